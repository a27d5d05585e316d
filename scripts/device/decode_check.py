#!/usr/bin/env python3
"""Check the kit's decode recipe against its plain reference loop, in one device call.

On a lent GPU machine, from the repository root (carry .whl as for the other device checks):

    python3 scripts/device/decode_check.py            # 2 GPUs: decode-dp, decode-tp2, P2P on/off

1. runs benchmarks/reference/plain_llm_decode.py (transformers' StaticCache, torch.compile
   reduce-overhead) on GPU 0 alone, the recipe's prompt, new tokens and batch sizes;
2. runs `kit reproduce recipes/llm_decode.yaml --runtime host` (REPEATS, default 1);
3. writes comparison.md / comparison.json under $OUT: per batch size the reference's decode
   tokens/s on one GPU, the kit's decode-dp (P2P on) per GPU (its tokens/s over its GPUs), their
   ratio (the goal: at least 1.0), the kit's batch-1 share of the datasheet HBM bandwidth, and
   decode-tp2 with P2P on and off; every raw output beside it.

`--cpu` runs the same steps at smoke scale on the CPU (the reference eager, the kit's --smoke
recipe), so the script's own code is tested without a GPU. Standard library, PyYAML and the
machine's Python only.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parents[2]
RECIPE = ROOT / "recipes" / "llm_decode.yaml"
SHAPE = {  # the reference's flag -> the recipe's parameter
    "--layers": "num_layers", "--hidden": "hidden_size", "--intermediate": "intermediate_size",
    "--heads": "num_heads", "--kv-heads": "num_kv_heads", "--vocab": "vocab_size",
    "--prompt": "prompt_len", "--new": "decode_steps", "--trials": "trials",
}  # fmt: skip


def params(recipe: Path, smoke: bool) -> dict[str, Any]:
    bench = next(
        b
        for b in yaml.safe_load(recipe.read_text())["benchmarks"]
        if b["kind"] == "llm_decode" and b["params"].get("tp") == 1
    )
    return {**bench["params"], **(bench["smoke"] if smoke else {})}


def reference(p: dict[str, Any], cpu: bool, out: Path) -> dict[str, Any]:
    argv = [sys.executable, str(ROOT / "benchmarks" / "reference" / "plain_llm_decode.py")]
    for flag, name in SHAPE.items():
        argv += [flag, str(p[name])]
    argv += ["--batches", *map(str, p["batch_sizes"])] + (["--cpu"] if cpu else [])
    first = (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": first}  # the reference on one GPU
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=1800)
    (out / "reference.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode:
        raise SystemExit(f"reference failed (exit {proc.returncode}): see {out / 'reference.log'}")
    line = next(x for x in proc.stdout.splitlines() if x.startswith("REFERENCE "))
    return json.loads(line.removeprefix("REFERENCE "))


def kit(recipe: Path, cpu: bool, repeats: int, out: Path) -> dict[str, Any]:
    bundle = out / "bundle"
    argv = [sys.executable, "-m", "kit", "reproduce", str(recipe), "--runtime", "host",
            "--repeats", str(repeats), "--out", str(bundle)]  # fmt: skip
    argv += ["--device", "cpu", "--smoke"] if cpu else ["--device", "cuda"]
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
    }
    proc = subprocess.run(argv, capture_output=True, text=True, env=env, timeout=3600)
    (out / "kit.log").write_text(proc.stdout + proc.stderr)
    if not (bundle / "results.json").is_file():
        raise SystemExit(f"kit wrote no results (exit {proc.returncode}): see {out / 'kit.log'}")
    return json.loads((bundle / "results.json").read_text())


def per_batch(results: dict[str, Any], bench: str, variant: str) -> dict[int, dict[str, Any]]:
    """batch -> the median over finished runs of decode tokens/s, and per GPU."""
    runs = [
        r
        for r in results["runs"]
        if (r["benchmark"], r["variant"], r["status"]) == (bench, variant, "ok")
    ]
    found: dict[int, list[float]] = {}
    for r in runs:
        for row in r["data"]["batches"]:
            found.setdefault(row["batch"], []).append(row["decode_tokens_per_s"] / r["world_size"])
    return {b: {"per_gpu": statistics.median(v), "runs": len(v)} for b, v in sorted(found.items())}


def compare(ref: dict[str, Any], results: dict[str, Any]) -> dict[str, Any]:
    dp = per_batch(results, "decode-dp", "p2p")
    rows = []
    for r in ref["batches"]:
        mine = dp.get(r["batch"])
        rows.append({
            "batch": r["batch"],
            "reference_tokens_per_s": r["decode_tokens_per_s"],
            "kit_per_gpu": mine["per_gpu"] if mine else None,
            "ratio": mine["per_gpu"] / r["decode_tokens_per_s"] if mine else None,
        })  # fmt: skip
    # data parallel only: one model a GPU, the figure the datasheet ratio is about (a
    # tensor-parallel run's share mixes its all-reduces into the step)
    share = [
        r["metrics"]["hbm_share_b1"]["value"]
        for r in results["runs"]
        if (r["benchmark"], r["status"]) == ("decode-dp", "ok") and "hbm_share_b1" in r["metrics"]
    ]
    return {
        "reference": ref["reference"],
        "device": ref["device"],
        "rows": rows,
        "hbm_share_b1": statistics.median(share) if share else None,
        "tp2": {v: per_batch(results, "decode-tp2", v) for v in ("p2p", "no-p2p")},
    }


def markdown(c: dict[str, Any]) -> str:
    def num(x: float | None, f: str = ",.1f") -> str:
        return "-" if x is None else format(x, f)

    lines = [
        f"# Decode: the kit against {c['reference']} ({c['device']})", "",
        "| batch | reference tokens/s (1 GPU) | kit decode-dp tokens/s per GPU | kit / reference |",
        "|---|---|---|---|",
    ]  # fmt: skip
    for r in c["rows"]:
        lines.append(f"| {r['batch']} | {num(r['reference_tokens_per_s'])} | "
                     f"{num(r['kit_per_gpu'])} | {num(r['ratio'], '.3f')} |")  # fmt: skip
    lines += ["", f"Batch-1 share of the datasheet HBM bandwidth (decode-dp): {num(c['hbm_share_b1'], '.1%')}", "",
              "| batch | decode-tp2 P2P on, tokens/s per GPU | P2P off |", "|---|---|---|"]  # fmt: skip
    on, off = c["tp2"]["p2p"], c["tp2"]["no-p2p"]
    for b in sorted(set(on) | set(off)):
        lines.append(f"| {b} | {num((on.get(b) or {}).get('per_gpu'))} | "
                     f"{num((off.get(b) or {}).get('per_gpu'))} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cpu", action="store_true", help="smoke scale on the CPU")
    ap.add_argument("--repeats", type=int, default=int(os.environ.get("REPEATS", "1")))
    ap.add_argument("--recipe", type=Path, default=RECIPE, help="a one-GPU machine: one with tp 1")
    a = ap.parse_args()
    out = Path(os.environ.get("OUT", "/tmp/out"))
    out.mkdir(parents=True, exist_ok=True)
    ref = reference(params(a.recipe, a.cpu), a.cpu, out)
    c = compare(ref, kit(a.recipe, a.cpu, a.repeats, out))
    (out / "comparison.json").write_text(json.dumps(c, indent=1) + "\n")
    (out / "comparison.md").write_text(markdown(c))
    print(markdown(c))


if __name__ == "__main__":
    main()
