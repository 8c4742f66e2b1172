#!/usr/bin/env bash
# Installs what the VM runner needs from Debian's archive (root, apt).
set -euo pipefail
need=()
command -v qemu-system-x86_64 >/dev/null || need+=(qemu-system-x86)
[ -x /bin/busybox ] && /bin/busybox --list >/dev/null 2>&1 && ldd /bin/busybox 2>&1 | grep -q "not a dynamic" || need+=(busybox-static)
command -v depmod >/dev/null || need+=(kmod)
command -v cpio >/dev/null || need+=(cpio)
# copied into the guest: the packet path of the IPVS mode (ipsets, iptables)
[ -x /usr/sbin/xtables-legacy-multi ] || need+=(iptables)
[ -x /usr/sbin/ipset ] || need+=(ipset)
if [ ${#need[@]} -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq "${need[@]}"
fi
# The kernel package is resolved and fetched at run time; the lists must exist.
apt-cache depends linux-image-cloud-amd64 >/dev/null 2>&1 || apt-get update -qq
