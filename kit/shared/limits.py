"""Bounds shared by the recipe's fields and the command-line options that override them.

Standard library only, and apart from the recipe model: the CLI's option types read these at
import time, and `kit --version` must not pay for the recipe's pydantic models to print one line.
"""

MAX_REPEATS = 100
MAX_GPUS = 64
MAX_NODES = 1024
