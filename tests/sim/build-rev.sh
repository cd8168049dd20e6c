#!/usr/bin/env bash
# tests/sim/build-rev.sh - builds another revision's simulator, for tests/sim/sweep.py --against.
#
# Usage: tests/sim/build-rev.sh REV
#   REV: any git revision (a commit, a tag, main~10). Checks it out in a
#   detached worktree under build/rev/<commit>/src (kept for the next call),
#   builds its warmlane-sim there (release), and prints the binary's path.
# Example, every run of the report against the policy issue 12 was filed on:
#   tests/sim/sweep.py --against "$(tests/sim/build-rev.sh e766218)"
set -euo pipefail

rev=${1:?usage: tests/sim/build-rev.sh REV}
top=$(cd "$(dirname "$0")/../.." && pwd)
cd "$top"
commit=$(git rev-parse --verify --quiet "$rev^{commit}") ||
	{ echo "build-rev.sh: $rev: not a revision of this repository" >&2; exit 2; }
dir="$top/build/rev/$commit"
if [ ! -d "$dir/src" ]; then
	git worktree prune # a worktree whose folder went with build/
	mkdir -p "$dir"
	git worktree add --detach "$dir/src" "$commit" >/dev/null 2>&1 ||
		{ echo "build-rev.sh: git worktree add failed for $commit" >&2; exit 1; }
fi
if [ ! -f "$dir/build/build.ninja" ]; then
	meson setup "$dir/build" "$dir/src" --buildtype=release >/dev/null ||
		{ echo "build-rev.sh: meson setup failed for $commit (see $dir/build/meson-logs)" >&2; exit 1; }
fi
ninja -C "$dir/build" tests/sim/warmlane-sim >/dev/null ||
	{ echo "build-rev.sh: the simulator of $commit does not build" >&2; exit 1; }
echo "$dir/build/tests/sim/warmlane-sim"
