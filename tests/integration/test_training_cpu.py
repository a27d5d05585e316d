"""The training workloads end to end on the CPU: `kit reproduce` of each shipped recipe at its
smoke scale, real torchrun with two gloo processes, one variant and one repeat to stay fast."""

from __future__ import annotations

import json
import math
import statistics
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, run_kit

pytestmark = pytest.mark.slow


def reproduce_smoke(tmp_path: Path, recipe_name: str, **override) -> tuple[int, dict, str]:
    """Run a shipped recipe at smoke scale with one variant (p2p) and one repeat."""
    recipe = yaml.safe_load((ROOT / "recipes" / f"{recipe_name}.yaml").read_text())
    recipe.update({"variants": ["p2p"], "repeats": 1, **override})
    path = tmp_path / f"{recipe_name}.yaml"
    path.write_text(yaml.safe_dump(recipe, sort_keys=False))
    out = tmp_path / "bundle"
    proc = run_kit("reproduce", str(path), "--device", "cpu", "--repeats", "1", "--out", str(out))
    return proc.returncode, json.loads((out / "results.json").read_text()), proc.stderr


def check_training_run(run: dict, unit: str, steps: int) -> None:
    assert run["status"] == "ok", run.get("error")
    assert run["world_size"] == 2 and run["backend"] == "gloo" and run["device"] == "cpu"
    d, m = run["data"], run["metrics"]
    warm = d["warmup_steps"]
    assert d["steps"] == steps and len(d["loss"]) == steps and warm == len(d["warmup_loss"]) >= 1
    assert (
        len(d["step_times_s"]) == warm + steps
    )  # every step, warm-up first (the report's contract)
    assert all(t > 0 for t in d["step_times_s"])
    measured = d["step_times_s"][warm:]
    losses = d["warmup_loss"] + d["loss"]
    assert all(math.isfinite(x) for x in losses)
    assert d["loss_first"] == losses[0] and d["loss_last"] == losses[-1]
    # It trained: the first batch's loss fell when that batch came round again (a model that does
    # not learn reads the same loss on the same batch). Not the last loss against the first: the
    # smoke is deterministic and the ResNet-18 one spikes at its 15th step (4.05 against 2.81,
    # then falls again), which is where a fast machine's 3 s window ended (issue 46, ci90).
    again = losses[d["params"]["data_batches"] :: d["params"]["data_batches"]]
    assert again and min(again) < losses[0], f"the loss never fell: did the model train? {losses}"
    assert m["throughput"]["unit"] == f"{unit}/s" and m["throughput"]["value"] > 0
    assert m["throughput_window"]["value"] > 0 and m["step_time_s"]["value"] > 0
    assert m["step_time_s"]["value"] == pytest.approx(statistics.median(measured))
    assert m["throughput"]["value"] == pytest.approx(
        d[f"{unit}_per_step"] / m["step_time_s"]["value"]
    )
    # memory: no device memory on the CPU (stated), the host peak RSS instead; no MFU on the CPU
    assert d["peak_mem_gib"] is None and "peak_mem_gib" not in m and "CPU" in d["peak_mem_note"]
    assert d["host_peak_rss_gib"] > 0
    assert d["mfu"] is None and "mfu" not in m and d["mfu_note"] == "null: not on a GPU"
    assert d["data"].startswith("synthetic") and d["weights"].startswith("random")
    assert d.get("flops_per_step", 0) > 0
    # the collector was frozen for the window, and what its collections there cost is recorded
    assert "gc.freeze" in d["gc_note"] and d["gc_window_s"] >= 0
    assert len(d["gc_collections"]) == 3 and all(n >= 0 for n in d["gc_collections"])


def test_gpt2_ddp_smoke(tmp_path):
    code, results, err = reproduce_smoke(tmp_path, "gpt2_ddp")
    assert code == 0, err
    (run,) = results["runs"]
    check_training_run(run, "samples", steps=3)
    d = run["data"]
    assert d["params"]["n_layer"] == 2 and d["precision"] == "fp32"
    assert d["matmul_precision"] == "highest"  # fp32 without TF32, as the HF Trainer
    assert run["metrics"]["tokens_per_s"]["value"] == pytest.approx(
        run["metrics"]["throughput"]["value"] * 64
    )
    assert d["param_count"] == d["param_count_formula"]


def test_llama_lora_fsdp_smoke(tmp_path):
    code, results, err = reproduce_smoke(tmp_path, "fsdp_llama")
    assert code == 0, err
    (run,) = results["runs"]
    check_training_run(run, "tokens", steps=3)
    d = run["data"]
    assert d["params"]["gradient_checkpointing"] is True and d["params"]["num_layers"] == 2
    assert d["weights"] == "random (from config)"
    assert d["param_count"] == d["param_count_formula"]
    assert d["lora_param_count"] == d["lora_param_count_formula"] > 0
    assert "FSDP2" in d["parallelism"] and d["recompute_flops_per_token"] > 0
    assert d["flops_formula"].startswith("4 N_mm + 6 N_lora + 12 L T d")


