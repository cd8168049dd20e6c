#!/usr/bin/env python3
"""sweep.py - every run of tests/sim/report.sh for the warmlane policy, over seeds, one variant against another.

Usage: tests/sim/sweep.py [--seeds 1-5] [--sim PATH] [--trace FILE] [--only REGEX] [--paired]
                          [--against PATH] [--variant 'NAME:--set a=1 --set b=2' ...]

Each variant (the first is always "today": no extra arguments) runs every
workload and scenario of the report (docs/routing-quality.md) with the
warmlane policy alone, on every seed, and the table prints, per run, the
mean over the seeds of the hit rate, the TTFT p90 (ms) and each figure of
the scenario's table (its columns, in order). A fault figure is a draw of
where the fault falls against the policy's clocks (docs/policy-v2.md,
section 7): judge a change over seeds, not one run. Runs of the trace are
left out when the trace is missing; --only keeps the runs whose name
matches REGEX.

--against PATH adds a first column, "against": the same runs with another
simulator binary, typically another revision's (tests/sim/build-rev.sh REV
builds one and prints its path), e.g. the policy an issue was filed on.
A run that binary does not know (a newer scenario or option) shows "-".

--paired adds, after each run's row, a row per other column: each figure's
mean difference to the first column's, seed by seed, and twice its
standard error over the seeds ("+0.31~0.12"), marked "!" where the
difference is more than that: a figure whose difference is within it is
a draw of the seeds, not a change (judge with 10 seeds or more).
"""
import argparse
import math
import os
import re
import shlex
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))
Q = "tests/sim/examples/quickstart.conf"
TIERS = "tests/sim/examples/tiers.conf"
VLLM = "tests/sim/examples/vllm.conf"
FAULTS = ["fast-failure", "rate-limit", "slow", "recover", "scale-out", "down",
          "flap", "agents-2", "agents-4"]


def runs(trace):
    out = []
    if trace:
        t = ["--trace", trace]
        out += [("mooncake", t), ("mooncake-log", t + ["--log-ingest"]),
                ("mooncake-session", t + ["--keys", "session"]),
                ("mooncake-speed3", t + ["--speed", "3"]),
                ("mooncake-agents2", t + ["--agents", "2"]),
                ("mooncake-agents4", t + ["--agents", "4"]),
                ("mooncake-engine", t + ["--engine-load"]),
                ("mooncake-engine-speed3", t + ["--engine-load", "--speed", "3"]),
                ("mooncake-engine-agents2", t + ["--engine-load", "--agents", "2"]),
                ("mooncake-engine-agents4", t + ["--engine-load", "--agents", "4"]),
                ("mooncake-hints", t + ["--shared-hints"]),
                ("mooncake-hints-speed3", t + ["--shared-hints", "--speed", "3"]),
                ("mooncake-hints-agents2", t + ["--shared-hints", "--agents", "2"]),
                ("mooncake-hints-agents4", t + ["--shared-hints", "--agents", "4"])]
        out += [("mooncake-" + sc, t + ["--scenario", sc]) for sc in FAULTS]
        out += [("mooncake-recover-anon", t + ["--scenario", "recover", "--keys", "none"])]
        out += [("anon-quick%d" % n, t + ["--keys", "none", "--config", Q, "--limit", str(n)])
                for n in (80, 1500)]
        out += [("anon-" + sc, t + ["--keys", "none", "--scenario", sc])
                for sc in ("slow", "fast-failure")]
        out += [("slowstart%d" % n, t + ["--keys", "session", "--config", Q, "--limit", str(n),
                                         "--scenario", "slow-start"]) for n in (300, 1000)]
    c = ["--workload", "chat"]
    out += [("chat", c), ("chat-hints-agents4", c + ["--shared-hints", "--agents", "4"]),
            ("groups", ["--workload", "groups"]),
            ("mixed", ["--workload", "mixed"]),
            ("hetero", c + ["--config", "tests/sim/examples/hetero.conf"]),
            ("vllm-slow", c + ["--config", VLLM, "--scenario", "slow"]),
            ("vllm-slow-log", c + ["--config", VLLM, "--scenario", "slow", "--log-ingest"]),
            ("vllm-slowpf", c + ["--config", VLLM, "--scenario", "slow-prefill"]),
            ("vllm-slowpf-log", c + ["--config", VLLM, "--scenario", "slow-prefill",
                                     "--log-ingest"]),
            ("chat-slowpf", c + ["--scenario", "slow-prefill"]),
            ("tiers-healthy", c + ["--config", TIERS]),
            ("chat-tiers", c + ["--config", TIERS, "--scenario", "tiers"]),
            ("chat-tiers-log", c + ["--config", TIERS, "--scenario", "tiers", "--log-ingest"]),
            ("chat-tiers-anon", c + ["--config", TIERS, "--scenario", "tiers", "--keys", "none"]),
            ("chat-tiers-agents2", c + ["--config", TIERS, "--scenario", "tiers",
                                        "--agents", "2"]),
            ("chat-recover-anon", c + ["--scenario", "recover", "--keys", "none"]),
            ("spread", ["--workload", "engine", "--config", "tests/sim/examples/near.conf",
                        "--turns", "1", "--clients", "1", "--size", "800", "--keys", "none",
                        "--log-ingest", "--scenario", "spread"])]
    out += [("chat-" + sc, c + ["--scenario", sc]) for sc in FAULTS]
    return out


