#!/usr/bin/env python3
"""warmlane behaviour tests: real HAProxy, the agent and the fake LLM fleet.

Usage: behaviour.py 2.6|3.0|3.2 SCENARIO
Scenarios:
  affinity     sessions stay on one server and hit its prefix cache; requests
               without identity spread
  agentloop    the same with each turn sent as soon as the previous answer
               is in (agent loops): still one server per session
  ratelimit    a server answering 429 + Retry-After gets, in each window,
               no more than the half-open probes
  breaker      a server answering instant 500s ends with < 1% of the traffic
               sent after its breaker opened
  deadkey      an attacker's 401/403s (many Authorization values) change
               nothing for other callers; a key the upstream revoked is
               excluded on that server (not the server, not the key
               elsewhere) within a bound; all revoked: still a key
  maint        a server set to MAINT on the runtime API stops being chosen,
               and is chosen again once READY; one in DRAIN is not chosen
               (the agent's runtime-API poller)
  haproxyown   a server refusing connections (a failure HAProxy reports
               no feedback for) is marked DOWN by HAProxy's health
               (observe layer4) and left by the agent via the runtime API
  models       requests for a model go only to servers that serve it; one
               for a model no server serves gets the example config's 404
               from HAProxy (warmlane's no_model) and reaches no server
  sessionscope another caller reusing a session id (x-session-id) with
               another model does not move the first caller's entry
               (policy.session_scope caller, the default); with global it
               does
  killrestart  agent SIGKILLed under load: every request succeeds (fail
               open); after a restart the agent decides again
  slowleave    issue 12: a warm server turning 5x slower (prefill and
               decode, headers with the first token) is left within 10 of
               its requests (6 on 2.6, 3.0 and 3.2 with the default
               slow_run 4; 12 with slow_run 0)
  slowleave2   the same with two servers and slow_run 0: the latency
               rule leaves the slower one, judged against the other
  recover      issue 12: that server, recovered, is back within 20% of
               its fair share of anonymous traffic within 30 s
  recovercheck the same with the example config's optional completion
               health check, at a low rate: HAProxy's check of it is
               slow while it is, and once it fits its peers' again it
               takes within 20% of its fair share of new sessions from
               5 s after the recovery on
  slowqueue    issue 12: a server that sends its headers before prefill and
               turns 5x slower, with no log input, loses its sessions once
               its queue has held (docs/policy-v2.md, section 22): under
               its fair share 60-120 s after (HAProxy 3.x)
  slowstart    issue 12: a server 5x slower from its first request gets at
               most half its fair share of the new sessions after its 5th
               answer (policy.slow_start)
  spread       policy.p2c_margin: four identical servers, one client sending
               anonymous requests one at a time: each gets at least half
               its fair share
  sizedrecover issue 12, routing alone: a server whose times to headers are
               irregular only by its prompts' sizes, left as 5x slower,
               gets new sessions back once it recovered (its probes judged
               by their prompt's size: docs/policy-v2.md, section 37)
  turns        issue 12, policy.routers auto: HAProxy's count of each body's
               user messages (the turn argument) shows the agent every turn
               of its conversations (it routes alone), then turns another
               HAProxy routed (it no longer does)
  longprompt   policy.place_long_kib: with one server busy, new sessions
               whose body is that many KiB or more leave it for the idle
               one, shorter ones keep their hashed server (HAProxy's
               req.body_size reaches the core as the size argument)
  tiers        failover tiers (issue 21): s1, s2 are tier 1, t1 tier 2;
               t1 gets nothing while tier 1 serves, takes the traffic
               (reason failover) while s1 and s2 answer 429 +
               Retry-After, and nothing again once they recovered;
               sessions placed on s2 while s1 was in MAINT (half of
               them hash to s1) go back home to s2 (reason affinity)
  metrics      /metrics passes promtool, its counters match what was sent,
               and a real Prometheus server scrapes warmlane series
Exit status: 0 pass, 1 fail, 77 skip (no such HAProxy binary, no agent, no
Prometheus for `metrics`). HAProxy 2.6 runs chrooted, as Debian's stock
config does, when the test runs as root.

Every count and wait is bounded; assertions are about where requests went,
never about how fast (timings are printed).
"""

import collections
import concurrent.futures as cf
import http.client
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
import urllib.parse
import urllib.request

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402

sys.path.insert(0, fe.FLEET_DIR)
import client as fc  # noqa: E402  (tests/fleet/client.py)

log = h.log


def short(i, tag="q"):
    """A short prompt (under 1 KiB: no prefix key is computed by HAProxy)."""
    return f"{tag} {i}: say something short about the number {i}."


def summary(env, records, what):
    served = fe.by(records, "served")
    reasons = fe.by(records, "reason")
    status = fe.by(records, "status")
    log(f"{what}: {len(records)} requests; served {fe.fmt_counts(served)}; "
        f"reasons {fe.fmt_counts(reasons)}; status {fe.fmt_counts(status)}")


# --- affinity ----------------------------------------------------------------

def conversations(env, paces, turns, tag, first=0):
    """Runs one conversation per entry of paces (seconds between an answer
    and the next turn) concurrently, each turn after the previous answer (one
    request in flight per caller); texts from seed 7, conversation index
    first, first + 1... Logs every session; returns (problems,
    servers used, cache-hit blocks the responses reported)."""
    cl = fc.Client(f"http://127.0.0.1:{env.port}", model="m1", max_tokens=8, timeout=15)
    convs = [fc.Conversation(cl, session=f"{tag}-{env.version}-{i}", seed=7, index=first + i,
                             system=None, context_chars=1500, question_chars=300)
             for i in range(len(paces))]

    def run(k):
        out = []
        for _ in range(turns):
            out.append(convs[k].turn())
            if paces[k]:
                time.sleep(paces[k])
        return out
    t0 = time.monotonic()
    with cf.ThreadPoolExecutor(len(paces)) as ex:
        results = list(ex.map(run, range(len(paces)), timeout=60))
    cl.close()
    log(f"{len(paces)} conversation(s) x {turns} turns in {time.monotonic() - t0:.1f} s")
    log(f"{'session':<18} {'next turn':<9} {'servers':<10} reasons, hit/prompt blocks by turn")
    used, hits, problems = set(), 0, []
    for conv, pace, rs in zip(convs, paces, results):
        s = conv.session
        bad = [r for r in rs if r.status != 200]
        assert not bad, f"{s}: failed turns {[(r.status, r.error) for r in bad]}"
        when = f"+{pace * 1000:.0f} ms" if pace else "at once"
        servers = sorted({r.served_by for r in rs})
        log(f"{s:<18} {when:<9} {','.join(servers):<10} "
            + " ".join(f"{r.reason}:{r.hit_blocks}/{r.prompt_blocks}" for r in rs))
        used.update(servers)
        hits += sum(r.hit_blocks or 0 for r in rs)
        for r in rs:
            assert r.reason in fe.CORE_REASONS, \
                f"{s} turn {r.turn}: reason {r.reason!r} is not the routing core's"
            assert r.warmlane_server == r.served_by, \
                f"{s} turn {r.turn}: warmlane chose {r.warmlane_server}, {r.served_by} answered"
        if len(servers) != 1:
            problems.append(
                f"session {s} (one request at a time, next turn {when}) moved: "
                + " ".join(f"{r.served_by}:{r.reason}:{r.hit_blocks}/{r.prompt_blocks}"
                           for r in rs))
            continue
        for prev, r in zip(rs, rs[1:]):
            if r.reason != "affinity":
                problems.append(f"{s} turn {r.turn}: reason {r.reason}, expected affinity")
            # the previous prompt is a prefix of this one: all its full
            # blocks are in the server's cache
            if r.hit_blocks is None or r.hit_blocks < prev.prompt_blocks - 1:
                problems.append(f"{s} turn {r.turn}: {r.hit_blocks} cached blocks of "
                                f"{r.prompt_blocks}, previous prompt had {prev.prompt_blocks}")
    return problems, used, hits


def affinity(binary, version):
    """Sessions stay on one server and hit its cache; no identity spreads.

    Each caller sends one request at a time and thinks 0.3 s between an
    answer and its next turn (seconds for a person): more than the agent's
    runtime-API poll interval (200 ms)."""
    with fe.FleetEnv("affinity", version) as env:
        env.start([fe.instance(n, fast=False) for n in ("s1", "s2", "s3", "s4")], binary)
        problems, used, hits = conversations(env, [0.3] * 8, 5, "conv")
        assert len(used) >= 2, f"8 sessions all on {used}: not spread by hashing"
        stats = env.fleet_stats()
        fleet_hits = sum(s["cache_hit_blocks"] for s in stats.values())
        log("fleet: " + ", ".join(
            f"{n} {s['requests']} req {s['cache_hit_blocks']}/{s['prompt_blocks']} blocks "
            f"({100 * s['hit_rate']:.0f}%)" for n, s in sorted(stats.items())))
        assert fleet_hits == hits, \
            f"the fleet counted {fleet_hits} cache-hit blocks, the responses said {hits}"
        for n in used:
            assert stats[n]["cache_hit_blocks"] > 0, f"{n} served sessions but no cache hit"
        total_hit = fleet_hits / max(1, sum(s["prompt_blocks"] for s in stats.values()))
        log(f"cache hit rate over the conversations: {100 * total_hit:.1f}%")

        # no identity: no session, no caller key, a short body (no prefix key)
        recs = fe.drive(env.port, lambda i: (fe.chat_body(short(i, "anon")), {}, "anon"),
                        n=120, concurrency=4)
        summary(env, recs, "no identity")
        fe.assert_all_ok(recs, "no identity")
        fe.assert_core_reasons(recs, "no identity")
        assert set(fe.by(recs, "reason")) == {"p2c"}, \
            f"no identity: reasons {fe.by(recs, 'reason')}, expected p2c only"
        served = fe.by(recs, "served")
        assert len(served) >= 3, f"no identity: served by {served} only"
        assert max(served.values()) <= 0.6 * len(recs), f"no identity: piled up {served}"
        assert not problems, "conversations did not stay warm:\n  " + "\n  ".join(problems)
        env.stop_agent_checked()


def agentloop(binary, version):
    """Sessions stay on one server when each turn is sent as soon as the
    previous answer is in (an agent or tool loop): still one request in
    flight per caller, but several turns within one runtime-API poll
    interval. First one such caller alone on an idle fleet, sending each
    turn at once, then four that take 20 ms (a tool step) beside four
    callers that think 0.3 s between turns. Four callers sending at once
    beside others can have turn 2 decided before the agent has read the
    log line of turn 1 (on 2.6 the feedback): it then follows turn 1's
    pending slot, which keeps the key's rendezvous choice, so a first turn
    placed by load is left (5 of 48 runs on the test machine; issue 12's
    open gap, docs/policy-v2.md, "What is left of issue 12"); 20 ms gave
    0 of 24. Turn 2 by hash on the same server is the log input's
    catch-up leaving turn 1's line unread (CI under ASan, once: a
    catch-up preempted on its first line; logsrc.h, LOGSRC_CATCH_UP_MIN)."""
    with fe.FleetEnv("agentloop", version) as env:
        env.start([fe.instance(n, fast=False) for n in ("s1", "s2", "s3", "s4")], binary)
        problems, _, _ = conversations(env, [0.0], 10, "solo", first=100)
        more, used, _ = conversations(env, [0.02, 0.3] * 4, 6, "mixed")
        problems += more
        assert not problems, "conversations did not stay warm:\n  " + "\n  ".join(problems)
        env.stop_agent_checked()


# --- 429 ----------------------------------------------------------------------

