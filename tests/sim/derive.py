#!/usr/bin/env python3
"""derive.py - traces made from a Mooncake-format trace, to check a policy change on more than one.

Usage: tests/sim/derive.py TRACE OUTDIR

Writes into OUTDIR, each a Mooncake-format JSONL file:
  second-half.jsonl  the requests from the median arrival on, shifted to
                     start at 0 (conversations begin mid-way; the fleet
                     starts cold on other prompts)
  short.jsonl        every prompt cut to half its blocks (and tokens): the
                     prefix structure kept, a lighter fleet
  sparse.jsonl       every other conversation (requests grouped by their
                     first two blocks): half the load, the same shapes
  relabel.jsonl      the block ids permuted (block 0 stays shared): other
                     keys, so other rendezvous draws, the same workload
Then, e.g.: tests/sim/sweep.py --trace OUTDIR/second-half.jsonl --only
'mooncake.*|anon.*' (docs/policy-v2.md, section 17). Deterministic: the
permutation's seed is fixed.
"""
import json
import math
import os
import random
import sys


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__.strip().splitlines()[2])
    src, out = sys.argv[1], sys.argv[2]
    reqs = []
    with open(src) as f:
        for n, line in enumerate(f, 1):
            try:
                r = json.loads(line)
                int(r["timestamp"]), list(r["hash_ids"]), int(r["input_length"])
            except (ValueError, KeyError, TypeError) as e:
                sys.exit(f"derive.py: {src}:{n}: not a Mooncake request ({e})")
            reqs.append(r)
    if not reqs:
        sys.exit(f"derive.py: {src}: no requests")
    os.makedirs(out, exist_ok=True)

    def dump(name, rs):
        with open(os.path.join(out, name + ".jsonl"), "w") as f:
            for r in rs:
                f.write(json.dumps(r) + "\n")

    ts = sorted(r["timestamp"] for r in reqs)
    mid = ts[len(ts) // 2]
    dump("second-half", [dict(r, timestamp=r["timestamp"] - mid)
                         for r in reqs if r["timestamp"] >= mid])
    dump("short", [dict(r, hash_ids=r["hash_ids"][:max(1, math.ceil(len(r["hash_ids"]) / 2))],
                        input_length=max(1, r["input_length"] // 2)) for r in reqs])
    groups = {}
    sparse = []
    for r in reqs:
        g = groups.setdefault(tuple(r["hash_ids"][:2]), len(groups))
        if g % 2 == 0:
            sparse.append(r)
    dump("sparse", sparse)
    ids = sorted({i for r in reqs for i in r["hash_ids"]} - {0})
    perm = ids[:]
    random.Random(7).shuffle(perm)
    m = dict(zip(ids, perm))
    m[0] = 0
    dump("relabel", [dict(r, hash_ids=[m[i] for i in r["hash_ids"]]) for r in reqs])


if __name__ == "__main__":
    main()
