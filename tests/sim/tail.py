#!/usr/bin/env python3
"""tests/sim/tail.py - takes apart the requests above a TTFT percentile of a warmlane-sim --debug-tail CSV.

Usage: tests/sim/tail.py FILE [--pct 90] [--prefill-ms-per-ktok 40] [--batch-slowdown 0.1]

Per policy, for the requests whose TTFT is over the policy's own percentile
(the tail) and for all of them: how the TTFT splits into queue wait and
prefill, and the prefill into what its uncached tokens cost on an idle
endpoint and what the batch it ran in added (the fleet's prefill model:
uncached / 1000 x prefill_ms_per_ktok x (1 + batch_slowdown x batch));
hits, new or warm keys (the key seen before within the 300 s TTL: on the
same endpoint as its previous request or moved), the live count of the
chosen endpoint against the least loaded at the decision, and the
policy's detail (warmlane: what its decision did with the key's entry).
"""
import argparse
import collections
import csv
import sys

TTL_MS = 300_000


def pct(vals, p):
    s = sorted(vals)
    if not s:
        return 0.0
    k = min(len(s) - 1, max(0, int(round(p / 100 * len(s) + 0.5)) - 1))
    return s[k]


def mean(vals):
    vals = list(vals)
    return sum(vals) / len(vals) if vals else 0.0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("file")
    ap.add_argument("--pct", type=float, default=90)
    ap.add_argument("--prefill-ms-per-ktok", type=float, default=40)
    ap.add_argument("--batch-slowdown", type=float, default=0.1)
    a = ap.parse_args()
    rows = collections.defaultdict(list)
    with open(a.file, newline="") as f:
        for r in csv.DictReader(f):
            rows[r["policy"]].append(r)
    for pol, rs in rows.items():
        last = {}  # key -> (arrival_ms, endpoint)
        recs = []
        for r in rs:  # arrival order
            t = float(r["arrival_ms"])
            key = r["akey"]
            prev = last.get(key) if key != "0" * 16 else None
            if prev is None or t - prev[0] > TTL_MS:
                state = "new"
            elif prev[1] == r["endpoint"]:
                state = "warm-kept"
            else:
                state = "warm-moved"
            if key != "0" * 16:
                last[key] = (t, r["endpoint"])
            ttft = float(r["ttft_ms"])
            if ttft < 0:
                continue
            unc = int(r["input"]) - int(r["cached"])
            base = unc / 1000 * a.prefill_ms_per_ktok
            recs.append(dict(ttft=ttft, queue=float(r["queue_ms"]), prefill=float(r["prefill_ms"]),
                             base=base, batch=int(r["batch"]), live=int(r["live_at"]),
                             lmin=int(r["live_min"]), hit=int(r["cached"]) > 0, state=state,
                             detail=r["detail"], reason=r["reason"], ep=r["endpoint"],
                             input=int(r["input"]), cached=int(r["cached"])))
        thr = pct([x["ttft"] for x in recs], a.pct)
        tail = [x for x in recs if x["ttft"] > thr]
        print(f"## {pol}: {len(recs)} requests, TTFT p{a.pct:g} {thr:.0f} ms, {len(tail)} above it")
        for name, sel in (("all", recs), ("tail", tail)):
            n = len(sel)
            q = sum(x["queue"] for x in sel)
            pf = sum(x["prefill"] for x in sel)
            b = sum(x["base"] for x in sel)
            print(f"{name:5s} n {n:5d}  TTFT mean {mean(x['ttft'] for x in sel):7.0f} ms:"
                  f" queue {q / n:6.1f}, prefill {pf / n:6.0f} (idle cost {b / n:6.0f},"
                  f" batch x{pf / b if b else 0:4.2f}, batch mean {mean(x['batch'] for x in sel):4.1f});"
                  f" hit {sum(x['hit'] for x in sel) / n:5.1%}, cached share"
                  f" {sum(x['cached'] for x in sel) / max(1, sum(x['input'] for x in sel)):5.1%},"
                  f" input mean {mean(x['input'] for x in sel):6.0f};"
                  f" live-min at decision {mean(x['live'] - x['lmin'] for x in sel):4.2f}")
        for field in ("state", "detail" if any(x["detail"] != "-" for x in recs) else "reason"):
            c_all = collections.Counter(x[field] for x in recs)
            c_tail = collections.Counter(x[field] for x in tail)
            parts = []
            for k, v in c_all.most_common():
                sel = [x for x in tail if x[field] == k]
                parts.append(f"{k} {c_tail[k]}/{v} ({c_tail[k] / max(1, len(tail)):.1%} of tail;"
                             f" tail batch {mean(x['batch'] for x in sel):4.1f},"
                             f" excess {mean(x['live'] - x['lmin'] for x in sel):4.2f},"
                             f" idle cost {mean(x['base'] for x in sel):5.0f})")
            print(f"  by {field}: " + "; ".join(parts))
        eps = collections.Counter(x["ep"] for x in tail)
        print("  tail by endpoint: " + " ".join(f"{k} {v}" for k, v in sorted(eps.items())))
        print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
