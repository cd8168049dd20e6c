"""The behaviour tests' environment: harness.Env with the fake LLM fleet.

FleetEnv is harness.Env (temp dir, agent, HAProxy from the haproxy/ example
config, cleanup of everything on exit) where the backends are instances of
the fake OpenAI-compatible fleet (tests/fleet/fleet.py, run as a child
process), the agent's config carries the test's endpoints (models, keys) and
policy (short cooldowns), polls HAProxy's runtime API, and HAProxy also has
an admin stats socket and a key map with two keys.

Also here: a bounded load driver (drive), request bodies, the fleet's admin
API (fault, stats), the runtime API (admin commands) and /metrics parsing.
"""

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

FLEET_DIR = os.path.join(h.source_root(), "tests", "fleet")

# The reasons of the routing core (docs/architecture.md); `rr` is the scaffold of
# the agent before the core was wired and is NOT one of them.
CORE_REASONS = {"affinity", "hash", "spill", "p2c", "cooldown_fallback", "key_fallback",
                "no_model", "none", "failover"}

# Short cooldowns so that a scenario takes seconds (see deploy/warmlane.yaml).
DEFAULT_POLICY = {
    "breaker_window": "10s",
    "breaker_min_requests": 5,
    "breaker_failure_ratio": 0.5,
    "breaker_consecutive": 5,
    "breaker_cooldown": "2s",
    "breaker_cooldown_max": "8s",
    "half_open_probes": 2,
    "rate_limit_cooldown": "2s",
    "dead_key_retry": "30s",
}

KEYS = {"k1": "Bearer upstream-k1", "k2": "Bearer upstream-k2"}


def instance(name, models=("m1",), fast=True, **kw):
    """A fleet instance config (tests/fleet/fakellm.InstanceConfig fields).
    fast: no prefill or decode time (the fault scenarios count requests)."""
    d = {"name": name, "port": 0, "models": list(models), "max_running": 64,
         "block_chars": 256, "cache_blocks": 4096}
    if fast:
        d.update(prefill_ms_per_block=0.0, decode_ms_per_token=0.0, base_ms=0.0)
    else:
        d.update(prefill_ms_per_block=4.0, decode_ms_per_token=0.5, base_ms=1.0)
    d.update(kw)
    return d


class FleetBackend:
    """One fleet instance as harness.Env sees a backend."""

    def __init__(self, info):
        self.name = info["name"]
        self.port = info["port"]
        self.admin_port = info.get("admin_port") or info["port"]
        self.models = info.get("models", [])

    def stop(self):
        pass  # the fleet process is stopped with the other processes


