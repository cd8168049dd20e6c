#!/usr/bin/env python3
"""warmlane's log input end to end: real HAProxy, the agent, the fake fleet.

Usage: logs.py 2.6|3.0|3.2 SCENARIO [--no-log-input]
Scenarios:
  refuse    a server refusing connections (no health checks configured):
            HAProxy redispatches and answers 200, SPOE says nothing, the log
            line does; warmlane stops routing to it within a bounded number
            of requests
  cut       a server cutting its streams half-way (status 200): treated as
            failing, not routed to after a bounded number of requests
  cutmid-new, cutmid-anon, cutmid-long
            issue 16's set-up: 4 servers, one cutting every stream half-way
            after its headers (the feedback says 200 first), 32 clients of
            long streams; a new session per request, no identity (p2c), or
            4 long sessions: after the breaker opens, only half-open probes
            reach it, and none closes it
  slow      servers that send headers at once, before prefill (as vLLM
            does): one turning 5x slower is left by the sessions it held,
            seen through the end-to-end EWMA (policy.score_by end_to_end)
  quiesce   after mixed traffic (streamed, plain, cut streams) with the
            runtime API polled once only, the agent's in-flight counts equal
            HAProxy's scur exactly (0); HAProxy's own log keeps httplog's
            format on 3.1+ (log profile), carries warmlane's fields before
  garbage   a burst of malformed datagrams on the log socket: every one is
            counted as unparseable, the agent logs a bounded number of them
            and keeps serving
  forged    46,000 well-formed forged lines (warmlane's decision on a real
            server, a success, random akeys): the affinity map does not
            grow (the issue: it grew by 46k entries, RSS by 17 MB), the
            sessions homed before stay warm; RSS before and after printed
  noformat  3.1+ without `option httplog`: HAProxy sends `Connect from`
            lines; the agent says once, with a sample, that they are not in
            its format, and warmlane_log_input_format_ok is 0
--no-log-input runs the scenario with the agent's log input off and prints
its figures without asserting what only the log input gives (for the
comparison docs/haproxy.md reports, "Log input"). HAProxy 2.6 runs chrooted when root, its log
socket then inside the chroot as in the example config.

Exit status: 0 pass, 1 fail, 77 skip. Every loop is bounded in count and
time; the processes started here are stopped at the end.
"""

import os
import random
import re
import http.client
import socket
import sys
import threading
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402

sys.path.insert(0, fe.FLEET_DIR)
import client as fc  # noqa: E402  (tests/fleet/client.py)

log = h.log
LOG_INPUT = "--no-log-input" not in sys.argv


class LogEnv(fe.FleetEnv):
    """FleetEnv with the agent's log input and HAProxy's log target pointed
    at the same socket; health checks of the llm servers removed unless
    asked for."""

    def __init__(self, name, version, log_input=True, checks=False, httplog=True, **kw):
        super().__init__(name, version, **kw)
        self.log_input = log_input
        self.checks = checks
        self.httplog = httplog

    # (the log socket and HAProxy's target pointing at it: FleetEnv's)
    def haproxy_config(self, test_headers=True):
        path = super().haproxy_config(test_headers=test_headers)
        with open(path) as f:
            text = f.read()
        if not self.httplog:
            text, n = re.subn(r"^    option httplog\n", "", text, flags=re.M)
            if n != 1:
                raise AssertionError("the example config has no `option httplog`")
        if not self.checks:
            text, n = re.subn(r"^    default-server check .*\n", "", text, flags=re.M)
            text = re.sub(r"^(    server s\d+ 127\.0\.0\.1:\d+) check inter 1s$", r"\1",
                          text, flags=re.M)
        with open(path, "w") as f:
            f.write(text)
        return path

    def wait_backends_up(self, timeout=15):
        ok = ("UP", "no check")
        h.wait_until("the backends up", lambda: all(
            self.server_status("llm", b.name).startswith(ok) for b in self.backends),
            timeout=timeout)

    def metrics(self):
        text, _ = self.metrics_text()
        return fe.parse_metrics(text)

    def wait_lines(self, n, timeout=10):
        """Waits until the agent has received at least n log datagrams."""
        def got():
            return fe.metric_sum(self.metrics(), "warmlane_log_datagrams_total") >= n
        h.wait_until(f"{n} log lines at the agent", got, timeout=timeout)


