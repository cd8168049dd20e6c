#!/usr/bin/env python3
"""fleet: starts several fakellm instances on one asyncio loop (stdlib only).

Usage:
  fleet.py --config FILE [--ready-file PATH] [--watch-stdin]
  fleet.py --n 4 --base-port P [--slow 1] [--slow-speed 0.2] [--model M]
           [--header-mode first_token|immediate] [--prefill-ms-per-block MS]
           [--decode-ms-per-token MS] [--cache-blocks N] [--max-running N]
           [--admin-base-port Q] [--ready-file PATH] [--watch-stdin]
  fleet.py ... --dump-config       print the fleet config as JSON and exit

Config FILE: a JSON list of instance objects (or {"instances": [...]}) with
the fields of fakellm.InstanceConfig: name, host (loopback only), port (0:
ephemeral), models, speed, prefill_ms_per_block, decode_ms_per_token,
base_ms, cache_blocks, block_chars, max_running, header_mode
("first_token" | "immediate"), default_max_tokens, max_tokens_limit,
batch_slowdown, admin_port (absent: none; 0: ephemeral), keepalive_timeout,
seed. Unknown fields are errors (exit 2).

Generated fleet (--n): names s1..sN on ports P+0..P+N-1 (P 0: ephemeral);
speeds cycle through 1.0, 1.25, 0.8, 1.1 and the last --slow instances run at
--slow-speed; every instance serves --model (default fake-model), and s2, s4,
... serve fake-large too.

Once every instance listens, the ready file (written atomically, removed on
exit) holds a JSON list with, per instance: name, host, port, url, model (the
first), models, admin_port, speed, header_mode, max_running, cache_blocks.
The same list is printed on stdout as one line. SIGTERM or SIGINT (or, with
--watch-stdin, the end of stdin: the parent died) stops everything; exit 0.

As a library: `with BackgroundFleet(configs) as fl: fl.instances` runs a
fleet on a thread of this process.
"""

import argparse
import asyncio
import json
import os
import signal
import sys
import threading

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fakellm  # noqa: E402

SPEED_CYCLE = (1.0, 1.25, 0.8, 1.1)


def load_config(path):
    """Reads a fleet config file; returns a list of InstanceConfig or raises
    ValueError naming the entry and field."""
    with open(path, encoding="utf-8") as f:
        try:
            data = json.load(f)
        except ValueError as e:
            raise ValueError(f"{path}: not JSON: {e}") from None
    return parse_config(data, path)


def parse_config(data, where="config"):
    if isinstance(data, dict) and "instances" in data:
        data = data["instances"]
    if not isinstance(data, list) or not data:
        raise ValueError(f"{where}: must be a non-empty list of instances")
    cfgs = [fakellm.InstanceConfig.from_dict(d, f"{where}[{i}]") for i, d in enumerate(data)]
    seen_names, seen_ports = set(), set()
    for i, c in enumerate(cfgs):
        if c.name in seen_names:
            raise ValueError(f"{where}[{i}].name: duplicate {c.name!r}")
        seen_names.add(c.name)
        for p in (c.port, c.admin_port):
            if p:
                if p in seen_ports:
                    raise ValueError(f"{where}[{i}]: port {p} used twice")
                seen_ports.add(p)
    return cfgs


def generated_config(n, base_port=0, slow=0, slow_speed=0.2, model="fake-model",
                     header_mode="first_token", prefill_ms_per_block=20.0,
                     decode_ms_per_token=5.0, cache_blocks=256, max_running=8,
                     admin_base_port=None):
    """The --n fleet as a list of dicts (the config file's form)."""
    if n < 1 or n > 1000:
        raise ValueError("--n must be within 1..1000")
    if not 0 <= slow <= n:
        raise ValueError("--slow must be within 0..n")
    out = []
    for i in range(n):
        d = {
            "name": f"s{i + 1}",
            "port": base_port + i if base_port else 0,
            "models": [model] + (["fake-large"] if i % 2 == 1 and model != "fake-large" else []),
            "speed": slow_speed if i >= n - slow else SPEED_CYCLE[i % len(SPEED_CYCLE)],
            "prefill_ms_per_block": prefill_ms_per_block,
            "decode_ms_per_token": decode_ms_per_token,
            "cache_blocks": cache_blocks,
            "max_running": max_running,
            "header_mode": header_mode,
        }
        if admin_base_port is not None:
            d["admin_port"] = admin_base_port + i if admin_base_port else 0
        out.append(d)
    return out


class Fleet:
    """Instances on the running loop."""

    def __init__(self, cfgs):
        self.cfgs = cfgs
        self.instances = []

    async def start(self):
        try:
            for c in self.cfgs:
                inst = fakellm.Instance(c)
                await inst.start()
                self.instances.append(inst)
        except BaseException:
            await self.stop()
            raise
        return self

    async def stop(self):
        for inst in self.instances:
            await inst.stop()

    def info(self):
        return [i.info() for i in self.instances]

    def by_name(self, name):
        for i in self.instances:
            if i.cfg.name == name:
                return i
        raise KeyError(name)


