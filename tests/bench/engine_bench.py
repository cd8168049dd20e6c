#!/usr/bin/env python3
"""tests/bench/engine_bench.py - routing policies on a real llama.cpp fleet.

Run by tests/bench/engine.sh (by hand, not in CI). For every case and every
policy, from a cold fleet (every llama-server started anew), the same
conversations (same seed, same texts) go through HAProxy 2.6 with the OpenAI
Node client (tests/engine/driver), and the engine's own counts decide:

  policies  warmlane   the example config with the agent
            leastconn  the example config without an agent (HAProxy alone)
            chash      `balance hash` on the session id, else the prompt's
                       first KiB, `hash-type consistent`, hash-balance-factor
            stick      leastconn with a stick table on the same key (what
                       HAProxy users configure instead of an agent)
  cases     healthy    four equal servers
            slow       one server runs a model with 4x the layers (slower)
            kill       one server SIGKILLed after a third of the requests,
                       restarted (empty) after two thirds
            429        one server's answers turned into 429 + Retry-After 5
                       by an HAProxy rule from a third to two thirds

Writes RESULTS.json (every record) and prints a summary; engine_report.py
makes the table and the plot from it.
"""

import argparse
import json
import os
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "tests", "e2e"))
sys.path.insert(0, os.path.join(ROOT, "tests", "engine"))
import harness as h  # noqa: E402
import engine as eng  # noqa: E402  (tests/e2e/engine.py)
import llamafleet as lf  # noqa: E402

POLICIES = ["warmlane", "leastconn", "chash", "stick"]
CASES = ["healthy", "slow", "kill", "429"]

# The key HAProxy's own policies hash or stick on: the session id when
# there is one, else the hash of the body's first KiB (the example config's
# prefix1, which covers the shared system prompt and the conversation's
# first words).
LBKEY = ("    http-request set-var(txn.lbkey) req.hdr(x-session-id) if { req.hdr(x-session-id) -m found }\n"
         "    http-request set-var(txn.lbkey) var(txn.warmlane.prefix1) if !{ req.hdr(x-session-id) -m found }\n")
BALANCE = {
    "warmlane": "",
    "leastconn": "",
    "chash": LBKEY + "    balance hash var(txn.lbkey)\n    hash-type consistent\n"
             "    hash-balance-factor 150\n",
    "stick": LBKEY + "    stick-table type string len 64 size 100k expire 30m\n"
             "    stick on var(txn.lbkey)\n",
}
RL_VICTIM = "e3"  # the 429 case's server
KILL_VICTIM = "e2"
SLOW = "e4"


class BenchEnv(eng.EngineEnv):
    def __init__(self, name, policy, case):
        super().__init__(name, "2.6", chroot=False)
        self.policy_name = policy
        self.case = case
        self.rl_map = self.path("ratelimit.map")

    def haproxy_config(self, test_headers=True):
        path = super().haproxy_config(test_headers=test_headers)
        with open(path) as f:
            text = f.read()
        anchor = "    balance leastconn\n"
        extra = BALANCE[self.policy_name]
        if self.policy_name in ("chash",):
            text = text.replace(anchor, extra, 1)
        else:
            text = text.replace(anchor, anchor + extra, 1)
        # the 429 case: a server listed in the map answers 429 +
        # Retry-After (HAProxy rewrites its answer; the admin socket adds
        # and removes the entry)
        with open(self.rl_map, "w") as f:
            f.write("")
        rule = (f"    http-response set-status 429 if {{ srv_name,map({self.rl_map}) -m found }}\n"
                f"    http-response set-header retry-after 5 if {{ srv_name,map({self.rl_map}) -m found }}\n")
        anchor2 = "    retries 2\n"
        if anchor2 not in text:
            raise AssertionError("the example config changed: no `retries 2`")
        text = text.replace(anchor2, rule + anchor2, 1)
        with open(path, "w") as f:
            f.write(text)
        return path


