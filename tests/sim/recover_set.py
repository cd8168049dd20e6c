#!/usr/bin/env python3
# tests/sim/recover_set.py - the recovery measurement set of docs/policy-v2.md, section 10: one line per figure.
#
# Usage: tests/sim/recover_set.py [--log-ingest] [NAME=VALUE ...]   (each NAME=VALUE passed to warmlane-sim
# as --set NAME=VALUE; --log-ingest passed to every run: the agents also read the end-of-stream log lines)
# Environment: WARMLANE_SIM_BUILD (default build/sim), TRACE (default
# ../shared/traces/mooncake_conversation.jsonl relative to the repository root).
# Run from the repository root. About 200 simulator runs, one at a time (a few seconds in all).
import os
import statistics as st
import subprocess
import sys

SIM = os.path.join(os.environ.get('WARMLANE_SIM_BUILD', 'build/sim'), 'tests/sim/warmlane-sim')
TRACE = os.environ.get('TRACE', '../shared/traces/mooncake_conversation.jsonl')
FLAGS = [a for a in sys.argv[1:] if a == '--log-ingest']
SETS = FLAGS + [x for a in sys.argv[1:] if a not in FLAGS for x in ('--set', a)]
CHAT = ['--workload', 'chat', '--size', '400', '--duration', '1800']  # tests/sim/meson.build, sim-recover


def run(args):
    p = subprocess.run([SIM, '--policy', 'warmlane'] + args + SETS, capture_output=True, text=True)
    if p.returncode not in (0, 1):
        sys.exit('warmlane-sim %s: %s' % (' '.join(args), p.stderr[-300:]))
    return p.stdout


def scen(args, col):
    """warmlane's figure in column col of the scenario table"""
    on = False
    for line in run(args).splitlines():
        if line.startswith('# scenario'):
            on = True
        elif on and line.startswith('warmlane'):
            return float(line.split()[col].rstrip('%'))
    sys.exit('no scenario row: %s' % ' '.join(args))


def healthy(args):
    """hit rate (%) and TTFT p90 (ms) of the main table"""
    for line in run(args).splitlines():
        f = line.split()
        if len(f) > 6 and f[0] == 'warmlane':
            return float(f[3]), float(f[5])
    sys.exit('no row: %s' % ' '.join(args))


def show(name, v):
    print('%s: %s (mean %.3f)' % (name, ' '.join('%.2f' % x for x in v), st.mean(v)))


def grid(base):
    """share 30-120 s after the recovery over idle_reset 56-64 s x seeds 1-5"""
    return [scen(base + ['--seed', str(s), '--set', 'idle_reset_ms=%d' % (ir * 1000)], 2)
            for ir in (56, 58, 60, 62, 64) for s in range(1, 6)]


S15, S157 = range(1, 6), (1, 2, 3, 4, 5, 7)
print('sim-recover (chat keyed, seed 7): %.2f' % scen(['--scenario', 'recover'] + CHAT + ['--seed', '7'], 2))
show('recover, chat keyed, seeds 1-5', [scen(['--scenario', 'recover'] + CHAT + ['--seed', str(s)], 2) for s in S15])
print('sim-recover-anonymous (seed 7): %.2f' %
      scen(['--scenario', 'recover'] + CHAT + ['--seed', '7', '--keys', 'none'], 2))
show('recover, Mooncake keyed, idle_reset grid', grid(['--trace', TRACE, '--scenario', 'recover']))
show('recover, chat keyed, idle_reset grid', grid(['--scenario', 'recover'] + CHAT))
show('recover, Mooncake anonymous, seeds 1-5',
     [scen(['--trace', TRACE, '--scenario', 'recover', '--keys', 'none', '--seed', str(s)], 2) for s in S15])
show('slow share, Mooncake, seeds 1-5', [scen(['--trace', TRACE, '--scenario', 'slow', '--seed', str(s)], 1) for s in S15])
for sc, seeds in (('slow', S15), ('slow-prefill', S15), ('flap', S157), ('fast-failure', S157)):
    show('%s share, chat, seeds %s' % (sc, ','.join(map(str, seeds))),
         [scen(['--workload', 'chat', '--scenario', sc, '--seed', str(s)], 1) for s in seeds])
show('fast-failure share, Mooncake, seeds 1-3',
     [scen(['--trace', TRACE, '--scenario', 'fast-failure', '--seed', str(s)], 1) for s in (1, 2, 3)])
for speed in ('1', '3'):
    for agents in ('1', '2'):
        h = [healthy(['--trace', TRACE, '--seed', str(s), '--speed', speed, '--agents', agents]) for s in (1, 2, 3)]
        print('Mooncake healthy, speed %s, %s agent(s), seeds 1-3: hit%% %s, TTFT p90 %s ms' %
              (speed, agents, ' '.join('%.1f' % x[0] for x in h), ' '.join('%.0f' % x[1] for x in h)))
