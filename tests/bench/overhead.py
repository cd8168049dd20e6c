#!/usr/bin/env python3
"""overhead.py - helper of tests/bench/overhead.sh: HAProxy configs and the table.

  overhead.py cfg VERSION WAY OUT key=value...
      Derives the HAProxy config of one way (plain, spoe) from the example
      haproxy/haproxy-2.6.cfg (haproxy-3.1.cfg for 3.1+), the way
      tests/e2e/harness.py does: regex substitutions of paths and ports,
      unchrooted, in the foreground. keys: dir (temp dir), port (frontend),
      origin (three ports of the trivial backend, comma-separated), agent
      (SPOP socket path; spoe only). The trivial backend is a second proxy
      of the same HAProxy answering `http-request return status 200`; the
      example's servers s1, s2, s3 point at it. Logging is removed in every
      way (the same cost for all three would only hide the difference).
      plain: no SPOE filter and none of the rules that only exist to ask
      or obey warmlane; `balance leastconn` does the choosing.

  overhead.py agentcfg OUT key=value...
      The warmlane agent's config: listen, metrics port, runtime API.

  overhead.py wrk FILE
      Parses one `wrk --latency` output: prints "rps p50_ms p99_ms errors".

  overhead.py busy
      What the machine does besides: CPU busy over one second and the five
      processes that used the most of it.

  overhead.py table RESULTS
      RESULTS has lines "label... rps p50_ms p99_ms errors"; the first is the
      baseline. Prints the table.
"""

import os
import re
import sys


def source_root():
    here = os.path.dirname(os.path.abspath(__file__))
    return os.path.dirname(os.path.dirname(here))


def kv(args):
    out = {}
    for a in args:
        k, _, v = a.partition("=")
        out[k] = v
    return out


def cfg(version, way, out, opts):
    major, minor = (int(x) for x in version.split(".")[:2])
    name = "haproxy-3.1.cfg" if (major, minor) >= (3, 1) else "haproxy-2.6.cfg"
    src = os.path.join(source_root(), "haproxy", name)
    with open(src) as f:
        text = f.read()
    d = opts["dir"]
    spoe = os.path.join(source_root(), "haproxy", "warmlane.spoe.conf")
    keys = os.path.join(d, "keys.map")
    with open(keys, "w") as f:
        f.write("k1 Bearer upstream-secret-1\n")

    def sub(pattern, repl, count=1, flags=re.M):
        nonlocal text
        text, n = re.subn(pattern, lambda m: repl, text, count=count, flags=flags)
        if n == 0:
            raise SystemExit(f"{src}: no line matches {pattern!r}: "
                             "update tests/bench/overhead.py")

    sub(r"^    log /dev/log local0\n", "")
    sub(r"^    chroot /var/lib/haproxy\n", "")
    sub(r"^    user haproxy\n", "")
    sub(r"^    group haproxy\n", "")
    sub(r"^    daemon\n", "")
    sub(r"^    stats socket /run/haproxy/admin.sock .*\n", "")
    sub(r"^    stats socket /run/haproxy/warmlane.sock (.*)$",
        f"    stats socket {os.path.join(d, 'stats.sock')} mode 600 level user")
    sub(r"^    bind 127\.0\.0\.1:8080$", f"    bind 127.0.0.1:{opts['port']}")
    # no key probes in a benchmark: the probe frontend goes
    sub(r"^frontend warmlane_probe\n(?:    .*\n)*", "")
    sub(r"^    log unix@/warmlane/log\.sock .*\n", "")
    sub(r"^    filter spoe engine warmlane config /etc/haproxy/warmlane\.spoe\.conf$",
        f"    filter spoe engine warmlane config {spoe}")
    sub(r"/etc/haproxy/warmlane-keys\.map", keys, count=0)
    ports = opts["origin"].split(",")
    sub(r"^    server s1 .*\n    server s2 .*\n    server s3 .*$",
        "\n".join(f"    server s{i + 1} 127.0.0.1:{p}" for i, p in enumerate(ports)))

    if way == "spoe":
        sub(r"^    server agent1 unix@/warmlane/spoa\.sock (.*)$",
            f"    server agent1 unix@{opts['agent']} "
            "check inter 1s fastinter 250ms fall 2 rise 2")
    elif way == "plain":
        # Every rule there only for warmlane, then its filter and backend.
        sub(r"^    filter spoe .*\n", "")
        sub(r"^    http-(request|response) .*warmlane.*\n", "", count=0)
        sub(r"^    use_backend %\[var\(txn\.warmlane\.backend\)\].*\n", "")
        sub(r"^    use-server %\[var\(txn\.warmlane\.server\)\].*\n", "")
        sub(r"^backend warmlane-agents\n(?:(?:    .*|\s*)\n)*(?:    .*\n?)?", "")
        # Comments may still explain the SPOE (haproxy-2.6.cfg's on
        # feedback): only directives count.
        live = "\n".join(l for l in text.splitlines()
                         if not l.lstrip().startswith("#"))
        if "warmlane-agents" in live or "spoe" in live.replace("spoe.conf", ""):
            raise SystemExit(f"{src}: the plain config still mentions the SPOE")
    else:
        raise SystemExit(f"unknown way {way!r}")

    text += (
        "\n# The trivial backend (overhead.sh): HAProxy answers by itself.\n"
        "frontend bench_origin\n"
        + "".join(f"    bind 127.0.0.1:{p}\n" for p in ports)
        + "    http-request return status 200 content-type application/json"
        " string \"{\\\"choices\\\":[]}\"\n")
    with open(out, "w") as f:
        f.write(text)


