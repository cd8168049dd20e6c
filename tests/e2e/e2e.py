#!/usr/bin/env python3
"""warmlane end-to-end scenarios with real HAProxy.

Usage: e2e.py 2.6|3.0|3.2 route|failopen|chroot
Exit status: 0 pass, 1 fail, 77 skip (no such HAProxy binary, no agent).
"""

import os
import signal
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402

BIG = ('{"model":"m1","stream":false,"messages":[{"role":"user","content":"'
       + "lorem ipsum " * 900 + '"}]}').encode()


def check_routed(status, hdr, what):
    """The request was served by the server warmlane chose."""
    assert status == 200, f"{what}: status {status}"
    reason = hdr.get("x-warmlane-reason", "")
    server = hdr.get("x-warmlane-server", "")
    served = hdr.get("x-served-by", "")
    assert reason in h.KNOWN_REASONS, f"{what}: reason {reason!r} (headers {hdr})"
    assert hdr.get("x-warmlane-backend") == "llm", f"{what}: backend {hdr}"
    assert server == served, f"{what}: warmlane chose {server!r}, {served!r} answered"
    return reason, server


def route(binary, version):
    """(a) The server that answers is the one the agent chose."""
    with h.Env("route", version) as env:
        env.start_backends()
        env.start_agent()
        env.start_haproxy(binary)
        env.wait_backends_up()
        env.wait_agent(up=True)
        cases = [
            ("no identity", None, {}),
            ("session a", None, {"x-session-id": "a"}),
            ("session a", None, {"x-session-id": "a"}),
            ("session b", None, {"x-session-id": "b"}),
            ("caller key", None, {"authorization": "Bearer client-1"}),
            ("x-model", None, {"x-model": "m1"}),
            ("long prompt", BIG, {}),
            ("long prompt", BIG, {"x-session-id": "c"}),
            ("no identity", None, {}),
        ]
        h.log(f"{'request':<14} {'server':<8} {'reason':<10} answered by")
        seen = set()
        for what, body, hdrs in cases:
            status, hdr, _dt = env.request(body=body, headers=hdrs)
            reason, server = check_routed(status, hdr, what)
            seen.add(server)
            h.log(f"{what:<14} {server:<8} {reason:<10} {hdr.get('x-served-by')}")
        # 3.0+: the feedback exchange ran: warmlane answered it with `ack`.
        # 2.6: haproxy-2.6.cfg sends no feedback exchange (a response-side
        # SPOE exchange can hang there while the agent is away); the log
        # line is the feedback (tests/e2e/outage.py, logs.py)
        status, hdr, _ = env.request(headers={"x-session-id": "a"})
        check_routed(status, hdr, "feedback")
        if version == "2.6":
            assert not hdr.get("x-warmlane-ack"), f"2.6: a feedback exchange ran: {hdr}"
            h.log("feedback: none over SPOE on 2.6 (the log line carries it)")
        else:
            assert hdr.get("x-warmlane-ack"), f"no ack to the feedback: {hdr}"
            h.log(f"feedback: acknowledged (ack={hdr['x-warmlane-ack']})")
        # the agent's answer carries the key id k1 (its only key): HAProxy
        # replaced Authorization from the key map
        status, hdr, _ = env.request(headers={"authorization": "Bearer client-1"})
        check_routed(status, hdr, "key map")
        if hdr.get("x-warmlane-key"):
            assert hdr["x-warmlane-key"] == "k1", hdr
            assert hdr.get("x-seen-authorization") == "Bearer upstream-secret-1", hdr
            h.log("key map: key k1 -> the upstream credential reached the server")
        assert env.agent.poll() is None, "the agent died"
        rc = env.stop_process(env.agent)
        assert rc == 0, f"the agent exited with {rc} on SIGTERM"


def failopen(binary, version):
    """(b) With the agent killed every request still succeeds, without delay."""
    n = 40
    with h.Env("failopen", version) as env:
        env.start_backends()
        env.start_agent()
        env.start_haproxy(binary)
        env.wait_backends_up()
        env.wait_agent(up=True)
        for _ in range(5):  # warm up connections
            env.request()
        up = []
        for _ in range(n):
            status, hdr, dt = env.request(headers={"x-session-id": "s"})
            check_routed(status, hdr, "agent up")
            up.append(dt)

        env.kill(env.agent, signal.SIGKILL)
        t_kill = time.monotonic()
        # until HAProxy's check marks the agent down, requests may each wait
        # `timeout processing`; none may fail
        window = []
        deadline = t_kill + 10
        while time.monotonic() < deadline and len(window) < 2000:
            status, hdr, dt = env.request(headers={"x-session-id": "s"})
            assert status == 200, f"status {status} right after the agent died"
            window.append(dt)
            if env.server_status("warmlane-agents", "agent1").startswith("DOWN"):
                break
        env.wait_agent(up=False, timeout=10)
        t_down = time.monotonic() - t_kill

        # With the agent DOWN the nbsrv guard skips the SPOE exchange: no
        # connection is even tried (3.x without the guard tries one per
        # request, each failing: stot and econ of the agent backend grow;
        # 2.6 makes none to a DOWN server either way).
        agents_before = env.show_stat()[("warmlane-agents", "BACKEND")]
        down = []
        served = set()
        for _ in range(n):
            status, hdr, dt = env.request(headers={"x-session-id": "s"})
            assert status == 200, f"status {status} with the agent down"
            assert not hdr.get("x-warmlane-reason"), f"a reason without agent: {hdr}"
            served.add(hdr.get("x-served-by"))
            down.append(dt)
        agents_after = env.show_stat()[("warmlane-agents", "BACKEND")]
        m_up, m_down = h.median_ms(up), h.median_ms(down)
        h.log(f"HAProxy {version}: median latency over {n} requests: "
              f"agent up {m_up:.2f} ms, agent killed {m_down:.2f} ms, slowest "
              f"{max(down) * 1000:.1f} ms")
        h.log(f"HAProxy {version}: agent marked DOWN {t_down:.2f} s after SIGKILL; "
              f"{len(window)} requests in between, slowest {max(window) * 1000:.1f} ms")
        h.log(f"HAProxy {version}: with the agent down, served by {sorted(served)}")
        for k in ("stot", "econ"):
            assert agents_after[k] == agents_before[k], \
                f"warmlane-agents {k} went from {agents_before[k]} to {agents_after[k]} " \
                f"over {n} requests with the agent DOWN: HAProxy still tried the agent"


def chroot(binary, version):
    """(c) A chrooted HAProxy (Debian's stock setup) reaches the agent."""
    if os.geteuid() != 0:
        raise h.Skip("chroot needs root")
    with h.Env("chroot", version, chroot=True) as env:
        env.start_backends()
        env.start_agent()
        env.start_haproxy(binary)
        env.wait_backends_up()
        env.wait_agent(up=True)
        for i in range(4):
            status, hdr, _ = env.request(headers={"x-session-id": f"c{i}"})
            reason, server = check_routed(status, hdr, "chrooted")
            h.log(f"chrooted HAProxy {version}: {server} ({reason})")


if __name__ == "__main__":
    sys.exit(h.main({"route": route, "failopen": failopen, "chroot": chroot}))
