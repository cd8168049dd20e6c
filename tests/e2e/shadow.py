#!/usr/bin/env python3
"""warmlane's shadow mode (policy.mode shadow, docs/shadow.md) with real HAProxy and the fake fleet.

Usage: shadow.py 2.6|3.0|3.2 shadow

One scenario, three phases, each of concurrent conversations (one request
at a time per conversation, a think time between turns):
  1. shadow: HAProxy balances on its own (leastconn), so conversations
     spread over the servers; warmlane answers only shadow_server and
     shadow_reason. /metrics must count every response once, by reason and
     match, exactly as the responses' own headers tell it (the server that
     answered, x-served-by, against warmlane's shadow choice), report warm
     entries HAProxy left (the would-have-kept-warm count > 0), and every
     affinity answer must name the server the conversation's previous turn
     really went to (the map learns what HAProxy did, not what warmlane
     would have done).
  2. SIGHUP to policy.mode route: warmlane routes (every response from the
     server it named) and the shadow counters stand still.
  3. SIGHUP back to shadow: no routing variable again, responses compared.
Exit status: 0 pass, 1 fail, 77 skip. Assertions are counts; the cache hit
rates of phases 1 and 2 are printed, never asserted.
"""

import concurrent.futures as cf
import os
import signal
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402

sys.path.insert(0, fe.FLEET_DIR)
import client as fc  # noqa: E402  (tests/fleet/client.py)

log = h.log

SERVERS = ("s1", "s2", "s3", "s4")
MATCHES = ("yes", "no", "none")


class ShadowEnv(fe.FleetEnv):
    """FleetEnv whose responses also carry warmlane's shadow variables
    (test only, as harness.py adds x-warmlane-server)."""

    def haproxy_config(self, test_headers=True):
        path = super().haproxy_config(test_headers=test_headers)
        with open(path) as f:
            text = f.read()
        line = "    http-response set-header x-warmlane-server %[var(txn.warmlane.server)]\n"
        if line not in text:
            raise AssertionError("harness.py changed: no x-warmlane-server header line")
        text = text.replace(line, line +
                            "    http-response set-header x-warmlane-shadow-server "
                            "%[var(txn.warmlane.shadow_server)]\n"
                            "    http-response set-header x-warmlane-shadow-reason "
                            "%[var(txn.warmlane.shadow_reason)]\n", 1)
        with open(path, "w") as f:
            f.write(text)
        return path


def metrics(env):
    text, _ = env.metrics_text()
    return fe.parse_metrics(text)


def shadow_counts(samples):
    """{(reason, match): n} of warmlane_shadow_responses_total."""
    return {(lb["reason"], lb["match"]): v for n, lb, v in samples
            if n == "warmlane_shadow_responses_total" and v}


def run_conversations(env, n, turns, tag, pace=0.3):
    """n concurrent conversations of `turns` turns; returns one list of
    fc.Result per conversation, in turn order."""
    cl = fc.Client(f"http://127.0.0.1:{env.port}", model="m1", max_tokens=8, timeout=15)
    convs = [fc.Conversation(cl, session=f"{tag}-{env.version}-{i}", seed=11, index=i,
                             system=None, context_chars=1500, question_chars=300)
             for i in range(n)]

    def run(k):
        out = []
        for _ in range(turns):
            out.append(convs[k].turn())
            time.sleep(pace)
        return out
    with cf.ThreadPoolExecutor(n) as ex:
        results = list(ex.map(run, range(n), timeout=90))
    cl.close()
    for rs in results:
        bad = [(r.turn, r.status, r.error) for r in rs if r.status != 200]
        assert not bad, f"{tag}: failed turns {bad}"
    return results


def fell_open(r):
    """No answer from warmlane within `timeout processing` (a loaded
    machine): HAProxy balanced the request without one, in either mode."""
    return not r.headers.get("x-warmlane-shadow-reason") and \
        not r.headers.get("x-warmlane-reason")


def check_fell_open(results, what):
    """Fell-open requests are counted and bounded (a tenth), not failed:
    the test is about what the answers say, not about their latency."""
    n = sum(len(rs) for rs in results)
    fell = sum(fell_open(r) for rs in results for r in rs)
    if fell:
        log(f"{what}: {fell} of {n} requests fell open (no answer within timeout processing)")
    assert fell <= n // 10, f"{what}: {fell} of {n} requests fell open"
    return fell


