#!/usr/bin/env python3
"""The command socket through real HAProxy traffic: warmlanectl against the agent the requests go through.

Usage: ctl.py 2.6|3.0|3.2 [ctl|spill|slots]
ctl (the default, in CI):
A session's first request is placed by the hash; once its success is known
(feedback on 3.x, the log line on 2.6) `show affinity` shows the entry on
the server that answered, `explain` predicts the warm hit the next request
gets, and explaining changes nothing (`show endpoints` before and after);
`set endpoint ... drain` moves the session where explain says, `ready`
and `clear affinity` undo it; a server's maxconn set on HAProxy's admin
socket shows as its slots.
slots (in CI): policy.place_slots, a new key off its first choice whose
one slot (HAProxy's maxconn 1) is busy, explained and then routed so.
spill (by hand, not in CI: it depends on how many requests are in flight
when explain looks): s3 ten times slower than s1 and s2 (left on its
end-to-end time per KiB), ten long requests in flight, load_factor 1.0;
explain for fresh sessions until one spills, printed (docs/ctl.md).
Exit 0 pass, 1 fail, 77 skip.
Waits are bounded conditions, never sleeps; nothing is timed.
"""

import json
import os
import re
import subprocess
import sys
import threading

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402

log = h.log
SESSION = "conv-ctl"


def name(server):
    """An endpoint as the answers write it: llm/SERVER, then [KEY] when it
    has one (the fleet's endpoints do)."""
    return r"llm/" + re.escape(server) + r"(\[[^\]]*\])?"


def scenario(binary, version):
    ctl = h.ctl_binary()
    with fe.FleetEnv("ctl", version) as env:
        sock = env.path("ctl.sock")
        env.agent_extra.append(f'command_socket: {{ path: "{sock}", mode: "0600" }}')
        env.start([fe.instance(n) for n in ("s1", "s2", "s3")], binary)

        def run(*words, ok=True):
            p = subprocess.run([ctl, "-s", sock] + list(words), capture_output=True,
                               text=True, timeout=15)
            if ok:
                assert p.returncode == 0, f"warmlanectl {' '.join(words)}: {p.returncode} {p.stdout}{p.stderr}"
            return p.stdout

        cl = fe.Client(env.port)
        hdrs = {"x-session-id": SESSION}

        def post(i):
            r = cl.post(fe.chat_body(f"hello {i}"), hdrs, i=i, tag="ctl")
            assert r.status == 200, f"request {i}: {r}"
            return r

        def entry_on(server):
            last = [""]

            def cond():
                last[0] = run("show", "affinity", f"session={SESSION}")
                return re.search(r"^endpoint: " + name(server) + "$", last[0], re.M)
            try:
                h.wait_until(f"the entry of {SESSION} on {server}", cond)
            except AssertionError as e:
                raise AssertionError(f"{e}; show affinity said:\n{last[0]}") from None

        r1 = post(1)
        log(f"first request: served by {r1.served}, reason {r1.reason}")
        entry_on(r1.served)
        out = run("show", "affinity", f"session={SESSION}")
        log(out.rstrip())

        before = json.loads(run("show", "endpoints", "-json"))
        for _ in range(5):
            out = run("explain", f"session={SESSION}", "model=m1")
        after = json.loads(run("show", "endpoints", "-json"))
        log(out.rstrip())
        assert "warm hit" in out and \
            re.search(r"^decision: " + name(r1.served) + " reason=affinity$", out, re.M), out
        for a, b in zip(before["endpoints"], after["endpoints"]):
            for k in ("in_flight", "decisions", "breaker", "samples", "view"):
                assert a[k] == b[k], f"explain changed {a['server']}'s {k}: {a[k]} -> {b[k]}"

        r2 = post(2)
        assert (r2.served, r2.reason) == (r1.served, "affinity"), f"explain said affinity on {r1.served}: {r2}"

        # HAProxy's maxconn is a server's slots (policy.place_slots): set
        # on the admin socket, the runtime API's next poll brings it
        env.admin("set maxconn server llm/s2 3")
        slots = {}

        def maxconn_seen():
            slots.update({e["server"]: e["slots"]
                          for e in json.loads(run("show", "endpoints", "-json"))["endpoints"]})
            return slots.get("s2") == 3
        h.wait_until("s2's maxconn 3 as its slots", maxconn_seen)
        assert slots["s1"] == 0 and slots["s3"] == 0, slots
        log(f"slots from HAProxy's maxconn: {slots}")

        assert run("set", "endpoint", f"llm/{r1.served}", "drain") == \
            f"llm/{r1.served}: drain (1 endpoint)\n\n"
        out = run("explain", f"session={SESSION}", "model=m1")
        log(out.rstrip())
        assert re.search(name(r1.served) + " excluded: drained ", out), out
        predicted = re.search(r"^decision: llm/([^ \[]+)", out, re.M).group(1)
        r3 = post(3)
        assert r3.served == predicted != r1.served, f"drained {r1.served}, explain said {predicted}: {r3}"
        ep = {e["server"]: e for e in json.loads(run("show", "endpoints", "-json"))["endpoints"]}
        assert ep[r1.served]["view"] == "drain" and ep[r1.served]["samples"] >= 1, ep[r1.served]
        run("set", "endpoint", f"llm/{r1.served}", "ready")

        entry_on(r3.served)
        assert ": cleared\n" in run("clear", "affinity", f"session={SESSION}")
        assert "entry: none\n" in run("show", "affinity", f"session={SESSION}")
        info = run("show", "info")
        decisions = int(info.split("decisions: ", 1)[1].split("\n", 1)[0])
        assert decisions >= 3, info
        bad = subprocess.run([ctl, "-s", sock, "frobnicate"], capture_output=True, text=True, timeout=15)
        assert bad.returncode == 1 and bad.stdout.startswith("error: unknown command"), bad
        cl.close()
        env.stop_agent_checked()
        assert not os.path.exists(sock), "the command socket is left after the stop"