def instances(header_mode="immediate", fast=True, **kw):
    return [fe.instance(n, header_mode=header_mode, admin_port=0, fast=fast, **kw)
            for n in ("s1", "s2", "s3")]


def short(i, tag="q"):
    return f"{tag} {i}: say something short about the number {i}."


def routed_to(records, server):
    return [r for r in records if r.wserver == server]


def detection(records, server, t_fault, quiet=10):
    """(requests, seconds) from the fault until the last decision for server
    that is followed by `quiet` requests without one (half-open probes after
    a cooldown aside); None when it never went quiet."""
    after = [r for r in records if r.t0 >= t_fault]
    last = None
    for i, r in enumerate(after):
        if r.wserver == server:
            nxt = after[i + 1:i + 1 + quiet]
            if len(nxt) == quiet and all(x.wserver != server for x in nxt):
                last = (i + 1, r.t1 - t_fault)
                break
    return last


# --- refused connections -----------------------------------------------------

def refuse(binary, version):
    policy = {"breaker_cooldown": "5s", "breaker_cooldown_max": "20s"}
    with LogEnv("refuse", version, log_input=LOG_INPUT, policy=policy) as env:
        # 30 ms per request: the 120 requests after the fault span about
        # two seconds, several runtime-API polls
        env.start(instances(base_ms=30.0), binary)
        warm = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                             {"x-session-id": f"w{i}"}, "warm"),
                        n=30, concurrency=2)
        fe.assert_all_ok(warm, "before the fault")
        assert routed_to(warm, "s2"), "s2 got nothing before the fault"
        env.fault("s2", mode="refuse")
        t_fault = time.monotonic()
        recs = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                             {"x-session-id": f"f{i}"}, "fault"),
                        n=120, concurrency=2)
        t_end = time.monotonic()
        chosen = routed_to(recs, "s2")
        served = fe.by(recs, "served")
        log(f"after the fault: {len(recs)} requests in {t_end - t_fault:.1f} s, warmlane "
            f"chose s2 for {len(chosen)} (at request " +
            " ".join(str(recs.index(r)) for r in chosen[:20]) + f"); served {fe.fmt_counts(served)}")
        d = detection(recs, "s2", t_fault)
        log("refused s2 left " + (f"after {d[0]} requests, {d[1]:.2f} s" if d else
                                  f"never within {len(recs)} requests") +
            f" (log input {'on' if LOG_INPUT else 'off'})")
        fe.assert_all_ok(recs, "HAProxy redispatches refused connections")
        assert "s2" not in served, f"s2 refuses connections but served {served['s2']}"
        if not LOG_INPUT:
            return
        m = env.metrics()
        redisp = fe.metric_sum(m, "warmlane_log_redispatched_total")
        log(f"agent: {redisp:.0f} redispatches seen in the log")
        assert redisp >= 1, "no redispatch seen in HAProxy's log lines"
        consecutive = int(env.policy["breaker_consecutive"])
        probes = int(env.policy["half_open_probes"])
        # the breaker opens after `consecutive` failures; requests already
        # in flight (2 clients) and half-open probes after each cooldown
        # (5 s, doubling) may still go there
        cooldowns = 1 + int((t_end - t_fault) / 5.0)
        bound = consecutive + 2 + probes * cooldowns
        assert len(chosen) <= bound, \
            f"warmlane chose the refusing s2 {len(chosen)} times, more than {bound}"
        assert d is not None, "warmlane kept choosing the refusing s2"
        env.stop_agent_checked()


# --- streams cut mid-way -------------------------------------------------------