def ratelimit(binary, version):
    """429 + Retry-After: no traffic in the window beyond half-open probes."""
    retry_after = 2
    with fe.FleetEnv("ratelimit", version) as env:
        probes = int(env.policy["half_open_probes"])
        env.start([fe.instance(n) for n in ("s1", "s2", "s3")], binary)
        # a new session per request: rendezvous hashing sends ~1/3 to s2
        warm = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                             {"x-session-id": f"w{i}"}, "warm"),
                        n=60, concurrency=4)
        summary(env, warm, "before")
        fe.assert_all_ok(warm, "before the fault")
        fe.assert_core_reasons(warm, "before the fault")
        assert fe.count(warm, served="s2") > 0, "s2 got nothing before the fault"

        env.fault("s2", mode="429", retry_after=retry_after)
        t_fault = time.monotonic()
        recs = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                             {"x-session-id": f"f{i}"}, "fault"),
                        duration=3 * retry_after + 1, concurrency=2)
        t_end = time.monotonic()
        summary(env, recs, "429 on s2")
        s2 = [r for r in recs if r.served == "s2"]
        assert s2, "s2 was never tried: the test did not exercise the 429"
        assert all(r.status == 429 for r in s2), "s2 answered something but 429"
        others = [r for r in recs if r.served != "s2"]
        fe.assert_all_ok(others, "the other servers")
        fe.assert_core_reasons(recs, "while s2 answered 429")
        t_first = min(r.t1 for r in s2)
        after = [r for r in s2 if r.t0 > t_first]
        windows = int((t_end - t_first) / retry_after) + 1
        bound = windows * probes
        log(f"s2 answered 429 to {len(s2)} of {len(recs)} requests; first at "
            f"+{t_first - t_fault:.2f} s; then at " +
            " ".join(f"+{r.t0 - t_first:.2f}" for r in after[:40]))
        log(f"requests sent to s2 after its first 429: {len(after)} "
            f"(at most {probes} probes x {windows} Retry-After windows = {bound}); "
            f"an even share would be {len(recs) // 3}")
        assert len(after) <= bound, \
            f"s2 got {len(after)} requests after its first 429 (Retry-After {retry_after} s), " \
            f"more than {bound} half-open probes"
        no_decision = [r for r in after if r.wserver != "s2"]
        if no_decision:
            log(f"of those, {len(no_decision)} were not warmlane's choice: {no_decision[:5]}")

        # the fault ends: once a window is over, s2's probes succeed and
        # it takes traffic again
        env.fault("s2", mode="none")
        t_clear = time.monotonic()
        rec2 = []
        for k in range(8):  # until s2 served 5 requests again, 8 s at most
            rec2 += fe.drive(env.port, lambda i, k=k: (fe.chat_body(short(i)),
                                                       {"x-session-id": f"r{k}-{i}"}, "after"),
                             duration=1.0, concurrency=2)
            if fe.count(rec2, served="s2") >= 5:
                break
        summary(env, rec2, "fault cleared")
        fe.assert_all_ok(rec2, "after the fault cleared")
        back = [r for r in rec2 if r.served == "s2"]
        if back:
            log(f"s2 served again {min(r.t0 for r in back) - t_clear:.2f} s after the fault cleared")
        if len(back) < 5:
            log("s2 as the agent sees it: " + " ".join(
                f"{nm}{{{','.join(f'{k}={v}' for k, v in lb.items() if k != 'server')}}}={v:g}"
                for nm, lb, v in fe.parse_metrics(env.metrics_text()[0])
                if lb.get("server") == "s2" and v))
        assert len(back) >= 5, f"s2 served only {len(back)} requests after the fault cleared"
        env.stop_agent_checked()


# --- failover tiers --------------------------------------------------------------

def tiers(binary, version, restart=False):
    """Tier 2 only while tier 1 cannot serve (429 + Retry-After), then back.
    restart: the agent restarted (SIGTERM, snapshot, start) while the homed
    sessions are on tier 2; their homes come back with the snapshot."""
    retry_after = 2
    with fe.FleetEnv("tiers-restart" if restart else "tiers", version) as env:
        probes = int(env.policy["half_open_probes"])
        env.endpoints["t1"] = {"models": ["m1"], "keys": ["k1"], "weight": 4, "tier": 2}
        env.start([fe.instance(n) for n in ("s1", "s2", "t1")], binary)

        def sessions(tag):
            # a new session per request (rendezvous would give t1, of
            # weight 4, two thirds of them without tiers) and one session
            # that comes back every time
            return lambda i: (fe.chat_body(short(i)),
                              {"x-session-id": "sticky" if i % 4 == 0 else f"{tag}{i}"}, tag)
        before = fe.drive(env.port, sessions("w"), n=80, concurrency=4)
        summary(env, before, "tier 1 healthy")
        fe.assert_all_ok(before, "tier 1 healthy")
        fe.assert_core_reasons(before, "tier 1 healthy")
        assert fe.count(before, served="t1") == 0, \
            f"t1 (tier 2) got {fe.count(before, served='t1')} requests while tier 1 was healthy"
        assert not [r for r in before if r.reason == "failover"], "a failover while tier 1 was healthy"
        assert fe.count(before, served="s1") > 0 and fe.count(before, served="s2") > 0, \
            "tier 1 is s1 and s2: one of them got nothing"

        # Sessions homed off their rendezvous choice: s1 in MAINT while
        # their first request is placed, so all are on s2 (about half of
        # them hash to s1). Through the failover and back, each must go
        # home to s2, where its cache is (docs/tiers.md, "Going back").
        homed = [f"home{k}" for k in range(12)]

        def post_each(want, tries=1):
            out = {}
            c = fe.Client(env.port)
            try:
                for s in homed:
                    for _ in range(tries):
                        r = c.post(fe.chat_body(short(0, s)), {"x-session-id": s}, tag=s)
                        if r.status == 200 and r.served == want:
                            break
                    out[s] = r
            finally:
                c.close()
            return out
        out = env.admin("set server llm/s1 state maint")
        assert out == "", f"set server state maint: {out!r}"
        wait_admin(env, "s1", "maint")
        first = post_each("s2")
        assert all(r.status == 200 and r.served == "s2" for r in first.values()), \
            f"homed sessions not placed on s2 with s1 in MAINT: {list(first.values())[:3]}"
        out = env.admin("set server llm/s1 state ready")
        assert out == "", f"set server state ready: {out!r}"
        wait_admin(env, "s1", "enabled")

        for s in ("s1", "s2"):
            env.fault(s, mode="429", retry_after=retry_after)
        t_fault = time.monotonic()
        recs = fe.drive(env.port, sessions("f"), duration=3 * retry_after + 1, concurrency=2)
        t_end = time.monotonic()
        summary(env, recs, "429 on s1 and s2")
        fe.assert_core_reasons(recs, "while tier 1 answered 429")
        tier1 = [r for r in recs if r.served in ("s1", "s2")]
        t1 = [r for r in recs if r.served == "t1"]
        assert tier1, "tier 1 was never tried: the test did not exercise the 429"
        assert all(r.status == 429 for r in tier1), "tier 1 answered something but 429"
        fe.assert_all_ok(t1, "t1 (tier 2)")
        bad = [r for r in t1 if r.reason != "failover"]
        assert not bad, f"t1 served {len(bad)} requests without reason failover: {bad[:3]}"
        # Per tier-1 server: what was sent before its first 429 came back,
        # then its half-open probes, one round per Retry-After window.
        t_first = min(r.t1 for r in tier1)
        after = [r for r in tier1 if r.t0 > t_first]
        windows = int((t_end - t_first) / retry_after) + 1
        bound = 2 * windows * probes
        log(f"tier 1 answered 429 to {len(tier1)} of {len(recs)} requests, first at "
            f"+{t_first - t_fault:.2f} s; after it {len(after)} (at most 2 servers x {probes} "
            f"probes x {windows} windows = {bound}); t1 served {len(t1)}")
        assert len(after) <= bound, \
            f"tier 1 got {len(after)} requests after its first 429, more than {bound} probes"
        assert len(t1) >= len(recs) - len(tier1), "requests neither on tier 1 nor on t1"
        # Each homed session served once by t1 (a half-open probe of tier 1
        # may take a request and answer 429: then again).
        away = post_each("t1", tries=6)
        assert all(r.status == 200 and r.served == "t1" for r in away.values()), \
            f"homed sessions not failed over to t1: {list(away.values())[:3]}"
        agent = "agent"
        if restart:
            rc = env.stop_process(env.agent)
            assert rc == 0, f"the agent exited with status {rc}"
            agent = "agent-restarted"
            env.restart_agent(name=agent)
            h.wait_until("the snapshot loaded", lambda: 'msg="snapshot loaded"' in
                         env.log_text(agent), timeout=10)
            env.wait_agent(up=True, timeout=15)
            m = re.search(r'msg="snapshot loaded" .* homes=(\d+) homes_restored=(\d+)',
                          env.log_text(agent))
            assert m, f"no homes in the 'snapshot loaded' line:\n{env.log_text(agent)[-2000:]}"
            log(f"agent restarted with the homed sessions on t1: the snapshot had "
                f"{m.group(1)} homes, {m.group(2)} restored")
            assert int(m.group(2)) >= len(homed), \
                f"{m.group(2)} homes restored, {len(homed)} sessions away from home"

        for s in ("s1", "s2"):
            env.fault(s, mode="none")
        t_clear = time.monotonic()
        rec2 = []
        for k in range(10):  # until tier 1 served 20 in a row, 10 s at most
            rec2 += fe.drive(env.port, sessions(f"r{k}-"), duration=1.0, concurrency=2)
            tail = rec2[-20:]
            if len(tail) == 20 and all(r.served in ("s1", "s2") for r in tail):
                break
        summary(env, rec2, "429s over")
        fe.assert_all_ok(rec2, "after tier 1 recovered")
        fe.assert_core_reasons(rec2, "after tier 1 recovered")
        back = [r for r in rec2 if r.served in ("s1", "s2")]
        assert back, "tier 1 never served again after its 429s ended"
        t_back = min(r.t0 for r in back)
        late = [r for r in rec2 if r.served == "t1" and r.t0 > t_back]
        log(f"tier 1 served again {t_back - t_clear:.2f} s after the fault cleared; "
            f"t1 served {fe.count(rec2, served='t1')} requests after the fault cleared, "
            f"{len(late)} of them after tier 1's first answer")
        tail = rec2[-20:]
        assert len(tail) == 20 and all(r.served in ("s1", "s2") for r in tail), \
            f"t1 still served requests at the end: {[r for r in tail if r.served == 't1'][:3]}"
        sticky = [r for r in rec2 if r.tag.startswith("r") and r.i % 4 == 0]
        assert sticky and sticky[-1].served in ("s1", "s2"), \
            f"the sticky session did not go back to tier 1: {sticky[-3:]}"
        # Both tier-1 breakers closed: the homed sessions go home to s2.
        h.wait_until("s1's and s2's breakers closed", lambda: all(
            fe.metric_sum(fe.parse_metrics(env.metrics_text()[0]),
                          "warmlane_endpoint_breaker_state", server=s) == 0
            for s in ("s1", "s2")), timeout=10)
        back_home = post_each("s2")
        off = [r for r in back_home.values() if r.served != "s2" or r.reason != "affinity"]
        log(f"homed sessions back from t1: {len(homed) - len(off)} of {len(homed)} on s2 "
            f"(reason affinity)")
        assert not off, f"homed sessions not back home on s2: {off[:3]}"

        samples = fe.parse_metrics(env.metrics_text()[0])
        t2 = fe.metric_sum(samples, "warmlane_tier_decisions_total", tier="2")
        fo = fe.metric_sum(samples, "warmlane_decisions_total", reason="failover")
        tier_gauge = fe.metric_sum(samples, "warmlane_endpoint_tier", server="t1")
        log(f"warmlane_tier_decisions_total{{tier=2}} = {t2:g}, "
            f"warmlane_decisions_total{{reason=failover}} = {fo:g}, t1's tier gauge {tier_gauge:g}")
        # (a restarted agent counts from its start)
        served_t1 = fe.count(rec2, served="t1") + (0 if restart else fe.count(recs, served="t1"))
        assert t2 == fo and t2 >= served_t1, \
            f"tier-2 decisions {t2:g}, failovers {fo:g}, t1 served {served_t1}"
        assert tier_gauge == 2, f"warmlane_endpoint_tier of t1 is {tier_gauge:g}"
        env.stop_agent_checked()


def tiers_restart(binary, version):
    tiers(binary, version, restart=True)


# --- 500 ----------------------------------------------------------------------

