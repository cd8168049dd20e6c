#!/usr/bin/env python3
"""tests/sim/split.py - where independent agents split a key: requests sent to another endpoint than the key's previous one.

Usage: tests/sim/split.py BASE FILE [FILE...]

BASE and each FILE are warmlane-sim --debug-tail CSVs of the same trace
and seed (BASE: one agent). A request is split when its key's previous
request, within the 300 s TTL, went to another endpoint; it is counted by
the warmlane detail of both decisions (the rule that placed the previous
one and this one's), and its cached tokens are compared with the same
request in BASE. Prints a markdown table: per class, split requests and
their change in hit rate (cached over input tokens) against BASE, per FILE.
"""
import collections
import csv
import sys

TTL_MS = 300_000
RULE = {"new-first": "R", "new-passed-bound": "B", "new-by-load": "L", "warm": "W",
        "moved-bound": "M", "new-passed-owned": "O", "new-passed-slow": "S"}
NAMES = {
    "BR": "bound walk on one decision, rendezvous choice on the other",
    "LR": "place_by_load on one, rendezvous choice on the other",
    "RW": "warm entry on one, rendezvous choice on the other",
    "BW": "warm entry on one, bound walk on the other",
    "LW": "warm entry on one, place_by_load on the other",
    "WW": "warm entries on both, different endpoints",
    "MW": "the warm bound moved it (moved-bound), and back",
    "BL": "bound walk on one, place_by_load on the other",
    "BB": "bound walk on both",
    "LL": "place_by_load on both",
    "none": "not split",
}


def load(path):
    with open(path, newline="") as f:
        rows = [r for r in csv.DictReader(f) if r["policy"] == "warmlane"]
    last = {}
    for r in rows:
        key, t, ep = r["akey"], float(r["arrival_ms"]), r["endpoint"]
        p = last.get(key) if key != "0" * 16 else None
        r["split"] = p[2] if p and t - p[0] <= TTL_MS and p[1] != ep else None
        last[key] = (t, ep, r["detail"])
    return rows


def cls(prev, this):
    a, b = RULE.get(prev, prev), RULE.get(this, this)
    return "".join(sorted(a + b)) if a != b else a + b


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__.split("\n\n")[1])
    base = load(sys.argv[1])
    inp = sum(int(r["input"]) for r in base)
    cols = []
    for path in sys.argv[2:]:
        rows = load(path)
        if len(rows) != len(base):
            sys.exit(f"{path}: {len(rows)} requests, BASE has {len(base)}")
        g = collections.defaultdict(lambda: [0, 0])
        for x, y in zip(base, rows):
            c = cls(y["split"], y["detail"]) if y["split"] else "none"
            g[c][0] += 1
            g[c][1] += int(y["cached"]) - int(x["cached"])
        cols.append(g)
    keys = sorted(set().union(*cols), key=lambda k: sum(c[k][1] for c in cols))
    print("| class | " + " | ".join(sys.argv[2:]) + " |")
    print("|---" * (len(cols) + 1) + "|")
    for k in keys:
        print(f"| {NAMES.get(k, k)} | " +
              " | ".join(f"{c[k][0]}, {c[k][1] / inp:+.4f}" for c in cols) + " |")
    print("| hit rate change | " +
          " | ".join(f"{sum(v[1] for v in c.values()) / inp:+.4f}" for c in cols) + " |")


if __name__ == "__main__":
    main()
