#!/usr/bin/env bash
# Download Debian trixie .deb files into a folder, without touching this machine's apt setup.
# The mirror is the one this machine's own Debian sources name (its first URIs line), with the
# suite changed to trixie; the package lists go to a private folder under /tmp.
# usage: scripts/debian-trixie-debs.sh DEST PACKAGE...
set -euo pipefail
dest=$1; shift
uri=$(grep -hoE '^URIs:[[:space:]]*\S+' /etc/apt/sources.list.d/*.sources 2>/dev/null | head -1 | awk '{print $2}')
if [ -z "$uri" ]; then
  uri=$(grep -hoE '^deb[[:space:]]+\S+' /etc/apt/sources.list 2>/dev/null | head -1 | awk '{print $2}')
fi
[ -n "$uri" ] || { echo "no Debian mirror named in /etc/apt sources" >&2; exit 1; }
work=/tmp/kit-trixie-apt
mkdir -p "$work/lists/partial" "$dest"
echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $uri trixie main" >"$work/sources.list"
opts=(-o "Dir::Etc::SourceList=$work/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
      -o "Dir::State::Lists=$work/lists" -o "APT::Architecture=amd64" -o "APT::Architectures=amd64")
apt-get "${opts[@]}" -qq update
(cd "$dest" && apt-get "${opts[@]}" -qq download "$@")
ls "$dest"