def breaker(binary, version):
    """Instant 500s: under 1% of the traffic after the breaker opened."""
    with fe.FleetEnv("breaker", version, policy={"half_open_probes": 1,
                                                 "breaker_cooldown_max": "30s"}) as env:
        consecutive = int(env.policy["breaker_consecutive"])
        env.start([fe.instance(n) for n in ("s1", "s2", "s3")], binary)
        env.fault("s3", mode="500")
        t_start = time.monotonic()

        def make(i):
            # half new sessions (hashing: 1/3 would go to s3), half anonymous
            hd = {"x-session-id": f"b{i}"} if i % 2 == 0 else {}
            return fe.chat_body(short(i)), hd, "load"
        recs = []
        for _ in range(4):  # at least 8 s and 300 requests after the opening
            recs += fe.drive(env.port, lambda i, k=len(recs): make(k + i),
                             duration=4.0, concurrency=4)
            fails = sorted(r.t1 for r in recs if r.served == "s3")
            if len(fails) >= consecutive:
                t_open = fails[consecutive - 1]
                n_after = sum(1 for r in recs if r.t0 > t_open)
                if n_after >= 300 and time.monotonic() - t_start >= 8:
                    break
        summary(env, recs, "500s from s3")
        s3 = [r for r in recs if r.served == "s3"]
        assert len(s3) >= consecutive, f"s3 got {len(s3)} requests: breaker never exercised"
        assert all(r.status == 500 for r in s3)
        fe.assert_all_ok([r for r in recs if r.served != "s3"], "the healthy servers")
        t_open = sorted(r.t1 for r in s3)[consecutive - 1]
        after = [r for r in recs if r.t0 > t_open]
        s3_after = [r for r in after if r.served == "s3"]
        share = len(s3_after) / max(1, len(after))
        log(f"breaker opened after the {consecutive}th failure at +{t_open - t_start:.2f} s; "
            f"then s3 got {len(s3_after)} of {len(after)} requests ({100 * share:.2f}%), at " +
            " ".join(f"+{r.t0 - t_open:.2f}" for r in s3_after[:20]))
        fell_open = [r for r in after if r.reason is None]
        if fell_open:
            log(f"{len(fell_open)} requests had no decision (HAProxy fell open)")
        assert len(after) >= 200, f"only {len(after)} requests after the opening"
        assert share < 0.01, \
            f"s3 (instant 500s) got {len(s3_after)} of {len(after)} requests after its " \
            f"breaker opened: {100 * share:.2f}%, not under 1%"
        fe.assert_core_reasons(after, "after the opening")
        env.stop_agent_checked()


def slowfail(binary, version):
    """500s after 0.5 s: a half-open breaker's first probe goes alone, so
    that once the breaker opened no two requests to the server overlap."""
    with fe.FleetEnv("slowfail", version, policy={"half_open_probes": 3,
                                                  "breaker_cooldown": "2s",
                                                  "breaker_cooldown_max": "2s"}) as env:
        consecutive = int(env.policy["breaker_consecutive"])
        env.start([fe.instance(n) for n in ("s1", "s2", "s3")], binary)
        env.fault("s3", mode="500", delay=0.5)

        def make(i):
            # every request a new session: a third of them rank s3 first
            return fe.chat_body(short(i)), {"x-session-id": f"sf{i}"}, "load"
        recs = fe.drive(env.port, make, duration=10.0, concurrency=8)
        summary(env, recs, "500s after 0.5 s from s3")
        s3 = sorted((r for r in recs if r.served == "s3"), key=lambda r: r.t0)
        assert len(s3) >= consecutive, f"s3 got {len(s3)} requests: breaker never exercised"
        assert all(r.status == 500 for r in s3), "s3 answered something but 500"
        fe.assert_all_ok([r for r in recs if r.served != "s3"], "the healthy servers")
        t_open = sorted(r.t1 for r in s3)[consecutive - 1]
        probes = [r for r in s3 if r.t0 > t_open]
        # A request sent to s3 before the previous probe's answer came back:
        # a half-open breaker that let several probes out at once.
        overlaps = [(a, b) for a, b in zip(probes, probes[1:]) if b.t0 < a.t1]
        log(f"breaker opened at +{t_open - recs[0].t0:.2f} s; then s3 got {len(probes)} "
            f"requests, at " + " ".join(f"+{r.t0 - t_open:.2f}" for r in probes[:20]) +
            f"; {len(overlaps)} sent while another was out")
        assert len(probes) >= 2, f"{len(probes)} half-open probes: too few periods exercised"
        assert not overlaps, \
            f"{len(overlaps)} requests went to s3 while a half-open probe was still out " \
            f"(at " + " ".join(f"+{b.t0 - t_open:.2f}" for _, b in overlaps[:10]) + ")"
        fe.assert_core_reasons(recs, "slowfail")
        env.stop_agent_checked()


# --- 401/403: no caller can take a key away; a revoked one is excluded -----

ATTACK_PATH = "/v1/organization/members"  # the fake: POST 401, GET 403, any key


def _key_metrics(env):
    samples = fe.parse_metrics(env.metrics_text()[0])
    probes = {res: fe.metric_sum(samples, "warmlane_key_probes_total", result=res)
              for res in ("accepted", "refused", "inconclusive")}
    dead = {f"{lb.get('server')}/{lb.get('key')}": v for n, lb, v in samples
            if n == "warmlane_endpoint_key_dead"}
    return probes, dead


class _Attacker:
    """Requests the client shapes so that the upstream refuses them (a path
    the key may not use), each under a new Authorization value (a new caller
    hash for warmlane), with the probe headers of the probe frontend."""

    def __init__(self, port, concurrency=2):
        self.port, self.concurrency = port, concurrency
        self.stop_ev = threading.Event()
        self.status = collections.Counter()
        self.keys = collections.Counter()
        self.sent = 0
        self.lock = threading.Lock()
        self.threads = []

    def _run(self, t):
        conn = None
        i = 0
        while not self.stop_ev.is_set() and i < 20000:
            i += 1
            if conn is None:
                conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=10)
            method = "POST" if i % 2 else "GET"
            hd = {"authorization": f"Bearer attacker-{t}-{i}",
                  "content-type": "application/json",
                  "x-warmlane-probe-key": "k2", "x-warmlane-probe-backend": "llm",
                  "x-warmlane-probe-server": "s1"}
            try:
                conn.request(method, ATTACK_PATH, body=b"{}" if method == "POST" else None,
                             headers=hd)
                r = conn.getresponse()
                r.read()
                st, key = r.status, r.getheader("x-warmlane-key") or "-"
                if r.will_close:
                    conn.close()
                    conn = None
            except (OSError, http.client.HTTPException):
                conn.close()
                conn = None
                st, key = 0, "-"
            with self.lock:
                self.status[st] += 1
                self.keys[key] += 1
                self.sent += 1
        if conn is not None:
            conn.close()

    def start(self):
        for t in range(self.concurrency):
            th = threading.Thread(target=self._run, args=(t,), daemon=True)
            th.start()
            self.threads.append(th)

    def stop(self):
        self.stop_ev.set()
        for th in self.threads:
            th.join(timeout=30)


def deadkey(binary, version):
    """An attacker's 401/403s, under many Authorization values, change nothing
    for other callers; a key the upstream really revoked is excluded (on that
    server only) within a bounded time; with every key revoked the answer
    still carries a key."""
    up = [v.split(" ", 1)[1] for v in fe.KEYS.values()]  # the upstream's keys
    # load_floor 64: with 4 clients the load bound never moves a session, so
    # that a move could only come from what the 401/403s did (the
    # attacker's requests are load like anyone's: that is not at issue).
    # Nor latency: the fake servers answer in about 1 ms, so a pause of a
    # busy host looks like a tenfold slowdown to the slow rules (clean-clone
    # CI once saw 3 of 6,553 victim requests leave s1 by hash, with no key
    # dead): sticky_tolerance 1000 and slow_run 0 take them out, as the peers
    # tests do.
    with fe.FleetEnv("deadkey", version,
                     policy={"dead_key_retry": "60s", "load_floor": 64,
                             "sticky_tolerance": 1000, "slow_run": 0}) as env:
        env.start_fleet([fe.instance(n, api_keys=up) for n in ("s1", "s2", "s3")])
        for n in ("s1", "s2", "s3"):
            env.endpoints[n]["keys"] = ["k1", "k2"]
        env.start_agent()
        env.start_haproxy(binary)
        env.wait_backends_up()
        env.wait_agent(up=True)

        sessions = 24

        def victims(tag):
            def make(i):
                hd = {"x-session-id": f"victim-{i % sessions}",
                      "authorization": "Bearer victim-own-credential"}
                return fe.chat_body(short(i % sessions, tag)), hd, tag
            return make

        def pairs(recs):
            out = {}
            for r in recs:
                out.setdefault(r.i % sessions, set()).add((r.served, r.key))
            return out

        # 1. Before any attack: where each victim session lands, with which key.
        base = fe.drive(env.port, victims("v"), n=3 * sessions, concurrency=2)
        summary(env, base, "victims, no attack")
        fe.assert_all_ok(base, "victims before the attack")
        assert all(r.key in ("k1", "k2") for r in base), \
            f"a victim request without a key: {[r for r in base if r.key is None][:3]}"
        before = pairs(base)

        # 2. The attack, with the victims' traffic beside it.
        probes0, _ = _key_metrics(env)
        atk = _Attacker(env.port)
        t_attack = time.monotonic()
        atk.start()
        try:
            during = fe.drive(env.port, victims("v"), duration=6.0, concurrency=2)
        finally:
            atk.stop()
        attack_s = time.monotonic() - t_attack
        probes1, dead1 = _key_metrics(env)
        summary(env, during, "victims during the attack")
        log(f"attacker: {atk.sent} requests in {attack_s:.1f} s, each with its own "
            f"Authorization value, statuses {fe.fmt_counts(dict(atk.status))}, "
            f"keys warmlane chose for it {fe.fmt_counts(dict(atk.keys))}")
        n_probes = sum(probes1.values()) - sum(probes0.values())
        log(f"probes during the attack: {n_probes} "
            f"(accepted {probes1['accepted'] - probes0['accepted']:.0f}, refused "
            f"{probes1['refused'] - probes0['refused']:.0f}); keys dead: "
            f"{[k for k, v in dead1.items() if v]}")
        refused = atk.status[401] + atk.status[403]
        assert refused >= 100, f"the attack got only {refused} 401/403s: it did not run"
        fe.assert_all_ok(during, "victims during the attack")
        after = pairs(during)
        moved = {k: (before.get(k), v) for k, v in after.items() if v != before.get(k)}
        assert not moved, f"victim sessions moved (server, key) under the attack: {moved}"
        assert not any(dead1.values()), f"the attack killed keys: {dead1}"
        assert probes1["refused"] == probes0["refused"], "a probe was refused"
        # one probe per key per interval (1 s) at most: 6 keys
        bound = 6 * (int(attack_s / 1.0) + 2)
        assert 1 <= n_probes <= bound, \
            f"{n_probes} probes in {attack_s:.1f} s for 6 keys (at most {bound})"
        st = env.fleet_stats()
        leaked = {n: x["probe_headers"] for n, x in st.items() if x["probe_headers"]}
        assert not leaked, f"x-warmlane-probe-* headers reached the fleet: {leaked}"
        own = {n: [a for a in x["by_auth"] if "attacker" in a or "victim" in a or not a]
               for n, x in st.items()}
        assert not any(own.values()), \
            f"a client's own (or no) credential reached the fleet: {own}"

        # 3. s1 really revokes k1's credential: excluded there, within a bound.
        env.fault("s1", mode="401", key=fe.KEYS["k1"])
        t_rev = time.monotonic()
        stop = threading.Event()
        load = []
        bg = threading.Thread(target=lambda: load.extend(
            fe.drive(env.port, victims("r"), duration=20.0, concurrency=2, stop=stop)),
            daemon=True)
        bg.start()
        try:
            def s1k1_dead():
                return _key_metrics(env)[1].get("s1/k1", 0) >= 1
            h.wait_until("s1/k1 excluded after its revocation", s1k1_dead,
                         timeout=15.0, interval=0.02)
            t_dead = time.monotonic()
        finally:
            stop.set()
            bg.join(timeout=30)
        excluded_s = t_dead - t_rev
        e401 = [r for r in load if r.status == 401]
        log(f"s1/k1 revoked: excluded {excluded_s:.2f} s later; {len(e401)} victim 401s "
            f"before that (all s1/k1: {all(r.served == 's1' and r.key == 'k1' for r in e401)})")
        # the probe tick (0.1 s) after the first 401 (a request to s1/k1),
        # the probe itself, and at most one interval (1 s) if a probe of
        # k1 had just run
        assert excluded_s < 5.0, f"s1/k1 excluded only {excluded_s:.2f} s after its revocation"
        for r in e401:
            assert r.served == "s1" and r.key == "k1", f"a 401 that is not s1/k1: {r}"
        recs = fe.drive(env.port, victims("x"), n=300, concurrency=2)
        later = fe.drive(env.port, lambda i: (fe.chat_body(short(i, "n")), {}, "n"),
                         n=300, concurrency=2)
        recs += later
        summary(env, recs, "after s1/k1 was excluded")
        s1k1 = [r for r in recs if r.wserver == "s1" and r.key == "k1"]
        s1k2 = [r for r in recs if r.served == "s1" and r.key == "k2" and r.status == 200]
        k1_elsewhere = [r for r in recs if r.served in ("s2", "s3") and r.key == "k1"
                        and r.status == 200]
        log(f"of {len(recs)} requests: s1/k1 chosen {len(s1k1)}, s1 served with k2 "
            f"{len(s1k2)}, k1 served by s2/s3 {len(k1_elsewhere)}")
        assert not s1k1, f"s1/k1 chosen {len(s1k1)} times after its exclusion: {s1k1[:3]}"
        fe.assert_all_ok(recs, "after s1/k1 was excluded")
        assert len(s1k2) >= 20, \
            f"s1 served only {len(s1k2)} requests with k2: the server, not the key, was excluded"
        assert len(k1_elsewhere) >= 20, \
            f"k1 served only {len(k1_elsewhere)} requests on s2/s3: the key was excluded everywhere"

        # 4. Every key revoked everywhere: the least recently refused key
        # is still sent (never no credential at all).
        for n in ("s1", "s2", "s3"):
            env.fault(n, mode="401")
        stop = threading.Event()
        load = []
        bg = threading.Thread(target=lambda: load.extend(
            fe.drive(env.port, victims("a"), duration=20.0, concurrency=2, stop=stop)),
            daemon=True)
        bg.start()
        try:
            h.wait_until("every key excluded",
                         lambda: sum(_key_metrics(env)[1].values()) >= 6,
                         timeout=15.0, interval=0.02)
        finally:
            stop.set()
            bg.join(timeout=30)
        env.fleet_reset(cache=False)
        last = fe.drive(env.port, victims("z"), n=60, concurrency=2)
        summary(env, last, "every key revoked")
        fb = [r for r in last if r.reason == "key_fallback" and r.key in ("k1", "k2")]
        assert len(fb) == len(last), \
            f"requests without key_fallback and a key: {[r for r in last if r not in fb][:3]}"
        by_auth = {}
        for x in env.fleet_stats().values():
            for a, c in x["by_auth"].items():
                by_auth[a] = by_auth.get(a, 0) + c
        log(f"credentials the fleet saw with every key revoked: {by_auth}")
        assert set(by_auth) <= set(fe.KEYS.values()), \
            f"a request reached the fleet without one of warmlane's keys: {by_auth}"
        env.stop_agent_checked()