class FleetEnv(h.Env):
    """harness.Env with the fake fleet as backends.

    chroot: None runs HAProxy 2.6 chrooted (Debian's stock setup) when root,
    the other versions not."""

    def __init__(self, name, version, chroot=None, policy=None, runtime_api=True,
                 poll_interval="200ms", state_file=True, completion_check=False):
        if chroot is None:
            chroot = version == "2.6" and os.geteuid() == 0
        super().__init__(name, version, chroot=chroot)
        self.policy = dict(DEFAULT_POLICY)
        self.policy.update(policy or {})
        self.runtime_api = runtime_api
        self.poll_interval = poll_interval
        self.state_file = state_file
        # the example config's optional completion health check, on
        self.completion_check = completion_check
        self.endpoints = {}  # server name -> {"models": [...], "keys": [...], "weight": w, "tier": t, "slots": n}
        self.stats = self.path("stats.sock")          # level user: the agent's
        self.admin_stats = self.path("admin.sock")    # level admin: the test's
        self.fleet_proc = None
        self.agent_cfg = None
        # The agent's log input on this test's own socket, and HAProxy's
        # warmlane log target pointed at it, as the example configs deploy
        # it: on HAProxy 2.6 the end-of-stream log line is the only feedback
        # (haproxy-2.6.cfg). logs.py turns it off for --no-log-input.
        self.log_input = True
        self.log_input_path = ""
        self.key_probe = True
        # more top-level sections of the agent's config, as YAML lines
        self.agent_extra = []

    # --- the fleet ---------------------------------------------------------
    def start_fleet(self, instances, timeout=15):
        cfg = self.path("fleet.json")
        ready = self.path("fleet.ready")
        with open(cfg, "w") as f:
            json.dump(instances, f)
        logpath = self.path("fleet.log")
        lf = open(logpath, "wb")
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        p = subprocess.Popen([sys.executable, os.path.join(FLEET_DIR, "fleet.py"),
                              "--config", cfg, "--ready-file", ready, "--watch-stdin"],
                             stdout=lf, stderr=subprocess.STDOUT, stdin=subprocess.PIPE,
                             start_new_session=True, env=env)
        lf.close()
        self.procs.append(("fleet", p, logpath))
        self.fleet_proc = p

        def up():
            if p.poll() is not None:
                raise AssertionError(f"the fleet exited with status {p.returncode}")
            return os.path.exists(ready)
        h.wait_until("the fleet", up, timeout=timeout)
        with open(ready) as f:
            info = json.load(f)
        self.backends = [FleetBackend(i) for i in info]
        for b in self.backends:
            self.endpoints.setdefault(b.name, {"models": b.models, "keys": ["k1"],
                                               "weight": 1})
        return self.backends

    def backend(self, name):
        for b in self.backends:
            if b.name == name:
                return b
        raise KeyError(name)

    def _admin(self, name, method, path, body=None):
        b = self.backend(name)
        c = http.client.HTTPConnection("127.0.0.1", b.admin_port, timeout=5)
        try:
            data = json.dumps(body).encode() if body is not None else None
            c.request(method, path, body=data,
                      headers={"content-type": "application/json"} if data else {})
            r = c.getresponse()
            out = r.read()
            if r.status != 200:
                raise AssertionError(f"{name} {method} {path}: {r.status} {out[:200]!r}")
            return json.loads(out)
        finally:
            c.close()

    def fault(self, name, **spec):
        """POST /admin/fault on one instance (mode, retry_after, key, ...)."""
        return self._admin(name, "POST", "/admin/fault", spec)

    def fleet_stats(self):
        return {b.name: self._admin(b.name, "GET", "/admin/stats") for b in self.backends}

    def fleet_reset(self, cache=True):
        for b in self.backends:
            self._admin(b.name, "POST", "/admin/reset", {"cache": cache})

    # --- the agent -----------------------------------------------------------
    def log_socket(self):
        if self.chroot:
            return self.path("chroot", "warmlane", "log.sock")
        return self.path("log.sock")

    def write_agent_config(self):
        if self.agent_cfg:
            return self.agent_cfg
        self.log_input_path = self.log_socket() if self.log_input else ""
        self.metrics_port = h.free_port()
        lines = ["log_level: info",
                 f'listen: ["unix:{self.agent_socket()},mode=0660"]',
                 f'metrics: {{ listen: "127.0.0.1:{self.metrics_port}" }}']
        if self.runtime_api:
            lines.append(f'runtime_api: {{ socket: "{self.stats}", backends: [llm], '
                         f'poll_interval: {self.poll_interval} }}')
        else:
            lines.append('runtime_api: { socket: "" }')
        lines.append(f'log_input: {{ path: "{self.log_input_path}", mode: "0660" }}')
        # Key probes through HAProxy's probe frontend (a 401/403 alone
        # never kills a key); the shortest interval, so that a scenario
        # takes seconds.
        if self.key_probe:
            lines.append(f'key_probe: {{ target: "unix:{self.probe_socket()}", '
                         'interval: 1s, timeout: 2s }')
        if self.state_file:
            lines.append(f'state: {{ file: "{self.path("state.msgpack")}", '
                         'snapshot_interval: 1s }')
        else:
            lines.append('state: { file: "" }')
        lines.extend(self.agent_extra)
        lines.append("policy:")
        for k, v in self.policy.items():
            lines.append(f"  {k}: {v}")
        lines.append("endpoints:")
        for b in self.backends:
            e = self.endpoints[b.name]
            models = ", ".join(e["models"])
            keys = ", ".join(e["keys"])
            # engine_metrics: the engine's own /metrics (engineload.py)
            extra = "".join(f', {k}: "{e[k]}"' for k in ("engine_metrics", "engine_info")
                            if e.get(k))
            tier = f", tier: {e['tier']}" if "tier" in e else ""
            tier += f", slots: {e['slots']}" if "slots" in e else ""
            lines.append(f"  - {{ backend: llm, server: {b.name}, models: [{models}], "
                         f"weight: {e.get('weight', 1)}, keys: [{keys}]{extra}{tier} }}")
        p = self.path("warmlane.yaml")
        with open(p, "w") as f:
            f.write("\n".join(lines) + "\n")
        self.agent_cfg = p
        return p

    def restart_agent(self, name="agent-restarted"):
        """Starts the agent again with the same config (the socket file of
        the killed one is still there: the new one must replace it)."""
        binary = os.environ.get("WARMLANE_BIN", "")
        p = self.start_process(name, [binary, "--config", self.agent_cfg])
        self.agent = p
        return p

    def stop_agent_checked(self):
        """SIGTERM to the agent: it must exit 0, and neither its log nor
        that of an earlier agent of this test may hold a sanitizer report."""
        rc = self.stop_process(self.agent)
        for name, _p, logpath in self.procs:
            if not name.startswith("agent"):
                continue
            with open(logpath, "rb") as f:
                text = f.read().decode("utf-8", "replace")
            for marker in ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer", "runtime error:"):
                if marker in text:
                    i = text.index(marker)
                    raise AssertionError(f"{name}: sanitizer report:\n{text[max(0, i - 200):i + 2000]}")
        assert rc == 0, f"the agent exited with status {rc} on SIGTERM"

    # --- HAProxy -------------------------------------------------------------
    def haproxy_config(self, test_headers=True):
        path = super().haproxy_config(test_headers=test_headers)
        with open(path) as f:
            text = f.read()
        with open(self.path("keys.map"), "w") as f:
            for k, v in KEYS.items():
                f.write(f"{k} {v}\n")
        line = f"    stats socket {self.stats} mode 600 level user\n"
        if line not in text:
            raise AssertionError("harness.py changed: no user-level stats socket line")
        text = text.replace(line, line + f"    stats socket {self.admin_stats} "
                            "mode 600 level admin\n", 1)
        if self.completion_check:
            text, n = re.subn(r"^    #(option httpchk|http-check |timeout check )", r"    \1",
                              text, flags=re.M)
            if n != 4:
                raise AssertionError("the example config's optional completion check changed")
        target = "/warmlane/log.sock" if self.chroot else self.log_socket()
        text, n = re.subn(r"unix@/warmlane/log\.sock ", f"unix@{target} ", text)
        if n != 1:
            raise AssertionError("the example config has no warmlane log target")
        with open(path, "w") as f:
            f.write(text)
        return path

    def start(self, instances, binary, agent=True):
        """Fleet, agent, HAProxy; waits until HAProxy sees them all UP."""
        h.log(f"# HAProxy {self.version}{' chrooted' if self.chroot else ''}, "
              f"{len(instances)} fleet instances, agent {'on' if agent else 'off'}")
        self.start_fleet(instances)
        if agent:
            self.start_agent()
        self.start_haproxy(binary)
        self.wait_backends_up()
        if agent:
            self.wait_agent(up=True)

    def admin(self, command):
        """One command on HAProxy's admin socket; returns its answer."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
            s.settimeout(3)
            s.connect(self.admin_stats)
            s.sendall(command.encode() + b"\n")
            data = b""
            for _ in range(1000):
                d = s.recv(65536)
                if not d:
                    break
                data += d
        return data.decode(errors="replace").strip()

    # --- metrics ---------------------------------------------------------------
    def metrics_text(self, timeout=3):
        c = http.client.HTTPConnection("127.0.0.1", self.metrics_port, timeout=timeout)
        try:
            c.request("GET", "/metrics")
            r = c.getresponse()
            body = r.read().decode(errors="replace")
            ctype = r.getheader("content-type", "")
            if r.status != 200:
                raise AssertionError(f"GET /metrics: status {r.status}")
            return body, ctype
        except OSError as e:
            raise AssertionError(
                f"no /metrics on 127.0.0.1:{self.metrics_port} ({e}): the agent "
                "does not serve metrics.listen") from None
        finally:
            c.close()


# --- requests ---------------------------------------------------------------

def chat_body(text, model="m1", max_tokens=1, stream=False):
    """An OpenAI chat body, `model` after `messages` as openai-python writes it."""
    body = {"messages": [{"role": "user", "content": text}]}
    if model is not None:
        body["model"] = model
    body["max_tokens"] = max_tokens
    if stream:
        body["stream"] = True
    return json.dumps(body).encode()


class Rec:
    """One request through HAProxy, as the client saw it."""
    __slots__ = ("i", "tag", "t0", "t1", "status", "served", "reason", "wserver",
                 "key", "hit", "blocks", "error")

    def __init__(self, i, tag):
        self.i, self.tag = i, tag
        self.t0 = self.t1 = 0.0
        self.status = 0
        self.served = self.reason = self.wserver = self.key = None
        self.hit = self.blocks = None
        self.error = None

    def __repr__(self):
        return (f"Rec({self.i} {self.tag} {self.status} served={self.served} "
                f"reason={self.reason} chose={self.wserver} key={self.key})")


class Client:
    """One keep-alive connection to HAProxy's frontend (one per thread)."""

    def __init__(self, port, timeout=15):
        self.port, self.timeout = port, timeout
        self.conn = None

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None

    def post(self, body, headers=None, i=0, tag=None, path="/v1/chat/completions"):
        rec = Rec(i, tag)
        hdrs = {"content-type": "application/json"}
        hdrs.update(headers or {})
        rec.t0 = time.monotonic()
        for attempt in range(2):
            if self.conn is None:
                self.conn = http.client.HTTPConnection("127.0.0.1", self.port,
                                                       timeout=self.timeout)
                fresh = True
            else:
                fresh = False
            try:
                self.conn.request("POST", path, body=body, headers=hdrs)
                r = self.conn.getresponse()
                r.read()
                break
            except (OSError, http.client.HTTPException) as e:
                self.close()
                if fresh or attempt == 1:  # a reused connection may have been closed idle
                    rec.error = f"{type(e).__name__}: {e}"
                    rec.t1 = time.monotonic()
                    return rec
        rec.t1 = time.monotonic()
        rec.status = r.status
        g = {k.lower(): v for k, v in r.getheaders()}
        rec.served = g.get("x-served-by")
        rec.reason = g.get("x-warmlane-reason") or None
        rec.wserver = g.get("x-warmlane-server") or None
        rec.key = g.get("x-warmlane-key") or None
        rec.hit = _int(g.get("x-cache-hit-blocks"))
        rec.blocks = _int(g.get("x-prompt-blocks"))
        if r.will_close:
            self.close()
        return rec


