#!/usr/bin/env bash
# same-traces.sh BASE: checks that a refactoring changed no behaviour. It
# builds proxysim from git revision BASE (a throwaway copy made with git
# archive; no worktree, nothing in the repo changes) and from the working
# tree, replays every bundled scenario with both (proxysim trace, trace
# --work, and replay, whose wall-clock "virtual in 4ms" is not compared),
# and fails on the first byte that differs. Run from the repository's root
# (make same-traces BASE=main).
set -euo pipefail
base=${1:?usage: same-traces.sh BASE}
go=${GO:-go}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/base"
git archive "$base" | tar -x -C "$tmp/base"
(cd "$tmp/base" && CGO_ENABLED=0 $go build -o "$tmp/proxysim-base" ./cmd/proxysim)
CGO_ENABLED=0 $go build -o "$tmp/proxysim-tree" ./cmd/proxysim

record() { # record BINARY OUTDIR: every bundled scenario of BINARY's library
	local bin=$1 out=$2 n f
	mkdir -p "$out"
	while read -r n; do
		f=${n//\//_}
		# A scenario tagged large takes minutes a run (make cl2-load-5000 replays it).
		if "$bin" show "$n" </dev/null 2>/dev/null | grep -Eq '^tags:.*\blarge\b'; then continue; fi
		{ "$bin" trace "$n" 2>&1; echo "exit $?"; } >"$out/$f.trace" || true
		{ "$bin" trace --work "$n" 2>&1; echo "exit $?"; } >"$out/$f.work" || true
		{ "$bin" replay "$n" 2>&1; echo "exit $?"; } | sed -E 's/ virtual in [0-9.]+(ns|µs|ms|s|m[0-9.]*s)/ virtual in X/' >"$out/$f.replay" || true
	done < <("$bin" list 2>/dev/null | awk '{print $1}')
}
record "$tmp/proxysim-base" "$tmp/out-base"
record "$tmp/proxysim-tree" "$tmp/out-tree"
# The library may differ (a scenario added): compare those both have.
n=0
for f in "$tmp"/out-base/*; do
	g="$tmp/out-tree/$(basename "$f")"
	[ -e "$g" ] || continue
	n=$((n + 1))
	if ! cmp -s "$f" "$g"; then
		echo "same-traces: $(basename "$f") differs from $base:" >&2
		diff "$f" "$g" | head -20 >&2
		exit 1
	fi
done
echo "same-traces: $((n / 3)) bundled scenarios, trace, trace --work and replay byte-identical to $base"
