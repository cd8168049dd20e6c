#!/usr/bin/env python3
"""warmlane's retry budget end to end: real HAProxy, the agent, the fake fleet.

Usage: retry.py 2.6|3.0|3.2 SCENARIO
Scenarios:
  storm     every server of the pool answers 503. With the budget
            (retry_budget defaults: ratio 0.2, 1/s over 10 s) the upstream
            attempts stay within (1 + ratio) x client requests + the floor
            (plus what requests already under way when the budget ran out
            may still retry); then the same with retry_budget.enabled
            false, where each request costs the example config's retries
            (HAProxy's `retries 2`). Both figures printed.
  rescue    one server of four answers 503, for 7 s (the breaker's
            half-open probes included): HAProxy's retries still serve every
            client (no client-visible error with the budget on), the same
            traffic with the budget off for comparison.
Both run the example config's `retry-on conn-failure empty-response 503`
and `http-request disable-l7-retry if { var(txn.warmlane.noretry) -m found }`
with the log input on (the budget needs it).

Exit status: 0 pass, 1 fail, 77 skip. Every loop is bounded in count and
time; the processes started here are stopped at the end.
"""

import math
import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402
from logs import LogEnv  # noqa: E402

log = h.log

RATIO = 0.2
FLOOR_PER_S = 1.0
WINDOW_S = 10.0
CLIENTS = 4


def instances(n=4, base_ms=0.0):
    return [fe.instance(f"s{i}", header_mode="immediate", admin_port=0, base_ms=base_ms)
            for i in range(1, n + 1)]


def upstream_requests(env):
    return sum(s["requests"] for s in env.fleet_stats().values())


def example_retries(env):
    """`retries N` of the example config's llm backend."""
    with open(env.haproxy_config_path) as f:
        text = f.read()
    backend = text[text.index("\nbackend llm\n"):]
    backend = backend[:backend.index("\nbackend ", 1)]
    for line in backend.splitlines():
        w = line.split()
        if len(w) == 2 and w[0] == "retries":
            return int(w[1])
    raise AssertionError("the example config's llm backend has no `retries`")


def run(binary, version, budget, faulty, n, tag, duration=None, base_ms=0.0):
    """n requests, or as many as `duration` seconds allow (a new session
    each, CLIENTS at a time) with the servers in `faulty` answering 503.
    Returns (records, upstream attempts, seconds, the agent's metrics, the
    config's retries)."""
    with LogEnv(f"retry-{tag}", version) as env:
        env.agent_extra = [
            f"retry_budget: {{ enabled: {'true' if budget else 'false'}, "
            f"ratio: {RATIO}, min_per_second: {FLOOR_PER_S}, window: {int(WINDOW_S)}s }}"]
        env.start(instances(base_ms=base_ms), binary)
        env.haproxy_config_path = env.path("haproxy.cfg")
        for s in faulty:
            env.fault(s, mode="503")
        before = upstream_requests(env)
        lines0 = fe.metric_sum(env.metrics(), "warmlane_log_datagrams_total")
        t0 = time.monotonic()
        recs = fe.drive(env.port, lambda i: (fe.chat_body(f"retry {tag} {i}"),
                                             {"x-session-id": f"{tag}{i}"}, tag),
                        n=n, duration=duration, concurrency=CLIENTS)
        secs = time.monotonic() - t0
        env.wait_lines(lines0 + len(recs))
        attempts = upstream_requests(env) - before
        m = env.metrics()
        retries = example_retries(env)
        env.stop_agent_checked()
    return recs, attempts, secs, m, retries


def budget_figures(m):
    return (f"warmlane_retries_total {fe.metric_sum(m, 'warmlane_retries_total', backend='llm'):.0f}, "
            f"warmlane_noretry_total {fe.metric_sum(m, 'warmlane_noretry_total', backend='llm'):.0f}, "
            f"warmlane_retry_budget_spent {fe.metric_sum(m, 'warmlane_retry_budget_spent', backend='llm'):.2f}, "
            f"active {fe.metric_sum(m, 'warmlane_retry_budget_active'):.0f}")