def _int(v):
    try:
        return int(v)
    except (TypeError, ValueError):
        return None


def drive(port, make, n=None, duration=None, concurrency=4, stop=None, max_n=50000,
          timeout=15, sink=None):
    """Sends make(i) -> (body, headers, tag) requests through HAProxy on
    `concurrency` threads until n were sent, `duration` seconds passed, or
    `stop` (a threading.Event) is set; never more than max_n, never longer
    than duration (or 120 s). Returns the records in sending order; `sink`,
    a list, also gets each record as it completes."""
    if n is None and duration is None and stop is None:
        raise ValueError("drive: n, duration or stop")
    limit = min(n if n is not None else max_n, max_n)
    deadline = time.monotonic() + (duration if duration is not None else 120.0)
    lock = threading.Lock()
    counter = [0]
    out = []

    def worker():
        c = Client(port, timeout=timeout)
        try:
            while True:
                with lock:
                    i = counter[0]
                    if i >= limit or time.monotonic() >= deadline or (stop and stop.is_set()):
                        return
                    counter[0] += 1
                body, headers, tag = make(i)
                rec = c.post(body, headers, i=i, tag=tag)
                with lock:
                    out.append(rec)
                    if sink is not None:
                        sink.append(rec)
        finally:
            c.close()

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(max(1, concurrency))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(1.0, deadline - time.monotonic() + timeout + 5))
    if any(t.is_alive() for t in threads):
        raise AssertionError("drive: a client thread did not finish")
    out.sort(key=lambda r: r.i)
    return out