class _Pair:
    def __init__(self, r):
        self.pair = f"{r.wserver}/{r.key}"


def wait_admin(env, server, state, timeout=5.0):
    """Waits until the agent's /metrics reports server in HAProxy admin
    state `state` (its runtime-API poller has read it); returns the seconds
    it took. A wait on the agent's view, not a guess of its timing."""
    t0 = time.monotonic()

    def seen():
        samples = fe.parse_metrics(env.metrics_text()[0])
        return fe.metric_sum(samples, "warmlane_endpoint_admin_state",
                             server=server, state=state) >= 1
    h.wait_until(f"the agent to see {server} {state}", seen, timeout=timeout, interval=0.02)
    return time.monotonic() - t0



# --- MAINT ----------------------------------------------------------------------

def maint(binary, version):
    """MAINT on the runtime API: not chosen within a poll; chosen again when READY."""
    with fe.FleetEnv("maint", version, poll_interval="200ms") as env:
        env.start([fe.instance(n) for n in ("s1", "s2", "s3", "s4")], binary)
        seq = [0]

        def fresh(tag):
            def make(i):
                seq[0] += 1
                return (fe.chat_body(short(seq[0])), {"x-session-id": f"{tag}{seq[0]}"}, tag)
            return make
        before = fe.drive(env.port, fresh("m"), n=80, concurrency=2)
        summary(env, before, "before")
        fe.assert_all_ok(before, "before")
        fe.assert_core_reasons(before, "before")
        assert fe.count(before, wserver="s2") > 0, "s2 not chosen before MAINT"

        out = env.admin("set server llm/s2 state maint")
        assert out == "", f"set server state maint: {out!r}"
        t_cmd = time.monotonic()
        # bounded: requests until 40 decisions in a row avoid s2 (5 s at most)
        recs, streak = [], 0
        deadline = t_cmd + 5
        c = fe.Client(env.port)
        try:
            for _ in range(5000):
                if streak >= 40 or time.monotonic() > deadline:
                    break
                body, hd, tag = fresh("x")(0)
                r = c.post(body, hd, tag=tag)
                recs.append(r)
                streak = streak + 1 if r.wserver != "s2" else 0
        finally:
            c.close()
        chosen = [r for r in recs if r.wserver == "s2"]
        t_last = max((r.t1 for r in chosen), default=t_cmd)
        log(f"after `set server llm/s2 state maint`: s2 chosen {len(chosen)} times, "
            f"the last {t_last - t_cmd:.3f} s after the command (poll interval 200 ms); "
            f"{len(recs)} requests")
        assert streak >= 40, "the agent kept choosing s2 in MAINT (5 s)"
        wait_admin(env, "s2", "maint")
        during = fe.drive(env.port, fresh("y"), n=150, concurrency=2)
        summary(env, during, "s2 in MAINT")
        fe.assert_all_ok(during, "s2 in MAINT")
        fe.assert_core_reasons(during, "s2 in MAINT")
        assert fe.count(during, wserver="s2") == 0, "the agent chose s2 in MAINT"
        assert fe.count(during, served="s2") == 0, "s2 served in MAINT"

        out = env.admin("set server llm/s2 state ready")
        assert out == "", f"set server state ready: {out!r}"
        t_ready = time.monotonic()
        recs, got = [], None
        c = fe.Client(env.port)
        try:
            for _ in range(5000):
                if time.monotonic() > t_ready + 8:
                    break
                body, hd, tag = fresh("z")(0)
                r = c.post(body, hd, tag=tag)
                recs.append(r)
                if r.wserver == "s2" and r.served == "s2" and r.status == 200:
                    got = r
                    break
        finally:
            c.close()
        assert got is not None, "s2 not chosen again within 8 s of `state ready`"
        log(f"s2 chosen again {got.t1 - t_ready:.3f} s after `state ready` "
            f"({len(recs)} requests), reason {got.reason}")
        after = fe.drive(env.port, fresh("w"), n=80, concurrency=2)
        summary(env, after, "after READY")
        fe.assert_all_ok(after, "after READY")
        assert fe.count(after, served="s2") > 0, "s2 got nothing after READY"

        # DRAIN: HAProxy sends a drained server no new traffic, and
        # neither does warmlane (new sessions here: none is bound to s2).
        out = env.admin("set server llm/s2 state drain")
        assert out == "", f"set server state drain: {out!r}"
        took = wait_admin(env, "s2", "drain")
        log(f"the agent saw s2 in DRAIN {took:.3f} s after `set server llm/s2 state drain` "
            "(poll interval 200 ms)")
        # Over several polls and health checks (inter 1s).
        drained = []
        t_end = time.monotonic() + 2.5
        for _ in range(100):
            if time.monotonic() > t_end:
                break
            drained += fe.drive(env.port, fresh("u"), n=20, concurrency=2)
            time.sleep(0.1)
        summary(env, drained, "s2 in DRAIN")
        st = env.show_stat()[("llm", "s2")]["status"]
        log(f"show stat: s2 {st}")
        assert st.startswith("DRAIN"), f"s2 left DRAIN by itself: {st}"
        fe.assert_all_ok(drained, "s2 in DRAIN")
        assert fe.count(drained, wserver="s2") == 0, "the agent chose s2 in DRAIN"
        env.stop_agent_checked()


# --- HAProxy's own failures -----------------------------------------------------

def haproxyown(binary, version):
    """A server refusing connections: HAProxy's own failure, which sends no
    feedback. HAProxy's health (observe layer4, error-limit, on-error
    mark-down, as the example config sets) marks it DOWN; the agent reads
    that on the runtime API and leaves it. Every client request succeeds
    (retry and redispatch), and the server is chosen again once back UP."""
    with fe.FleetEnv("haproxyown", version, poll_interval="200ms") as env:
        env.start([fe.instance(n, admin_port=0) for n in ("s1", "s2", "s3")], binary)
        seq = [0]

        def fresh(tag):
            def make(i):
                seq[0] += 1
                return (fe.chat_body(short(seq[0])), {"x-session-id": f"{tag}{seq[0]}"}, tag)
            return make
        before = fe.drive(env.port, fresh("a"), n=60, concurrency=2)
        fe.assert_all_ok(before, "before")
        assert fe.count(before, wserver="s2") > 0, "s2 not chosen before the fault"

        env.fault("s2", mode="refuse")
        t_fault = time.monotonic()
        recs, streak, t_down = [], 0, None
        c = fe.Client(env.port)
        try:
            for _ in range(5000):
                if streak >= 40 or time.monotonic() > t_fault + 8:
                    break
                body, hd, tag = fresh("b")(0)
                r = c.post(body, hd, tag=tag)
                recs.append(r)
                streak = streak + 1 if r.wserver != "s2" else 0
                if t_down is None and r.wserver == "s2" and len(recs) % 5 == 0:
                    if env.show_stat()[("llm", "s2")]["status"].startswith("DOWN"):
                        t_down = time.monotonic()
        finally:
            c.close()
        chosen = [r for r in recs if r.wserver == "s2"]
        summary(env, recs, "s2 refusing")
        st = env.show_stat()[("llm", "s2")]
        log(f"s2 refusing: HAProxy says {st['status']} (econ {st['econ']}, chkdown "
            f"{st['chkdown']}); the agent chose it {len(chosen)} times, the last "
            f"{max((r.t1 for r in chosen), default=t_fault) - t_fault:.2f} s after the fault")
        assert streak >= 40, "the agent kept choosing s2 (refusing connections) for 8 s"
        assert st["status"].startswith("DOWN"), f"HAProxy did not mark s2 down: {st['status']}"
        fe.assert_all_ok(recs, "s2 refusing (HAProxy retries elsewhere)")
        assert fe.count(recs, served="s2") == 0, "s2 served while refusing"

        # The streak above may come from the breaker (the log lines of the
        # refused connections) before the poller has read HAProxy's DOWN:
        # what is asserted next is the agent's behaviour once it has.
        seen_s = wait_admin(env, "s2", "down")
        log(f"the agent saw s2 DOWN {seen_s:.2f} s after the streak")
        during = fe.drive(env.port, fresh("c"), n=100, concurrency=2)
        fe.assert_all_ok(during, "s2 DOWN")
        assert fe.count(during, wserver="s2") == 0, "the agent chose s2 while DOWN"

        env.fault("s2", mode="none")
        t_clear = time.monotonic()
        got = None
        c = fe.Client(env.port)
        try:
            for _ in range(5000):
                if time.monotonic() > t_clear + 10:
                    break
                body, hd, tag = fresh("d")(0)
                r = c.post(body, hd, tag=tag)
                if r.wserver == "s2" and r.served == "s2" and r.status == 200:
                    got = r
                    break
                time.sleep(0.02)
        finally:
            c.close()
        assert got is not None, "s2 not chosen within 10 s of accepting connections again"
        log(f"s2 chosen again {got.t1 - t_clear:.2f} s after it accepted connections "
            "(HAProxy's check: inter 1s, rise 2; then one poll)")
        env.stop_agent_checked()


# --- models -------------------------------------------------------------------