def expected_from_headers(results):
    """What /metrics must say, from the responses alone: (reason, match)
    counts, warm (affinity answers) and warm_missed (affinity answers
    HAProxy served elsewhere)."""
    want, warm, missed = {}, 0, 0
    for rs in results:
        for r in rs:
            sh = r.headers.get("x-warmlane-shadow-server") or ""
            reason = r.headers.get("x-warmlane-shadow-reason")
            if fell_open(r):
                continue  # HAProxy had no answer in time: nothing compared
            assert reason in fe.CORE_REASONS, \
                f"turn {r.turn} of {r.session}: shadow reason {reason!r}"
            m = "none" if not sh else "yes" if sh == f"llm/{r.served_by}" else "no"
            want[(reason, m)] = want.get((reason, m), 0) + 1
            if reason == "affinity" and m != "none":
                warm += 1
                missed += m == "no"
    return want, warm, missed


def fleet_blocks(env):
    stats = env.fleet_stats()
    return (sum(s["cache_hit_blocks"] for s in stats.values()),
            sum(s["prompt_blocks"] for s in stats.values()))


def reload_mode(env, mode, n_reloads):
    env.policy["mode"] = mode
    env.agent_cfg = None
    env.write_agent_config()
    os.kill(env.agent.pid, signal.SIGHUP)
    h.wait_until(f"reload {n_reloads} to {mode}", lambda: env.log_text("agent").count(
        'msg="configuration reloaded"') >= n_reloads, timeout=10)
    last = [ln for ln in env.log_text("agent").splitlines()
            if 'msg="configuration reloaded"' in ln][-1]
    assert f"mode={mode}" in last, f"reload to {mode}: {last}"
    want = 1 if mode == "shadow" else 0
    h.wait_until(f"warmlane_shadow_mode {want}", lambda: fe.metric_sum(
        metrics(env), "warmlane_shadow_mode") == want, timeout=5)