def cut(binary, version):
    policy = {"breaker_cooldown": "5s", "breaker_cooldown_max": "20s"}
    with LogEnv("cut", version, log_input=LOG_INPUT, policy=policy) as env:
        env.start(instances(header_mode="first_token", base_ms=30.0), binary)
        env.fault("s2", mode="cut")
        t_fault = time.monotonic()
        # A cut stream gives the client no complete answer (no header it
        # could report): the fleet counts what reached s2, batch by batch.
        recs, seen, left = [], [], None
        for b in range(12):
            recs += fe.drive(env.port, lambda i, k=len(recs): (
                fe.chat_body(short(k + i), max_tokens=8, stream=True),
                {"x-session-id": f"c{k + i}"}, "cut"), n=10, concurrency=2)
            seen.append((env.fleet_stats()["s2"]["requests"], len(recs),
                         time.monotonic() - t_fault))
            if left is None and b >= 2 and seen[-1][0] == seen[-3][0]:
                left = seen[-3]
        t_end = time.monotonic()
        stats = env.fleet_stats()
        log(f"{len(recs)} streamed requests in {t_end - t_fault:.1f} s; s2 (cuts every "
            f"stream) received {stats['s2']['requests']}, cut {stats['s2']['cut']}; "
            f"s2 requests after each batch of 10: {' '.join(str(s[0]) for s in seen)}")
        log("cutting s2 left " + (f"after {left[0]} requests to it ({left[1]} in all), "
                                  f"{left[2]:.2f} s" if left else
                                  f"never within {len(recs)} requests") +
            f" (log input {'on' if LOG_INPUT else 'off'})")
        if not LOG_INPUT:
            return
        m = env.metrics()
        cuts = fe.metric_sum(m, "warmlane_endpoint_completions_total", server="s2",
                             end="server_cut")
        log(f"agent: {cuts:.0f} cut streams of s2 seen in the log")
        # lines in warmlane's format: the gauge an alert watches says so
        assert fe.metric_sum(m, "warmlane_log_input_format_ok") == 1, \
            "warmlane_log_input_format_ok is not 1 with lines in warmlane's format"
        assert cuts >= 1 and stats["s2"]["cut"] >= 1, \
            f"no cut stream seen: agent {cuts}, fleet {stats['s2']['cut']}"
        consecutive = int(env.policy["breaker_consecutive"])
        probes = int(env.policy["half_open_probes"])
        cooldowns = 1 + int((t_end - t_fault) / 5.0)
        bound = 2 * consecutive + 2 + probes * cooldowns
        assert stats["s2"]["requests"] <= bound, \
            f"s2, which cuts every stream, received {stats['s2']['requests']} requests " \
            f"(bound {bound})"
        assert left is not None, "warmlane kept sending requests to s2, which cuts every stream"
        ok = [r for r in recs if r.served not in (None, "s2")]
        fe.assert_all_ok(ok, "the servers that do not cut")
        env.stop_agent_checked()


# --- streams cut half-way, the headers' feedback first ------------------------

# The shipped breaker defaults (deploy/warmlane.yaml), not the short test ones.
SHIPPED_BREAKER = {"breaker_window": "10s", "breaker_min_requests": 5,
                   "breaker_failure_ratio": 0.5, "breaker_consecutive": 5,
                   "breaker_cooldown": "5s", "breaker_cooldown_max": "300s",
                   "half_open_probes": 3}

CUTMID_IDS = {
    "new": lambda i: {"x-session-id": f"n{i}"},   # a new session per request
    "anon": lambda i: {},                          # no identity: p2c
    # 4 long sessions, one hashed to each server (rendezvous over s1..s4:
    # L0 s1, L1 s3, L4 s4, L12 s2), so that one lives on the cutting s2.
    # L0..L3 hashed to s1, s3, s1, s1: s2 got streams only when the load
    # bound moved a session, and none in 10 s once in CI (2026-12-05).
    "long": lambda i: {"x-session-id": ("L0", "L1", "L4", "L12")[i % 4]},
}


