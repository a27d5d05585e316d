#!/usr/bin/env python3
"""A recipe cut to the benchmarks named, in the order named, for device calls that run part of
one (containers.sh `only=`, multi_gpu.sh `ONLY=`): the benchmark that must not be cut by a time
limit goes first.

    python3 scripts/device/cut_recipe.py RECIPE NAME[,NAME...] OUT

A name matches a benchmark's `name` or its `kind`. Exit 2 naming what the recipe lacks.
VARIANTS=p2p (comma-separated, from the environment) keeps only those of the recipe's variants:
a data-parallel decode and the copy check move nothing between GPUs, so their P2P-off runs are
device time that measures nothing new (the report gives data-parallel runs no P2P verdict).
GPUS=N sets the recipe's `gpus`: a data-parallel decode and the copy check on a one-GPU machine
(each GPU runs alone in them; the two-GPU bundles' per-GPU figures are comparable, their totals
are not). `verified_on` is dropped: it tells of the recipe as written, not of a part of it
(a recipe cut to `gpus: 4` read "verified on 2x NVIDIA H200", the report review, 8).
"""

import os
import sys
from pathlib import Path

import yaml


def main(recipe: str, names: str, out: str) -> int:
    data = yaml.safe_load(Path(recipe).read_text())
    wanted = names.split(",")
    keep = [b for n in wanted for b in data["benchmarks"] if n in (b.get("name"), b["kind"])]
    missing = [n for n in wanted if not any(n in (b.get("name"), b["kind"]) for b in keep)]
    if missing:
        print(f"{recipe} has no benchmark named {', '.join(missing)}", file=sys.stderr)
        return 2
    data["benchmarks"] = keep
    if os.environ.get("VARIANTS"):
        variants = os.environ["VARIANTS"].split(",")
        unknown = [v for v in variants if v not in data.get("variants", [])]
        if unknown:
            print(f"{recipe} has no variant named {', '.join(unknown)}", file=sys.stderr)
            return 2
        data["variants"] = variants
    if os.environ.get("GPUS"):
        data["gpus"] = int(os.environ["GPUS"])
    data.pop("verified_on", None)
    Path(out).write_text(yaml.safe_dump(data, sort_keys=False))
    return 0


if __name__ == "__main__":
    if len(sys.argv) != 4:
        sys.exit("usage: cut_recipe.py RECIPE NAME[,NAME...] OUT")
    sys.exit(main(*sys.argv[1:]))
