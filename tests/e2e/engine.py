#!/usr/bin/env python3
"""warmlane with real inference engines: llama.cpp's llama-server behind real
HAProxy, driven by the official OpenAI Node client (tests/engine).

Usage: engine.py 2.6|3.2 engine|slow|slow2
Four llama-servers (one thread, one slot, a small host-memory prompt cache
each: tests/engine/llamafleet.py says why one slot) serve a tiny random-weight model (tests/engine/mkmodel.py); HAProxy
runs the example config of its version with warmlane; the driver
(tests/engine/driver) sends multi-turn conversations after a shared system
prompt, half with a session id, half streamed, each turn carrying the
engine's real previous reply. Phases, each asserting behaviour only:

  affinity  every later turn lands on the server of the conversation's
            earlier turns, and the engine reports at least 90% of the
            previous prompt as cached (usage.prompt_tokens_details);
  kill      the conversations go on while the server holding the most of
            them is SIGKILLed: no request that had not yet received its
            response headers fails (streams the kill cut are counted and
            printed), and the victim's conversations continue elsewhere;
  restart   the victim, restarted with an empty cache, gets at least 10% of
            40 new conversations, sent one at a time;
  leastconn the affinity phase's traffic on a cold fleet with the agent
            stopped (HAProxy's leastconn): its cached share is printed next
            to warmlane's, not asserted.

Usage: engine.py 2.6|3.2 slow: one server slow from its first request
(see slow()): its conversations leave it once it is judged. slow2: a
fleet of two, one turning slower (see slow2()).

Set-up: tests/engine/fetch-llama.sh into <build>/engine (tests/run.sh runs
it first; here it costs one line when done) and `npm ci` of the driver.
Exit status: 0 pass, 1 fail, 77 skip: no HAProxy of that version, no agent,
or llama-server from Debian sid cannot be had (nothing else makes it skip).
"""

import json
import os
import subprocess
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402

ENGINE_DIR = os.path.join(h.source_root(), "tests", "engine")
sys.path.insert(0, ENGINE_DIR)
import llamafleet as lf  # noqa: E402

log = h.log
MODEL = "tiny"


def engine_dir():
    """Where llama-server and the models are kept (fetch-llama.sh's folder)."""
    return os.environ.get("WARMLANE_ENGINE_DIR") or os.path.join(
        h.source_root(), "build", "engine")


def setup():
    """(llama-server wrapper, model path); Skip only when sid's packages
    cannot be had. The driver's node_modules are installed when missing."""
    folder = engine_dir()
    t0 = time.monotonic()
    binary = lf.fetch(folder)
    if binary is None:
        raise h.Skip("llama-server from Debian sid cannot be had (see above)")
    model = lf.model(folder)
    driver_setup()
    log(f"# set-up {time.monotonic() - t0:.1f}s (llama-server, model, driver)")
    return binary, model


def driver_setup():
    d = os.path.join(ENGINE_DIR, "driver")
    r = subprocess.run([os.path.join(ENGINE_DIR, "npm-ci.sh")], capture_output=True,
                       text=True, timeout=600)
    if r.returncode != 0:
        raise AssertionError(f"npm ci in {d} failed:\n{r.stdout}{r.stderr}")


class EngineBackend:
    def __init__(self, server):
        self.name = server.name
        self.port = server.port
        self.admin_port = server.port
        self.models = [MODEL]

    def stop(self):
        pass  # the fleet stops its servers