def stream_drive(port, make, n, concurrency):
    """n streamed requests make(i) -> (body, headers) on `concurrency`
    threads, a connection each, sent in index order. A cut stream still
    has its headers (sent before the body): the record keeps who chose and
    who served it, and whether its body came whole. Returns the records in
    index order."""
    lock = threading.Lock()
    nxt = [0]
    out = []

    def worker():
        while True:
            with lock:
                i = nxt[0]
                if i >= n:
                    return
                nxt[0] += 1
            body, hd = make(i)
            rec = fe.Rec(i, "stream")
            rec.t0 = time.monotonic()
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=20)
            try:
                c.request("POST", "/v1/chat/completions", body=body,
                          headers=dict(hd, **{"content-type": "application/json"}))
                r = c.getresponse()
                rec.status = r.status
                rec.served = r.getheader("x-served-by")
                rec.wserver = r.getheader("x-warmlane-server") or None
                rec.reason = r.getheader("x-warmlane-reason") or None
                r.read()
            except (OSError, http.client.HTTPException) as e:
                rec.error = f"{type(e).__name__}: {e}"
            finally:
                c.close()
            rec.t1 = time.monotonic()
            with lock:
                out.append(rec)

    threads = [threading.Thread(target=worker, daemon=True) for _ in range(concurrency)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    if any(t.is_alive() for t in threads):
        raise AssertionError("stream_drive: a client thread did not finish")
    return sorted(out, key=lambda r: r.i)


def cutmid(binary, version, ids):
    """Issue 16's set-up: 4 servers, one cutting every streamed response
    half-way (status 200, `SD--`) after its headers, so that the feedback
    says 200 before the log line says cut; 120 streamed requests of 64
    tokens (2-3 s) on 32 clients, so that several streams of the cutting
    server are under way when one of them is cut: counted at their
    headers, their successes kept the failure ratio under its threshold,
    broke every run of failures and closed the breaker on its probes."""
    # The shipped breaker but for a 2 s first cooldown: the 10 s run then
    # holds two half-open rounds (2 s, then 4 s: the cooldown doubles).
    policy = dict(SHIPPED_BREAKER, breaker_cooldown="2s")
    with LogEnv("cutmid-" + ids, version, log_input=LOG_INPUT, policy=policy) as env:
        insts = [fe.instance(n, header_mode="immediate", admin_port=0, fast=False,
                             base_ms=5.0, prefill_ms_per_block=1.0,
                             decode_ms_per_token=40.0)
                 for n in ("s1", "s2", "s3", "s4")]
        env.start(insts, binary)
        env.fault("s2", mode="cut")
        t0 = time.monotonic()
        make_hd = CUTMID_IDS[ids]
        recs = stream_drive(env.port, lambda i: (
            fe.chat_body(short(i), max_tokens=64, stream=True), make_hd(i)),
            n=120, concurrency=32)
        t_end = time.monotonic()
        stats = env.fleet_stats()
        got = stats["s2"]["requests"]
        to_s2 = [r.i for r in recs if r.served == "s2"]
        m = env.metrics()
        cuts = fe.metric_sum(m, "warmlane_endpoint_completions_total", server="s2",
                             end="server_cut")
        log(f"[{ids}] {len(recs)} streamed requests in {t_end - t0:.1f} s; s2 (cuts "
            f"every stream half-way) received {got}, cut {stats['s2']['cut']}, at "
            f"request {' '.join(str(i + 1) for i in to_s2[:40])}; served "
            f"{fe.fmt_counts(fe.by(recs, 'served'))}; reasons "
            f"{fe.fmt_counts(fe.by(recs, 'reason'))}; agent saw {cuts:.0f} cuts of s2 "
            f"(log input {'on' if LOG_INPUT else 'off'})")
        bad = [r for r in recs if r.served != "s2" and (r.error or r.status != 200)]
        assert not bad, f"requests to the servers that do not cut failed: {bad[:3]}"
        if not LOG_INPUT:
            return
        assert cuts >= 1, "no cut stream of s2 seen in the log"
        consecutive = int(env.policy["breaker_consecutive"])
        probes = int(env.policy["half_open_probes"])
        # The breaker opens at the `consecutive`-th cut at the latest; the
        # other clients may have streams to s2 under way by then (at most
        # 31). Then s2 gets only half-open probes, at most `probes` a round,
        # none of which closes it: rounds start 2, 6, 14, 30 s after the
        # trip (the cooldown doubles).
        duration = t_end - t0
        rounds = sum(1 for k in range(1, 10) if 2.0 * (2 ** k - 1) < duration)
        # After the trip, only probes. The breaker has opened by the time a
        # client sees s2's `consecutive`-th cut (its log line follows within
        # milliseconds): requests to s2 started later than that (plus 0.2 s)
        # were decided with it open or half-open. (Counting by request index
        # instead let requests decided just before the trip, under way with
        # 32 clients, count as probes.) The rounds above assume the trip at
        # the start, so they are an upper bound.
        ends = sorted(r.t1 for r in recs if r.served == "s2")
        t_trip = ends[consecutive - 1] + 0.2 if len(ends) >= consecutive else t0
        first = sum(1 for r in recs if r.served == "s2" and r.t0 <= t_trip)
        late = [r.i for r in recs if r.served == "s2" and r.t0 > t_trip]
        log(f"[{ids}] s2 received {first} requests before its {consecutive}th cut "
            f"(+{t_trip - t0:.2f} s), {len(late)} after (half-open probes: at most {probes} "
            f"in each of {rounds} rounds)")
        bound = consecutive + 31 + probes * rounds
        assert got <= bound, \
            f"s2, which cuts every stream, received {got} requests (bound {bound})"
        assert len(late) <= probes * rounds, \
            f"s2 received {len(late)} requests after its {consecutive}th cut, more than " \
            f"{probes} probes in each of {rounds} half-open rounds"
        env.stop_agent_checked()


# --- slow server, headers before prefill -------------------------------------

def slow(binary, version):
    policy = {"score_by": "end_to_end", "cold_start_samples": 3}
    with LogEnv("slow", version, log_input=LOG_INPUT, policy=policy) as env:
        env.start(instances(header_mode="immediate", fast=False, base_ms=20.0,
                            prefill_ms_per_block=8.0, decode_ms_per_token=2.0), binary)
        # Warm-up: about 40 streamed answers per server, so that each has a
        # long-run end-to-end baseline before one of them turns slow.
        warm = fe.drive(env.port, lambda i: (fe.chat_body(short(i), max_tokens=8, stream=True),
                                             {"x-session-id": f"w{i}"}, "warm"),
                        n=120, concurrency=3)
        fe.assert_all_ok(warm, "warm-up")
        cl = fc.Client(f"http://127.0.0.1:{env.port}", model="m1", max_tokens=8,
                       timeout=15, stream=True)
        convs = [fc.Conversation(cl, session=f"slow-{version}-{i}", seed=11, index=i,
                                 system=None, context_chars=1500, question_chars=200)
                 for i in range(9)]

        def turns(n):
            out = []
            for _ in range(n):
                out.append([c.turn() for c in convs])
            return out
        before = turns(3)
        home = {c.session: before[-1][k].served_by for k, c in enumerate(convs)}
        by_server = {}
        for s, srv in home.items():
            by_server.setdefault(srv, []).append(s)
        victim = max(sorted(by_server), key=lambda s: len(by_server[s]))
        log(f"before: sessions per server {fe.fmt_counts({k: len(v) for k, v in by_server.items()})}; "
            f"{victim} turns 5x slower")
        ttfb = [r.ttfb_ms for row in before for r in row if r.ttfb_ms is not None]
        log(f"headers after {min(ttfb):.0f}-{max(ttfb):.0f} ms (sent before prefill)")
        env.fault(victim, mode="slow", factor=5)
        t_fault = time.monotonic()
        # Turns until the victim's sessions have left it for two turns in a
        # row: at most 12 turns, stopping early.
        after, n_victim, left_at = [], 0, None
        for t in range(12):
            row = [c.turn() for c in convs]
            after.append(row)
            on = [r for r in row if r.served_by == victim]
            n_victim += len(on)
            if on:
                left_at = None
            elif left_at is None:
                left_at = (t + 1, time.monotonic() - t_fault, n_victim)
            elif t + 1 - left_at[0] >= 1:
                break
        cl.close()
        bad = [r for row in before + after for r in row if not r.ok]
        assert not bad, f"failed turns: {[(r.status, r.error) for r in bad[:3]]}"
        log("turns after the fault, server:reason of each session: " +
            " | ".join(" ".join(f"{r.served_by or '-'}:{(r.reason or '-')[:3]}" for r in row)
                       for row in after))
        if left_at:
            log(f"5x-slow {victim} left after {left_at[2]} requests to it, "
                f"{left_at[0]} turns, {left_at[1]:.2f} s (log input {'on' if LOG_INPUT else 'off'})")
        else:
            log(f"5x-slow {victim} still served its sessions after {len(after)} turns "
                f"({n_victim} requests; log input {'on' if LOG_INPUT else 'off'})")
        if not LOG_INPUT:
            return
        m = env.metrics()
        for b in env.backends:
            e2e = fe.metric_sum(m, "warmlane_endpoint_e2e_ewma_seconds_per_kib", server=b.name,
                                kind="stream")
            hdr = fe.metric_sum(m, "warmlane_endpoint_ttfb_ewma_seconds", server=b.name,
                                kind="stream")
            log(f"{b.name}: headers EWMA {1000 * hdr:.1f} ms, end-to-end EWMA "
                f"{1000 * e2e:.1f} ms per KiB")
        assert left_at is not None and left_at[2] <= 30, \
            f"the sessions of the 5x-slow {victim} did not leave it for good within " \
            "30 requests to it"
        env.stop_agent_checked()


# --- in-flight at quiescence --------------------------------------------------

def quiesce(binary, version):
    # The runtime API is polled at start, then not for a minute: the counts
    # at the end come from decisions and log lines alone.
    with LogEnv("quiesce", version, log_input=LOG_INPUT, poll_interval="1m") as env:
        env.start(instances(header_mode="immediate", fast=False, base_ms=5.0,
                            prefill_ms_per_block=1.0, decode_ms_per_token=5.0), binary)
        env.fault("s3", mode="cut", ratio=0.3)
        lines0 = fe.metric_sum(env.metrics(), "warmlane_log_datagrams_total")

        def make(i):
            hd = {"x-session-id": f"q{i % 12}"} if i % 3 else {}
            return fe.chat_body(short(i), max_tokens=6, stream=i % 2 == 0), hd, "mixed"
        recs = fe.drive(env.port, make, n=120, concurrency=4)
        log(f"{len(recs)} requests: status {fe.fmt_counts(fe.by(recs, 'status'))}, "
            f"chosen {fe.fmt_counts(fe.by(recs, 'wserver'))}")
        rows = {}

        def quiet():
            st = env.show_stat()
            rows.update(st)
            return all(int(st[("llm", b.name)]["scur"] or 0) == 0 for b in env.backends)
        h.wait_until("HAProxy quiescent", quiet, timeout=10)
        if LOG_INPUT:
            env.wait_lines(lines0 + len(recs))
        else:
            time.sleep(0.5)
        m = env.metrics()
        agent = {b.name: fe.metric_sum(m, "warmlane_endpoint_in_flight", server=b.name)
                 for b in env.backends}
        scur = {b.name: int(rows[("llm", b.name)]["scur"] or 0) for b in env.backends}
        ends = {lb.get("end"): v for n, lb, v in m if n == "warmlane_log_completions_total"}
        log(f"at quiescence: agent in-flight {fe.fmt_counts(agent)}, HAProxy scur "
            f"{fe.fmt_counts(scur)}; log lines by end {fe.fmt_counts(ends)} "
            f"(log input {'on' if LOG_INPUT else 'off'})")
        if not LOG_INPUT:
            return
        lag_n = fe.metric_sum(m, "warmlane_log_lag_seconds_count")
        lag_s = fe.metric_sum(m, "warmlane_log_lag_seconds_sum")
        lag_5ms = fe.metric_sum(m, "warmlane_log_lag_seconds_bucket", le="0.005")
        log(f"log lag: {lag_n:.0f} lines, mean {1000 * lag_s / max(1, lag_n):.2f} ms, "
            f"{lag_5ms:.0f} within 5 ms (HAProxy's millisecond clock)")
        # Your own log (HAProxy's stderr here, `log global`): on 3.1+ the
        # log profile keeps it in httplog's format; before, one format
        # serves both targets.
        own = [x for x in env.log_text("haproxy").splitlines()
               if '"POST /v1/chat/completions HTTP/1.1"' in x]
        with_fields = sum(1 for x in own if " wsrv=" in x)
        profiles = tuple(int(x) for x in version.split(".")) >= (3, 1)
        log(f"HAProxy's own log: {len(own)} request lines, {with_fields} with warmlane's fields")
        assert own, "no request line in HAProxy's own log"
        assert with_fields == (0 if profiles else len(own)), \
            f"{with_fields} of {len(own)} lines of HAProxy's own log carry warmlane's fields"
        decided = fe.metric_sum(m, "warmlane_endpoint_decisions_total")
        assert decided >= len(recs) // 2, f"only {decided} requests decided by warmlane"
        assert sum(ends.values()) == decided, \
            f"{sum(ends.values())} log lines used for {decided} decided requests"
        for b in env.backends:
            assert agent[b.name] == scur[b.name], \
                f"{b.name}: agent in-flight {agent[b.name]:.0f}, HAProxy scur {scur[b.name]}"
        env.stop_agent_checked()


# --- malformed datagrams -------------------------------------------------------

def garbage_datagrams(n, seed=5):
    """n datagrams none of which is a usable line, of every kind of error."""
    rng = random.Random(seed)
    real = (b"<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - be=llm srv=s1 "
            b"st=200 ts=SD-- rc=0 tw=0 tc=0 tr=0 ta=21 tt=21 bytes=117")
    out = []
    for i in range(n):
        k = i % 6
        if k == 0:    # bad <PRI>
            d = b"<" + bytes([rng.choice(b"abc>")]) + rng.randbytes(rng.randrange(0, 300))
        elif k == 1:  # random text without a field name
            d = bytes(rng.choice(b"xyz \t\x00\xff[]\"") for _ in range(rng.randrange(1, 400)))
        elif k == 2:  # a real line cut before its termination state
            d = real[:rng.randrange(60, real.index(b" ts=") + 4)]
        elif k == 3:  # malformed required values
            d = real.replace(b"st=200", b"st=" + str(rng.randrange(1000, 10**6)).encode())
        elif k == 4:  # line ends only
            d = b"\n" * rng.randrange(0, 3)
        else:         # bigger than the read buffer, no field
            d = b"x" * rng.randrange(17000, 60000)
        out.append(d)
    return out


def garbage(binary, version):
    if not LOG_INPUT:
        raise h.Skip("garbage needs the log input")
    with LogEnv("garbage", version) as env:
        env.start(instances(), binary)
        m0 = env.metrics()
        bad0 = fe.metric_sum(m0, "warmlane_log_lines_total", result="unparseable")
        data = garbage_datagrams(1200)
        bg = fe.Background(env.port, lambda i: (fe.chat_body(short(i)),
                                                {"x-session-id": f"g{i % 20}"}, "g"),
                           concurrency=2, max_duration=20).start()
        t0 = time.monotonic()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.settimeout(5)
            s.connect(env.log_socket())
            for d in data:
                s.send(d)
        t_burst = time.monotonic() - t0
        recs = bg.stop()
        log(f"{len(data)} malformed datagrams in {t_burst:.2f} s beside {len(recs)} requests")
        fe.assert_all_ok(recs, "requests during the burst")
        fe.assert_core_reasons(recs, "requests during the burst")

        def counted():
            m = env.metrics()
            return fe.metric_sum(m, "warmlane_log_lines_total", result="unparseable") - bad0 \
                >= len(data)
        h.wait_until("the agent to count the burst", counted, timeout=10)
        after = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                              {"x-session-id": f"h{i}"}, "after"),
                         n=20, concurrency=2)
        fe.assert_all_ok(after, "requests after the burst")
        fe.assert_core_reasons(after, "requests after the burst")
        m = env.metrics()
        bad = fe.metric_sum(m, "warmlane_log_lines_total", result="unparseable") - bad0
        errs = {lb.get("error"): v for n, lb, v in m if n == "warmlane_log_unparseable_total"}
        shown = env.log_text("agent").count('msg="unparseable log line"')
        log(f"agent: {bad:.0f} unparseable ({fe.fmt_counts(errs)}), {shown} logged")
        assert bad == len(data), f"{bad:.0f} unparseable counted for {len(data)} sent"
        assert shown <= 5 * (1 + int((time.monotonic() - t0) / 10)), \
            f"{shown} unparseable lines logged: not rate-limited"
        env.stop_agent_checked()


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return -1