def storm(binary, version):
    n = 400
    servers = ["s1", "s2", "s3", "s4"]
    recs, att, secs, m, retries = run(binary, version, True, servers, n, "on")
    statuses = fe.by(recs, "status")
    # Over the run, ceil(secs / window) windows each allow the floor; in
    # each, the requests already under way when the budget ran out (at
    # most one per client: their lines had not arrived) may still take
    # every retry of the config.
    windows = math.ceil(secs / WINDOW_S)
    floor = FLOOR_PER_S * WINDOW_S * windows
    slack = CLIENTS * retries * windows
    bound = (1 + RATIO) * n + floor + slack
    log(f"budget on: {n} client requests in {secs:.2f} s -> {att} upstream attempts "
        f"({att / n:.3f} per request); bound (1 + {RATIO}) x {n} + floor {floor:.0f} "
        f"+ in flight {slack} = {bound:.0f}; client statuses {fe.fmt_counts(statuses)}; "
        + budget_figures(m))
    recs_off, att_off, secs_off, m_off, _ = run(binary, version, False, servers, n, "off")
    log(f"budget off: {n} client requests in {secs_off:.2f} s -> {att_off} upstream attempts "
        f"({att_off / n:.3f} per request; `retries {retries}`); "
        f"client statuses {fe.fmt_counts(fe.by(recs_off, 'status'))}; " + budget_figures(m_off))
    assert all(r.status == 503 for r in recs), f"not all 503: {fe.fmt_counts(statuses)}"
    assert fe.metric_sum(m, "warmlane_retry_budget_active") == 1, "the budget is not active"
    assert fe.metric_sum(m, "warmlane_noretry_total", backend="llm") > 0, \
        "no request was marked noretry"
    assert att <= bound, f"{att} upstream attempts with the budget, over {bound:.0f}"
    # Without the budget every request takes the config's retries: the
    # comparison is only meaningful if HAProxy does retry them.
    assert att_off >= 1.5 * n, f"without the budget only {att_off} attempts for {n} requests"
    assert att < att_off, "the budget changed nothing"
    seen_off = fe.metric_sum(m_off, "warmlane_retries_total", backend="llm")
    assert seen_off == att_off - n, \
        f"budget off: {seen_off:.0f} retries seen in the log, {att_off - n} made"


def rescue(binary, version):
    # 7 s at about 150 requests a second: past the breaker's first cooldowns
    # (2 s, then 4 s), so that s3 also gets its half-open probes, each
    # answered 503 and retried elsewhere.
    dur = 7.0
    recs, att, secs, m, retries = run(binary, version, True, ["s3"], None, "on",
                                      duration=dur, base_ms=20.0)
    n = len(recs)
    errors = [r for r in recs if r.status != 200]
    log(f"budget on, s3 of 4 answering 503: {n} requests in {secs:.2f} s, {att} upstream "
        f"attempts, client statuses {fe.fmt_counts(fe.by(recs, 'status'))}; " + budget_figures(m))
    recs_off, att_off, secs_off, m_off, _ = run(binary, version, False, ["s3"], None, "off",
                                                duration=dur, base_ms=20.0)
    errors_off = [r for r in recs_off if r.status != 200]
    log(f"budget off: {len(recs_off)} requests in {secs_off:.2f} s, {att_off} upstream attempts, "
        f"client statuses {fe.fmt_counts(fe.by(recs_off, 'status'))}; " + budget_figures(m_off))
    assert n >= 200, f"only {n} requests in {dur} s"
    assert not errors, f"{len(errors)} client-visible errors with the budget on: {errors[:5]}"
    assert not errors_off, f"{len(errors_off)} client-visible errors with the budget off"
    assert fe.metric_sum(m, "warmlane_retries_total", backend="llm") > 0, \
        "no retry seen: s3 was never tried"


SCENARIOS = {"storm": storm, "rescue": rescue}

if __name__ == "__main__":
    sys.exit(h.main(SCENARIOS))
