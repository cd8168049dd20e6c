#!/usr/bin/env python3
"""Artefact fingerprints: three llama.cpp llama-servers under one model name
(`--alias tiny`), e1 and e2 with one generated model, e3 with another (one
more layer: tests/engine/mkmodel.py); one HAProxy and its warmlane reading
each server's own /props (endpoints[].engine_info) with
`policy.artefact_affinity: true`.

Usage: artefact.py 2.6|3.2 artefact
Phases, each asserting behaviour:

  report    the agent fingerprints the three (warmlane_endpoint_artefact_info),
            e1 and e2 alike, e3 apart; each endpoint is flagged
            (warmlane_endpoint_artefact_mismatch 1) and logged once, not at
            every read (engine.info_interval 1s, watched for 3 s more);
  affinity  16 new sessions, then e1 disabled in HAProxy: every session
            that was on e1 goes on e2, the endpoint of its artefact, none
            on e3 (without the policy rendezvous hashing puts about half of
            them there).

Exit status: 0 pass, 1 fail, 77 skip (as engine.py).
"""

import os
import sys
import time

sys.dont_write_bytecode = True
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import harness as h  # noqa: E402
import fleetenv as fe  # noqa: E402
import engine as eng  # noqa: E402

log = h.log
MARK = "endpoints serving one model name serve different artefacts"


def artefact(binary, version):
    llama, model_a = eng.setup()
    folder = os.path.dirname(model_a)
    model_b = eng.lf.model(folder, layers=3)
    fleet = eng.lf.Fleet(llama, model_a, n=3, parallel=1, cache_ram=32, threads=1,
                         ctx=4096, models=[model_a, model_a, model_b],
                         extra=["--alias", eng.MODEL])
    with eng.EngineEnv("artefact", version, policy={"artefact_affinity": "true"}) as env:
        try:
            log(f"# fleet of 3 llama-servers up in {fleet.start():.2f}s")
            env.use_fleet(fleet)
            for s in fleet.servers:
                env.endpoints[s.name]["engine_info"] = f"http://127.0.0.1:{s.port}/props"
            env.agent_extra.append("engine: { info_interval: 1s }")
            env.start_agent()
            env.start_haproxy(binary)
            env.wait_backends_up(timeout=20)
            env.wait_agent(up=True)
            run(env, fleet)
            env.stop_agent_checked()
        finally:
            fleet.stop()


def series(env):
    text, _ = env.metrics_text()
    return fe.parse_metrics(text)


def run(env, fleet):
    names = [s.name for s in fleet.servers]

    # --- report -----------------------------------------------------------
    def fingerprints():
        fp = {}
        for n, lb, v in series(env):
            if n == "warmlane_endpoint_artefact_info" and lb.get("fingerprint"):
                fp[lb["server"]] = lb["fingerprint"]
        return fp
    h.wait_until("the agent to fingerprint the three", lambda: len(fingerprints()) == 3,
                 timeout=10)
    fp = fingerprints()
    log(f"report: fingerprints {fp}")
    if fp["e1"] != fp["e2"] or fp["e1"] == fp["e3"]:
        raise AssertionError(f"report: e1 and e2 (one model) and e3 (another): {fp}")
    h.wait_until("every endpoint flagged", lambda: all(
        fe.metric_sum(series(env), "warmlane_endpoint_artefact_mismatch", server=n) == 1
        for n in names), timeout=5)
    time.sleep(3)  # three more reads at info_interval 1s: no new line
    text = env.log_text("agent")
    lines = [ln for ln in text.splitlines() if MARK in ln]
    log(f"report: {len(lines)} log lines: " + " | ".join(
        ln[ln.index("backend="):ln.index("backend=") + 120] for ln in lines))
    per = {n: sum(1 for ln in lines if f"server={n} " in ln) for n in names}
    if any(c != 1 for c in per.values()):
        raise AssertionError(f"report: not one line per endpoint: {per}")
    reads = fe.metric_sum(series(env), "warmlane_engine_info_reads_total", result="ok")
    if reads < 9:
        raise AssertionError(f"report: only {reads} descriptions read in 4 s or more")

    # --- affinity ---------------------------------------------------------
    c = fe.Client(env.port, timeout=30)
    first = {}
    for i in range(16):
        r = c.post(fe.chat_body(f"hello {i}", model=eng.MODEL, max_tokens=1),
                   {"x-session-id": f"art-{i}"}, i=i, tag="first")
        if r.status != 200:
            raise AssertionError(f"affinity: first turn {i}: {r.status} {r.error}")
        first[i] = r.served
    on_e1 = [i for i, s in first.items() if s == "e1"]
    log(f"affinity: first turns {fe.fmt_counts({s: list(first.values()).count(s) for s in names})}")
    if len(on_e1) < 2:
        raise AssertionError(f"affinity: only {len(on_e1)} of 16 sessions on e1")
    env.admin("disable server llm/e1")

    def e1_out():
        for n, lb, v in series(env):
            if (n == "warmlane_endpoint_admin_state" and lb.get("server") == "e1"
                    and lb.get("state") == "enabled"):
                return v == 0.0
        return False
    h.wait_until("the agent to see e1 disabled", e1_out, timeout=5)
    then = {}
    for i in on_e1:
        r = c.post(fe.chat_body(f"hello {i} again", model=eng.MODEL, max_tokens=1),
                   {"x-session-id": f"art-{i}"}, i=i, tag="next")
        if r.status != 200:
            raise AssertionError(f"affinity: next turn {i}: {r.status} {r.error}")
        then[r.served] = then.get(r.served, 0) + 1
    c.close()
    log(f"affinity: e1 disabled; its {len(on_e1)} sessions went to {fe.fmt_counts(then)}")
    if then.get("e3", 0) != 0 or then.get("e2", 0) != len(on_e1):
        raise AssertionError(f"affinity: e1's sessions left its artefact: {then}")


SCENARIOS = {"artefact": artefact}

if __name__ == "__main__":
    sys.exit(h.main(SCENARIOS))