def agentcfg(out, opts):
    lines = [
        "log_level: warn",
        f'listen: ["unix:{opts["agent"]},mode=0600"]',
        f'metrics: {{ listen: "127.0.0.1:{opts["metrics"]}" }}',
        f'runtime_api: {{ socket: "{opts["stats"]}", backends: [llm] }}',
        'log_input: { path: "" }',
        f'state: {{ file: "{os.path.join(opts["dir"], "state.msgpack")}" }}',
        f'command_socket: {{ path: "{os.path.join(opts["dir"], "ctl.sock")}" }}',
    ]
    if opts.get("coalesce_us", "") != "":
        lines.append(f'spop: {{ coalesce_us: {int(opts["coalesce_us"])} }}')
    lines.append("endpoints:")
    for s in ("s1", "s2", "s3"):
        lines.append(f"  - {{ backend: llm, server: {s}, models: [m1], "
                     "weight: 1, keys: [k1] }")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")


UNITS = {"us": 0.001, "ms": 1.0, "s": 1000.0, "m": 60000.0}


def wrk(path):
    with open(path) as f:
        t = f.read()
    rps = re.search(r"^Requests/sec:\s+([\d.]+)", t, re.M)
    lat = {}
    for p, v, u in re.findall(r"^\s+(50|99)\.000%\s+([\d.]+)(us|ms|s|m)\s*$", t, re.M):
        lat[p] = float(v) * UNITS[u]
    if not lat:
        for p, v, u in re.findall(r"^\s+(50|99)%\s+([\d.]+)(us|ms|s|m)\s*$", t, re.M):
            lat[p] = float(v) * UNITS[u]
    errs = 0
    m = re.search(r"Non-2xx or 3xx responses:\s+(\d+)", t)
    if m:
        errs += int(m.group(1))
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", t)
    if m:
        errs += sum(int(x) for x in m.groups())
    if not rps or "50" not in lat or "99" not in lat:
        raise SystemExit(f"{path}: not a wrk --latency output")
    print(f"{float(rps.group(1)):.1f} {lat['50']:.3f} {lat['99']:.3f} {errs}")


