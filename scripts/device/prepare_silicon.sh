#!/usr/bin/env bash
# On the development machine: fill .nvbandwidth/ (ignored by git, never committed) for
# scripts/device/silicon_check.py, which builds NVIDIA's nvbandwidth on the GPU machine:
#   .nvbandwidth/src/    nvbandwidth's sources, exported from a clone or fetched snapshot of
#                        github.com/NVIDIA/nvbandwidth (COMMIT names the commit)
#   .nvbandwidth/boost/  Boost program_options 1.83: Debian trixie's libboost-program-options1.83-dev
#                        (the static library) and libboost1.83-dev (the headers), 11 MB of .debs;
#                        trixie's GCC 14 build links with Ubuntu 24.04's GCC 13 there
# usage: bash scripts/device/prepare_silicon.sh NVBANDWIDTH_GIT_DIR
#        then carry [".whl", ".nvbandwidth"] (scripts/device/prepare.sh makes .whl)
set -euo pipefail
git_dir=${1:?usage: prepare_silicon.sh NVBANDWIDTH_GIT_DIR (a clone or bare snapshot)}
root="$(cd "$(dirname "$0")/../.." && pwd)"
cd "$root"
rm -rf .nvbandwidth/src
mkdir -p .nvbandwidth/src .nvbandwidth/boost
git --git-dir="$git_dir" archive HEAD | tar -x -C .nvbandwidth/src --exclude=diagrams
git --git-dir="$git_dir" rev-parse HEAD >.nvbandwidth/src/COMMIT
if ! ls .nvbandwidth/boost/libboost-program-options1.83-dev_*.deb >/dev/null 2>&1; then
  bash scripts/debian-trixie-debs.sh .nvbandwidth/boost libboost-program-options1.83-dev libboost1.83-dev
fi
du -sh .nvbandwidth