def test_resnet_ddp_smoke_both_shapes_and_a_minimum_window(tmp_path):
    """Both shipped shapes; resnet18-32 also with min_window_s: its timed window lasts at least
    that long and the rule is recorded (one ResNet launch fewer than a run of its own: issue 46)."""
    recipe = yaml.safe_load((ROOT / "recipes" / "resnet_ddp.yaml").read_text())
    small = next(b for b in recipe["benchmarks"] if b["name"] == "resnet18-32")
    # two planned steps and a 3 s floor: on a loaded CI machine three smoke steps alone once
    # lasted 2.05 s, so a 2 s floor over 3 steps did not always need more steps
    small["smoke"]["steps"] = 2
    small["smoke"]["min_window_s"] = 3.0
    code, results, err = reproduce_smoke(tmp_path, "resnet_ddp", benchmarks=recipe["benchmarks"])
    assert code == 0, err
    runs = {r["benchmark"]: r for r in results["runs"]}
    assert sorted(runs) == ["resnet18-32", "resnet50-224"]
    check_training_run(runs["resnet50-224"], "images", steps=3)
    assert runs["resnet50-224"]["data"]["params"]["arch"] == "resnet50"
    # FLOPs per image come from torch's counter: ResNet-50 does more work than ResNet-18
    assert (
        runs["resnet50-224"]["data"]["flops_per_image"]
        > runs["resnet18-32"]["data"]["flops_per_image"]
    )
    run = runs["resnet18-32"]
    d = run["data"]
    check_training_run(run, "images", steps=d["steps"])
    # planned from the fastest warm-up step (this rank's; the ranks take the largest count):
    # more than 2 steps whenever 2 at that pace fall short of 3 s, however loaded the machine
    fastest = min(d["step_times_s"][: d["warmup_steps"]])
    assert d["window_s"] >= 3.0 and d["steps"] >= max(2, math.ceil(3.0 / fastest))
    # the plan from the fastest warm-up step may fall short on a noisy CPU: then the rule says
    # how many steps were added after a synchronize
    assert d["window_rule"].startswith(
        f"at least 2 steps and at least 3 s of timed steps: {d['steps']} steps ran"
    )
    assert "energy_counter" not in d  # the CPU has no energy counter to read


def test_llama_local_model_and_data_paths_are_used_and_reported(tmp_path):
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=512, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, tie_word_embeddings=False,
    )  # fmt: skip
    model_dir = tmp_path / "tiny-llama"
    LlamaForCausalLM(config).save_pretrained(model_dir)
    tokens = tmp_path / "tokens.pt"
    torch.save(torch.randint(0, 512, (4 * 2 * 64,)), tokens)
    smoke = {"seq_len": 64, "warmup_steps": 1, "steps": 3, "data_batches": 4, "lr": 0.01}
    code, results, err = reproduce_smoke(
        tmp_path, "fsdp_llama",
        benchmarks=[
            {"kind": "llama_lora_fsdp", "name": "local",
             "params": {"model_path": str(model_dir), "data_path": str(tokens), **smoke}},
            {"kind": "llama_lora_fsdp", "name": "missing",
             "params": {"model_path": str(tmp_path / "nowhere"), **smoke}},
        ],
    )  # fmt: skip
    assert code == 1, err  # the missing path fails its run; the other completes
    runs = {r["benchmark"]: r for r in results["runs"]}
    local = runs["local"]
    assert local["status"] == "ok", local.get("error")
    assert local["data"]["weights"] == f"pretrained weights from {model_dir}"
    assert local["data"]["data"] == f"local file {tokens}"
    assert local["data"]["config"]["vocab_size"] == 512
    missing = runs["missing"]
    assert missing["status"] == "failed"
    # both ranks fail on the path; torchrun stops the group at the first failed rank, so rank 0
    # writes its own record only when it fails first (under load rank 1 sometimes does, and the
    # driver then records the exit with the cause from the log): either way the error names it
    cause = f"FileNotFoundError: model_path {tmp_path / 'nowhere'}: no config.json there"
    error = missing["error"]
    assert error == cause or (error.startswith("worker exited with status 1") and cause in error)


@pytest.mark.parametrize(
    ("script", "args", "key"),
    [
        ("hf_trainer_gpt2.py", ["--n-layer", "2", "--n-embd", "64", "--n-head", "4", "--vocab", "1024",
                                "--seq", "64", "--max-steps", "4"], "train_samples_per_second"),
        ("plain_fsdp_llama.py", ["--layers", "2", "--hidden", "64", "--intermediate", "128", "--heads", "4",
                                 "--kv-heads", "2", "--vocab", "1024", "--seq", "128", "--warmup", "1",
                                 "--steps", "2"], "tokens_per_second"),
        ("plain_resnet_ddp.py", ["--arch", "resnet18", "--image-size", "32", "--batch", "4",
                                 "--warmup", "1", "--steps", "2"], "images_per_s"),
    ],
)  # fmt: skip
def test_reference_scripts_run_on_cpu(script, args, key):
    """The reference scripts the lead times on GPUs must at least run (CPU, gloo, tiny shapes)."""
    import os
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node=2",
         str(ROOT / "benchmarks" / "reference" / script), "--cpu", *args],
        capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    (line,) = [x for x in proc.stdout.splitlines() if x.startswith("REFERENCE ")]
    record = json.loads(line.removeprefix("REFERENCE "))
    assert record["world_size"] == 2 and record[key] > 0