class EngineEnv(fe.FleetEnv):
    """FleetEnv with llama-servers as the backends, x-served-by (%s) in
    every response, HAProxy's health check on /health (a llama-server
    still loading its model accepts connections and answers 503), and
    `option http-server-close` (see haproxy_config)."""

    def use_fleet(self, fleet):
        self.backends = [EngineBackend(s) for s in fleet.servers]
        for b in self.backends:
            # slots: what a user configures from llama-server's --parallel
            self.endpoints[b.name] = {"models": [MODEL], "keys": ["k1"], "weight": 1,
                                      "slots": fleet.parallel}

    def start_fleet(self, fleet, binary, what):
        """Starts fleet (logged as `what`), the agent and HAProxy, and
        waits until HAProxy has every server up and the agent answers."""
        log(f"# fleet of {what} up in {fleet.start():.2f}s")
        self.use_fleet(fleet)
        self.start_agent()
        self.start_haproxy(binary)
        self.wait_backends_up(timeout=20)
        self.wait_agent(up=True)

    def haproxy_config(self, test_headers=True):
        path = super().haproxy_config(test_headers=test_headers)
        with open(path) as f:
            text = f.read()
        # after default_backend: outside the feedback's `.if` of the 2.6
        # config, so that every version sets it
        line = "    default_backend llm\n"
        if line not in text:
            raise AssertionError("the example config changed: no `default_backend llm`")
        text = text.replace(line, line + "    http-response set-header x-served-by %s\n", 1)
        anchor = "    balance leastconn\n"
        if anchor not in text:
            raise AssertionError("the example config changed: no `balance leastconn`")
        # llama-server (cpp-httplib) closes its connection after a streamed
        # answer while its headers say keep-alive: HAProxy then sends the next
        # request on a dead connection, retries (empty-response) and, with
        # the example's `option redispatch 1`, moves the conversation to
        # another server and its cold cache. Closing the server side after
        # each response avoids the race (a loopback connect per request).
        text = text.replace(anchor, anchor + "    option httpchk GET /health\n"
                            "    option http-server-close\n", 1)
        with open(path, "w") as f:
            f.write(text)
        return path


def drive(env, plan, name, background=False):
    """Runs the driver with `plan` (see driver.mjs); returns the Popen when
    background, else the records."""
    out = env.path(f"{name}.jsonl")
    p = dict(baseURL=f"http://127.0.0.1:{env.port}/v1", model=MODEL, out=out,
             state=env.path("conversations.json"), system_chars=900, user_chars=200,
             max_tokens=16, session_share=0.5, stream_share=0.5, concurrency=4)
    p.update(plan)
    pf = env.path(f"{name}.plan.json")
    with open(pf, "w") as f:
        json.dump(p, f)
    proc = env.start_process(f"driver-{name}",
                             ["node", os.path.join(ENGINE_DIR, "driver", "driver.mjs"), pf])
    if background:
        proc.out = out
        return proc
    return finish(env, proc, out)


def finish(env, proc, out, timeout=240):
    try:
        proc.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"the driver did not finish in {timeout}s") from None
    if proc.returncode != 0:
        raise AssertionError(f"the driver exited with status {proc.returncode}:\n"
                             f"{env.log_text('driver-' + os.path.basename(out)[:-len('.jsonl')])[-2000:]}")
    return read(out)


def read(out):
    recs = []
    if os.path.exists(out):
        with open(out) as f:
            for line in f:
                if line.endswith("\n"):
                    recs.append(json.loads(line))
    return recs


def cached_share(recs):
    p = sum(r["prompt_tokens"] or 0 for r in recs if r["error"] is None)
    c = sum(r["cached_tokens"] or 0 for r in recs if r["error"] is None)
    return c / p if p else 0.0


def pct(xs, q):
    xs = sorted(xs)
    if not xs:
        return float("nan")
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def report(recs, what):
    served = {}
    for r in recs:
        served[r["served"]] = served.get(r["served"], 0) + 1
    ok = [r for r in recs if r["error"] is None]
    ttft = [r["ttft_ms"] for r in ok]
    later = [r for r in ok if r["turn"] > 1]
    log(f"{what}: {len(recs)} requests, {len(recs) - len(ok)} failed; served "
        f"{fe.fmt_counts(served)}; cached share {cached_share(recs):.1%} "
        f"(later turns {cached_share(later):.1%}); TTFT p50 {pct(ttft, 0.5):.0f} ms "
        f"p90 {pct(ttft, 0.9):.0f} ms (printed, not asserted)")


def assert_ok(recs, what):
    bad = [r for r in recs if r["error"] is not None or r["status"] != 200]
    if bad:
        raise AssertionError(f"{what}: {len(bad)} of {len(recs)} requests failed, first: "
                             f"{bad[:3]}")


def assert_affinity(recs, what):
    """Every later turn on its earlier turns' server, >= 90% of the previous
    prompt cached by the engine."""
    moved, missed = [], []
    for r in recs:
        if r["turn"] == 1 or r["error"] is not None:
            continue
        if r["served"] != r["prev_served"]:
            moved.append(r)
        elif (r["cached_tokens"] or 0) < 0.9 * r["prev_prompt_tokens"]:
            missed.append(r)
    if moved or missed:
        raise AssertionError(
            f"{what}: {len(moved)} later turns moved off their server, {len(missed)} "
            f"cached < 90% of the previous prompt; first moved "
            f"{[(r['conv'], r['turn'], r['prev_served'], r['served'], r['reason']) for r in moved[:4]]}, "
            f"first missed {[(r['conv'], r['turn'], r['cached_tokens'], r['prev_prompt_tokens']) for r in missed[:4]]}")