def table(path):
    """Each way's medians over the rounds (a way is one label; rows come
    in rounds, (1) first), then the median of each round's ratio of a
    SPOE way's requests/s to the constant agent's in the same round."""
    rows = {}
    rounds = []
    with open(path) as f:
        for line in f:
            if line.strip():
                f = line.split()  # the label may contain spaces
                label = " ".join(f[:-4])
                rps, p50, p99, errs = f[-4:]
                if label.startswith("(1)"):
                    rounds.append({})
                rows.setdefault(label, []).append(
                    (float(rps), float(p50), float(p99), int(errs)))
                rounds[-1][label] = float(rps)

    def med(xs):
        xs = sorted(xs)
        n = len(xs)
        return xs[n // 2] if n % 2 else (xs[n // 2 - 1] + xs[n // 2]) / 2

    agg = [(label, med([r[0] for r in v]), med([r[1] for r in v]),
            med([r[2] for r in v]), sum(r[3] for r in v)) for label, v in rows.items()]
    base = agg[0]
    print(f"| {'way':<40} | {'req/s':>9} | {'ratio':>6} | {'p50 ms':>7} | "
          f"{'+p50 ms':>8} | {'p99 ms':>7} | {'+p99 ms':>8} | {'errors':>6} |")
    print(f"|{'-' * 42}|{'-' * 11}|{'-' * 8}|{'-' * 9}|{'-' * 10}|{'-' * 9}|"
          f"{'-' * 10}|{'-' * 8}|")
    for label, rps, p50, p99, errs in agg:
        ratio = rps / base[1] if base[1] > 0 else float("nan")
        print(f"| {label:<40} | {rps:>9.0f} | {ratio:>6.3f} | {p50:>7.3f} | "
              f"{p50 - base[2]:>+8.3f} | {p99:>7.3f} | {p99 - base[3]:>+8.3f} | "
              f"{errs:>6} |")
    const = "(3) SPOE to constant agent"
    if len(rounds) > 1 and all(const in r for r in rounds):
        print()
        print(f"paired, each round's requests/s over the constant agent's ({len(rounds)} rounds):")
        for label in rows:
            if label.startswith("(2)"):
                rs = [r[label] / r[const] for r in rounds if label in r and r[const] > 0]
                print(f"  {label}: median {med(rs):.3f} ("
                      + ", ".join(f"{x:.3f}" for x in rs) + ")")
    base_way = "(2) SPOE to warmlane baseline"
    if rounds and all(base_way in r for r in rounds):
        print()
        print(f"paired, each round's requests/s over the baseline's ({len(rounds)} rounds):")
        for label in rows:
            if label.startswith("(2)") and label != base_way:
                rs = [r[label] / r[base_way] for r in rounds
                      if label in r and r[base_way] > 0]
                print(f"  {label}: median {med(rs):.3f} ("
                      + ", ".join(f"{x:.3f}" for x in rs) + ")")


def _proc_times():
    out = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/stat") as f:
                st = f.read()
        except OSError:
            continue
        name = st[st.index("(") + 1:st.rindex(")")]
        rest = st[st.rindex(")") + 2:].split()
        out[pid] = (name, int(rest[11]) + int(rest[12]))  # utime + stime
    return out


def _cpu_times():
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:]]
    idle = v[3] + v[4]
    return sum(v), idle


def busy():
    import time
    t0, i0 = _cpu_times()
    p0 = _proc_times()
    time.sleep(1.0)
    t1, i1 = _cpu_times()
    p1 = _proc_times()
    total = max(t1 - t0, 1)
    ncpu = os.cpu_count() or 1
    pct = 100.0 * (1 - (i1 - i0) / total)
    per = []
    for pid, (name, t) in p1.items():
        if pid in p0 and p0[pid][0] == name:
            per.append((t - p0[pid][1], name, pid))
    per.sort(reverse=True)
    # a clock tick is 1/100 s: ticks over one second are percents of a CPU
    top = "; ".join(f"{name} {d}%" for d, name, _ in per[:5] if d > 0)
    print(f"{pct:.0f}% of all {ncpu} CPUs busy over 1 s; top (% of one CPU): "
          f"{top or 'nothing'}")


def main():
    a = sys.argv[1:]
    if len(a) >= 4 and a[0] == "cfg":
        cfg(a[1], a[2], a[3], kv(a[4:]))
    elif len(a) >= 2 and a[0] == "agentcfg":
        agentcfg(a[1], kv(a[2:]))
    elif len(a) == 2 and a[0] == "wrk":
        wrk(a[1])
    elif a == ["busy"]:
        busy()
    elif len(a) == 2 and a[0] == "table":
        table(a[1])
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