def forged(binary, version):
    if not LOG_INPUT:
        raise h.Skip("forged needs the log input")
    with LogEnv("forged", version) as env:
        env.start(instances(), binary)
        homed = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                              {"x-session-id": f"f{i}"}, "home"),
                         n=20, concurrency=1)
        fe.assert_all_ok(homed, "sessions before the forged lines")
        m0 = env.metrics()
        e0 = fe.metric_sum(m0, "warmlane_affinity_entries")
        p0 = fe.metric_sum(m0, "warmlane_log_lines_total", result="parsed")
        c0 = fe.metric_sum(m0, "warmlane_log_completions_total", end="complete")
        rss0 = rss_kib(env.agent.pid)
        rng = random.Random(15)
        n = 46000
        t0 = time.monotonic()
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as s:
            s.settimeout(5)  # blocking: a full queue waits for the agent, nothing is lost
            s.connect(env.log_socket())
            for i in range(n):
                srv = ("s1", "s2", "s3")[i % 3]
                s.send(b"<134>1 2026-11-29T10:21:44.552318+00:00 - haproxy 1 - - "
                       b"be=llm srv=%s st=200 ts=---- rc=0 tw=0 tc=0 tr=1 ta=40 tt=40 "
                       b"bytes=900 wbe=llm wsrv=%s key=k1 akey=%016x reason=hash fb=%d stream=0"
                       % (srv.encode(), srv.encode(), rng.getrandbits(64), i & 1))
        t_send = time.monotonic() - t0

        def parsed():
            m = env.metrics()
            return fe.metric_sum(m, "warmlane_log_lines_total", result="parsed") - p0 >= n
        h.wait_until(f"the agent to parse {n} forged lines", parsed, timeout=60)
        m = env.metrics()
        e1 = fe.metric_sum(m, "warmlane_affinity_entries")
        used = fe.metric_sum(m, "warmlane_log_completions_total", end="complete") - c0
        rss1 = rss_kib(env.agent.pid)
        log(f"{n} forged lines in {t_send:.1f} s, {used:.0f} completions; affinity entries {e0:.0f} -> {e1:.0f}; "
            f"agent RSS {rss0} -> {rss1} KiB ({(rss1 - rss0) / 1024:+.1f} MiB; an ASan build)")
        # every forged line reached the core (on warmlane's endpoint), not
        # ignored as unrouted or unknown: else this would prove nothing
        assert used >= n, f"{used:.0f} of the {n} forged lines counted as completions"
        assert e1 == e0, f"forged log lines changed the affinity map: {e0:.0f} -> {e1:.0f} entries"
        again = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                              {"x-session-id": f"f{i}"}, "again"),
                         n=20, concurrency=1)
        fe.assert_all_ok(again, "sessions after the forged lines")
        moved = [(a, b) for a, b in zip(homed, again)
                 if b.reason != "affinity" or b.wserver != a.wserver]
        assert not moved, f"sessions not warm where they were after the forged lines: {moved}"


