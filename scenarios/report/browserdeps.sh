#!/usr/bin/env bash
# Installs what the report page's browser test needs on this host (root,
# apt): Chromium from Debian's archive, and a font for its screenshots.
# Idempotent: the package lists are fetched only when something is missing.
# It only installs packages; the test runs Chromium headless on a local
# file, with no network.
set -euo pipefail
need=()
if ! command -v chromium >/dev/null; then
  need+=(chromium)
fi
if ! [ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ]; then
  need+=(fonts-dejavu-core)
fi
if [ ${#need[@]} -gt 0 ]; then
  if [ "$(id -u)" != 0 ]; then
    echo "scenarios/report/browserdeps.sh: ${need[*]} missing, and installing needs root" >&2
    exit 1
  fi
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null 2>&1 || {
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "${need[@]}"
  }
fi
chromium --version