def wait_up(env, name, up=True, timeout=20):
    want = "UP" if up else "DOWN"
    h.wait_until(f"HAProxy to see {name} {want}",
                 lambda: env.server_status("llm", name).startswith(want), timeout=timeout)


def engine(binary, version):
    llama, model = setup()
    t_all = time.monotonic()
    # One slot each: with two, two turns arriving together at a server can
    # swap slots and one finds only the system prompt (the engine's slot
    # choice, not routing; seen in 1-3 of 24 requests).
    fleet = lf.Fleet(llama, model, n=4, parallel=1, cache_ram=32, threads=1, ctx=16384)
    with EngineEnv("engine", version) as env:
        try:
            env.start_fleet(fleet, binary, "4 llama-servers")
            run(env, fleet, binary)
        finally:
            fleet.stop()
    log(f"# engine on HAProxy {version}: {time.monotonic() - t_all:.0f}s")


def run(env, fleet, binary):
    # --- affinity: 8 conversations x 3 turns -------------------------------
    a = drive(env, dict(conversations=8, turns=3, seed=1), "affinity")
    report(a, "warmlane affinity")
    assert_ok(a, "affinity")
    assert_affinity(a, "affinity")
    ours = cached_share(a)

    # --- kill: 3 more turns each, the busiest server SIGKILLed after 4 -----
    convs = {}
    for r in a:
        convs.setdefault(r["served"], set()).add(r["conv"])
    victim = max(sorted(convs), key=lambda s: len(convs[s]))
    vconvs = convs[victim]
    p = drive(env, dict(conversations=8, turns=3, seed=2), "kill", background=True)
    h.wait_until("4 requests of the kill phase", lambda: p.poll() is not None or
                 len(read(p.out)) >= 4, timeout=120)
    t_kill = None
    if p.poll() is None:
        # the kill lands while requests are under way
        fleet.server(victim).kill()
        t_kill = time.monotonic()
        log(f"kill: SIGKILLed {victim} (it held {len(vconvs)} of 8 conversations) after "
            f"{len(read(p.out))} requests")
    k = finish(env, p, p.out)
    if t_kill is None:
        raise AssertionError("kill: the driver finished before the kill")
    report(k, "warmlane kill")
    cut = [r for r in k if r["cut"]]
    nohdr = [r for r in k if not r["cut"] and (r["error"] is not None or r["status"] != 200)]
    log(f"kill: {len(cut)} streams cut by the kill (counted, allowed); "
        f"{len(nohdr)} other failures")
    if nohdr:
        raise AssertionError(f"kill: {len(nohdr)} requests failed that had not been cut "
                             f"mid-stream: {nohdr[:3]}")
    # the victim's conversations: after their first turn that was not on the
    # victim, every turn is elsewhere and succeeds
    after = [r for r in k if r["conv"] in vconvs and r["served"] not in (None, victim)]
    if not after:
        raise AssertionError(f"kill: none of {victim}'s conversations continued elsewhere")
    late = [r for r in k if r["conv"] in vconvs and r["served"] == victim and any(
        x["conv"] == r["conv"] and x["i"] < r["i"] and x["served"] not in (None, victim)
        for x in k)]
    if late:
        raise AssertionError(f"kill: conversations went back to the dead {victim}: {late[:3]}")
    moved = sorted({r["conv"] for r in after})
    log(f"kill: {victim}'s conversations {sorted(vconvs)} continued on "
        f"{sorted({r['served'] for r in after})} ({len(moved)} of them)")

    # --- restart: empty cache, >= 10% of 40 new conversations ----------------
    s = fleet.server(victim)
    s.start()
    s.wait_healthy()
    wait_up(env, victim)
    h.wait_until("the agent to see it", lambda: agent_sees_up(env, victim), timeout=10)
    # One conversation at a time: with four at once, new keys follow load,
    # and a server restarted with a cold cache answers its first (the
    # shared system prompt's prefill) several times slower than its warm
    # peers, so in a phase of about a second its share swung around the
    # bar (2-9 of 40, the bar 4: a flaky test). One at a time, every
    # decision finds the fleet idle and places by the keys' hash (5-6 of
    # 40 to the victim in eight runs): what the phase asks is whether
    # anything still keeps the victim out.
    n = drive(env, dict(conversations=40, turns=1, seed=3, new_only=True, prefix="n",
                        concurrency=1),
              "restart")
    report(n, "warmlane restart")
    assert_ok(n, "restart")
    got = sum(1 for r in n if r["served"] == victim)
    log(f"restart: the restarted {victim} got {got} of {len(n)} new conversations")
    if got < 0.1 * len(n):
        raise AssertionError(f"restart: {victim} got {got} of {len(n)} new conversations "
                             "(< 10%)")

    # --- leastconn: the affinity traffic, cold fleet, no agent ----------------
    env.stop_agent_checked()
    env.wait_agent(up=False)
    fleet.restart_all()
    for sv in fleet.servers:
        wait_up(env, sv.name)
    os.remove(env.path("conversations.json"))
    lc = drive(env, dict(conversations=8, turns=3, seed=1), "leastconn")
    report(lc, "leastconn affinity")
    assert_ok(lc, "leastconn")
    moved = sum(1 for r in lc if r["turn"] > 1 and r["served"] != r["prev_served"])
    later = sum(1 for r in lc if r["turn"] > 1)
    log(f"leastconn: {moved} of {later} later turns left their server (warmlane: 0)")
    log(f"cached-token share: warmlane {ours:.1%}, leastconn {cached_share(lc):.1%} "
        "(printed for comparison, not asserted)")


