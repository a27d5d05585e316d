#!/usr/bin/env bash
# On the development machine: put what a lent GPU machine lacks into the folders a device call
# carries (both ignored by git, never committed):
#   .whl/     the driver's pure-Python dependencies missing there (pydantic, the Docker SDK)
#   .device/  docker-bin.tar.xz: Debian trixie's dockerd 26 (CDI), containerd, runc, docker-init
#             taken out of the .deb files (38 MB: the whole call carries at most 64 MB)
#   .podman/  podman-bin.tar.xz (with `podman` as argument): this machine's Podman 4.3 (Debian 12,
#             scripts/ci-podman.sh installs it), conmon and catatonit, the shared libraries they
#             need beyond glibc, and the trixie runc of docker-bin.tar.xz (13 MB). The working
#             tree and .device/ together leave no room for it: a Podman call carries .whl and
#             .podman, not .device
# usage: bash scripts/device/prepare.sh [podman]   then carry [".whl", ".device"] (or ".podman")
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
mkdir -p .whl .device
py=(--no-deps --only-binary=:all: --python-version 3.12 --implementation cp
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64
    -d .whl)
if ! ls .whl/pydantic_core-* >/dev/null 2>&1; then
  python3 -m pip download -q "${py[@]}" pydantic==2.14.3 pydantic-core==2.50.4 typing-extensions==4.16.0 \
      annotated-types==0.8.0 typing-inspection==0.4.5 docker==7.2.0
fi
if [ ! -s .device/docker-bin.tar.xz ]; then
  bins=$(mktemp -d /tmp/kit-docker-bins.XXXXXX)
  bash scripts/docker-trixie.sh "$bins"
  # the lent machines run Ubuntu 24.04 (glibc 2.39): trixie's runc runs there even where this
  # machine's glibc is too old for it and docker-trixie.sh dropped it
  if [ ! -e "$bins/bin/runc" ]; then
    debs=$(mktemp -d /tmp/kit-runc.XXXXXX)
    bash scripts/debian-trixie-debs.sh "$debs" runc >/dev/null
    dpkg-deb -x "$debs"/runc_*.deb "$debs/x" && cp "$debs/x/usr/sbin/runc" "$bins/bin/"
    rm -rf "$debs"
  fi
  # no userland proxy there, and no CLI: the scripts talk to the daemon through the Docker SDK
  rm -f "$bins/bin/docker-proxy" "$bins/bin/docker"
  tar -C "$bins" -cf - bin | xz -9 -T0 >.device/docker-bin.tar.xz
  rm -rf "$bins"
fi
if [ "${1:-}" = podman ] && [ ! -s .podman/podman-bin.tar.xz ]; then
  command -v podman >/dev/null || { echo "prepare: no podman here (bash scripts/ci-podman.sh)" >&2; exit 2; }
  mkdir -p .podman
  grep -qx '/.podman/' .git/info/exclude 2>/dev/null || echo /.podman/ >>.git/info/exclude
  pb=$(mktemp -d /tmp/kit-podman-bins.XXXXXX)
  mkdir -p "$pb/bin" "$pb/lib"
  cp "$(command -v podman)" /usr/bin/conmon /usr/libexec/podman/catatonit "$pb/bin/"
  tar -C "$pb" -xJf .device/docker-bin.tar.xz bin/runc
  # every shared library beyond glibc's own: the lent machine's Ubuntu may lack them
  for b in "$pb/bin/podman" "$pb/bin/conmon"; do ldd "$b" | awk '/=>/ {print $3}'; done | sort -u \
      | grep -vE '/(libc|libm|libpthread|libdl|librt)\.so' | xargs -I{} cp -L {} "$pb/lib/"
  tar -C "$pb" -cf - bin lib | xz -9 -T0 >.podman/podman-bin.tar.xz
  rm -rf "$pb"
fi
du -sh .whl .device .podman 2>/dev/null