def spill(binary, version):
    ctl = h.ctl_binary()
    policy = {"load_factor": 1.0, "load_floor": 1, "cold_start_samples": 5}
    with fe.FleetEnv("ctl-spill", version, policy=policy) as env:
        sock = env.path("ctl.sock")
        env.agent_extra.append(f'command_socket: {{ path: "{sock}" }}')
        env.start([fe.instance("s1", fast=False), fe.instance("s2", fast=False),
                   fe.instance("s3", fast=False, speed=0.1)], binary)

        def run(*words):
            return subprocess.run([ctl, "-s", sock] + list(words), capture_output=True,
                                  text=True, timeout=15).stdout
        recs = fe.drive(env.port, lambda i: (fe.chat_body(f"warm {i}", max_tokens=20), {}, "warm"),
                        n=150, concurrency=3)
        fe.assert_all_ok(recs, "warm-up")
        log(f"warm-up served by {fe.fmt_counts(fe.by(recs, 'served'))}")
        log(run("show", "endpoints").rstrip())
        bg = fe.Background(env.port, lambda i: (fe.chat_body(f"load {i}", max_tokens=400), {}, "load"),
                           concurrency=10).start()
        found = None
        try:
            for n in range(400):
                out = run("explain", f"session=conv-{n}", "model=m1")
                if "reason=spill" in out:
                    found = f"$ warmlanectl explain session=conv-{n} model=m1\n{out}"
                    break
        finally:
            bg.stop()
        assert found, f"no spill in 400 explains; the last:\n{out}"
        log(found.rstrip())
        env.stop_agent_checked()