def agent_sees_up(env, name):
    """The agent's /metrics says the server is `enabled`
    (warmlane_endpoint_admin_state, read from HAProxy's runtime API)."""
    try:
        text, _ = env.metrics_text()
    except AssertionError:
        return False
    for n, lb, v in fe.parse_metrics(text):
        if (n == "warmlane_endpoint_admin_state" and name in lb.values()
                and lb.get("state") == "enabled"):
            return v == 1.0
    return False


def answered(recs, server, stream):
    """End times (driver clock, ms) of server's successful answers of one
    kind (streamed or not: the core judges each kind apart), in order."""
    return sorted(r["t0"] + r["total_ms"] for r in recs
                  if r["served"] == server and r["error"] is None and r["stream"] == stream)


def slow(binary, version):
    """Issue 12, a server slow from its first request on a real fleet:
    four llama-servers, e4 running a model with 4x the layers (about 5-10x
    slower to its first token than its peers, every answer of it cold);
    24 conversations of 4 turns from 4 clients, so that the first turns
    are all placed by hash before e4 has answered 5 times. Once e4 and
    one peer have 5 answers of a kind (policy.slow_start, the core's
    statistics per kind), a conversation on e4 leaves it at its next turn
    of that kind (policy.slow_start_leave): at most one such turn may
    stay (an answer whose log line the agent has not read yet). Counts,
    not times; TTFT printed. WARMLANE_SLOW_START_LEAVE=false: the rule off
    (they all stay). policy.place_slots is off (WARMLANE_PLACE_SLOTS=true
    turns it on: then e4 is mostly passed over before it can be judged)."""
    llama, _model = setup()
    folder = engine_dir()
    victim = "e4"
    models = [lf.model(folder)] * 3 + [lf.model(folder, layers=8)]
    fleet = lf.Fleet(llama, models[0], n=4, parallel=1, cache_ram=64, threads=1,
                     ctx=16384, models=models)
    # place_slots off: with each server's one slot configured, e4, busy
    # with a slow answer most of the time, takes so few new keys that it
    # never answers 5 times and is never judged (6 and 8 of 96 requests
    # in two runs; docs/policy-v2.md, section 13): the judgement this
    # test is for is then never reached
    pol = {"place_slots": os.environ.get("WARMLANE_PLACE_SLOTS", "false")}
    if os.environ.get("WARMLANE_SLOW_START_LEAVE"):
        pol["slow_start_leave"] = os.environ["WARMLANE_SLOW_START_LEAVE"]
    with EngineEnv("engineslow", version, policy=pol) as env:
        try:
            env.start_fleet(fleet, binary, f"4 llama-servers ({victim} 4x the layers)")
            recs = drive(env, dict(conversations=24, turns=4, seed=5, user_chars=400),
                         "slow")
        finally:
            fleet.stop()
    report(recs, f"warmlane, {victim} slow from the start")
    assert_ok(recs, "slow")
    peers = [f"e{i}" for i in range(1, 4)]
    judged = {}
    for stream in (False, True):
        mine = answered(recs, victim, stream)
        theirs = [a[4] for a in (answered(recs, p, stream) for p in peers) if len(a) >= 5]
        if len(mine) >= 5 and theirs:
            judged[stream] = max(mine[4], min(theirs))
    if not judged:
        raise AssertionError(f"slow: {victim} and its peers never had 5 answers of a kind")
    stayed, left = [], []
    for r in recs:
        at = judged.get(r["stream"])
        if r["turn"] == 1 or r["prev_served"] != victim or at is None or r["t0"] < at:
            continue
        (stayed if r["served"] == victim else left).append(r)
    ttft = {s: pct([r["ttft_ms"] for r in recs if r["served"] == s], 0.5) for s in peers + [victim]}
    log(f"slow: judged from {', '.join(f'{k}: {v / 1000:.1f}s' for k, v in ((('stream' if s else 'plain'), t) for s, t in sorted(judged.items())))}; "
        f"later turns from {victim} after it: {len(left)} left, {len(stayed)} stayed "
        f"{[(r['conv'], r['turn'], r['reason']) for r in stayed]}; TTFT p50 by server "
        f"{', '.join(f'{k} {v:.0f} ms' for k, v in ttft.items())} (printed)")
    if len(left) + len(stayed) < 3:
        raise AssertionError(f"slow: only {len(left) + len(stayed)} later turns of {victim}'s "
                             "conversations came after it was judged: the test says nothing")
    if len(stayed) > 1:
        raise AssertionError(f"slow: {len(stayed)} of {len(stayed) + len(left)} later turns "
                             f"stayed on {victim}, slow from its start, after it was judged")


