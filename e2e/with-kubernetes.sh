#!/usr/bin/env bash
# with-kubernetes.sh KUBERNETES MODULE COMMAND
#
# Runs COMMAND (a bash command line) in a temporary copy of the e2e module
# MODULE (e.g. e2e/upstream) whose go.mod points k8s.io/kubernetes at the
# checkout KUBERNETES, and each staging module the checkout has
# (staging/src/k8s.io/NAME with a go.mod) at its folder there. Nothing in
# the repository changes; the copy is removed on exit, however it ends.
# `make upstream-bubble KUBERNETES=path` uses it (docs/realcp.md, "Before
# you send a kube-proxy PR").
set -euo pipefail

if [ $# -ne 3 ]; then
  echo "usage: $0 KUBERNETES MODULE COMMAND" >&2
  exit 2
fi
kube=$(cd "$1" && pwd)
module=$2
cmd=$3
root=$(cd "$(dirname "$0")/.." && pwd)

if [ ! -f "$kube/go.mod" ] || ! grep -q '^module k8s.io/kubernetes$' "$kube/go.mod"; then
  echo "$1: not a k8s.io/kubernetes checkout (its go.mod must say 'module k8s.io/kubernetes')" >&2
  exit 2
fi
if [ ! -f "$root/$module/go.mod" ]; then
  echo "$module: no go.mod under $root" >&2
  exit 2
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/proxysim-with-kubernetes-XXXXXX")
trap 'rm -rf "$tmp"' EXIT
copy="$tmp/$(basename "$module")"
cp -r "$root/$module" "$copy"
cd "$copy"

# The copy is elsewhere: proxysim itself by absolute path.
go mod edit -replace "github.com/proxysim/proxysim=$root"
edits=(-replace "k8s.io/kubernetes=$kube")
staged=0
if [ -d "$kube/staging/src/k8s.io" ]; then
  for dir in "$kube"/staging/src/k8s.io/*/; do
    dir=${dir%/}
    [ -f "$dir/go.mod" ] || continue
    edits+=(-replace "k8s.io/$(basename "$dir")=$dir")
    staged=$((staged + 1))
  done
fi
go mod edit "${edits[@]}"
echo "== $module against $kube ($staged staging modules from the checkout; the others stay pinned)"
# A checkout's dependencies may differ from v1.36.3's: let go resolve them
# in the copy.
export GOFLAGS="${GOFLAGS:+$GOFLAGS }-mod=mod"
bash -c "$cmd"
