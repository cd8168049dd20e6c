"""End-to-end harness: real HAProxy + the warmlane agent + trivial backends.

Everything runs on loopback in a temporary directory that is removed at the
end; every process started here is killed at the end (SIGTERM, then SIGKILL),
also when a test fails or the harness is interrupted (meson's timeout sends
SIGTERM). Every wait is a bounded poll.

Environment:
  WARMLANE_BIN          the agent binary (set by meson); missing: SKIP
  WARMLANE_HAPROXY_DIR  folder of tests/haproxy/fetch-haproxy.sh (haproxy-3.0...)
  WARMLANE_SOURCE_ROOT  the repository (for haproxy/*.cfg)
"""

import http.client
import http.server
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.append(os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                             "fleet"))
from poll import wait_until  # noqa: E402,F401  (tests/fleet/poll.py; h.wait_until)

SKIP = 77
KNOWN_REASONS = {"affinity", "hash", "spill", "p2c", "cooldown_fallback", "key_fallback",
                 "no_model", "none", "failover"}


class Skip(Exception):
    pass


def log(*a):
    print(*a, flush=True)


def ctl_binary():
    """warmlanectl, as meson builds it (WARMLANECTL_BIN); Skip without it."""
    b = os.environ.get("WARMLANECTL_BIN", "")
    if not b or not os.access(b, os.X_OK):
        raise Skip("warmlanectl is not built (WARMLANECTL_BIN unset or missing)")
    return b


def source_root():
    r = os.environ.get("WARMLANE_SOURCE_ROOT")
    if r:
        return r
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


_HANDED_OUT = set()


def _ephemeral_low():
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            return int(f.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def free_port():
    """A loopback TCP port free now, below the kernel's ephemeral range (a
    port bind(0) returns is one the next outgoing connection, HAProxy's
    health checks or a peer's connect, may take before the listener binds
    it: seen once, `peers` failing with "Address already in use"), and
    never one this process handed out before."""
    low = max(1025, min(10000, _ephemeral_low() - 1))
    high = _ephemeral_low() - 1
    rng = random.Random(os.getpid() ^ time.monotonic_ns())
    for _ in range(200):
        port = rng.randint(low, high) if high > low else 0
        if port in _HANDED_OUT:
            continue
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
            port = s.getsockname()[1]
        _HANDED_OUT.add(port)
        return port
    raise RuntimeError("no free loopback port below the ephemeral range")


# --- HAProxy binaries --------------------------------------------------------

def haproxy_binary(version):
    """The HAProxy binary for "2.6", "3.0" or "3.2", or Skip."""
    if version == "2.6":
        path = shutil.which("haproxy") or "/usr/sbin/haproxy"
    else:
        d = os.environ.get("WARMLANE_HAPROXY_DIR", "")
        path = os.path.join(d, "haproxy-" + version) if d else ""
    if not path or not os.access(path, os.X_OK):
        raise Skip(f"no HAProxy {version} binary (run tests/haproxy/fetch-haproxy.sh)")
    try:
        out = subprocess.run([path, "-v"], capture_output=True, text=True,
                             timeout=10).stdout
    except (OSError, subprocess.TimeoutExpired) as e:
        raise Skip(f"HAProxy {version} does not run: {e}")
    m = re.search(r"HAProxy version (\S+)", out)
    if not m or not m.group(1).startswith(version + "."):
        raise Skip(f"{path} is not HAProxy {version}: {out.splitlines()[:1]}")
    return path, m.group(1)


def example_config(version):
    """The haproxy/ example that applies to this version."""
    major, minor = (int(x) for x in version.split(".")[:2])
    name = "haproxy-3.1.cfg" if (major, minor) >= (3, 1) else "haproxy-2.6.cfg"
    return os.path.join(source_root(), "haproxy", name)


# --- backends ----------------------------------------------------------------

class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def _answer(self):
        n = int(self.headers.get("content-length") or 0)
        if n:
            self.rfile.read(n)
        body = self.server.name.encode()
        self.send_response(200)
        self.send_header("content-type", "text/plain")
        self.send_header("x-served-by", self.server.name)
        self.send_header("x-seen-authorization",
                         self.headers.get("authorization", "-"))
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer

    def log_message(self, *a):
        pass


class _Server(http.server.ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass  # HAProxy closing idle keep-alive connections


class Backend:
    def __init__(self, name):
        self.name = name
        self.server = _Server(("127.0.0.1", 0), _Handler)
        self.server.name = name
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.1}, daemon=True)
        self.thread.start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


