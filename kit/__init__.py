"""kit: a containerized reproducibility kit for GPU hardware.

This module must stay import-light: the worker package (kit.worker) is copied into the
benchmark images, and it imports kit's top level.
"""

__version__ = "0.1.0"


def version_line() -> str:
    """What `kit --version` prints (kit.__main__ answers it alone; the CLI's option too)."""
    return f"kit {__version__}"