def slow2(binary, version):
    """Issue 12 on a fleet of two: two llama-servers, 6 conversations of 8
    turns (session ids, not streamed, 2 clients), then the server holding
    more of them restarted on a model with 4x the layers (its cache empty,
    its answers 10-30x slower) and 8 more turns each. Every conversation
    it held leaves it within 3 turns. With two candidates the latency rule
    judges it against the other: against their median, their mean, no
    EWMA is ever 2.5 times over, and they stayed all 8 turns
    (docs/policy-v2.md, section 36). Counts, not times; TTFT printed."""
    llama, _model = setup()
    folder = engine_dir()
    fleet = lf.Fleet(llama, lf.model(folder), n=2, parallel=1, cache_ram=64, threads=1,
                     ctx=16384)
    plan = dict(conversations=6, seed=5, stream_share=0.0, session_share=1.0, concurrency=2)
    with EngineEnv("engineslow2", version) as env:
        try:
            env.start_fleet(fleet, binary, "2 llama-servers")
            warm = drive(env, dict(plan, turns=8), "warm")
            report(warm, "warm")
            assert_ok(warm, "warm")
            held = {}
            for r in warm:
                if r["turn"] == 8:
                    held.setdefault(r["served"], []).append(r["conv"])
            victim = max(sorted(held), key=lambda sv: len(held[sv]))
            s = fleet.server(victim)
            s.stop()
            s.model = lf.model(folder, layers=8)
            s.start()
            s.wait_healthy()
            wait_up(env, victim)
            slow = drive(env, dict(plan, turns=8), "slow")
        finally:
            fleet.stop()
    report(slow, f"{victim} slower")
    assert_ok(slow, "slow")
    stayed = {}
    for c in held[victim]:
        turns = sorted((r for r in slow if r["conv"] == c), key=lambda r: r["turn"])
        n = 0
        for r in turns:
            if r["served"] != victim:
                break
            n += 1
        stayed[c] = n
    ttft = {sv: round(pct([r["ttft_ms"] for r in slow if r["served"] == sv], 0.5))
            for sv in sorted(held)}
    log(f"slow2: {victim} held {held[victim]} of 6 conversations when it turned slower; "
        f"turns each stayed on it: {stayed}; it got "
        f"{sum(1 for r in slow if r['served'] == victim)} of {len(slow)} requests after; "
        f"TTFT p50 by server {ttft} ms (printed)")
    bad = {c: n for c, n in stayed.items() if n > 3}
    if bad:
        raise AssertionError(f"slow2: conversations stayed on {victim}, slower, for more than "
                             f"3 of 8 turns: {bad}")


SCENARIOS = {"engine": engine, "slow": slow, "slow2": slow2}

if __name__ == "__main__":
    sys.exit(h.main(SCENARIOS))
