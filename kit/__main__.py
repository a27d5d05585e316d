"""`kit` and `python -m kit`: the version answers before the CLI is built.

`kit --version` is what a script or a bug report asks first; building the CLI (typer, rich and
every command's signature) would take most of its time (issue 46). Everything else goes to
kit.cli, imported only then.
"""

from __future__ import annotations

import sys

from kit import version_line


def main() -> None:
    if sys.argv[1:] == ["--version"]:
        print(version_line())
        return
    from kit.cli import main as cli  # the CLI's imports, only when it runs

    cli()


if __name__ == "__main__":
    main()