def models(binary, version):
    """Requests for a model go only to servers that serve it."""
    serves = {"s1": ["m-a"], "s2": ["m-a", "m-b"], "s3": ["m-b"], "s4": ["m-c"]}
    with fe.FleetEnv("models", version) as env:
        env.start([fe.instance(n, models=m) for n, m in serves.items()], binary)
        long_text = "lorem ipsum dolor " * 1500  # 27 KB: "model" after a long prompt

        def make(i):
            model = ("m-a", "m-b", "m-c", "m-z")[i % 4] if i % 13 else "m-a"
            hd = {}
            if i % 3 == 0:
                hd["x-session-id"] = f"mod{i % 17}"
            text = long_text + str(i) if i % 13 == 0 else short(i)
            if i % 5 == 0:
                hd["x-model"] = model  # the header wins over the body
                body = fe.chat_body(text, model=None)
            else:
                body = fe.chat_body(text, model=model)
            return body, hd, model
        before = {n: s["requests"] for n, s in env.fleet_stats().items()}
        recs = fe.drive(env.port, make, n=240, concurrency=4)
        fe.assert_core_reasons([r for r in recs if r.tag != "m-z"], "models")
        for model in ("m-a", "m-b", "m-c", "m-z"):
            rs = [r for r in recs if r.tag == model]
            log(f"{model}: {len(rs)} requests, warmlane chose {fe.fmt_counts(fe.by(rs, 'wserver'))}, "
                f"reasons {fe.fmt_counts(fe.by(rs, 'reason'))}, status {fe.fmt_counts(fe.by(rs, 'status'))}, "
                f"served by {fe.fmt_counts(fe.by(rs, 'served'))}")
            if model == "m-z":
                # The example config's no_model rule: HAProxy answers 404
                # itself (no http-response rule runs, so no x-warmlane-*
                # header) and no server sees the request.
                for r in rs:
                    assert r.status == 404 and r.served is None and r.wserver is None, \
                        f"unserved model m-z: {r} (expected HAProxy's own 404)"
                continue
            ok = {n for n, m in serves.items() if model in m}
            for r in rs:
                assert r.status == 200, f"{model}: {r}"
                assert r.wserver in ok and r.served == r.wserver, \
                    f"{model} went to {r.wserver}/{r.served}, served by {sorted(ok)} only"
            assert set(fe.by(rs, "served")) == ok, \
                f"{model}: served by {fe.by(rs, 'served')}, expected all of {sorted(ok)}"
        longs = [r for r in recs if r.i % 13 == 0]
        assert longs and all(r.status == 200 and r.wserver in ("s1", "s2") for r in longs), \
            f"long prompts (model after 27 KB of messages): {longs}"
        # The fleet saw exactly the served requests: none of the m-z ones.
        after = {n: s["requests"] for n, s in env.fleet_stats().items()}
        got = {n: after[n] - before[n] for n in after}
        served = sum(1 for r in recs if r.tag != "m-z")
        log(f"fleet requests during the run: {fe.fmt_counts(got)}, {served} of them sent "
            f"for served models, {len(recs) - served} for m-z")
        assert sum(got.values()) == served, \
            f"the fleet got {got}: {sum(got.values())} requests, {served} expected (m-z reached a server)"
        samples = fe.parse_metrics(env.metrics_text()[0])
        no_model = fe.metric_sum(samples, "warmlane_decisions_total", reason="no_model")
        n_z = len(recs) - served
        assert no_model == n_z, f"warmlane_decisions_total{{reason=no_model}} = {no_model}, {n_z} sent"
        # The body is the rule's JSON error, with its content type.
        conn = http.client.HTTPConnection("127.0.0.1", env.port, timeout=10)
        try:
            conn.request("POST", "/v1/chat/completions", body=fe.chat_body("hi", model="m-z"),
                         headers={"content-type": "application/json"})
            resp = conn.getresponse()
            body = resp.read()
        finally:
            conn.close()
        assert resp.status == 404 and resp.getheader("content-type") == "application/json", \
            f"{resp.status} {resp.getheaders()}"
        err = json.loads(body)
        assert err["error"]["code"] == "model_not_found", body
        env.stop_agent_checked()


def sessionscope(binary, version):
    """A client reuses a victim's x-session-id with another model.

    Turn by turn, one request at a time (HAProxy waits for the feedback's
    ACK before it answers, so each turn sees the previous one's feedback):
    the victim (model m-a) and the other caller (m-b, served elsewhere)
    alternate. With session_scope caller (the default) the two have
    different affinity keys and the victim stays warm (affinity) on its
    server; with global (the keys before session_scope) each of the other
    caller's successes moves the entry to its m-b server, and the victim's
    next turn is hashed again."""
    serves = {"s1": ["m-a"], "s2": ["m-a"], "s3": ["m-b"], "s4": ["m-b"]}
    for scope in ("caller", "global"):
        with fe.FleetEnv(f"sessionscope-{scope}", version,
                         policy={"session_scope": scope}) as env:
            env.start([fe.instance(n, models=m) for n, m in serves.items()], binary)
            cl = fe.Client(env.port)
            victim = {"x-session-id": "shared-1", "authorization": "Bearer victim-key"}
            other = {"x-session-id": "shared-1", "authorization": "Bearer other-key"}
            recs = []
            for i in range(12):
                mine = i % 2 == 0
                r = cl.post(fe.chat_body(short(i), model="m-a" if mine else "m-b"),
                            victim if mine else other, i=i, tag="victim" if mine else "other")
                assert r.status == 200, f"{scope}: {r}"
                assert r.served == r.wserver, f"{scope}: warmlane chose {r.wserver}: {r}"
                recs.append(r)
            cl.close()
            vs = [r for r in recs if r.tag == "victim"]
            os_ = [r for r in recs if r.tag == "other"]
            log(f"session_scope {scope}: victim " +
                " ".join(f"{r.served}:{r.reason}" for r in vs) +
                "; other " + " ".join(f"{r.served}:{r.reason}" for r in os_))
            assert all(r.served in ("s1", "s2") for r in vs), f"{scope}: victim {vs}"
            assert all(r.served in ("s3", "s4") for r in os_), f"{scope}: other {os_}"
            assert len({r.served for r in vs}) == 1, f"{scope}: the victim moved: {vs}"
            later = [r.reason for r in vs[1:]]
            if scope == "caller":
                assert later == ["affinity"] * len(later), \
                    f"caller scope: the victim's turns after the other caller's: {later}"
            else:
                assert "affinity" not in later, \
                    f"global scope: the other caller's turns should have moved the entry: {later}"
            env.stop_agent_checked()


# --- SIGKILL and restart ----------------------------------------------------

