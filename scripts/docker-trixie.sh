#!/usr/bin/env bash
# Put Debian trixie's Docker engine (dockerd 26 with CDI, containerd, runc, the docker CLI) into
# DEST/bin, taken out of the .deb files: no package is installed, nothing outside DEST changes.
# (docker-init is tini-static; runc is dropped where this glibc is too old for it.)
# Docker 25+ hands devices to containers through CDI, which the tests and the lent GPU machines
# use; bookworm's docker.io (20.10) predates it. Idempotent: an existing DEST/bin/dockerd is kept.
# usage: scripts/docker-trixie.sh DEST
set -euo pipefail
dest=$1
here="$(cd "$(dirname "$0")" && pwd)"
if [ -x "$dest/bin/dockerd" ]; then exit 0; fi
debs=$(mktemp -d /tmp/kit-docker-debs.XXXXXX)
root=$(mktemp -d /tmp/kit-docker-root.XXXXXX)
trap 'rm -rf "$debs" "$root"' EXIT
bash "$here/debian-trixie-debs.sh" "$debs" docker.io docker-cli containerd runc tini >/dev/null
for f in "$debs"/*.deb; do dpkg-deb -x "$f" "$root"; done
mkdir -p "$dest/bin"
for b in usr/sbin/dockerd usr/sbin/docker-proxy usr/sbin/runc usr/bin/containerd \
         usr/bin/containerd-shim-runc-v2 usr/bin/docker; do
  [ -e "$root/$b" ] && cp "$root/$b" "$dest/bin/"
done
# `init: true` containers run docker-init: Debian's is tini, statically linked
cp "$root/usr/bin/tini-static" "$dest/bin/docker-init"
# trixie's runc needs glibc 2.38: where this machine's is older, the system's runc is used
"$dest/bin/runc" --version >/dev/null 2>&1 || rm "$dest/bin/runc"
ls "$dest/bin"
