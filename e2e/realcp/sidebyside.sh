#!/usr/bin/env bash
# sidebyside.sh STORY[,STORY...] [TEST FLAGS...]: realcp stories side by
# side, one test process each, with its own etcd, API server, kube-proxy
# and network namespace, so that they share only the machine (docs/realcp.md
# "Side by side"). Each story's verdict must be the one pinned
# (-realcp-check-pinned), unless REALCP_UPDATE=1 re-pins it (-update-realcp,
# the long stories only). REALCP_SERIAL=1 runs them one after another, to
# compare their sync offsets with a side-by-side run's. Extra flags go to
# every process (make realcp-long passes -realcp-long). The test binary and
# kube-proxy are built once, first. Logs: REALCP_LOGS (a temp folder).
set -euo pipefail
cd "$(dirname "$0")"
stories=$1
shift
mode=-realcp-check-pinned
[ "${REALCP_UPDATE:-}" = 1 ] && mode=-update-realcp
logs=${REALCP_LOGS:-$(mktemp -d /tmp/realcp-sbs.XXXXXX)}
mkdir -p "$logs"
export CGO_ENABLED=0 PROXYSIM_REALCP_REQUIRED=1
go test -c -o "$logs/realcp.test" .
if [ -z "${KUBE_PROXY:-}" ]; then
  # Built once here, not by every process at once.
  KUBE_PROXY=${XDG_CACHE_HOME:-$HOME/.cache}/proxysim/realcp/kube-proxy
  go build -o "$KUBE_PROXY" k8s.io/kubernetes/cmd/kube-proxy
fi
export KUBE_PROXY
run() {
  local story=$1
  shift
  "$logs/realcp.test" -test.v -test.count=1 -test.timeout 0 -test.run '^TestKubeProxyBinaryAgainstPrediction$' \
    -realcp-scenario "$story" "$mode" "$@" >"$logs/$story.log" 2>&1
}
start=$(date +%s)
IFS=, read -ra list <<<"$stories"
pids=()
for s in "${list[@]}"; do
  if [ "${REALCP_SERIAL:-}" = 1 ]; then
    run "$s" "$@" || true
  else
    run "$s" "$@" &
    pids+=($!)
  fi
done
for p in "${pids[@]}"; do wait "$p" || true; done
fail=0
for s in "${list[@]}"; do
  if grep -q '^PASS$' "$logs/$s.log"; then verdict=PASS; else verdict=FAIL fail=1; fi
  echo "== $s: $verdict ($logs/$s.log)"
  grep -E 'largest sync offset' "$logs/$s.log" | sed 's/^ *[a-z_]*\.go:[0-9]*: /   /' || true
  [ $verdict = PASS ] || grep -v '^ *[a-z_]*\.go:[0-9]*: [IW][0-9]' "$logs/$s.log" | tail -n 80
done
echo "== ${#list[@]} stories in $(( $(date +%s) - start )) s ($([ "${REALCP_SERIAL:-}" = 1 ] && echo one after another || echo side by side))"
exit $fail