def run_one(llama, models, policy, case, plan, log):
    names = [f"e{i + 1}" for i in range(4)]
    mlist = [models["slow"] if (case == "slow" and n == SLOW) else models["fast"]
             for n in names]
    fleet = lf.Fleet(llama, models["fast"], n=4, parallel=plan["parallel"],
                     cache_ram=plan["cache_ram"], threads=1, ctx=16384, models=mlist)
    events = []
    with BenchEnv(f"bench-{policy}-{case}", policy, case) as env:
        try:
            fleet.start()
            env.use_fleet(fleet)
            if policy == "warmlane":
                env.policy.update(plan["policy"])
                if plan["engine_metrics"]:
                    # the engines' own counts (docs/engine-load.md): with
                    # policy.routers auto, the agent learns it routes alone
                    for s in fleet.servers:
                        env.endpoints[s.name]["engine_metrics"] = (
                            f"http://127.0.0.1:{s.port}/metrics")
                env.start_agent()
            env.start_haproxy(h.haproxy_binary("2.6")[0])
            env.wait_backends_up(timeout=30)
            if policy == "warmlane":
                env.wait_agent(up=True)
            total = plan["conversations"] * plan["turns"]
            p = eng.drive(env, dict(conversations=plan["conversations"], turns=plan["turns"],
                                    seed=plan["seed"], concurrency=plan["concurrency"],
                                    system_chars=plan["system_chars"],
                                    user_chars=plan["user_chars"],
                                    max_tokens=plan["max_tokens"], open=plan["open"]),
                          "bench", background=True)
            t0 = time.monotonic()

            def at(frac):
                h.wait_until(f"{frac:.2f} of the requests", lambda: p.poll() is not None or
                             len(eng.read(p.out)) >= int(frac * total), timeout=600,
                             interval=0.1)
                return p.poll() is None
            if case == "kill":
                if at(1 / 3):
                    fleet.server(KILL_VICTIM).kill()
                    events.append(("kill", time.monotonic() - t0))
                if at(2 / 3):
                    s = fleet.server(KILL_VICTIM)
                    s.start()
                    s.wait_healthy()
                    events.append(("restart", time.monotonic() - t0))
            elif case == "429":
                if at(1 / 3):
                    env.admin(f"add map {env.rl_map} {RL_VICTIM} 1")
                    events.append(("429 on", time.monotonic() - t0))
                if at(2 / 3):
                    env.admin(f"del map {env.rl_map} {RL_VICTIM}")
                    events.append(("429 off", time.monotonic() - t0))
            recs = eng.finish(env, p, p.out, timeout=900)
            if policy == "warmlane":
                # what policy.routers concluded by the run's end
                m = eng.fe.parse_metrics(env.metrics_text()[0])
                events.append(("routers", {n: eng.fe.metric_sum(m, f"warmlane_routers_{n}")
                                           for n in ("alone", "turns", "turn_skips")}))
        finally:
            fleet.stop()
    log(f"{case:8s} {policy:9s} {len(recs)} requests, cached {eng.cached_share(recs):.1%}, "
        f"failed {sum(1 for r in recs if r['error'])}, events {events}")
    return {"case": case, "policy": policy, "records": recs, "events": events}


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--engine-dir", required=True)
    ap.add_argument("--conversations", type=int, default=32)
    ap.add_argument("--turns", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=4)
    ap.add_argument("--parallel", type=int, default=1)
    ap.add_argument("--cache-ram", type=int, default=64)
    ap.add_argument("--system-chars", type=int, default=900)
    ap.add_argument("--user-chars", type=int, default=400)
    ap.add_argument("--max-tokens", type=int, default=16)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--open", type=int, default=0,
                    help="conversations under way at once, a finished one replaced "
                         "by the next (0: all from the start)")
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                    help="a policy: line of warmlane's config (repeatable)")
    ap.add_argument("--engine-metrics", action="store_true",
                    help="warmlane polls each llama-server's /metrics (engine_metrics)")
    a = ap.parse_args()
    sets = dict(kv.split("=", 1) for kv in a.set)
    plan = dict(conversations=a.conversations, turns=a.turns, concurrency=a.concurrency,
                parallel=a.parallel, cache_ram=a.cache_ram, system_chars=a.system_chars,
                user_chars=a.user_chars, max_tokens=a.max_tokens, seed=a.seed, open=a.open,
                policy=sets, engine_metrics=a.engine_metrics)
    t0 = time.monotonic()
    llama = lf.fetch(a.engine_dir)
    if llama is None:
        print("engine-bench: no llama-server", file=sys.stderr)
        return 1
    models = {"fast": lf.model(a.engine_dir, layers=2), "slow": lf.model(a.engine_dir, layers=8)}
    eng.driver_setup()
    if not os.environ.get("WARMLANE_BIN"):
        print("engine-bench: WARMLANE_BIN unset", file=sys.stderr)
        return 1
    runs = []
    for case in a.cases.split(","):
        for policy in a.policies.split(","):
            runs.append(run_one(llama, models, policy, case, plan, h.log))
    with open(a.out + ".tmp", "w") as f:
        json.dump({"plan": plan, "seconds": time.monotonic() - t0, "runs": runs,
                   "haproxy": h.haproxy_binary("2.6")[1],
                   "llama": subprocess.run([llama, "--version"], capture_output=True,
                                           text=True).stderr.strip().splitlines()[-2:]}, f)
    os.replace(a.out + ".tmp", a.out)
    h.log(f"engine-bench: {len(runs)} runs in {time.monotonic() - t0:.0f}s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