def number(s):
    m = re.fullmatch(r"(-?[0-9.]+)%?", s)
    return float(m.group(1)) if m else math.nan


def one(sim, seed, args, extra, lenient=False):
    """hit rate, p90, scenario figures of one run (the warmlane row); with
    lenient, [] for a run the binary refuses."""
    base = [sim, "--seed", str(seed), "--policy", "warmlane"] + args + extra
    csv = subprocess.run(base + ["--csv"], cwd=TOP, capture_output=True, text=True)
    if csv.returncode != 0:
        if lenient:
            return []
        sys.exit("sweep.py: %s: %s" % (" ".join(base), csv.stderr.strip()))
    row = csv.stdout.splitlines()[1].split(",")
    figs = [float(row[2]), float(row[4])]
    if "--scenario" in args:
        human = subprocess.run(base, cwd=TOP, capture_output=True, text=True).stdout
        on = False
        for line in human.splitlines():
            if line.startswith("# scenario"):
                on = True
            elif on and line.split()[:1] == ["warmlane"]:
                figs += [number(x) for x in line.split()[1:]]
                break
    return figs


def paired(base, rows):
    """per figure, the mean of rows - base seed by seed and twice its
    standard error ("-" where fewer than two seeds have both)"""
    out = []
    for i in range(max([len(r) for r in rows + base] + [0])):
        d = [r[i] - b[i] for r, b in zip(rows, base)
             if i < len(r) and i < len(b) and not math.isnan(r[i] - b[i])]
        if len(d) < 2:
            out.append("-")
            continue
        m = sum(d) / len(d)
        se = 2 * math.sqrt(sum((x - m) ** 2 for x in d) / (len(d) - 1) / len(d))
        out.append("%s%+.4g~%.2g" % ("!" if abs(m) > se else "", m, se))
    return " ".join(out)


def mean(rows):
    out = []
    for i in range(max([len(r) for r in rows] + [0])):
        v = [r[i] for r in rows if i < len(r) and not math.isnan(r[i])]
        out.append(sum(v) / len(v) if v else math.nan)
    return out


def cell(figs):
    return " ".join(fmt(x) for x in figs) or "-"


def fmt(x):
    if math.isnan(x):
        return "-"
    return "%.4f" % x if abs(x) < 1 else "%.4g" % x


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="1-5")
    ap.add_argument("--sim", default=os.path.join(TOP, "build/sim/tests/sim/warmlane-sim"))
    ap.add_argument("--trace", default=os.path.join(TOP, "../shared/traces/mooncake_conversation.jsonl"))
    ap.add_argument("--only", default="", metavar="REGEX")
    ap.add_argument("--against", default="", metavar="PATH")
    ap.add_argument("--variant", action="append", default=[],
                    help="NAME:ARGS, e.g. 'lf2.5:--set load_factor=2.5'")
    ap.add_argument("--paired", action="store_true")
    a = ap.parse_args()
    for what, path in (("--sim", a.sim), ("--against", a.against)):
        if path and not (os.path.isfile(path) and os.access(path, os.X_OK)):
            sys.exit("sweep.py: %s %s: not an executable file" % (what, path))
    try:
        re.compile(a.only)
    except re.error as e:
        sys.exit("sweep.py: --only %s: %s" % (a.only, e))
    lo, _, hi = a.seeds.partition("-")
    seeds = range(int(lo), int(hi or lo) + 1)
    variants = [("today", [])] + [(v.partition(":")[0], shlex.split(v.partition(":")[2]))
                                  for v in a.variant]
    trace = a.trace if os.path.isfile(a.trace) else None
    against = ["against"] if a.against else []
    print("| run | " + " | ".join(against + [n for n, _ in variants]) + " |")
    print("|---" * (len(against) + len(variants) + 1) + "|")
    for name, args in runs(trace):
        if a.only and not re.fullmatch(a.only, name):
            continue
        cols = [[one(a.against, s, args, [], True) for s in seeds]] if against else []
        cols += [[one(a.sim, s, args, extra) for s in seeds] for _, extra in variants]
        print("| %s | %s |" % (name, " | ".join(cell(mean(c)) for c in cols)), flush=True)
        if a.paired:
            for label, c in zip((against + [n for n, _ in variants])[1:], cols[1:]):
                print("| %s: %s - first | %s |" % (name, label, paired(cols[0], c)) +
                      " |" * (len(cols) - 1), flush=True)


if __name__ == "__main__":
    main()
