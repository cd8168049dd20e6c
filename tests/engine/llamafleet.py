#!/usr/bin/env python3
"""A fleet of llama.cpp llama-servers on loopback (tests/engine).

Fleet(binary, model, n, ...) starts n llama-servers (each its own process
group, its own log file in `workdir`), with a chosen number of slots
(--parallel), host-memory prompt cache (--cache-ram, MiB), threads and
context, waits until each answers GET /health with 200, and stop() ends them
all (SIGTERM, then SIGKILL) leaving no process behind. Servers can be killed
(SIGKILL: streams under way are cut) and restarted on the same port with an
empty cache.

As a command (tests/bench/engine.sh uses it):

    llamafleet.py --binary B --model M --n 4 --ready-file F [--parallel 2]
                  [--cache-ram 32] [--threads 1] [--ctx 16384] [--similarity 0.9]
                  [--workdir D]

writes F as JSON [{"name": "e1", "port": P, "pid": PID}, ...] once all are
healthy, then runs until its standard input closes or SIGTERM, and stops
them. Each server's pid is its process group, for the caller's kill -9.

Helpers: fetch() runs tests/engine/fetch-llama.sh, model() writes the model
with tests/engine/mkmodel.py (both cached in a folder of the build).
"""

import argparse
import http.client
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def fetch(folder):
    """tests/engine/fetch-llama.sh FOLDER; returns the wrapper's path or
    None when llama-server cannot be had (the script's own words printed)."""
    r = subprocess.run([os.path.join(HERE, "fetch-llama.sh"), folder],
                       capture_output=True, text=True, timeout=1200)
    sys.stdout.write(r.stdout)
    sys.stdout.write(r.stderr)
    sys.stdout.flush()
    w = os.path.join(folder, "llama-server")
    return w if r.returncode == 0 and os.access(w, os.X_OK) else None


def model(folder, layers=2):
    """The tiny random model in FOLDER (written once per layer count)."""
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, f"tiny-l{layers}.gguf")
    if not os.path.exists(path):
        subprocess.run([sys.executable, os.path.join(HERE, "mkmodel.py"), path,
                        "--layers", str(layers)], check=True, timeout=120)
    return path


def get(port, path, timeout=2.0):
    """(status, body) of GET http://127.0.0.1:port/path, or (0, error)."""
    c = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read()
    except (OSError, http.client.HTTPException) as e:
        return 0, str(e).encode()
    finally:
        c.close()


class Server:
    def __init__(self, fleet, name, port, model_path):
        self.fleet = fleet
        self.name = name
        self.port = port
        self.model = model_path
        self.proc = None
        self.starts = 0
        self.logpath = os.path.join(fleet.workdir, f"{name}.log")

    def argv(self):
        f = self.fleet
        return [f.binary, "-m", self.model, "--host", "127.0.0.1",
                "--port", str(self.port), "-t", str(f.threads), "-tb", str(f.threads),
                "--parallel", str(f.parallel), "--cache-ram", str(f.cache_ram),
                "-c", str(f.ctx), "--slot-prompt-similarity", str(f.similarity),
                "--metrics", "--no-webui"] + f.extra

    def start(self):
        self.starts += 1
        lf = open(self.logpath, "ab")
        lf.write(f"--- start {self.starts}: {' '.join(self.argv())}\n".encode())
        lf.flush()
        self.proc = subprocess.Popen(self.argv(), stdout=lf, stderr=subprocess.STDOUT,
                                     stdin=subprocess.DEVNULL, start_new_session=True)
        lf.close()
        return self

    def healthy(self):
        if self.proc is None or self.proc.poll() is not None:
            return False
        st, _ = get(self.port, "/health", timeout=1.0)
        return st == 200

    def wait_healthy(self, timeout=60.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"llama-server {self.name} exited with status "
                                   f"{self.proc.returncode}: {self.tail()}")
            if self.healthy():
                return
            time.sleep(0.05)
        raise RuntimeError(f"llama-server {self.name} not healthy after {timeout:.0f}s: "
                           f"{self.tail()}")

    def wait_started(self, timeout=60.0, tries=3):
        """wait_healthy; a server that could not bind its port (free_port's
        port taken in between, as any outgoing connection's local port may
        take it) moves to another free port, up to `tries` times."""
        deadline = time.monotonic() + timeout
        for attempt in range(tries):
            try:
                return self.wait_healthy(max(1.0, deadline - time.monotonic()))
            except RuntimeError:
                if attempt + 1 == tries or self.proc.poll() is None or \
                        "couldn't bind HTTP server socket" not in self.tail():
                    raise
            self.port = free_port()
            self.start()

    def tail(self, n=1500):
        try:
            with open(self.logpath, "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def signal(self, sig):
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, sig)
            except ProcessLookupError:
                pass

    def kill(self):
        """SIGKILL: the engine dies as in a crash, streams under way are cut."""
        self.signal(signal.SIGKILL)
        if self.proc is not None:
            self.proc.wait(timeout=10)

    def stop(self, timeout=5.0):
        if self.proc is None:
            return
        self.signal(signal.SIGTERM)
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        # the group too: nothing the server started outlives it
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass

    def restart(self):
        """Kill, then start again on the same port: an empty cache."""
        self.kill()
        self.start()
        self.wait_healthy()

    def metrics(self):
        """llama-server's /metrics as {name: value} (llamacpp:* counters)."""
        st, body = get(self.port, "/metrics")
        out = {}
        if st != 200:
            return out
        for line in body.decode("utf-8", "replace").splitlines():
            if line.startswith("#") or " " not in line:
                continue
            k, v = line.rsplit(" ", 1)
            try:
                out[k] = float(v)
            except ValueError:
                pass
        return out


