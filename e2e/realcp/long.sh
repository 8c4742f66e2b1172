#!/usr/bin/env bash
# long.sh: the long realcp stories (make realcp-long), side by side: one
# test process each, with its own etcd, API server, kube-proxy and network
# namespace, so that they share only the machine. REALCP_LONG_SERIAL=1 runs
# them one after another instead (to compare their sync offsets with the
# side-by-side run's). -update-realcp rewrites each story's pinned verdict
# in testdata/realcp-long.txt; otherwise each must match it.
set -euo pipefail
cd "$(dirname "$0")"
stories=${REALCP_LONG_SCENARIOS:-iptables-partial-sync,iptables-large-cluster,nftables-partial-and-full-syncs}
mode=-realcp-check-pinned
[ "${REALCP_LONG_UPDATE:-}" = 1 ] && mode=-update-realcp
logs=${REALCP_LONG_LOGS:-$(mktemp -d /tmp/realcp-long.XXXXXX)}
mkdir -p "$logs"
export CGO_ENABLED=0 PROXYSIM_REALCP_REQUIRED=1
go test -c -o "$logs/realcp.test" .
if [ -z "${KUBE_PROXY:-}" ]; then
  # Built once here, not by each process at once.
  KUBE_PROXY=${XDG_CACHE_HOME:-$HOME/.cache}/proxysim/realcp/kube-proxy
  go build -o "$KUBE_PROXY" k8s.io/kubernetes/cmd/kube-proxy
fi
export KUBE_PROXY
run() {
  "$logs/realcp.test" -test.v -test.count=1 -test.timeout 0 -test.run '^TestKubeProxyBinaryAgainstPrediction$' \
    -realcp-long -realcp-scenario "$1" "$mode" >"$logs/$1.log" 2>&1
}
pids=() names=()
IFS=, read -ra list <<<"$stories"
for s in "${list[@]}"; do
  if [ "${REALCP_LONG_SERIAL:-}" = 1 ]; then
    run "$s" || true
    echo "$s: $(grep -E '^(--- |ok|FAIL)' "$logs/$s.log" | head -1)"
  else
    run "$s" &
    pids+=($!) names+=("$s")
  fi
done
for i in "${!pids[@]}"; do wait "${pids[$i]}" || true; done
fail=0
for s in "${list[@]}"; do
  echo "== $s ($logs/$s.log)"
  grep -E 'largest sync offset|^\s*--- (PASS|FAIL)|differ' "$logs/$s.log" | head -5 || true
  grep -q '^PASS$' "$logs/$s.log" || fail=1
done
exit $fail
