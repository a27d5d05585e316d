#!/usr/bin/env bash
# Build the local base image the docker tests use instead of a registry image (none is reachable
# in CI): a minimal Debian bookworm rootfs with python3 and venv, made by debootstrap and turned
# into an image with `docker import`. Takes a few minutes; skipped when the image already exists.
#
# usage: tests/docker/make_base_image.sh [TAG]      (default kit-test-base:bookworm)
# env:   KIT_DEBIAN_MIRROR (default http://deb.debian.org/debian)
set -euo pipefail

tag="${1:-kit-test-base:bookworm}"
mirror="${KIT_DEBIAN_MIRROR:-http://deb.debian.org/debian}"

if docker image inspect "$tag" >/dev/null 2>&1; then
    echo "base image $tag exists; nothing to do"
    exit 0
fi
command -v debootstrap >/dev/null || { echo "debootstrap missing: apt-get install debootstrap" >&2; exit 1; }

root="$(mktemp -d /tmp/kit-rootfs.XXXXXX)"
trap 'rm -rf --one-file-system "$root"' EXIT

debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
    bookworm "$root" "$mirror"
# Keep the image small: apt lists and caches are not needed to run pip from a wheelhouse.
chroot "$root" apt-get clean
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin "$root"/usr/share/doc/* \
    "$root"/usr/share/man/* "$root"/usr/share/locale/*

tar -C "$root" -c . | docker import \
    --change 'ENV LANG=C.UTF-8' \
    --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'CMD ["/bin/bash"]' \
    --message "kit test base: debootstrap bookworm minbase + python3" \
    - "$tag"
echo "built base image $tag"
