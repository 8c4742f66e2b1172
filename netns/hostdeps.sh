#!/usr/bin/env bash
# Installs the user-space tools the real-kernel suites need on this host
# (root, apt): iptables (both the nft and the legacy multi-binaries), nft,
# conntrack and iproute2. Idempotent: the package lists are fetched only
# when something is missing. It changes no netfilter table and no
# alternative: the suites call xtables-nft-multi / xtables-legacy-multi by
# their own names, inside throwaway network namespaces.
set -euo pipefail
need=()
for pair in \
  xtables-nft-multi:iptables \
  xtables-legacy-multi:iptables \
  nft:nftables \
  conntrack:conntrack \
  ip:iproute2; do
  bin=${pair%%:*} pkg=${pair#*:}
  if ! command -v "$bin" >/dev/null && ! [ -x "/usr/sbin/$bin" ] && ! [ -x "/sbin/$bin" ]; then
    case " ${need[*]-} " in *" $pkg "*) ;; *) need+=("$pkg") ;; esac
  fi
done
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
  }
fi
