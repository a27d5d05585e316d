#!/usr/bin/env bash
# System packages the tests need on a fresh Debian machine: WeasyPrint's Pango, poppler-utils
# (pdftotext/pdftoppm to look at the PDF), Chromium (to open the HTML), debootstrap,
# ssh-keygen (signed bundles).
# Idempotent: installs only what is missing. Needs root (CI runs as root).
set -euo pipefail
need=()
command -v pdftoppm >/dev/null || need+=(poppler-utils)
ldconfig -p | grep -q libpango-1.0 || need+=(libpango-1.0-0 libpangoft2-1.0-0)
# WeasyPrint subsets fonts in C with it (a quarter faster than its fontTools fallback)
ldconfig -p | grep -q libharfbuzz-subset || need+=(libharfbuzz-subset0)
[ -e /usr/share/fonts/truetype/dejavu/DejaVuSans.ttf ] || need+=(fonts-dejavu-core)
command -v chromium >/dev/null || need+=(chromium)
# Docker: scripts/ci-docker.sh (trixie's dockerd 26 with CDI, out of its .deb files)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v ssh-keygen >/dev/null || need+=(openssh-client)
if [ ${#need[@]} -gt 0 ]; then
  echo "ci-setup: installing ${need[*]}"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