# --- lines not in warmlane's format ---------------------------------------------

def noformat(binary, version):
    """HAProxy 3.1+ with warmlane's log profile but no `option httplog` (the
    README's snippet before issue 16, now in docs/haproxy.md): HAProxy sends `Connect from` lines
    only. The agent says so once, with a sample, and its gauge shows it."""
    if tuple(int(x) for x in version.split(".")) < (3, 1):
        raise h.Skip("log profiles are 3.1+")
    if not LOG_INPUT:
        raise h.Skip("noformat needs the log input")
    with LogEnv("noformat", version, httplog=False) as env:
        env.start(instances(), binary)
        recs = fe.drive(env.port, lambda i: (fe.chat_body(short(i)),
                                             {"x-session-id": f"n{i}"}, "n"),
                        n=80, concurrency=2)
        fe.assert_all_ok(recs, "requests (warmlane routes without the log input)")
        env.wait_lines(len(recs))
        m = env.metrics()
        got = fe.metric_sum(m, "warmlane_log_datagrams_total")
        bad = fe.metric_sum(m, "warmlane_log_lines_total", result="unparseable")
        ok = fe.metric_sum(m, "warmlane_log_input_format_ok")
        ratio = fe.metric_sum(m, "warmlane_log_input_unparsed_ratio")
        text = env.log_text("agent")
        said = [x for x in text.splitlines() if "not in warmlane's format" in x]
        log(f"{len(recs)} requests: {got:.0f} datagrams, {bad:.0f} unparseable; "
            f"warmlane_log_input_format_ok {ok:.0f}, unparsed_ratio {ratio:.2f}; "
            f"said {len(said)} time(s): {said[0][:400] if said else '-'}")
        assert got >= len(recs) and bad == got, f"{bad:.0f} of {got:.0f} unparseable"
        assert any(n == "warmlane_log_input_format_ok" for n, _, _ in m), \
            "no warmlane_log_input_format_ok gauge"
        assert ok == 0, "warmlane_log_input_format_ok is not 0"
        assert ratio == 1.0, f"unparsed ratio {ratio}"
        assert len(said) == 1, f"the format warning was logged {len(said)} times"
        assert "Connect from" in said[0] and "sample=" in said[0], \
            "the warning carries no sample of the lines"
        env.stop_agent_checked()


SCENARIOS = {"refuse": refuse, "cut": cut, "slow": slow, "quiesce": quiesce,
             "garbage": garbage, "forged": forged,
             "cutmid-new": lambda b, v: cutmid(b, v, "new"),
             "cutmid-anon": lambda b, v: cutmid(b, v, "anon"),
             "cutmid-long": lambda b, v: cutmid(b, v, "long"),
             "noformat": noformat}

if __name__ == "__main__":
    if "--no-log-input" in sys.argv:
        sys.argv.remove("--no-log-input")
    sys.exit(h.main(SCENARIOS))
