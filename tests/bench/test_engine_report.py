#!/usr/bin/env python3
"""tests/bench/test_engine_report.py - engine_report.py's text from results
as engine_bench.py writes them (JSON: events as [name, value] pairs), with
no engine: a kill case under the four policies, warmlane's events the
fault times and what policy.routers concluded (a dict, not a time). Exit
status 0 when every check holds, 1 with the first that does not."""

import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import engine_report  # noqa: E402


def records(policy):
    """Two conversations of two turns; warmlane's stay, the others move."""
    out = []
    for conv, server in (("c0", "e1"), ("c1", "e2")):
        for turn in (1, 2):
            moved = policy != "warmlane" and turn == 2
            out.append({
                "conv": conv, "turn": turn, "error": None, "cut": False, "status": 200,
                "served": ("e3" if moved else server), "prev_served": server if turn == 2 else None,
                "prompt_tokens": 100 * turn, "prev_prompt_tokens": 100 if turn == 2 else None,
                "cached_tokens": 90 if turn == 2 and not moved else 0,
                "ttft_ms": 100.0 * turn, "total_ms": 150.0 * turn,
            })
    return out


def results(open_):
    runs = []
    for policy in engine_report.POLICIES:
        events = []
        if policy == "warmlane":
            events = [["kill", 5.2], ["restart", 12.4],
                      ["routers", {"alone": 1.0, "turns": 1.0, "turn_skips": 0.0}]]
        runs.append({"case": "kill", "policy": policy, "records": records(policy),
                     "events": events})
    plan = dict(conversations=2, turns=2, concurrency=4, parallel=1, cache_ram=64,
                system_chars=900, user_chars=400, max_tokens=16, seed=11, open=open_,
                policy={}, engine_metrics=False)
    # through JSON, as engine.sh hands them over
    return json.loads(json.dumps({"plan": plan, "seconds": 60.0, "runs": runs,
                                  "haproxy": "2.6.12", "llama": ["version: test"]}))


def main():
    md, _, cases = engine_report.markdown(results(0))
    checks = [
        (cases == ["kill"], f"cases {cases}"),
        ("Fault times under warmlane (seconds into the run): kill: kill 5, restart 12."
         in md, "the fault times line"),
        ("by each run's end (`policy.routers` auto, docs/policy-v2.md section 38): "
         "kill: routing alone, turn skip share 0.000." in md, "the routers line"),
        ("2 conversations x 2 turns after a shared" in md, "the traffic without open"),
    ]
    md, _, _ = engine_report.markdown(results(16))
    checks.append(("2 conversations x 2 turns (16 under way at once, a finished one "
                   "replaced by the next) after a shared" in md, "the traffic with open"))
    for ok, what in checks:
        if not ok:
            print(f"FAIL: {what}\n{md}")
            return 1
    print(f"ok: {len(checks)} checks")
    return 0


if __name__ == "__main__":
    sys.exit(main())
