#!/usr/bin/env bash
# Installs the userspace tools that real-kernel and side-by-side tests exec
# on this host, from Debian's archive (root, apt): iptables (iptables-nft
# and iptables-legacy), nftables (nft) and conntrack.
set -euo pipefail
need=()
command -v iptables-nft >/dev/null || need+=(iptables)
command -v nft >/dev/null || need+=(nftables)
command -v conntrack >/dev/null || need+=(conntrack)
command -v unshare >/dev/null || need+=(util-linux)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}"
fi
