#!/usr/bin/env python3
"""Regenerate docker/<env>/requirements.lock (pinned versions + sha256) from requirements.in.

usage: python3.X scripts/lock_env.py ENV      (run with the image's Python version: markers are
                                               evaluated by the running interpreter)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from kit.runtime.images import environments


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    env = environments.load(argv[0])
    running = f"{sys.version_info.major}.{sys.version_info.minor}"
    if running != env.python:
        print(f"warning: running Python {running}, image Python {env.python}", file=sys.stderr)
    env.lock.write_text(environments.compile_lock(env))
    print(f"wrote {env.lock}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