# --- the environment of one test ---------------------------------------------

class Env:
    """A temp dir, backends, the agent and HAProxy; cleaned up on exit."""

    def __init__(self, name, haproxy_version, chroot=False):
        self.name = name
        self.version = haproxy_version
        self.chroot = chroot
        self.procs = []   # (name, Popen, logpath)
        self.backends = []
        self.tmp = tempfile.mkdtemp(prefix=f"warmlane-e2e-{name}-")
        self.failed = False

    # context manager: cleanup even on failure or SIGTERM
    def __enter__(self):
        self._old_term = signal.signal(signal.SIGTERM, _raise_on_term)
        return self

    def __exit__(self, et, ev, tb):
        if et is not None and et is not Skip:
            self.failed = True
            self.dump_logs()
        self.cleanup()
        signal.signal(signal.SIGTERM, self._old_term)
        return False

    def path(self, *p):
        return os.path.join(self.tmp, *p)

    def start_process(self, name, argv, **kw):
        logpath = self.path(name + ".log")
        f = open(logpath, "wb")
        p = subprocess.Popen(argv, stdout=f, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, start_new_session=True, **kw)
        f.close()
        self.procs.append((name, p, logpath))
        return p

    def kill(self, p, sig=signal.SIGKILL):
        try:
            os.killpg(p.pid, sig)
        except ProcessLookupError:
            pass
        try:
            p.wait(timeout=5)
        except subprocess.TimeoutExpired:
            try:
                os.killpg(p.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
            p.wait(timeout=5)

    def stop_process(self, p, timeout=5):
        """SIGTERM, then SIGKILL after timeout; returns the exit status."""
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                p.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill(p)
        return p.returncode

    def cleanup(self):
        for _name, p, _log in reversed(self.procs):
            self.stop_process(p)
        for b in self.backends:
            b.stop()
        if os.environ.get("WARMLANE_E2E_KEEP"):
            log(f"# kept {self.tmp}")
        else:
            shutil.rmtree(self.tmp, ignore_errors=True)

    def dump_logs(self):
        for name, _p, logpath in self.procs:
            try:
                with open(logpath, "rb") as f:
                    data = f.read()[-6000:]
            except OSError:
                continue
            log(f"----- {name} log (tail) -----")
            log(data.decode("utf-8", "replace"))

    def log_text(self, name):
        for n, _p, logpath in self.procs:
            if n == name:
                with open(logpath, "rb") as f:
                    return f.read().decode("utf-8", "replace")
        return ""

    # --- backends ---
    def start_backends(self, names=("s1", "s2", "s3")):
        for n in names:
            self.backends.append(Backend(n))
        return self.backends

    # --- agent ---
    def probe_socket(self):
        """HAProxy's key probe listener (bound before any chroot)."""
        return self.path("probe.sock")

    def agent_socket(self):
        if self.chroot:
            return self.path("chroot", "warmlane", "spoa.sock")
        return self.path("spoa.sock")

    def write_agent_config(self):
        self.metrics_port = free_port()
        lines = ["log_level: debug",
                 f'listen: ["unix:{self.agent_socket()},mode=0660"]',
                 f'metrics: {{ listen: "127.0.0.1:{self.metrics_port}" }}',
                 # not the default path, which another agent may hold
                 'log_input: { path: "" }',
                 f'command_socket: {{ path: "{self.path("ctl.sock")}" }}',
                 "endpoints:"]
        for b in self.backends:
            lines.append(f"  - {{ backend: llm, server: {b.name}, models: [m1], "
                         f"weight: 1, keys: [k1] }}")
        p = self.path("warmlane.yaml")
        with open(p, "w") as f:
            f.write("\n".join(lines) + "\n")
        return p

    def start_agent(self):
        binary = os.environ.get("WARMLANE_BIN", "")
        if not binary or not os.access(binary, os.X_OK):
            raise Skip("the warmlane agent is not built (WARMLANE_BIN unset or missing)")
        os.makedirs(os.path.dirname(self.agent_socket()), exist_ok=True)
        cfg = self.write_agent_config()
        p = self.start_process("agent", [binary, "--config", cfg])
        wait_until("the agent's socket", lambda: p.poll() is not None or
                   os.path.exists(self.agent_socket()), timeout=10)
        if p.poll() is not None:
            raise AssertionError(f"the agent exited with status {p.returncode}")
        self.agent = p
        return p

    # --- HAProxy ---
    def haproxy_config(self, test_headers=True):
        """The example config of this version, pointed at this test's files."""
        # self.example: another config of haproxy/ (tests/e2e/peers.py)
        src = getattr(self, "example", None) or example_config(self.version)
        with open(src) as f:
            text = f.read()
        spoe = os.path.join(source_root(), "haproxy", "warmlane.spoe.conf")
        keys = self.path("keys.map")
        with open(keys, "w") as f:
            f.write("k1 Bearer upstream-secret-1\n")
        self.port = free_port()
        self.stats = self.path("stats.sock")

        def sub(pattern, repl, count=1, flags=re.M):
            nonlocal text
            text, n = re.subn(pattern, lambda m: repl, text, count=count, flags=flags)
            if n == 0:
                raise AssertionError(f"{src}: no line matches {pattern!r}: "
                                     "update tests/e2e/harness.py")

        sub(r"^    log /dev/log local0$", "    log stderr format raw local0 info")
        if self.chroot:
            os.makedirs(self.path("chroot"), exist_ok=True)
            sub(r"^    chroot /var/lib/haproxy$", f"    chroot {self.path('chroot')}")
        else:
            sub(r"^    chroot /var/lib/haproxy\n", "")
        sub(r"^    user haproxy\n", "")
        sub(r"^    group haproxy\n", "")
        sub(r"^    daemon\n", "")
        sub(r"^    stats socket /run/haproxy/admin.sock .*\n", "")
        sub(r"^    stats socket /run/haproxy/warmlane.sock (.*)$",
            f"    stats socket {self.stats} mode 600 level user")
        sub(r"^    bind 127\.0\.0\.1:8080$", f"    bind 127.0.0.1:{self.port}")
        # the key probe listener: bound before the chroot, the real path
        sub(r"^    bind unix@/var/lib/haproxy/warmlane/probe\.sock .*$",
            f"    bind unix@{self.probe_socket()} mode 600")
        sub(r"^    filter spoe engine warmlane config /etc/haproxy/warmlane\.spoe\.conf$",
            f"    filter spoe engine warmlane config {spoe}")
        sub(r"/etc/haproxy/warmlane-keys\.map", keys, count=0)
        servers = "\n".join(f"    server {b.name} 127.0.0.1:{b.port} check inter 1s"
                            for b in self.backends)
        sub(r"^    server s1 .*\n    server s2 .*\n    server s3 .*$", servers)
        # The agent's server line: the chrooted form names the socket inside
        # the chroot; otherwise the real path.
        agent_path = "/warmlane/spoa.sock" if self.chroot else self.agent_socket()
        # (its check settings are the example's own: the outage tests
        # measure them)
        m = re.search(r"^    server agent1 unix@/warmlane/spoa\.sock (.*)$", text, re.M)
        if not m:
            raise AssertionError(f"{src}: no agent1 server line: update tests/e2e/harness.py")
        sub(r"^    server agent1 unix@/warmlane/spoa\.sock (.*)$",
            f"    server agent1 unix@{agent_path} {m.group(1)}")
        if test_headers:
            # test only: what warmlane decided, as seen by HAProxy (after
            # default_backend: outside the feedback's `.if` of the 2.6 config)
            sub(r"^(    default_backend llm)$",
                "    default_backend llm\n"
                "    http-response set-header x-warmlane-server %[var(txn.warmlane.server)]\n"
                "    http-response set-header x-warmlane-reason %[var(txn.warmlane.reason)]\n"
                "    http-response set-header x-warmlane-backend %[var(txn.warmlane.backend)]\n"
                "    http-response set-header x-warmlane-key %[var(txn.warmlane.key)]")
            # the feedback's answer (the agent sets `ack`)
            sub(r"^(    http-response send-spoe-group warmlane feedback .*)$",
                re.search(r"^(    http-response send-spoe-group warmlane feedback .*)$",
                          text, re.M).group(1)
                + "\n    http-response set-header x-warmlane-ack %[var(txn.warmlane.ack)]")
        p = self.path("haproxy.cfg")
        with open(p, "w") as f:
            f.write(text)
        return p

    def start_haproxy(self, binary, **kw):
        cfg = self.haproxy_config(**kw)
        chk = subprocess.run([binary, "-c", "-f", cfg], capture_output=True,
                             text=True, timeout=20)
        if chk.returncode != 0:
            raise AssertionError(f"haproxy -c failed:\n{chk.stdout}{chk.stderr}")
        p = self.start_process("haproxy", [binary, "-db", "-f", cfg], cwd=self.tmp)
        self.haproxy = p

        def ready():
            if p.poll() is not None:
                raise AssertionError(f"HAProxy exited with status {p.returncode}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.5):
                    pass
                return os.path.exists(self.stats)
            except OSError:
                return False
        wait_until("HAProxy to listen", ready, timeout=15)
        return p

    def show_stat(self):
        """HAProxy's `show stat` as a dict (proxy, server) -> row dict."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(2)
            s.connect(self.stats)
            s.sendall(b"show stat\n")
            data = b""
            while True:
                d = s.recv(65536)
                if not d:
                    break
                data += d
        lines = data.decode().splitlines()
        head = lines[0].lstrip("# ").split(",")
        rows = {}
        for line in lines[1:]:
            if not line:
                continue
            r = dict(zip(head, line.split(",")))
            rows[(r["pxname"], r["svname"])] = r
        return rows

    def server_status(self, proxy, server):
        try:
            return self.show_stat().get((proxy, server), {}).get("status", "")
        except OSError:
            return ""

    def wait_agent(self, up, timeout=15):
        want = "UP" if up else "DOWN"
        wait_until(f"HAProxy to see the agent {want}",
                   lambda: self.server_status("warmlane-agents", "agent1").startswith(want),
                   timeout=timeout)

    def wait_backends_up(self, timeout=15):
        wait_until("the backends UP", lambda: all(
            self.server_status("llm", b.name).startswith("UP") for b in self.backends),
            timeout=timeout)

    # --- requests ---
    def request(self, body=None, headers=None, timeout=10):
        """One POST through HAProxy; returns (status, headers dict, seconds)."""
        headers = dict(headers or {})
        if body is None:
            body = b'{"model":"m1","messages":[{"role":"user","content":"hi"}]}'
        headers.setdefault("content-type", "application/json")
        t0 = time.monotonic()
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=timeout)
        try:
            c.request("POST", "/v1/chat/completions", body=body, headers=headers)
            r = c.getresponse()
            r.read()
            dt = time.monotonic() - t0
            return r.status, {k.lower(): v for k, v in r.getheaders()}, dt
        finally:
            c.close()


def _raise_on_term(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def median_ms(xs):
    return statistics.median(xs) * 1000.0


def main(scenarios):
    """e2e.py VERSION SCENARIO: runs one scenario, exit 0 / 1 / 77 (skip)."""
    if len(sys.argv) != 3 or sys.argv[2] not in scenarios:
        print(f"usage: {sys.argv[0]} 2.6|3.0|3.2 {'|'.join(scenarios)}", file=sys.stderr)
        return 2
    version, name = sys.argv[1], sys.argv[2]
    try:
        binary, full = haproxy_binary(version)
        log(f"# HAProxy {full} ({binary})")
        scenarios[name](binary, version)
    except Skip as e:
        log(f"SKIP: {e}")
        return SKIP
    except (AssertionError, KeyboardInterrupt) as e:
        log(f"FAIL: {e}")
        return 1
    log("PASS")
    return 0
