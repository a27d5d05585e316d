"""What tells two Docker daemon URLs of a recipe's nodes apart (one daemon named twice on the
host network would run two nodes on one machine's ports)."""

from __future__ import annotations

import posixpath
from urllib.parse import urlsplit


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