class Background:
    """drive() on a thread: start(), then stop() returns the records."""

    def __init__(self, port, make, concurrency=4, max_duration=60.0):
        self.ev = threading.Event()
        self.live = []  # the records so far
        self.records = None
        self.err = None

        def run():
            try:
                self.records = drive(port, make, duration=max_duration,
                                     concurrency=concurrency, stop=self.ev,
                                     sink=self.live)
            except BaseException as e:  # reported by stop()
                self.err = e
        self.thread = threading.Thread(target=run, daemon=True)

    def start(self):
        self.thread.start()
        return self

    def stop(self, timeout=30):
        self.ev.set()
        self.thread.join(timeout)
        if self.thread.is_alive():
            raise AssertionError("background load did not stop")
        if self.err:
            raise self.err
        return self.records


def count(records, **want):
    """How many records have every attribute equal to the given value."""
    return sum(1 for r in records if all(getattr(r, k) == v for k, v in want.items()))


def by(records, attr):
    out = {}
    for r in records:
        v = getattr(r, attr)
        out[v] = out.get(v, 0) + 1
    return out


def fmt_counts(d):
    return " ".join(f"{k}={v}" for k, v in sorted(d.items(), key=lambda kv: str(kv[0])))


def assert_all_ok(records, what):
    bad = [r for r in records if r.status != 200]
    if bad:
        raise AssertionError(f"{what}: {len(bad)} of {len(records)} requests failed, "
                             f"first {bad[:3]} errors {[r.error for r in bad[:3]]}")


def assert_core_reasons(records, what):
    """Every request was decided by the routing core (not fail-open, not rr)."""
    reasons = by(records, "reason")
    bad = {k: v for k, v in reasons.items() if k not in CORE_REASONS}
    if bad:
        raise AssertionError(
            f"{what}: reasons {fmt_counts(reasons)}: expected only the routing "
            f"core's {sorted(CORE_REASONS)} (rr: the core is not wired into the "
            "agent; None: no answer from the agent, HAProxy fell open)")


# --- Prometheus text ---------------------------------------------------------

_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)(\s+\S+)?$')
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


def parse_metrics(text):
    """Prometheus text -> list of (name, {label: value}, float)."""
    out = []
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise AssertionError(f"/metrics: unparsable line {line!r}")
        labels = dict(_LABEL.findall(m.group(3) or ""))
        out.append((m.group(1), labels, float(m.group(4))))
    return out


def metric_sum(samples, name, **labels):
    return sum(v for n, lb, v in samples
               if n == name and all(lb.get(k) == x for k, x in labels.items()))