def killrestart(binary, version):
    """SIGKILL under load: every request succeeds; decisions resume after restart."""
    with fe.FleetEnv("killrestart", version) as env:
        env.start([fe.instance(n) for n in ("s1", "s2", "s3")], binary)

        def make(i):
            hd = {"x-session-id": f"k{i % 50}"} if i % 2 == 0 else {}
            return fe.chat_body(short(i)), hd, "load"
        bg = fe.Background(env.port, make, concurrency=4, max_duration=40).start()
        try:
            time.sleep(1.5)
            t_kill = time.monotonic()
            env.kill(env.agent, signal.SIGKILL)
            env.wait_agent(up=False, timeout=10)
            t_down = time.monotonic()
            time.sleep(1.0)
            assert os.path.exists(env.agent_socket()), "the killed agent's socket file vanished"
            env.restart_agent()
            t_restart = time.monotonic()
            env.wait_agent(up=True, timeout=15)
            t_up = time.monotonic()
            # until 100 requests in a row were decided again (10 s at most)
            h.wait_until("decisions from the restarted agent", lambda: len(
                [r for r in list(bg.live) if r.t0 > t_up and r.reason]) >= 100,
                timeout=10, interval=0.1)
        finally:
            recs = bg.stop()
        before = [r for r in recs if r.t1 < t_kill]
        gap = [r for r in recs if r.t0 >= t_kill and r.t1 < t_up]
        after = [r for r in recs if r.t0 > t_up]
        summary(env, before, "before SIGKILL")
        summary(env, gap, "agent dead (SIGKILL to HAProxy seeing it UP again)")
        summary(env, after, "after the restart")
        log(f"HAProxy saw the agent DOWN {t_down - t_kill:.2f} s after SIGKILL; restarted "
            f"at +{t_restart - t_kill:.2f} s, UP at +{t_up - t_kill:.2f} s")
        fe.assert_all_ok(recs, "under load across SIGKILL and restart")
        fe.assert_core_reasons(before, "before SIGKILL")
        assert len(gap) >= 20, f"only {len(gap)} requests while the agent was down"
        assert fe.count(gap, reason=None) > 0, "no request fell open while the agent was dead"
        assert len(after) >= 100, f"only {len(after)} requests after the restart"
        tail = after[len(after) // 2:]
        fe.assert_core_reasons(tail, "after the restart")
        lat = sorted(r.t1 - r.t0 for r in gap)
        log(f"while down: {len(gap)} requests, slowest {lat[-1] * 1000:.0f} ms; "
            f"{fe.count(gap, reason=None)} without a decision")
        env.stop_agent_checked()


# --- metrics and Prometheus -------------------------------------------------

def metrics(binary, version):
    """/metrics: promtool-valid, counters match, a real Prometheus scrapes it."""
    promtool = shutil.which("promtool")
    prometheus = shutil.which("prometheus")
    if not promtool or not prometheus:
        raise h.Skip("no promtool/prometheus (Debian package prometheus)")
    with fe.FleetEnv("metrics", version) as env:
        env.start([fe.instance(n) for n in ("s1", "s2", "s3")], binary)
        text, ctype = env.metrics_text()
        base = fe.parse_metrics(text)
        d0 = fe.metric_sum(base, "warmlane_decisions_total")

        def make(i):
            k = i % 4
            if k == 0:
                return fe.chat_body(short(i)), {"x-session-id": f"p{i % 7}"}, "session"
            if k == 1:
                return fe.chat_body(short(i)), {}, "anon"
            if k == 2:
                return fe.chat_body(short(i), model="nope"), {}, "nomodel"
            return fe.chat_body(short(i)), {"authorization": f"Bearer caller-{i % 3}"}, "caller"
        n = 200
        l0 = fe.metric_sum(base, "warmlane_log_datagrams_total")
        recs = fe.drive(env.port, make, n=n, concurrency=4)
        # The unknown model gets the example config's 404 from HAProxy
        # (warmlane's no_model): no server, no feedback, no x-warmlane-*.
        nomodel = [r for r in recs if r.tag == "nomodel"]
        assert nomodel and all(r.status == 404 and r.served is None for r in nomodel), \
            f"unknown model: {[r for r in nomodel if r.status != 404 or r.served][:3]}"
        fe.assert_core_reasons([r for r in recs if r.tag != "nomodel"], "metrics load")
        # every request's end-of-stream log line has reached the agent (on
        # 2.6 they are its only feedback)
        h.wait_until(f"{n} log lines at the agent", lambda: fe.metric_sum(
            fe.parse_metrics(env.metrics_text()[0]), "warmlane_log_datagrams_total") - l0 >= n,
            timeout=10, interval=0.05)
        text, ctype = env.metrics_text()
        log(f"/metrics: {len(text)} bytes, content-type {ctype}")
        chk = subprocess.run([promtool, "check", "metrics"], input=text, capture_output=True,
                             text=True, timeout=30)
        log(f"promtool check metrics: exit {chk.returncode} {chk.stdout.strip()} {chk.stderr.strip()}")
        assert chk.returncode == 0, f"promtool check metrics failed:\n{chk.stdout}{chk.stderr}"
        samples = fe.parse_metrics(text)
        families = sorted({nm for nm, _, _ in samples})
        log("families: " + " ".join(families))
        assert all(nm.startswith("warmlane_") for nm in families if not nm.startswith(("process_", "go_"))), \
            f"metrics not named warmlane_*: {[nm for nm in families if not nm.startswith('warmlane_')]}"
        dec = {lb.get("reason"): v for nm, lb, v in samples if nm == "warmlane_decisions_total"}
        log(f"warmlane_decisions_total: {dec}")
        sent = fe.by([r for r in recs if r.tag != "nomodel"], "reason")
        sent["no_model"] = sent.get("no_model", 0) + len(nomodel)
        total = fe.metric_sum(samples, "warmlane_decisions_total") - d0
        assert total == n, \
            f"warmlane_decisions_total summed over reasons grew by {total}, {n} route requests were sent"
        for reason, k in sent.items():
            got = fe.metric_sum(samples, "warmlane_decisions_total", reason=reason) - \
                fe.metric_sum(base, "warmlane_decisions_total", reason=reason)
            assert got == k, f"reason {reason}: {k} responses said so, the counter grew by {got}"
        for want in ("in_flight", "ewma", "breaker", "spop"):
            assert any(want in nm for nm in families), f"no warmlane metric about {want}"

        def delta(name, **lb):
            return fe.metric_sum(samples, name, **lb) - fe.metric_sum(base, name, **lb)
        # per endpoint: the decisions HAProxy reported back in x-warmlane-server
        for srv, k in fe.by(recs, "wserver").items():
            if srv is None:
                continue
            got = delta("warmlane_endpoint_decisions_total", server=srv)
            assert got == k, f"warmlane_endpoint_decisions_total{{server={srv}}} grew by {got}, " \
                             f"{k} responses named it"
        # SPOE messages: one route per request, one feedback per request a
        # server answered (HAProxy's own 404s run no http-response rule); on
        # 2.6 no feedback exchange (haproxy-2.6.cfg: the log line is the
        # feedback there)
        answered = n - len(nomodel)
        fb_spoe = version != "2.6"
        if any(nm == "warmlane_spop_messages_total" for nm in families):
            for msg, want in (("route", n), ("feedback", answered)):
                got = delta("warmlane_spop_messages_total", message=msg)
                want = want if msg == "route" or fb_spoe else 0
                assert got == want, f"warmlane_spop_messages_total{{message={msg}}} grew by {got}, " \
                                    f"{want} expected ({n} requests, {len(nomodel)} answered by HAProxy)"
        # responses: the 200s of the requests warmlane routed are successes,
        # each feedback message (2.6: each routed request's log line) is
        # classified or counted as unusable
        if any(nm == "warmlane_responses_total" for nm in families):
            status = fe.by(recs, "status")
            got = delta("warmlane_responses_total", **{"class": "success"})
            assert got == status.get(200, 0), \
                f"warmlane_responses_total{{class=success}} grew by {got}, " \
                f"the client counted {status.get(200, 0)} 200s"
            unusable = delta("warmlane_feedback_problems_total")
            classified = delta("warmlane_responses_total")
            log(f"feedback: {classified:.0f} classified, {unusable:.0f} unusable "
                f"({fe.fmt_counts({lb.get('cause'): v for nm, lb, v in samples if nm == 'warmlane_feedback_problems_total' and v})})")
            if fb_spoe:
                assert classified + unusable == answered, \
                    f"{answered} feedback messages, {classified} classified + {unusable} unusable"
            else:
                assert unusable == 0 and classified == answered, \
                    f"2.6: {answered} routed requests' log lines, {classified} classified, " \
                    f"{unusable} unusable feedback messages"
        log("per-endpoint decisions, SPOE messages and responses by class agree with the "
            "requests sent")

        # a real Prometheus server scraping the agent every second under load
        pport = h.free_port()
        data = env.path("prometheus-data")
        os.makedirs(data)
        with open(env.path("prometheus.yml"), "w") as f:
            f.write("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
                    "scrape_configs:\n  - job_name: warmlane\n    static_configs:\n"
                    f"      - targets: ['127.0.0.1:{env.metrics_port}']\n")
        env.start_process("prometheus", [
            prometheus, f"--config.file={env.path('prometheus.yml')}",
            f"--storage.tsdb.path={data}", f"--web.listen-address=127.0.0.1:{pport}",
            "--log.level=warn"])
        bg = fe.Background(env.port, make, concurrency=2, max_duration=40).start()
        t0 = time.monotonic()
        result = None
        try:
            def query():
                nonlocal result
                q = urllib.parse.urlencode({"query": "warmlane_decisions_total"})
                try:
                    with urllib.request.urlopen(
                            f"http://127.0.0.1:{pport}/api/v1/query?{q}", timeout=2) as r:
                        doc = json.load(r)
                except (OSError, ValueError):
                    return False
                if doc.get("status") != "success":
                    return False
                result = doc["data"]["result"]
                return len(result) > 0 and sum(float(x["value"][1]) for x in result) > n
            h.wait_until("Prometheus to return warmlane_decisions_total", query,
                         timeout=25, interval=0.5)
        finally:
            load = bg.stop()
        log(f"Prometheus returned {len(result)} series after {time.monotonic() - t0:.1f} s "
            f"({len(load)} requests meanwhile):")
        for x in result:
            log(f"  {x['metric']} = {x['value'][1]}")
        for x in result:
            assert x["metric"].get("job") == "warmlane" and "reason" in x["metric"], x
        with urllib.request.urlopen(f"http://127.0.0.1:{pport}/api/v1/targets", timeout=2) as r:
            tg = json.load(r)["data"]["activeTargets"]
        log("targets: " + ", ".join(f"{t['scrapeUrl']} {t['health']} {t.get('lastError', '')}"
                                    for t in tg))
        assert tg and all(t["health"] == "up" for t in tg), f"scrape targets: {tg}"
        env.stop_agent_checked()


def _slow_busiest(env, warm):
    """After the warm-up records warm (tag: the session), the server
    holding most sessions turns 5x slower (prefill and decode). Returns
    (each session's server, sessions per server, that server, when)."""
    fe.assert_all_ok(warm, "warm-up")
    summary(env, warm, "warm-up")
    last = {r.tag: r.served for r in warm}
    homes = collections.Counter(last.values())
    victim = homes.most_common(1)[0][0]
    log(f"sessions per server after the warm-up: {dict(sorted(homes.items()))}; "
        f"{victim} turns 5x slower")
    env.fault(victim, mode="slow", factor=5)
    return last, homes, victim, time.monotonic()


def _even_sessions(env, version, tag, per_server, servers):
    """Session ids that start on each of servers per_server times: one
    request for each of 48 candidates, then the first per_server of each
    server's. A test whose count scales with a server's share of the
    sessions starts from the same share every run this way (the policy
    places a new key by hashing and load, so a fixed set of ids spreads
    differently from run to run)."""
    cands = [f"{tag}-{version}-{j}" for j in range(48)]

    def first(i):
        return fe.chat_body(short(i, tag), max_tokens=2, stream=True), \
            {"x-session-id": cands[i]}, cands[i]
    recs = fe.drive(env.port, first, n=len(cands), concurrency=4)
    fe.assert_all_ok(recs, "session placement")
    homes = {s: [r.tag for r in recs if r.served == s][:per_server] for s in servers}
    short_of = {s: len(v) for s, v in homes.items() if len(v) < per_server}
    assert not short_of, f"of {len(cands)} new sessions, too few started on {short_of}"
    return [sid for k in range(per_server) for s in servers for sid in homes[s][k:k + 1]]


def _slow_phase(env, version, binary, servers=("s1", "s2", "s3", "s4")):
    """Four servers at 40 ms to the first token (streamed: headers with it),
    12 sessions, 3 starting on each server, warmed until every server is
    well past cold_start_samples, then the server holding most sessions
    (of a tie, the first) turns 5x slower (prefill and decode) for 30
    requests per session. Returns (victim, requests it got once slow, how
    many of them came before a session first left it).

    Even sessions: the requests a slow server gets before it is left are
    its request rate times the detector's two rounds of answers (0.45 s
    from the change in every run, whatever its share), so with a fixed set
    of ids, which HAProxy 3.2's runs spread 4/4/4 to 6/1/5 over three
    servers, the victim got 6 to 9 requests, and 11 and 13 in CI's
    AddressSanitizer build, against the bound of 10. servers: their
    names (two: 6 sessions on each)."""
    env.start([fe.instance(n, fast=False, base_ms=40.0, prefill_ms_per_block=0.0,
                           decode_ms_per_token=0.0) for n in servers],
              binary)
    nsess = 12
    ids = _even_sessions(env, version, "sl", nsess // len(servers), servers)

    def keyed(i):
        return (fe.chat_body(short(i, "sl"), max_tokens=2, stream=True),
                {"x-session-id": ids[i % nsess]}, ids[i % nsess])
    warm = fe.drive(env.port, keyed, n=40 * nsess, concurrency=4)
    last, _, victim, t_slow = _slow_busiest(env, warm)
    recs = fe.drive(env.port, lambda i: keyed(40 * nsess + i), n=30 * nsess, concurrency=4)
    fe.assert_all_ok(recs, "slow phase")
    summary(env, recs, f"{victim} 5x slower")
    sent, first_left, first_at = 0, None, None
    for r in sorted(recs, key=lambda r: r.t0):
        if first_left is None and last.get(r.tag) == victim and r.served != victim:
            first_left, first_at = sent, r.t0 - t_slow
        sent += r.served == victim
        last[r.tag] = r.served
    mine = sorted(r.t0 - t_slow for r in recs if r.served == victim)
    log(f"{victim} got {sent} of {len(recs)} requests once slow (at "
        + " ".join(f"+{t:.2f}" for t in mine[:20]) + " s); the first session left it "
        + (f"after {first_left} of them (+{first_at:.2f} s)" if first_left is not None
           else "never")
        + f"; sessions on it at the end: {sum(1 for v in last.values() if v == victim)}")
    return victim, sent, first_left


def slowleave(binary, version):
    """Issue 12: a warm server turning 5x slower is left within 10 of its
    requests: it gets at most 10 once slow (no new session starts, and
    idle_reset's re-trial is a minute away). Counts, not times. The
    default policy (slow_run 4: docs/policy-v2.md). WARMLANE_SLOW_RUN
    overrides policy.slow_run (0: the rule off)."""
    pol = {}
    if os.environ.get("WARMLANE_SLOW_RUN"):
        pol["slow_run"] = int(os.environ["WARMLANE_SLOW_RUN"])
    with fe.FleetEnv("slowleave", version, policy=pol) as env:
        victim, sent, _ = _slow_phase(env, version, binary)
        env.stop_agent_checked()
        assert sent <= 10, f"{victim} (5x slower) got {sent} requests once slow, not at most 10"


def slowleave2(binary, version):
    """Two servers, the slow-run detector off (policy.slow_run 0): the
    latency rule alone leaves the one that turns 5x slower, judged against
    the other, within 30 of its requests (the EWMA's 20 or so answers, at
    6 sessions on it). Against the median of two, their mean, no EWMA is
    ever 2.5 times over: it kept every session, 180 of 360 requests. (The
    default policy's slow-run detector left it after 6 before and after:
    its first slow answers are judged before its EWMA moves the median.)
    What the latency rule alone judges: servers whose times to headers
    are too irregular for the detector, as an LLM's are."""
    with fe.FleetEnv("slowleave2", version, policy={"slow_run": 0}) as env:
        victim, sent, first = _slow_phase(env, version, binary, servers=("s1", "s2"))
        env.stop_agent_checked()
        assert first is not None, f"{victim} (5x slower) was never left: {sent} requests"
        assert sent <= 30, f"{victim} (5x slower) got {sent} requests once slow, not at most 30"


def recover(binary, version):
    """Issue 12: a server left as 5x slower, once recovered, is back within
    20% of its fair share of anonymous traffic within 30 s."""
    with fe.FleetEnv("recover", version) as env:
        victim, _, _ = _slow_phase(env, version, binary)
        env.fault(victim, mode="none")
        t_ok = time.monotonic()

        def anon(i):
            return fe.chat_body(short(i, "rec"), max_tokens=2, stream=True), {}, "anon"
        # 30 s after the recovery, then 30 s measured: a 15 s window gave
        # 20.8-27.5% on 2.6 (10 runs, the same before and after the base
        # learnt to follow the EWMA down), too close to the bound for CI
        rec = fe.drive(env.port, anon, duration=60.0, concurrency=4)
        fe.assert_all_ok(rec, "after the recovery")
        late = [r for r in rec if r.t0 - t_ok >= 30.0]
        early = [r for r in rec if r.t0 - t_ok < 30.0]
        share = sum(r.served == victim for r in late) / max(1, len(late))
        log(f"recovered {victim}: {sum(r.served == victim for r in early)} of {len(early)} "
            f"anonymous requests in the first 30 s, {sum(r.served == victim for r in late)} "
            f"of {len(late)} ({100 * share:.1f}%, fair 25%) in the next 30 s; "
            f"served {fe.fmt_counts(fe.by(late, 'served'))}")
        env.stop_agent_checked()
        assert len(late) >= 100, f"only {len(late)} requests 30-60 s after the recovery"
        assert share >= 0.8 * 0.25, \
            f"recovered {victim}: {100 * share:.1f}% of anonymous requests 30-60 s after, " \
            "not within 20% of its fair share (25%)"


def recovercheck(binary, version):
    """Issue 12, with the example config's optional completion health
    check, at a low rate (one client, 15-20 requests a second, where
    exploration's probes come seconds apart): HAProxy's check of the
    server left as 5x slower times 5x its peers' while it is slow, and
    theirs again once it recovered; that verdict re-tries it at once
    (warmlane_check_recovered_total), and it takes its share of new
    sessions (rendezvous hashing: the same session ids every run) again,
    within 20% of its fair share from 5 s after the recovery on (the
    check's inter is 2 s), 30 s measured. WARMLANE_COMPLETION_CHECK=0
    runs the same without the check (its assertions then fail)."""
    on = os.environ.get("WARMLANE_COMPLETION_CHECK", "1") != "0"
    with fe.FleetEnv("recovercheck", version, completion_check=on) as env:
        victim, _, _ = _slow_phase(env, version, binary)
        samples = fe.parse_metrics(env.metrics_text()[0])
        slow = {lb.get("server"): v for n, lb, v in samples
                if n == "warmlane_endpoint_check_slow"}
        checks = {lb.get("server"): v for n, lb, v in samples
                  if n == "warmlane_endpoint_check_seconds"}
        log(f"while {victim} is slow: check_slow {fe.fmt_counts(slow)}; check seconds "
            + " ".join(f"{k}={v:.3f}" for k, v in sorted(checks.items())))
        env.fault(victim, mode="none")
        t_ok = time.monotonic()

        def fresh(i):
            time.sleep(0.02)
            return (fe.chat_body(short(i, "rc"), max_tokens=2, stream=True),
                    {"x-session-id": f"rc-{i}"}, f"rc{i}")
        rec = fe.drive(env.port, fresh, duration=35.0, concurrency=1)
        fe.assert_all_ok(rec, "after the recovery")
        samples = fe.parse_metrics(env.metrics_text()[0])
        verdicts = fe.metric_sum(samples, "warmlane_check_recovered_total")
        mine = sorted(r.t0 - t_ok for r in rec if r.served == victim)
        late = [r for r in rec if r.t0 - t_ok >= 5.0]
        share = sum(r.served == victim for r in late) / max(1, len(late))
        log(f"recovered {victim}: its first new sessions at "
            + " ".join(f"+{t:.2f}" for t in mine[:5]) + f" s; {len(mine)} of {len(rec)} "
            f"in 35 s; {sum(r.served == victim for r in late)} of {len(late)} from +5 s "
            f"({100 * share:.1f}%, fair 25%); check verdicts {verdicts:g}; "
            f"served {fe.fmt_counts(fe.by(late, 'served'))}")
        env.stop_agent_checked()
        assert slow.get(victim) == 1 and all(v == 0 for k, v in slow.items() if k != victim), \
            f"while {victim} was 5x slower, check_slow {slow}"
        assert verdicts >= 1, "no health check verdict \"recovered\""
        assert len(late) >= 300, f"only {len(late)} requests 5-35 s after the recovery"
        assert share >= 0.8 * 0.25, \
            f"recovered {victim}: {100 * share:.1f}% of new sessions 5-35 s after, " \
            "not within 20% of its fair share (25%)"

def spread(binary, version):
    """policy.p2c_margin: four identical servers (40 ms to the first
    token), one client sending anonymous requests one at a time for 20 s
    (nothing in flight at any decision, so power of two choices compares
    latencies alone). Each server gets at least half its fair share of
    the last 10 s. Without the margin (WARMLANE_P2C_MARGIN=0) they split
    by EWMAs a fraction of a percent apart, the same server losing every
    pair: one got 8 of 232. That a server over the margin still loses its
    pairs is core-decide's p2c_latency_margin."""
    pol = {}
    if os.environ.get("WARMLANE_P2C_MARGIN"):
        pol["p2c_margin"] = float(os.environ["WARMLANE_P2C_MARGIN"])
    servers = ("s1", "s2", "s3", "s4")
    with fe.FleetEnv("spread", version, policy=pol) as env:
        env.start([fe.instance(n, fast=False, base_ms=40.0, prefill_ms_per_block=0.0,
                               decode_ms_per_token=0.0) for n in servers], binary)

        def anon(i):
            return fe.chat_body(short(i, "sp"), max_tokens=2, stream=True), {}, "anon"
        recs = fe.drive(env.port, anon, duration=20.0, concurrency=1)
        fe.assert_all_ok(recs, "anonymous requests")
        summary(env, recs, "one client, anonymous")
        env.stop_agent_checked()
        late = recs[len(recs) // 2:]
        got = collections.Counter(r.served for r in late)
        log(f"the last {len(late)} requests: " + " ".join(f"{s}={got[s]}" for s in servers))
        assert len(late) >= 100, f"only {len(late)} requests in the last 10 s"
        for s in servers:
            assert got[s] >= 0.5 * len(late) / len(servers), \
                f"{s} got {got[s]} of the last {len(late)} requests (fair {len(late) / 4:.0f})"


def slowqueue(binary, version):
    """Issue 12, docs/policy-v2.md section 22: four servers that send their
    headers at once, before prefill and decode (vLLM's), 600 ms a request;
    no log input, so that nothing times a request's end; 24 sessions at a
    steady 8 requests a second in all (open loop: a request is sent at its
    time whatever the answers), 30 s, then the server holding most
    sessions turns 5x slower for 120 s. Its headers stay as fast as its
    peers': only its queue shows it (about 6 in flight against 1.2), which
    the warm slack tolerates (fair share + 6) and the load bound alone does
    not. Once it has held that queue long enough to average over twice its
    fair share at over twice its peers' time per request, its sessions
    lose the slack and the bound moves them until its queue is within it:
    60-120 s after the change it gets under its fair share of the
    requests, where it holds more sessions than its share when the change
    comes (the most of four servers for 24). The agent before the rule
    kept every session (2026-12-05, 3.2: 140 of 480, fair 120, a
    failure); with it, about 4 of 7 left within 40 s (60 of 480), the
    other 3 holding a queue under the load floor. HAProxy 3.x: on 2.6 the log
    line is the only feedback, and without it no session is warm."""
    servers = ("s1", "s2", "s3", "s4")
    nsess, rate = 24, 8.0
    with fe.FleetEnv("slowqueue", version) as env:
        env.log_input = False
        env.start([fe.instance(n, fast=False, header_mode="immediate", base_ms=40.0,
                               prefill_ms_per_block=0.0, decode_ms_per_token=20.0)
                   for n in servers], binary)

        def paced(first, t0):
            def make(i):
                wait = t0 + i / rate - time.monotonic()
                if wait > 0:
                    time.sleep(wait)
                j = first + i
                return (fe.chat_body(short(j, "sq"), max_tokens=28, stream=True),
                        {"x-session-id": f"sq-{version}-{j % nsess}"}, f"s{j % nsess}")
            return make
        warm = fe.drive(env.port, paced(0, time.monotonic()), n=int(30 * rate),
                        duration=45.0, concurrency=32)
        _, homes, victim, t_slow = _slow_busiest(env, warm)
        recs = fe.drive(env.port, paced(len(warm), t_slow), n=int(120 * rate),
                        duration=140.0, concurrency=64)
        fe.assert_all_ok(recs, "slow phase")
        summary(env, recs, f"{victim} 5x slower")
        env.stop_agent_checked()
        for lo in range(0, 120, 20):
            win = [r for r in recs if lo <= r.t0 - t_slow < lo + 20]
            got = sum(r.served == victim for r in win)
            log(f"+{lo}-{lo + 20} s: {victim} got {got} of {len(win)}")
        late = [r for r in recs if 60 <= r.t0 - t_slow < 120]
        got = sum(r.served == victim for r in late)
        assert len(late) >= 300, f"only {len(late)} requests 60-120 s after the change"
        log(f"{victim} held {homes[victim]} of {nsess} sessions at the change")
        assert got < len(late) / len(servers), \
            (f"{victim} (5x slower, headers before prefill) got {got} of the {len(late)} "
             f"requests 60-120 s after the change (fair {len(late) / 4:.0f}): its sessions stayed")


def slowstart(binary, version):
    """Issue 12: one of four servers (40 ms to the first token, headers
    with it) is 5x slower from its first request; 50 sessions of 2 turns
    sent by 4 clients, a new session every 2 requests (100 requests: low
    volume, the slow one under cold_start_samples answers). Its share of
    the new sessions (a session's first request) sent after its 5th
    answer came back is at most half its fair share (12.5%). Counts, not
    times. WARMLANE_SLOW_START overrides policy.slow_start (0: the rule
    off: 23.7% on 2.6, a quarter, the hash's share)."""
    pol = {}
    if os.environ.get("WARMLANE_SLOW_START"):
        pol["slow_start"] = float(os.environ["WARMLANE_SLOW_START"])
    with fe.FleetEnv("slowstart", version, policy=pol) as env:
        names = ("s1", "s2", "s3", "s4")
        env.start([fe.instance(n, fast=False, base_ms=40.0, prefill_ms_per_block=0.0,
                               decode_ms_per_token=0.0) for n in names], binary)
        victim = "s4"
        env.fault(victim, mode="slow", factor=5)

        def keyed(i):
            return (fe.chat_body(short(i, "ss"), max_tokens=2, stream=True),
                    {"x-session-id": f"ss-{version}-{i // 2}"}, f"s{i // 2}")
        recs = fe.drive(env.port, keyed, n=100, concurrency=4)
        fe.assert_all_ok(recs, "sessions")
        summary(env, recs, f"{victim} 5x slower from the start")
        answers = sorted(r.t1 for r in recs if r.served == victim)
        assert len(answers) >= 5, f"{victim} answered {len(answers)} times, not 5"
        fifth = answers[4]
        seen, new = set(), []
        for r in sorted(recs, key=lambda r: r.t0):
            if r.tag in seen:
                continue
            seen.add(r.tag)
            if r.t0 >= fifth:
                new.append(r)
        got = sum(r.served == victim for r in new)
        share = got / max(1, len(new))
        log(f"{victim}: {len(answers)} requests; of the {len(new)} new sessions after its 5th "
            f"answer it got {got} ({100 * share:.1f}%, fair 25%, bound 12.5%); first turns "
            f"{fe.fmt_counts(fe.by(new, 'served'))}, reasons {fe.fmt_counts(fe.by(new, 'reason'))}")
        env.stop_agent_checked()
        assert len(new) >= 20, f"only {len(new)} new sessions after {victim}'s 5th answer"
        assert share <= 0.5 * 0.25, \
            f"{victim} (5x slower from the start) got {100 * share:.1f}% of the new sessions " \
            "after its 5th answer, not at most half its fair share (12.5%)"


def sizedrecover(binary, version):
    """Issue 12, routing alone (policy.routers one): a server whose times
    to headers are irregular only because its prompts' sizes are (one new
    session in 20 sends a 128 KiB prompt, 25x the others' time to the
    first token on every server), left as 5x slower, is back once it
    recovered. Raw, its answers spread over twice their mean, too much for
    exploration's verdicts, and idle_reset's re-trial is 10 minutes away:
    before docs/policy-v2.md section 37 it got no new session back. Now
    its probes are judged sized: HAProxy's req.body_size reaches the
    decision (the size argument) and the decision's answer (struct asked),
    and each time to headers counts over what its size class takes on the
    fit servers. Every request is a new session. Counts, not times: at
    least a quarter of its fair share (25%) of the new sessions 20-50 s
    after the recovery."""
    pol = {"routers": "one", "idle_reset": "10m"}
    with fe.FleetEnv("sizedrecover", version, policy=pol) as env:
        env.start([fe.instance(n, fast=False, base_ms=20.0, prefill_ms_per_block=1.0,
                               decode_ms_per_token=0.0) for n in ("s1", "s2", "s3", "s4")],
                  binary)

        def sized(i):
            text = f"sz {version} {i}: " + ("x" * 131072 if i % 20 == 0 else "y" * 1500)
            sid = f"sz-{version}-{i}"
            return fe.chat_body(text, max_tokens=2, stream=False), {"x-session-id": sid}, sid
        warm = fe.drive(env.port, sized, n=1000, concurrency=4)
        fe.assert_all_ok(warm, "warm-up")
        summary(env, warm, "warm-up")
        env.fault("s2", mode="slow", factor=5)
        slow = fe.drive(env.port, lambda i: sized(1000 + i), n=600, concurrency=4)
        fe.assert_all_ok(slow, "slow phase")
        summary(env, slow, "s2 5x slower")
        late = [r for r in slow[-200:] if r.served == "s2"]
        env.fault("s2", mode="none")
        t_ok = time.monotonic()
        rec = fe.drive(env.port, lambda i: sized(1600 + i), duration=50.0, concurrency=4)
        fe.assert_all_ok(rec, "after the recovery")
        window = [r for r in rec if r.t0 - t_ok >= 20.0]
        back = sum(r.served == "s2" for r in window)
        share = back / max(1, len(window))
        log(f"s2 got {len(late)} of the slow phase's last 200 requests; recovered: "
            f"{sum(r.served == 's2' for r in rec if r.t0 - t_ok < 20.0)} of the first 20 s' "
            f"requests, {back} of {len(window)} 20-50 s after ({100 * share:.1f}%, fair 25%); "
            f"served {fe.fmt_counts(fe.by(window, 'served'))}, "
            f"reasons {fe.fmt_counts(fe.by(window, 'reason'))}")
        env.stop_agent_checked()
        assert len(late) < 200 // 4, \
            f"s2 (5x slower) got {len(late)} of the slow phase's last 200, its fair share: not left"
        assert len(window) >= 100, f"only {len(window)} requests 20-50 s after the recovery"
        assert share >= 0.25 * 0.25, \
            f"recovered s2: {100 * share:.1f}% of new sessions 20-50 s after, " \
            "under a quarter of its fair share (25%)"


def longprompt(binary, version):
    """policy.place_long_kib 4, place_long_z 0, with place_load_z, the load
    bound, owned_bound, exploration and place_slots out of the way: s1
    holds 8 streams of 300 tokens (3 s each), s2 none. 16 new sessions of
    a short body (under 1 KiB) stay on their rendezvous choice, so some
    on s1; 16 of a 5 KiB body all go to s2 (reason hash): without the
    size argument they would split as the short ones. Both servers first
    answer 5 streamed requests (the guard: slow_start's judgement).
    Counts, not times."""
    pol = {"place_long_kib": 4, "place_long_z": 0, "place_load_z": 0,
           "load_floor": 1000, "owned_bound": -1, "explore_share": 0,
           "place_slots": "false"}
    with fe.FleetEnv("longprompt", version, policy=pol) as env:
        env.start([fe.instance(n, fast=False, base_ms=20.0, prefill_ms_per_block=0.0,
                               decode_ms_per_token=10.0) for n in ("s1", "s2")], binary)

        def warm(i):
            return (fe.chat_body(short(i, "lw"), max_tokens=2, stream=True),
                    {"x-session-id": f"lw-{i}"}, f"lw-{i}")
        recs = fe.drive(env.port, warm, n=24, concurrency=2)
        fe.assert_all_ok(recs, "warm-up")
        summary(env, recs, "warm-up")
        per = fe.by(recs, "served")
        assert min(per.get("s1", 0), per.get("s2", 0)) >= 5, \
            f"warm-up: {fe.fmt_counts(per)}, not 5 answers on each server"
        holders = [r.tag for r in recs if r.served == "s1"][:8]

        def hold(i):
            return (fe.chat_body(short(i, "hold"), max_tokens=300, stream=True),
                    {"x-session-id": holders[i % len(holders)]}, "hold")
        bg = fe.Background(env.port, hold, concurrency=len(holders)).start()
        try:
            time.sleep(1.0)  # a few runtime-API polls: s1's streams counted
            c = fe.Client(env.port)
            probes = {"short": [], "long": []}
            for i in range(16):
                for kind, text in (("short", short(i, "ps")),
                                   ("long", f"pl {i}: " + "x" * 5120)):
                    body = fe.chat_body(text, max_tokens=2, stream=True)
                    probes[kind].append(c.post(body, {"x-session-id": f"p{kind}-{i}"},
                                               i=i, tag=kind))
                    time.sleep(0.1)
            c.close()
        finally:
            held = bg.stop()
        fe.assert_all_ok(held, "s1's streams")
        for kind, rs in probes.items():
            fe.assert_all_ok(rs, kind)
            summary(env, rs, f"new sessions, {kind} body, s1 busy")
        env.stop_agent_checked()
        on_s1 = {k: sum(r.served == "s1" for r in rs) for k, rs in probes.items()}
        log(f"s1 held {len(holders)} streams ({fe.fmt_counts(fe.by(held, 'served'))}); "
            f"new sessions on s1: short {on_s1['short']}/16, long {on_s1['long']}/16")
        assert all(r.served == "s1" for r in held), "a holder left s1"
        assert on_s1["short"] >= 1, \
            "no short session stayed on s1: the setup does not show the rule"
        assert on_s1["long"] == 0, \
            f"{on_s1['long']} long sessions went to busy s1 (place_long_kib 4)"
        assert all(r.reason == "hash" for r in probes["long"]), \
            f"long sessions' reasons {fe.fmt_counts(fe.by(probes['long'], 'reason'))}"


def turns(binary, version):
    """Issue 12, policy.routers auto without engine counts or hints:
    HAProxy counts each body's user messages (haproxy/*.cfg, the `turn`
    argument of warmlane.spoe.conf), and the agent compares the turns of
    a key's requests (core/routers.h): a turn that skips one was routed
    by another HAProxy. 25 conversations of four turns, all through this
    HAProxy: the agent routes alone (warmlane_routers_turns) from the
    50th turn that could have followed a skipped one (turns 3 and 4 of
    each), not before. Then conversations of which another HAProxy would have
    routed every second turn (turns 1, 3 and 5 come here): it no longer
    routes alone within 10 of them; nor does it route alone again when
    one caller (its own Authorization header) sends a conversation of 80
    turns that skip none. Bodies as the OpenAI clients send
    them: compact JSON (JSON.stringify), every other conversation with
    Python's spaces after the colons; the first user message 9 KiB of
    the conversation's own, so that its 8 KiB prefix key is. While alone,
    conversations whose bodies grow past the prefix windows keep their
    server (on 2.6, each turn sent once the agent has read the log line
    of the one before, its only feedback there). Counts, not times."""
    with fe.FleetEnv("turns", version) as env:
        env.start([fe.instance(n) for n in ("s1", "s2", "s3", "s4")], binary)
        c = fe.Client(env.port)

        def ask(conv, turn, headers=None):
            msgs = [{"role": "system", "content": "You are terse."}]
            for t in range(1, turn + 1):
                first = f"conversation {version} {conv}: " + (f"{conv} " * 9216)[:9216]
                msgs.append({"role": "user", "content": first if t == 1 else f"and turn {t}?"})
                if t < turn:
                    msgs.append({"role": "assistant", "content": f"answer {t}"})
            body = {"messages": msgs, "model": "m1", "max_tokens": 1}
            text = json.dumps(body, separators=(",", ":")) if conv % 2 else json.dumps(body)
            r = c.post(text.encode(), headers, i=turn, tag=f"c{conv}")
            fe.assert_all_ok([r], f"conversation {conv}, turn {turn}")
            return r

        def metric(name):
            return fe.metric_sum(fe.parse_metrics(env.metrics_text()[0]), name)
        for conv in range(25):
            assert metric("warmlane_routers_alone") == 0, \
                f"alone before the 50th turn that counts (conversation {conv})"
            for turn in (1, 2, 3, 4):
                ask(conv, turn)
        alone = {n: metric(f"warmlane_routers_{n}") for n in ("alone", "turns", "turn_skips")}
        log(f"25 conversations of 4 turns: {alone}")
        assert alone == {"alone": 1, "turns": 1, "turn_skips": 0}, \
            f"every turn through this HAProxy: {alone}, not alone by the turns"
        # Conversations without a session id, whose bodies grow by 2 KiB a
        # turn: past the 4 KiB prefix window at turn 3 (6 KiB), past the
        # 8 KiB one at turn 5 (10 KiB), and each time the key changes. The new key
        # takes the shorter window's entry whose last request was the turn
        # before (docs/policy-v2.md, section 42): every turn on its first
        # turn's server, where by load or hash most would move.
        moved = []
        for conv in range(200, 212):
            msgs = [{"role": "system", "content": f"conversation {version} {conv}"}]
            first = None
            for turn in range(1, 7):
                msgs.append({"role": "user", "content": f"turn {turn}: " + "w" * 1900})
                text = json.dumps({"messages": msgs, "model": "m1", "max_tokens": 1},
                                  separators=(",", ":"))
                lines = metric("warmlane_log_lines_total")
                r = c.post(text.encode(), i=turn, tag=f"g{conv}")
                fe.assert_all_ok([r], f"growing conversation {conv}, turn {turn}")
                if version == "2.6":
                    # 2.6 tells the answer by its log line only: the next
                    # turn waits until the agent has read it (a turn sent
                    # before is placed as new: docs/policy-v2.md, "What
                    # is left of issue 12").
                    h.wait_until(f"turn {turn}'s log line read",
                                 lambda: metric("warmlane_log_lines_total") > lines)
                first = first or r.served
                if r.served != first:
                    moved.append((conv, turn, len(text), first, r.served, r.reason))
                msgs.append({"role": "assistant", "content": f"answer {turn}"})
        log(f"12 conversations of 6 turns growing past 4 and 8 KiB: {len(moved)} turns "
            f"left the first turn's server")
        assert not moved, f"turns moved as their bodies grew past a prefix window: {moved}"
        shared = 0
        while metric("warmlane_routers_alone") == 1:
            assert shared < 10, \
                f"still alone after {shared} conversations another HAProxy shared"
            for turn in (1, 3, 5):
                ask(100 + shared, turn)
            shared += 1
        skips = metric("warmlane_routers_turn_skips")
        log(f"not alone after {shared} conversations with every second turn elsewhere "
            f"(skip share {skips:.3f})")
        assert skips >= 0.10, f"not alone with a skip share of {skips} (the bar: 0.10)"
        # One caller of its own (HAProxy's caller: its Authorization
        # header's hash) sends a conversation's turns 1 to 80, all here,
        # none skipped: counted as the others', 49 of them would take the
        # share under 0.05. It counts up to half of the last 64 counted
        # turns while the others' are under 10 minutes old.
        hostile = {"Authorization": "Bearer one-caller"}
        for turn in range(1, 81):
            ask(1000, turn, hostile)
        after = {n: metric(f"warmlane_routers_{n}") for n in ("alone", "turns", "turn_skips")}
        log(f"after one caller's 80 turns that skip none: {after}")
        c.close()
        env.stop_agent_checked()
        assert after["alone"] == 0 and after["turn_skips"] >= 0.05, \
            f"one caller's turns made the verdict: {after}"


def hotkey(binary, version):
    """policy.hot_share (docs/policy-v2.md, section 47), the defaults: one
    system prompt of 2 KiB that every request shares, a short question of
    its own after it (one user message: HAProxy's turn argument is 1 for
    each, so the key's turns go back), no session id. Its 1 KiB prefix
    key is all the traffic: hot. 12 at a time on four servers whose
    answers stream for 0.4 s: its server holds more than the load floor
    (6) and the bound, and the key is sent once to warm a second one
    (warmlane_twin_spreads_total 1); then each request goes to the
    cheaper of the two. The same prompt with a session id, 8 at a time
    (over the bound, within the warm slack: fair share + 6), stays on
    one server: a session is one conversation. Counts, not times."""
    with fe.FleetEnv("hotkey", version) as env:
        env.start([fe.instance(n, fast=False, base_ms=10.0, prefill_ms_per_block=0.0,
                               decode_ms_per_token=10.0) for n in ("s1", "s2", "s3", "s4")],
                  binary)
        system = f"hot {version}: " + "You answer questions about the manual. " * 52

        def ask(i, session=None):
            body = json.dumps({"model": "m1", "max_tokens": 40, "stream": True,
                               "messages": [{"role": "system", "content": system},
                                            {"role": "user", "content": short(i, "hq")}]},
                              separators=(",", ":")).encode()
            assert 1024 <= len(body) < 4096, f"body of {len(body)} bytes: not one window"
            return body, {"x-session-id": session} if session else {}, "hot"

        def metric(name):
            return fe.metric_sum(fe.parse_metrics(env.metrics_text()[0]), name)
        first = fe.drive(env.port, lambda i: ask(i), n=1, concurrency=1)
        fe.assert_all_ok(first, "the first request")
        recs = fe.drive(env.port, lambda i: ask(i + 1), n=120, concurrency=12)
        fe.assert_all_ok(recs, "the shared prompt")
        summary(env, recs, "one shared system prompt, 12 at a time")
        per = fe.by(recs, "served")
        spreads = metric("warmlane_twin_spreads_total")
        sends = metric("warmlane_twin_sends_total")
        log(f"shared prompt: {fe.fmt_counts(per)}; spreads {spreads:.0f}, "
            f"sent to the twin {sends:.0f}")
        sess = fe.drive(env.port, lambda i: ask(1000 + i, "one-conversation"), n=80,
                        concurrency=8)
        fe.assert_all_ok(sess, "the session")
        # Its first 8, sent before its first answer, are a new key's
        # (reason hash, the load bound); from then on its warm entry's.
        warm = [r for r in sess if r.reason == "affinity"]
        sess_per = fe.by(warm, "served")
        log(f"with a session id: {fe.fmt_counts(fe.by(sess, 'served'))}, "
            f"of them by its warm entry {fe.fmt_counts(sess_per)}")
        env.stop_agent_checked()
        assert spreads == 1, f"{spreads:.0f} spreads, not one: {fe.fmt_counts(per)}"
        assert len(per) == 2, f"the hot key on {fe.fmt_counts(per)}, not two servers"
        assert min(per.values()) >= 120 // 5, \
            f"the twin took too little: {fe.fmt_counts(per)}"
        assert sends >= 1, "no request went to the twin"
        assert all(r.reason == "affinity" for r in recs[len(recs) // 2:]), \
            f"late reasons {fe.fmt_counts(fe.by(recs[len(recs) // 2:], 'reason'))}"
        assert len(warm) >= 60 and len(sess_per) == 1, \
            f"a session's warm requests on {fe.fmt_counts(sess_per)}"


SCENARIOS = {"affinity": affinity, "agentloop": agentloop, "ratelimit": ratelimit, "breaker": breaker,
             "deadkey": deadkey, "maint": maint, "haproxyown": haproxyown, "models": models,
             "sessionscope": sessionscope, "sizedrecover": sizedrecover,
             "killrestart": killrestart, "metrics": metrics, "slowleave": slowleave,
             "slowleave2": slowleave2,
             "recover": recover, "recovercheck": recovercheck, "tiers": tiers, "tiersrestart": tiers_restart, "slowstart": slowstart,
             "longprompt": longprompt, "spread": spread, "slowfail": slowfail,
             "slowqueue": slowqueue, "turns": turns, "hotkey": hotkey}

if __name__ == "__main__":
    sys.exit(h.main(SCENARIOS))