def shadow(binary, version):
    with ShadowEnv("shadow", version, policy={"mode": "shadow"}) as env:
        env.start([fe.instance(n, fast=False) for n in SERVERS], binary)
        assert fe.metric_sum(metrics(env), "warmlane_shadow_mode") == 1

        # --- 1. shadow: HAProxy balances, warmlane only compares ----------
        b0 = fleet_blocks(env)
        convs, turns = 6, 6
        res = run_conversations(env, convs, turns, "shadow")
        b1 = fleet_blocks(env)
        n = convs * turns - check_fell_open(res, "shadow")
        spread = 0
        affinity_turns = 0
        for rs in res:
            servers = {r.served_by for r in rs}
            spread += len(servers) > 1
            for r in rs:
                if fell_open(r):
                    continue
                assert not r.headers.get("x-warmlane-server") and \
                    not r.headers.get("x-warmlane-backend") and \
                    not r.headers.get("x-warmlane-key") and \
                    not r.headers.get("x-warmlane-reason"), \
                    f"{r.session} turn {r.turn}: a routing variable in shadow mode " \
                    f"({r.headers.get('x-warmlane-server')!r})"
                assert r.headers.get("x-warmlane-shadow-server"), \
                    f"{r.session} turn {r.turn}: no shadow_server"
            # what the map learned: the previous turn's real server
            for prev, r in zip(rs, rs[1:]):
                if r.headers.get("x-warmlane-shadow-reason") == "affinity":
                    affinity_turns += 1
                    assert r.headers["x-warmlane-shadow-server"] == f"llm/{prev.served_by}", \
                        f"{r.session} turn {r.turn}: affinity names " \
                        f"{r.headers['x-warmlane-shadow-server']}, the previous turn " \
                        f"went to {prev.served_by}"
            log(f"{rs[0].session:<16} served " + " ".join(
                f"{r.served_by}({r.headers.get('x-warmlane-shadow-reason')}:"
                f"{r.headers.get('x-warmlane-shadow-server', '-').split('/')[-1]})"
                for r in rs))
        want, warm, missed = expected_from_headers(res)
        # every response counted once: feedback (3.x) or log line (2.6)
        h.wait_until(f"{n} shadow responses in /metrics", lambda: sum(
            shadow_counts(metrics(env)).values()) >= n, timeout=10)
        s = metrics(env)
        got = shadow_counts(s)
        got_warm = fe.metric_sum(s, "warmlane_shadow_warm_total")
        got_missed = fe.metric_sum(s, "warmlane_shadow_warm_missed_total")
        log(f"shadow: {n} requests, {spread} of {convs} conversations on more than one "
            f"server; fleet cache hits {b1[0] - b0[0]}/{b1[1] - b0[1]} blocks "
            f"({100 * (b1[0] - b0[0]) / max(1, b1[1] - b0[1]):.0f}%)")
        log("from the headers: " + ", ".join(f"{k[0]}/{k[1]} {v}" for k, v in sorted(want.items()))
            + f"; warm {warm}, missed {missed}")
        log("from /metrics:    " + ", ".join(f"{k[0]}/{k[1]} {v:.0f}" for k, v in sorted(got.items()))
            + f"; warm {got_warm:.0f}, missed {got_missed:.0f}")
        yes = sum(v for k, v in want.items() if k[1] == "yes")
        log(f"match rate {100 * yes / n:.0f}% ({yes}/{n}); would have kept warm "
            f"{missed} of {warm} warm requests; answers counted once of two "
            f"(a late feedback ACK): {fe.metric_sum(s, 'warmlane_shadow_duplicates_total'):.0f}")
        assert spread >= convs // 2, \
            f"only {spread} of {convs} conversations spread: HAProxy's leastconn should " \
            "spread them in shadow mode"
        assert got == {k: float(v) for k, v in want.items()}, \
            f"/metrics {got} != the responses' {want}"
        assert got_warm == warm and got_missed == missed, \
            f"warm {got_warm}/{got_missed} in /metrics, {warm}/{missed} in the responses"
        assert affinity_turns > 0, "no affinity answer in shadow mode: the map learned nothing"
        assert missed > 0, "no warm request sent elsewhere by leastconn: nothing to report"
        assert fe.metric_sum(s, "warmlane_shadow_bad_reason_total") == 0

        # --- 2. reload to route: warmlane routes --------------------------
        reload_mode(env, "route", 1)
        before = sum(shadow_counts(metrics(env)).values())
        res = run_conversations(env, convs, 4, "route")
        check_fell_open(res, "route")
        b2 = fleet_blocks(env)
        moved = 0
        for rs in res:
            moved += len({r.served_by for r in rs}) > 1
            for r in rs:
                if fell_open(r):
                    continue
                assert r.warmlane_server == r.served_by, \
                    f"route mode: warmlane chose {r.warmlane_server}, {r.served_by} answered"
                assert not r.headers.get("x-warmlane-shadow-server")
        # every log line of the phase read (on 2.6 they are the answers
        # that would be compared): one per request so far
        total = n + convs * 4
        h.wait_until(f"{total} log lines", lambda: fe.metric_sum(
            metrics(env), "warmlane_log_lines_total", result="parsed") >= total, timeout=10)
        after = sum(shadow_counts(metrics(env)).values())
        log(f"route after the reload: {convs * 4} requests, {moved} of {convs} conversations "
            f"moved; fleet cache hits {b2[0] - b1[0]}/{b2[1] - b1[1]} blocks "
            f"({100 * (b2[0] - b1[0]) / max(1, b2[1] - b1[1]):.0f}%)")
        assert after == before, f"shadow counters moved in route mode: {before} -> {after}"

        # --- 3. back to shadow ---------------------------------------------
        reload_mode(env, "shadow", 2)
        res = run_conversations(env, 3, 3, "again", pace=0.1)
        fell = check_fell_open(res, "shadow again")
        for rs in res:
            for r in rs:
                assert not r.headers.get("x-warmlane-server"), "routing again after the reload"
                assert fell_open(r) or r.headers.get("x-warmlane-shadow-server")
        h.wait_until("the new shadow responses", lambda: sum(
            shadow_counts(metrics(env)).values()) >= after + 9 - fell, timeout=10)
        env.stop_agent_checked()


SCENARIOS = {"shadow": shadow}

if __name__ == "__main__":
    sys.exit(h.main(SCENARIOS))
