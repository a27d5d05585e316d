"""What tells two Docker daemon URLs of a recipe's nodes apart (one daemon named twice on the
host network would run two nodes on one machine's ports)."""

from __future__ import annotations

import posixpath
import re
from urllib.parse import urlsplit

NETWORK_DAEMON = re.compile(
    r"^(ssh|tcp|http|https)://"
    r"([A-Za-z0-9_][A-Za-z0-9_.-]*@)?"  # a user: never an option (-oProxyCommand=...)
    r"([A-Za-z0-9](?:[A-Za-z0-9_.-]*[A-Za-z0-9])?|\[[0-9A-Fa-f:.]+\])"  # a host name or [IPv6]
    r"(:[0-9]{1,5})?/?$"
)
"""A daemon on another machine: [USER@]HOST[:PORT], each part a name, never an option to ssh."""
LOCAL_DAEMON = re.compile(r"^(unix|npipe)://\S+$")


def url_ok(url: str) -> bool:
    """A Docker daemon URL a node may name: a local socket, or [USER@]HOST[:PORT] over ssh or
    TCP whose user and host are names (ssh would read `ssh://-oProxyCommand=...` as an option)."""
    if LOCAL_DAEMON.match(url):
        return True
    m = NETWORK_DAEMON.match(url)
    return bool(m) and (m.group(4) is None or 1 <= int(m.group(4)[1:]) <= 65535)


def daemon_key(url: str) -> tuple[str, str]:
    """What tells two daemon URLs apart: a unix socket's normalised path
    (unix:///var/run//docker.sock is unix:///var/run/docker.sock), else the host (any user) and
    port, in lower case."""
    parsed = urlsplit(url)
    if parsed.scheme in ("unix", "npipe"):
        return parsed.scheme, posixpath.normpath("/" + (parsed.netloc + parsed.path).lstrip("/"))
    try:
        port = parsed.port
    except ValueError:
        port = None
    return "net", f"{(parsed.hostname or '').lower()}:{port or ''}"
