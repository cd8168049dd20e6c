#!/usr/bin/env python3
"""Engine load across HAProxies: two HAProxy instances, each with its own
warmlane, in front of one fleet of two llama.cpp llama-servers; both agents
poll the engines' own /metrics (endpoints[].engine_metrics, engine.py's
fleet: llama-server --metrics).

Usage: engineload.py 2.6|3.2 engineload
Phases, each asserting behaviour:

  seen      long generations sent through HAProxy A only, all to one
            server (one session): agent B, whose HAProxy carries none of
            them (its runtime API says scur + qcur 0), counts them in that
            server's in-flight view (warmlane_endpoint_in_flight), from the
            engine (warmlane_endpoint_engine_fresh 1);
  steered   meanwhile new sessions sent through HAProxy B all go to the
            other server: its load, over B's load_floor (4 here), is past the
            load bound (without engine load, B sees two idle servers and
            rendezvous hashing puts about half of them on the loaded one);
  routers   each agent's share of the engines' load (policy.routers auto,
            warmlane_routers_share): B's under 0.6, A's at least 0.8; A
            routes alone (warmlane_routers_alone 1) once it has decided 30
            requests in the last minute or so (BRIEF_N short ones more), B
            never;
  stale     the loaded llama-server stopped (SIGSTOP): its polls fail, and
            past engine.max_age (2 s) B's view of it is the runtime API's
            again (fresh 0, in-flight 0), the failures counted.

Exit status: 0 pass, 1 fail, 77 skip (as engine.py).
"""

import os
import signal
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402
import engine as eng  # noqa: E402

log = h.log
LONG_TOKENS = 8000   # 20 s or more each on one slot: loaded all along
LONG_N = 6
BRIEF_N = 40         # over the 30 decisions a verdict "alone" needs, decayed


def series(env, name, server):
    text, _ = env.metrics_text()
    for n, lb, v in fe.parse_metrics(text):
        if n == name and lb.get("server") == server:
            return v
    return None


def engineload(binary, version):
    llama, model = eng.setup()
    fleet = eng.lf.Fleet(llama, model, n=2, parallel=1, cache_ram=32, threads=1,
                         ctx=16384)
    with eng.EngineEnv("engineload-a", version) as a, \
            eng.EngineEnv("engineload-b", version) as b:
        try:
            log(f"# fleet of 2 llama-servers up in {fleet.start():.2f}s")
            # A keeps one session on its server however loaded (a floor
            # over LONG_N); B's floor, 4, is under LONG_N, as the steering
            # below needs (the default, 6, is LONG_N itself)
            a.policy["load_floor"] = 16
            b.policy["load_floor"] = 4
            for env in (a, b):
                env.use_fleet(fleet)
                for s in fleet.servers:
                    env.endpoints[s.name]["engine_metrics"] = (
                        f"http://127.0.0.1:{s.port}/metrics")
            # B is not told the slots: it learns them from the engines'
            # metrics (requests deferred beside one processing)
            for s in fleet.servers:
                b.endpoints[s.name].pop("slots", None)
            for env in (a, b):
                # a llama-server busy generating on its one thread answers
                # /metrics late on a loaded machine: 2 s, not the 1 s default
                env.agent_extra.append("engine: { poll_interval: 100ms, timeout: 2s }")
                env.start_agent()
                env.start_haproxy(binary)
            for env in (a, b):
                env.wait_backends_up(timeout=20)
                env.wait_agent(up=True)
            run(a, b, fleet)
            for env in (a, b):
                env.stop_agent_checked()
        finally:
            fleet.stop()


