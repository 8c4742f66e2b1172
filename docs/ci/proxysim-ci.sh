#!/usr/bin/env bash
# proxysim-ci.sh: replay a folder of proxysim scenarios in CI, stage by stage,
# with a JUnit report per stage. It needs only a proxysim binary (go install
# it; see docs/ci/README.md) and, for the last stage, Go:
#
#   1. fake     every scenario on the fake dataplane (in memory, any machine)
#   2. netns    the iptables and nftables scenarios on this host's kernel, in
#               throwaway network namespaces (root; iptables, nft)
#   3. ipvs     the IPVS scenarios in Debian's kernel under QEMU (--dataplane
#               vm), or on this kernel with PROXYSIM_IPVS_DATAPLANE=netns
#   4. go-test  go test of the packages that hold your bubble.Replay tests
#
# Usage: proxysim-ci.sh [FOLDER|FILE...]        (default: the folder proxysim)
#
# Environment (all optional):
#   PROXYSIM                  the proxysim binary (default: proxysim on PATH)
#   PROXYSIM_RESULTS          where the JUnit reports go (default: proxysim-results)
#   PROXYSIM_SKIP_FAKE=1      skip stage 1; likewise PROXYSIM_SKIP_NETNS,
#                             PROXYSIM_SKIP_IPVS, PROXYSIM_SKIP_GO_TEST
#   PROXYSIM_IPTABLES_BACKENDS  iptables backends stage 2 replays on (default: nft;
#                             "nft legacy" for both)
#   PROXYSIM_IPVS_DATAPLANE   vm (default) or netns (a host kernel with ip_vs)
#   PROXYSIM_GO_PACKAGES      packages for stage 4, e.g. "./proxy/..." (unset: the
#                             stage is skipped, saying so)
#   PROXYSIM_GO_TEST_FLAGS    flags for go test (default: -count=1)
#
# Every stage runs, whatever the others did; the script exits 1 if any
# failed, after a summary with each stage's time. A stage that cannot run
# (a tool missing) fails, and `proxysim doctor` says what to install: skip
# the stage by its variable if this CI is not meant to run it.
set -uo pipefail

proxysim=${PROXYSIM:-proxysim}
results=${PROXYSIM_RESULTS:-proxysim-results}
if [ $# -eq 0 ]; then set -- proxysim; fi
if ! command -v "$proxysim" >/dev/null 2>&1; then
  echo "proxysim-ci: no proxysim binary ($proxysim): CGO_ENABLED=0 go install github.com/proxysim/proxysim/cmd/proxysim@latest" >&2
  exit 2
fi
mkdir -p "$results" || exit 2

# Stages that need root run through sudo when this shell is not root.
as_root=()
if [ "$(id -u)" != 0 ]; then
  if command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then
    as_root=(sudo -E)
  fi
fi

summary=()
failed=0

# stage NAME COMMAND...: runs one stage, timed, and records how it ended.
stage() {
  local name=$1; shift
  echo "== proxysim-ci: $name"
  local start=$SECONDS
  "$@"
  local code=$?
  local took=$((SECONDS - start))
  if [ $code = 0 ]; then
    summary+=("ok    $name (${took}s)")
  else
    summary+=("FAIL  $name (${took}s, exit $code)")
    failed=1
  fi
  echo "== proxysim-ci: $name: exit $code in ${took}s"
}

skipped() { summary+=("skip  $1 ($2)"); echo "== proxysim-ci: $1: skipped ($2)"; }

# needs CHECKS: the doctor's verdict on what a stage needs, printed whole
# when something is missing.
needs() {
  if ! ${as_root[@]+"${as_root[@]}"} "$proxysim" doctor --require "$1" >"$results/doctor.txt" 2>&1; then
    cat "$results/doctor.txt" >&2
    echo "proxysim-ci: this stage needs $1 (see the install commands above)" >&2
    return 3
  fi
}

targets=("$@")

# The stages' commands.
replay_fake() {
  "$proxysim" replay --junit "$results/fake.xml" "${targets[@]}"
}
replay_netns() { # CHECKS MODE JUNIT [FLAGS...]
  local checks=$1 mode=$2 junit=$3; shift 3
  needs "$checks" || return
  ${as_root[@]+"${as_root[@]}"} "$proxysim" replay --dataplane netns --mode "$mode" --junit "$results/$junit" "$@" "${targets[@]}"
}
replay_vm() {
  needs vm || return
  "$proxysim" replay --dataplane vm --mode ipvs --junit "$results/vm-ipvs.xml" "${targets[@]}"
}

if [ "${PROXYSIM_SKIP_FAKE:-}" = 1 ]; then skipped fake PROXYSIM_SKIP_FAKE=1; else
  stage fake replay_fake
fi

if [ "${PROXYSIM_SKIP_NETNS:-}" = 1 ]; then skipped netns PROXYSIM_SKIP_NETNS=1; else
  for b in ${PROXYSIM_IPTABLES_BACKENDS:-nft}; do
    stage "netns iptables ($b)" replay_netns "netns,iptables-$b" iptables "netns-iptables-$b.xml" --iptables "$b"
  done
  stage "netns nftables" replay_netns netns,nftables nftables netns-nftables.xml
fi

if [ "${PROXYSIM_SKIP_IPVS:-}" = 1 ]; then skipped ipvs PROXYSIM_SKIP_IPVS=1; else
  case ${PROXYSIM_IPVS_DATAPLANE:-vm} in
    vm) stage "ipvs (vm)" replay_vm ;;
    netns) stage "ipvs (netns)" replay_netns netns,ip_vs ipvs netns-ipvs.xml ;;
    *) echo "proxysim-ci: PROXYSIM_IPVS_DATAPLANE=$PROXYSIM_IPVS_DATAPLANE: want vm or netns" >&2; exit 2 ;;
  esac
fi

if [ "${PROXYSIM_SKIP_GO_TEST:-}" = 1 ]; then skipped go-test PROXYSIM_SKIP_GO_TEST=1
elif [ -z "${PROXYSIM_GO_PACKAGES:-}" ]; then skipped go-test "PROXYSIM_GO_PACKAGES is not set"
else
  # shellcheck disable=SC2086 # word splitting is the point: lists of packages and flags
  stage go-test go test ${PROXYSIM_GO_TEST_FLAGS:--count=1} $PROXYSIM_GO_PACKAGES
fi

echo "== proxysim-ci: summary (JUnit reports in $results/)"
printf '  %s\n' "${summary[@]}"
exit $failed