class Fleet:
    def __init__(self, binary, model_path, n=4, parallel=2, cache_ram=32, threads=1,
                 ctx=16384, workdir=None, models=None, names=None, extra=(), similarity=0.9):
        self.extra = list(extra)
        # llama-server reuses the idle slot whose cached prompt covers at
        # least this fraction of the new prompt (--slot-prompt-similarity,
        # default 0.10); only when none does is the least recently used
        # slot taken, saved to the --cache-ram prompt cache, and the best
        # saved prompt restored into it. With a shared system prompt every
        # slot passes 0.10: a conversation's next turn lands in another
        # conversation's slot and reuses only the system prompt, even while
        # its own prompt sits in the prompt cache. At 0.9 no other
        # conversation's slot qualifies (nor, mostly, the conversation's own
        # previous turn): the choice goes to the prompt cache, which holds
        # the idle slots' prompts (--cache-idle-slots) and restores the best
        # match. (0.75, between the two, lost prompts: a new conversation's
        # first turn took a slot by similarity and its prompt was not saved.)
        self.similarity = similarity
        self.binary = binary
        self.parallel = parallel
        self.cache_ram = cache_ram
        self.threads = threads
        self.ctx = ctx
        self.own_workdir = workdir is None
        self.workdir = workdir or tempfile.mkdtemp(prefix="warmlane-llama-")
        os.makedirs(self.workdir, exist_ok=True)
        models = models or [model_path] * n
        names = names or [f"e{i + 1}" for i in range(n)]
        self.servers = [Server(self, names[i], free_port(), models[i]) for i in range(n)]

    def start(self, timeout=60.0):
        t0 = time.monotonic()
        try:
            for s in self.servers:
                s.start()
            for s in self.servers:
                s.wait_started(max(1.0, timeout - (time.monotonic() - t0)))
        except BaseException:
            self.stop()
            raise
        return time.monotonic() - t0

    def server(self, name):
        for s in self.servers:
            if s.name == name:
                return s
        raise KeyError(name)

    def restart_all(self):
        """Every server killed and started again: a cold fleet."""
        for s in self.servers:
            s.kill()
            s.start()
        for s in self.servers:
            s.wait_healthy()

    def stop(self):
        for s in self.servers:
            s.stop()
        if self.own_workdir and not os.environ.get("WARMLANE_E2E_KEEP"):
            import shutil
            shutil.rmtree(self.workdir, ignore_errors=True)

    def info(self):
        return [{"name": s.name, "port": s.port,
                 "pid": s.proc.pid if s.proc else None} for s in self.servers]

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.stop()
        return False


def main():
    ap = argparse.ArgumentParser(description="N llama-servers on loopback")
    ap.add_argument("--binary", required=True)
    ap.add_argument("--model", required=True, action="append",
                    help="once, or once per server")
    ap.add_argument("--n", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=2)
    ap.add_argument("--cache-ram", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--ctx", type=int, default=16384)
    ap.add_argument("--similarity", type=float, default=0.9)
    ap.add_argument("--workdir")
    ap.add_argument("--ready-file", required=True)
    a = ap.parse_args()
    models = a.model if len(a.model) == a.n else [a.model[0]] * a.n
    fleet = Fleet(a.binary, models[0], n=a.n, parallel=a.parallel,
                  cache_ram=a.cache_ram, threads=a.threads, ctx=a.ctx,
                  workdir=a.workdir, models=models, similarity=a.similarity)

    def term(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, term)
    try:
        fleet.start()
        tmp = a.ready_file + ".tmp"
        with open(tmp, "w") as f:
            json.dump(fleet.info(), f)
        os.replace(tmp, a.ready_file)
        sys.stdin.read()  # until the caller closes it (or SIGTERM)
    except KeyboardInterrupt:
        pass
    finally:
        fleet.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