def run(a, b, fleet):
    names = [s.name for s in fleet.servers]
    # --- seen: load through A only ------------------------------------------
    recs = []

    def long_one(i):
        c = fe.Client(a.port, timeout=120)
        body = fe.chat_body("tell me a long story " + "x" * 40, model=eng.MODEL,
                            max_tokens=LONG_TOKENS)
        recs.append(c.post(body, {"x-session-id": "heavy"}, i=i, tag="long"))
        c.close()

    # not waited for: they run to the end of the test (the fleet's stop
    # ends them)
    threads = [threading.Thread(target=long_one, args=(i,), daemon=True)
               for i in range(LONG_N)]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    # the loaded server: where A's agent sent them
    h.wait_until("A's agent to route the long requests", lambda: sum(
        (series(a, "warmlane_endpoint_decisions_total", n) or 0) for n in names) >= LONG_N,
        timeout=10)
    dec = {n: series(a, "warmlane_endpoint_decisions_total", n) for n in names}
    busy = max(names, key=lambda n: dec[n])
    idle = [n for n in names if n != busy][0]
    if dec[busy] != LONG_N:
        raise AssertionError(f"seen: A's agent split the one session's requests: {dec}")

    # B must count at least its load_floor (4) of them, which the steering
    # below needs: on a loaded machine the last of the LONG_N may reach the
    # engine seconds later (HAProxy's connect, llama-server's accept)
    def b_sees():
        v = series(b, "warmlane_endpoint_in_flight", busy)
        return v is not None and v >= 4
    h.wait_until(f"agent B to count A's load on {busy}", b_sees, timeout=20)
    seen_ms = (time.monotonic() - t0) * 1000
    b_if = series(b, "warmlane_endpoint_in_flight", busy)
    b_fresh = series(b, "warmlane_endpoint_engine_fresh", busy)
    b_engine = series(b, "warmlane_endpoint_engine_requests", busy)
    b_scur = b.server_status("llm", busy)
    row = b.show_stat().get(("llm", busy))
    b_haproxy = int(row["scur"]) + int(row["qcur"]) if row else None
    log(f"seen: A sent {LONG_N} long generations to {busy}; agent B: in-flight {b_if:.0f}, "
        f"engine sample {b_engine:.0f}, fresh {b_fresh:.0f}; B's HAProxy scur+qcur "
        f"{b_haproxy} ({b_scur}); seen {seen_ms:.0f} ms after the first was sent "
        "(printed, not asserted)")
    if b_fresh != 1:
        raise AssertionError(f"seen: B's engine view of {busy} is not fresh ({b_fresh})")
    if b_haproxy != 0:
        raise AssertionError(f"seen: B's HAProxy carried requests to {busy}: {b_haproxy}")
    # the engine's own count of what it runs while others wait: its one
    # slot (--parallel 1), learnt by B, which configures none
    h.wait_until(f"agent B to learn {busy}'s slots from its metrics",
                 lambda: series(b, "warmlane_endpoint_slots", busy) == 1, timeout=20)
    if series(b, "warmlane_endpoint_slots", idle) != 0:
        raise AssertionError(f"seen: B has slots for {idle}, which never queued: "
                             f"{series(b, 'warmlane_endpoint_slots', idle)}")
    log(f"seen: B learnt {busy}'s 1 slot from its /metrics; {idle} unknown")

    # --- steered: new sessions through B go to the idle server -------------
    c = fe.Client(b.port, timeout=30)
    placed = {}
    for i in range(8):
        r = c.post(fe.chat_body(f"short {i}", model=eng.MODEL, max_tokens=1),
                   {"x-session-id": f"new-{i}"}, i=i, tag="new")
        if r.status != 200:
            raise AssertionError(f"steered: a request through B failed: {r.status} {r.error}")
        placed[r.served] = placed.get(r.served, 0) + 1
    c.close()
    log(f"steered: 8 new sessions through B while {busy} is loaded by A: "
        f"{fe.fmt_counts(placed)}")
    if placed.get(busy, 0) != 0:
        raise AssertionError(f"steered: B sent {placed[busy]} of 8 new sessions to the "
                             f"loaded {busy}")
    # over B's load_floor (4) all along, or the check proved nothing
    if series(b, "warmlane_endpoint_in_flight", busy) < 4:
        raise AssertionError("steered: the long requests ended before the check: "
                             f"raise LONG_TOKENS ({LONG_TOKENS})")

    # --- routers: who carries the engines' load ----------------------------
    # policy.routers auto: each agent compares its HAProxy's counts with the
    # engines' at each sample. B carries none of the long generations: it
    # routes beside another HAProxy. A carries them all but has decided
    # LONG_N requests, under the 30 its verdict "alone" needs; short
    # anonymous requests through A (no session, a body under the 1 KiB of
    # the first prefix key: power of two choices, to the idle server) make
    # it alone.
    h.wait_until("both agents to measure their share", lambda: all(
        fe.metric_sum(fe.parse_metrics(env.metrics_text()[0]), "warmlane_routers_share") >= 0
        for env in (a, b)), timeout=10)
    share = {k: fe.metric_sum(fe.parse_metrics(env.metrics_text()[0]), "warmlane_routers_share")
             for k, env in (("A", a), ("B", b))}
    alone = {k: fe.metric_sum(fe.parse_metrics(env.metrics_text()[0]), "warmlane_routers_alone")
             for k, env in (("A", a), ("B", b))}
    log(f"routers: share of the engines' load A {share['A']:.2f}, B {share['B']:.2f}; "
        f"alone A {alone['A']:.0f}, B {alone['B']:.0f}")
    if not share["B"] < 0.6 or alone["B"] != 0:
        raise AssertionError(f"routers: B, which carries none of {busy}'s load, measured a "
                             f"share of {share['B']:.2f} (alone {alone['B']:.0f})")
    if not share["A"] >= 0.8 or alone["A"] != 0:
        raise AssertionError(f"routers: A, which carries {busy}'s load after {LONG_N} "
                             f"decisions, measured {share['A']:.2f} (alone {alone['A']:.0f})")
    c = fe.Client(a.port, timeout=30)
    placed = {}
    for i in range(BRIEF_N):
        r = c.post(fe.chat_body(f"brief {i}", model=eng.MODEL, max_tokens=1),
                   {}, i=i, tag="brief")
        if r.status != 200:
            raise AssertionError(f"routers: a request through A failed: {r.status} {r.error}")
        placed[r.served] = placed.get(r.served, 0) + 1
    c.close()
    h.wait_until("A's agent to route alone", lambda: fe.metric_sum(
        fe.parse_metrics(a.metrics_text()[0]), "warmlane_routers_alone") == 1, timeout=10)
    share_a = fe.metric_sum(fe.parse_metrics(a.metrics_text()[0]), "warmlane_routers_share")
    alone_b = fe.metric_sum(fe.parse_metrics(b.metrics_text()[0]), "warmlane_routers_alone")
    log(f"routers: {BRIEF_N} short requests through A ({fe.fmt_counts(placed)}): A alone "
        f"at a share of {share_a:.2f}; B alone {alone_b:.0f}")
    if alone_b != 0:
        raise AssertionError("routers: B routes alone beside A")

    # --- stale: the engine stops answering ---------------------------------
    srv = fleet.server(busy)
    srv.signal(signal.SIGSTOP)
    t_stop = time.monotonic()
    try:
        h.wait_until(f"B's engine view of the stopped {busy} to go stale",
                     lambda: series(b, "warmlane_endpoint_engine_fresh", busy) == 0,
                     timeout=6)
        gone_s = time.monotonic() - t_stop
        # the poll out when it stopped fails at engine.timeout (2 s), which
        # may be just after the sample aged out
        h.wait_until(f"a failed poll of the stopped {busy}", lambda: fe.metric_sum(
            fe.parse_metrics(b.metrics_text()[0]), "warmlane_endpoint_engine_polls_total",
            server=busy, result="failed") >= 1, timeout=5)
        b_if = series(b, "warmlane_endpoint_in_flight", busy)
        text, _ = b.metrics_text()
        fails = fe.metric_sum(fe.parse_metrics(text), "warmlane_endpoint_engine_polls_total",
                              server=busy, result="failed")
        stale = fe.metric_sum(fe.parse_metrics(text), "warmlane_engine_samples_stale_total")
        age = series(b, "warmlane_endpoint_engine_sample_age_seconds", busy)
        log(f"stale: {busy} SIGSTOPped; B's view stale after {gone_s:.2f} s (sample age "
            f"{age:.2f} s), in-flight {b_if:.0f} (runtime API), {fails:.0f} failed polls, "
            f"{stale:.0f} stale samples")
        # the last sample may be one poll (100 ms) older than the stop
        if gone_s < 1.8 or age <= 2.0:
            raise AssertionError(f"stale: the engine view went stale after {gone_s:.2f} s "
                                 f"(sample age {age:.2f} s), before engine.max_age (2 s)")
        if b_if != 0 or fails < 1 or stale < 1:
            raise AssertionError(f"stale: in-flight {b_if}, failed polls {fails}, "
                                 f"stale {stale}")
    finally:
        srv.signal(signal.SIGCONT)
    h.wait_until(f"B's engine view of {busy} back", lambda: series(
        b, "warmlane_endpoint_engine_fresh", busy) == 1, timeout=5)
    bad = [r for r in recs if r.status != 200]
    if bad:
        raise AssertionError(f"long requests failed: {bad}")
    log(f"# B's view back after SIGCONT; {len(recs)} of {LONG_N} long requests "
        "ended so far (the rest are cut by the fleet's stop)")


SCENARIOS = {"engineload": engineload}

if __name__ == "__main__":
    sys.exit(h.main(SCENARIOS))