def write_ready(path, info):
    tmp = f"{path}.tmp.{os.getpid()}"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class BackgroundFleet:
    """Runs a Fleet on its own thread and loop: a context manager whose
    `instances` is the ready-file list. call(coro_fn, *args) runs a coroutine
    function on the fleet's loop (e.g. lambda: inst.set_fault(...))."""

    def __init__(self, cfgs, start_timeout=10.0):
        self.cfgs = [c if isinstance(c, fakellm.InstanceConfig)
                     else fakellm.InstanceConfig.from_dict(c) for c in cfgs]
        self.start_timeout = start_timeout
        self.loop = None
        self.fleet = None
        self.instances = []
        self._thread = None
        self._ready = threading.Event()
        self._error = None
        self._stop = None

    def __enter__(self):
        self._thread = threading.Thread(target=self._run, name="fakellm-fleet", daemon=True)
        self._thread.start()
        if not self._ready.wait(self.start_timeout):
            self.close()
            raise RuntimeError("fleet did not start in time")
        if self._error:
            self.close()
            raise self._error
        return self

    def __exit__(self, *exc):
        self.close()

    def _run(self):
        async def main():
            self.loop = asyncio.get_running_loop()
            self._stop = asyncio.Event()
            try:
                self.fleet = await Fleet(self.cfgs).start()
                self.instances = self.fleet.info()
            except Exception as e:  # reported by __enter__
                self._error = e
                self._ready.set()
                return
            self._ready.set()
            await self._stop.wait()
            await self.fleet.stop()
        asyncio.run(main())

    def call(self, fn, *args, timeout=10.0):
        async def run():
            r = fn(*args)
            return await r if asyncio.iscoroutine(r) else r
        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout)

    def close(self, timeout=10.0):
        if self._thread is None:
            return
        if self.loop is not None and self._stop is not None and not self.loop.is_closed():
            try:
                self.loop.call_soon_threadsafe(self._stop.set)
            except RuntimeError:
                pass  # loop already finished
        self._thread.join(timeout)
        self._thread = None


def parse_args(argv):
    ap = argparse.ArgumentParser(description="Start a fake LLM fleet on loopback.")
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--config", help="JSON list of instances")
    src.add_argument("--n", type=int, help="generate N instances s1..sN")
    ap.add_argument("--base-port", type=int, default=0, help="--n: first port (0: ephemeral ports)")
    ap.add_argument("--slow", type=int, default=0, help="--n: how many (the last ones) are slow")
    ap.add_argument("--slow-speed", type=float, default=0.2, help="--n: speed of the slow ones")
    ap.add_argument("--model", default="fake-model", help="--n: model every instance serves")
    ap.add_argument("--header-mode", choices=fakellm.HEADER_MODES, default="first_token")
    ap.add_argument("--prefill-ms-per-block", type=float, default=20.0)
    ap.add_argument("--decode-ms-per-token", type=float, default=5.0)
    ap.add_argument("--cache-blocks", type=int, default=256)
    ap.add_argument("--max-running", type=int, default=8)
    ap.add_argument("--admin-base-port", type=int, default=None,
                    help="--n: admin-only listeners on Q+0.. (0: ephemeral); default none")
    ap.add_argument("--ready-file", help="write the instance list here once all listen")
    ap.add_argument("--watch-stdin", action="store_true", help="exit when stdin reaches its end")
    ap.add_argument("--dump-config", action="store_true", help="print the config and exit")
    return ap.parse_args(argv)


async def amain(a, cfgs):
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    for s in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(s, stop.set)
    if a.watch_stdin:
        def on_stdin():
            try:
                data = os.read(sys.stdin.fileno(), 4096)
            except OSError:
                data = b""
            if not data:
                loop.remove_reader(sys.stdin.fileno())
                stop.set()
        loop.add_reader(sys.stdin.fileno(), on_stdin)
    fleet = Fleet(cfgs)
    try:
        await fleet.start()
    except OSError as e:
        print(f"fleet: cannot listen: {e}", file=sys.stderr)
        return 1
    info = fleet.info()
    try:
        if a.ready_file:
            write_ready(a.ready_file, info)
        print(json.dumps(info), flush=True)
        await stop.wait()
    finally:
        await fleet.stop()
        if a.ready_file:
            try:
                os.unlink(a.ready_file)
            except OSError:
                pass
    return 0


def main(argv=None):
    a = parse_args(argv)
    try:
        if a.config:
            cfgs = load_config(a.config)
        else:
            cfgs = parse_config(generated_config(
                a.n, a.base_port, a.slow, a.slow_speed, a.model, a.header_mode,
                a.prefill_ms_per_block, a.decode_ms_per_token, a.cache_blocks,
                a.max_running, a.admin_base_port), "generated")
    except (OSError, ValueError) as e:
        print(f"fleet: {e}", file=sys.stderr)
        return 2
    if a.dump_config:
        print(json.dumps([c.to_dict() for c in cfgs], indent=1))
        return 0
    return asyncio.run(amain(a, cfgs))


if __name__ == "__main__":
    sys.exit(main())