def slots(binary, version):
    """policy.place_slots through real HAProxy: every server's maxconn 1
    (set on the admin socket, read by the runtime API as its slots); a
    session T whose first choice is some server X holds X's one slot with
    a long answer; a new session S whose first choice is X too is then
    explained as leaving it for a free slot, and goes where explain says,
    reason hash. Then no slot is free: a long answer holds each other
    server, T's next turn waits in X's queue in HAProxy (X: 2 in flight,
    the others 1), and a new session S2 whose first choice is X too is
    explained as leaving it for the fewest waiting, and goes there.
    Ordered by waits on what the agent shows, never by time."""
    ctl = h.ctl_binary()
    with fe.FleetEnv("ctl-slots", version) as env:
        sock = env.path("ctl.sock")
        env.agent_extra.append(f'command_socket: {{ path: "{sock}", mode: "0600" }}')
        servers = ("s1", "s2", "s3")
        env.start([fe.instance(n, fast=False, decode_ms_per_token=5.0) for n in servers],
                  binary)

        def run(*words):
            p = subprocess.run([ctl, "-s", sock] + list(words), capture_output=True,
                               text=True, timeout=15)
            assert p.returncode == 0, f"warmlanectl {' '.join(words)}: {p.returncode} {p.stdout}{p.stderr}"
            return p.stdout

        def endpoints():
            return {e["server"]: e for e in json.loads(run("show", "endpoints", "-json"))["endpoints"]}

        def decided(session):
            out = run("explain", f"session={session}", "model=m1")
            m = re.search(r"^decision: llm/([^ \[]+)", out, re.M)
            assert m, out
            return m.group(1), out

        def first_choices(want):
            """{server: [n sessions whose first choice it is]} for want
            {server: n}, explained on an idle fleet"""
            found = {sv: [] for sv in want}
            for i in range(600):
                sv, _ = decided(f"conv-slots-K{i}")
                if sv in found and len(found[sv]) < want[sv]:
                    found[sv].append(f"conv-slots-K{i}")
                if all(len(found[k]) == want[k] for k in want):
                    return found
            raise AssertionError(f"600 sessions: {found} against {want}")

        held = {}

        def hold(name, session, tokens):
            def go():
                c = fe.Client(env.port, timeout=90)
                try:
                    held[name] = c.post(fe.chat_body(f"hold {name}", max_tokens=tokens),
                                        {"x-session-id": session}, i=0, tag=name)
                finally:
                    c.close()
            th = threading.Thread(target=go, daemon=True)
            th.start()
            return th

        for sv in servers:
            env.admin(f"set maxconn server llm/{sv} 1")
        h.wait_until("maxconn 1 as every server's slots",
                     lambda: all(e["slots"] == 1 for e in endpoints().values()))
        x, out = decided("conv-slots-S")
        assert "every slot of its choice busy" not in out, out
        others = [sv for sv in servers if sv != x]
        found = first_choices({x: 2, **{sv: 1 for sv in others}})
        t, s2 = found[x]
        u = {sv: found[sv][0] for sv in others}
        log(f"S, {t} and {s2} have {x} first; {t} holds its slot")

        threads = [hold("T", t, 2400)]
        h.wait_until(f"{x} busy", lambda: endpoints()[x]["in_flight"] >= 1 or "T" in held)
        assert "T" not in held, f"the long answer ended before S was explained: {held}"
        y, out = decided("conv-slots-S")
        log(out.rstrip())
        assert y != x and "every slot of its choice busy, to the first with one free" in out, out
        cl = fe.Client(env.port)
        r = cl.post(fe.chat_body("a new session"), {"x-session-id": "conv-slots-S"}, i=1,
                    tag="new")
        cl.close()
        assert (r.status, r.served, r.reason) == (200, y, "hash"), \
            f"explain said {y} (x {x} busy): {r}"
        log(f"slots: S went to {y} while {x} was busy (reason {r.reason})")

        # No slot free: each other server held, T's next turn queued on X.
        for sv in others:
            threads.append(hold(sv, u[sv], 1600))
        h.wait_until("every server busy",
                     lambda: all(e["in_flight"] >= 1 for e in endpoints().values()) or
                     len(held) > 0)
        threads.append(hold("T2", t, 1))
        h.wait_until(f"T's next turn waiting on {x}",
                     lambda: endpoints()[x]["in_flight"] >= 2 or len(held) > 0)
        assert not held, f"a long answer ended before S2 was explained: {held}"
        z, out = decided(s2)
        log(out.rstrip())
        assert z != x and "every slot of its choice busy and none free, to the first with " \
            "fewer waiting" in out, out
        cl = fe.Client(env.port, timeout=90)
        r = cl.post(fe.chat_body("no slot free"), {"x-session-id": s2}, i=2, tag="wait")
        cl.close()
        assert (r.status, r.served, r.reason) == (200, z, "hash"), \
            f"explain said {z} (every slot busy, {x} 2 in flight): {r}"
        for th in threads:
            th.join(90)
            assert not th.is_alive(), held
        assert all(v.status == 200 for v in held.values()), held
        assert held["T"].served == x and held["T2"].served == x, held
        assert all(held[sv].served == sv for sv in others), held
        log(f"slots: S2 went to {z} while every slot was busy and {x} had one waiting "
            f"(reason {r.reason}); T's turns answered by {x}")
        env.stop_agent_checked()


if __name__ == "__main__":
    if len(sys.argv) == 2:
        sys.argv.append("ctl")
    sys.exit(h.main({"ctl": scenario, "spill": spill, "slots": slots}))
