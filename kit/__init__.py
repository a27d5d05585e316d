"""kit: a containerized reproducibility kit for GPU hardware.

This module must stay import-light: the worker package (kit.worker) is copied into the
benchmark images, and it imports kit's top level.
"""

__version__ = "0.1.0"
