"""The decode workload's pieces in one process: its decoder against transformers' Llama with the
same weights, the static-cache decode step against a full forward, the largest-batch search, and
the parameter checks."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import weakref

import pytest
import torch

from kit.workloads.llm_decode.fused import fused_step
from kit.workloads.llm_decode.memory import bytes_per_step, largest_batch
from kit.workloads.llm_decode.model import Generation, Llama, Shard
from kit.workloads.llm_decode.params import LlmDecodeParams
from kit.workloads.llm_decode.worker import Replay, one_shot_allowed
from tests.conftest import ROOT

TINY = {
    "vocab_size": 96, "hidden_size": 64, "intermediate_size": 96, "num_layers": 2, "num_heads": 4,
    "num_kv_heads": 2, "dtype": "fp32", "prompt_len": 12, "decode_steps": 5, "batch_sizes": [1],
}  # fmt: skip


def hf_twin(model: Llama, p: LlmDecodeParams):
    """transformers' LlamaForCausalLM with Llama 3.1's RoPE scaling and this model's weights."""
    from transformers import LlamaConfig, LlamaForCausalLM

    rope = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
            "original_max_position_embeddings": 8192, "rope_theta": p.rope_theta}  # fmt: skip
    config = LlamaConfig(
        vocab_size=p.vocab_size, hidden_size=p.hidden_size, intermediate_size=p.intermediate_size,
        num_hidden_layers=p.num_layers, num_attention_heads=p.num_heads,
        num_key_value_heads=p.num_kv_heads, rms_norm_eps=p.rms_eps, max_position_embeddings=131072,
        tie_word_embeddings=False, attn_implementation="eager", rope_parameters=rope,
        rope_scaling=rope, rope_theta=p.rope_theta,
    )  # fmt: skip
    hf = LlamaForCausalLM(config).eval()
    dh, hkv = p.hidden_size // p.num_heads, p.num_kv_heads
    with torch.no_grad():
        hf.model.embed_tokens.weight.copy_(model.embed)
        hf.lm_head.weight.copy_(model.head)
        hf.model.norm.weight.copy_(model.norm)
        for ours, theirs in zip(model.layers, hf.model.layers, strict=True):
            q, k, v = ours.wqkv.split([p.num_heads * dh, hkv * dh, hkv * dh])
            a = theirs.self_attn
            a.q_proj.weight.copy_(q)
            a.k_proj.weight.copy_(k)
            a.v_proj.weight.copy_(v)
            a.o_proj.weight.copy_(ours.wo)
            gate, up = ours.wgu.chunk(2)
            theirs.mlp.gate_proj.weight.copy_(gate)
            theirs.mlp.up_proj.weight.copy_(up)
            theirs.mlp.down_proj.weight.copy_(ours.wdown)
            theirs.input_layernorm.weight.copy_(ours.norm1)
            theirs.post_attention_layernorm.weight.copy_(ours.norm2)
    return hf


def _twins(batch: int, seed: int, prompt_len: int = TINY["prompt_len"]):
    """The TINY decode model, its transformers twin, a generation of `batch` sequences and a
    random prompt for it: (params, twin, generation, prompt)."""
    p = LlmDecodeParams(**{**TINY, "prompt_len": prompt_len})
    model = Llama(p, Shard(0, 1), torch.device("cpu"))
    gen = Generation(model, batch, p.prompt_len, p.decode_steps)
    prompt = torch.randint(
        0, p.vocab_size, (batch, p.prompt_len), generator=torch.Generator().manual_seed(seed)
    )
    return p, hf_twin(model, p), gen, prompt


def test_prefill_and_every_decode_step_match_transformers_llama():
    """The same weights in transformers' LlamaForCausalLM, run over the whole sequence without a
    cache: the prefill's logits and each cached decode step's logits are its logits there."""
    p, hf, gen, prompt = _twins(2, seed=3)
    with torch.no_grad():
        ours = [gen.start(prompt)]
        for _ in range(p.decode_steps):
            ours.append(gen.step())
        seq = torch.cat([prompt, gen.out[:, : p.decode_steps]], dim=1)
        theirs = hf(seq).logits.float()
    for i, logits in enumerate(ours):
        torch.testing.assert_close(logits, theirs[:, p.prompt_len - 1 + i], atol=2e-5, rtol=1e-4)
    # the greedy tokens are the argmax of the logits that preceded them
    assert gen.out[:, 0].tolist() == ours[0].argmax(-1).tolist()
    assert gen.out[:, -1].tolist() == ours[-1].argmax(-1).tolist()


def beside(p, hf, gen, twin, prompt, step):
    """A generation by `step` beside its eager twin's: every step's logits, and transformers'
    logits over the whole sequence it generated (one forward, the reference)."""
    with torch.no_grad():
        ours = [gen.start(prompt)]
        twin.start(prompt)
        for _ in range(p.decode_steps):
            ours.append(step())
            twin.step()
        seq = torch.cat([prompt, gen.out[:, : p.decode_steps]], dim=1)
        return ours, hf(seq).logits.float()


def test_the_fused_step_matches_transformers_llama_at_every_step():
    """step_mode fused: the same pieces the GPU compiles with inductor, traced by torch.compile
    here without code generation (aot_eager): its logits at every step are transformers', and it
    leaves the same state (tokens, positions, cache) as the eager step."""
    p, hf, gen, prompt = _twins(2, seed=5)
    _, _, twin, _ = _twins(2, seed=5)
    ours, theirs = beside(p, hf, gen, twin, prompt, fused_step(gen, backend="aot_eager"))
    for i, logits in enumerate(ours):
        torch.testing.assert_close(logits, theirs[:, p.prompt_len - 1 + i], atol=2e-5, rtol=1e-4)
    assert torch.equal(gen.out, twin.out) and torch.equal(gen.pos, twin.pos)
    torch.testing.assert_close(gen.cache.kv, twin.cache.kv, atol=1e-6, rtol=1e-5)
    # the cache's written positions hold K and V, the rest is still zero
    written = p.prompt_len + p.decode_steps
    assert gen.cache.k[:, :, :, written - 1].abs().sum() > 0


def test_a_wrong_position_is_caught_by_the_comparison():
    """The comparison above can fail: a decode step at the wrong position gives other logits."""
    _, hf, gen, prompt = _twins(1, seed=4)
    with torch.no_grad():
        gen.start(prompt)
        gen.pos.add_(1)  # one position too far
        wrong = gen.step()
        theirs = hf(torch.cat([prompt, gen.out[:, :1]], dim=1)).logits[:, -1]
    assert not torch.allclose(wrong, theirs, atol=1e-4)


def test_the_bytes_a_step_must_read_count_weights_and_the_written_cache():
    p = LlmDecodeParams(**TINY)
    model = Llama(p, Shard(0, 1), torch.device("cpu"))
    read = bytes_per_step(model, p, batch=4, cache_len=p.prompt_len + p.decode_steps)
    dh = p.hidden_size // p.num_heads
    per_layer = (
        p.num_heads + 2 * p.num_kv_heads
    ) * dh * p.hidden_size + p.hidden_size * p.num_heads * dh
    per_layer += 3 * p.hidden_size * p.intermediate_size + 2 * p.hidden_size
    weights = (p.num_layers * per_layer + p.hidden_size + p.vocab_size * p.hidden_size) * 4
    assert read["weights"] == weights + 4 * p.hidden_size * 4  # plus the batch's embedding rows
    per_position = 2 * p.num_layers * 4 * p.num_kv_heads * dh * 4
    assert read["kv_needed"] == per_position * (p.prompt_len + (p.decode_steps + 1) / 2)
    assert read["kv_issued"] == per_position * (p.prompt_len + p.decode_steps)


@pytest.mark.parametrize(("limit", "cap", "found", "capped", "tries"), [
    (37, 4096, 37, False, 12),  # 1..64 doubling (7 tries), then 32..64 bisected (5)
    (1, 4096, 1, False, 2),
    (0, 4096, 0, False, 1),  # not even one sequence fits: 0, said as a number
    (5000, 4096, 4096, True, 13),  # everything up to the cap fits: "at least the cap"
    (5000, 100, 100, True, 8),  # 1..64, then the cap itself
    (99, 100, 99, False, 14),
])  # fmt: skip
def test_the_largest_batch_search(limit, cap, found, capped, tries):
    p = LlmDecodeParams(**TINY, fit_max_batch=cap)
    asked: list[int] = []

    def fit(b: int) -> bool:
        asked.append(b)
        return b <= limit

    out = largest_batch(p, fit)
    assert (out["largest_batch"], out["capped"]) == (found, capped)
    assert len(asked) == tries and max(asked) <= cap


@pytest.mark.parametrize(("change", "words"), [
    ({"tp": 4}, "tp: must be a divisor of num_kv_heads"),
    ({"tp": 3}, "tp: must be 1, 2, 4 or 8"),
    ({"batch_sizes": [1, 1]}, "batch_sizes: must be one or more distinct"),
    ({"batch_sizes": []}, "batch_sizes: must be one or more distinct"),
    ({"decode_steps": 1}, "decode_steps: must be from 2"),
    ({"num_heads": 3}, "hidden_size: must be a multiple of num_heads"),
    ({"all_reduce": "one-shot"}, "all_reduce: must be nccl when tp is 1"),
    ({"all_reduce": "ring"}, "all_reduce"),
])  # fmt: skip
def test_parameters_are_checked(change, words):
    with pytest.raises(ValueError, match=words):
        LlmDecodeParams(**{**TINY, **change})


@pytest.mark.parametrize(("device", "env", "change", "note"), [
    ("cuda", {}, {}, None),
    ("cpu", {}, {}, "gloo's all-reduce ran: the one-shot is a GPU kernel"),
    ("cuda", {"NCCL_P2P_DISABLE": "1"}, {}, "NCCL's all-reduce ran: this variant has P2P off"),
    ("cuda", {}, {"step_mode": "graph"}, "NCCL's all-reduce ran: only the fused step's"),
])  # fmt: skip
def test_the_one_shot_all_reduce_runs_only_where_it_measures_what_the_variant_asks(
    monkeypatch, device, env, change, note
):
    """Symmetric memory's one-shot reads the other GPU over P2P: a variant without P2P, the CPU
    and the steps without the batch-1 kernels run the backend's all-reduce, and say why."""
    from pathlib import Path

    from kit.worker.common import Context

    monkeypatch.delenv("NCCL_P2P_DISABLE", raising=False)
    for k, v in env.items():
        monkeypatch.setenv(k, v)
    backend = "nccl" if device == "cuda" else "gloo"
    ctx = Context({}, Path("."), 0, 0, 2, torch.device(device), backend)
    p = LlmDecodeParams(
        **{**TINY, "tp": 2, "step_mode": "fused", "all_reduce": "one-shot", **change}
    )
    assert one_shot_allowed(ctx, p) is (note is None)
    assert [note in n for n in ctx.notes] == ([] if note is None else [True])
    nccl = LlmDecodeParams(**{**TINY, "tp": 2, "step_mode": "fused"})
    assert one_shot_allowed(ctx, nccl) is False and len(ctx.notes) <= 1  # NCCL asked: no note


def test_a_comparison_predicts_decode_from_the_datasheets_memory_bandwidth():
    """H200 against H100: decode is held against HBM (4.8 / 3.35 TB/s), prefill against FLOP/s."""
    from types import SimpleNamespace

    from kit.report.choice import predicted

    def machine(name: str):
        return SimpleNamespace(hardware=SimpleNamespace(gpus=[SimpleNamespace(name=name)] * 2))

    h200, h100 = machine("NVIDIA H200"), machine("NVIDIA H100 80GB HBM3")
    ratio, words = predicted("tokens/s", h200, h100, "decode_tokens_per_s")
    assert ratio == pytest.approx(4800 / 3350) and words == "HBM bandwidth"
    assert predicted("tokens/s", h200, h100, "prefill_tokens_per_s") == (1.0, "dense bf16 FLOP/s")
    assert predicted("GB/s", h200, h100, "decode_read_gbps_b1")[1] == "HBM bandwidth"
    assert predicted("sequences", h200, h100, "max_batch_fit") == (None, "no datasheet figure")


def test_the_decode_figure_leaves_out_what_is_not_a_row():
    """A received bundle's own fields may hold anything: rows without a positive whole batch or
    a positive rate are left out, never drawn or crashed on."""
    from types import SimpleNamespace

    from kit.report.decode import batch_one, curves, decode_plot

    def run(batches, hbm=None):
        extra = {"batches": batches, "hbm_gbs": hbm}
        return SimpleNamespace(device="cuda", data=SimpleNamespace(extra=extra.get))

    hostile = [
        "row", None, {"batch": "1"}, {"batch": True, "decode_tokens_per_s": 5.0},
        {"batch": -2, "decode_tokens_per_s": 5.0}, {"batch": 0, "decode_tokens_per_s": 5.0},
        {"batch": 4, "decode_tokens_per_s": "fast"}, {"batch": 4, "decode_tokens_per_s": -1.0},
        {"batch": 1, "decode_tokens_per_s": 100.0, "read_gbps": 2000.0},
        {"batch": 8, "decode_tokens_per_s": 700.0},
    ]  # fmt: skip
    bench = SimpleNamespace(
        variants=[
            SimpleNamespace(name="p2p", ok=[run(hostile, hbm=True), run("x"), run({"a": 1})]),
            SimpleNamespace(name="no-p2p", ok=[run([{"batch": 1, "read_gbps": 1675.0}], 3350)]),
        ]
    )
    assert curves(bench) == {"p2p": {1: [100.0], 8: [700.0]}}
    assert batch_one(bench) == [
        "p2p: a batch-1 step reads memory at 2,000 GB/s per GPU (no datasheet HBM figure for this GPU)",
        "no-p2p: a batch-1 step reads memory at 1,675 GB/s per GPU, 50% of the datasheet's 3,350 GB/s "
        "HBM bandwidth",
    ]
    svg = decode_plot(curves(bench), "t", "salt")
    assert svg is not None and svg.startswith("<svg") and "700" in svg
    assert decode_plot({}, "t", "salt") is None


class _Counter:
    """NVML's energy counter stand-in (no GPU in CI): millijoules in the order they are read."""

    def __init__(self, *readings: float | None) -> None:
        self.readings = list(readings)

    def nvmlDeviceGetTotalEnergyConsumption(self, handle):
        value = self.readings.pop(0)
        if value is None:
            raise RuntimeError("NVML_ERROR_NOT_SUPPORTED")
        return value


@pytest.fixture
def one_rank():
    import torch.distributed as dist

    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    yield
    dist.destroy_process_group()


def test_energy_per_output_token_is_the_counter_at_the_batch_s_edges_over_its_tokens(one_rank):
    """J per output token: the GPU's counter after the timed generations minus before, over the
    tokens they generated; a counter that cannot be read gives no figure and says why."""
    from types import SimpleNamespace

    from kit.worker.energy import EnergyCounter
    from kit.workloads.llm_decode.worker import batch_energy

    ctx = SimpleNamespace(world_size=1, synchronize=lambda: None)
    counter = EnergyCounter(_Counter(1_000.0, 61_000.0), object(), 0, "GPU-test")
    e = batch_energy(ctx, counter, counter.read(), tokens=120)
    assert e["complete"] and e["energy_j"] == pytest.approx(60.0)
    assert e["j_per_token"] == pytest.approx(0.5) and e["tokens"] == 120
    assert e["gpus"][0]["uuid"] == "GPU-test" and "timed generations" in e["read_at"]
    broken = EnergyCounter(_Counter(1_000.0, None), object(), 0, "GPU-test")
    e = batch_energy(ctx, broken, broken.read(), tokens=120)
    assert e["j_per_token"] is None and "NVML_ERROR_NOT_SUPPORTED" in e["reason"]
    e = batch_energy(ctx, None, None, tokens=120)
    assert e["j_per_token"] is None and e["reason"] == "no GPU: no energy counter"


KERNEL_SCRIPT = """
import json, sys
import torch
from tests.unit.test_llm_decode import _twins, beside
from kit.workloads.llm_decode.fused import kernel_step

p, hf, gen, prompt = _twins(1, seed=11, prompt_len=int(sys.argv[1]))
_, _, twin, _ = _twins(1, seed=11, prompt_len=int(sys.argv[1]))
ours, theirs = beside(p, hf, gen, twin, prompt, kernel_step(gen))
worst = max(float((o - theirs[:, p.prompt_len - 1 + i]).abs().max()) for i, o in enumerate(ours))
print(json.dumps({"worst": worst, "same_tokens": torch.equal(gen.out, twin.out),
                  "same_pos": torch.equal(gen.pos, twin.pos),
                  "cache": float((gen.cache.kv - twin.cache.kv).abs().max()),
                  "largest": float(theirs.abs().max())}))
"""


@pytest.mark.slow  # Triton's interpreter: about 30 s
def test_the_batch_1_triton_step_matches_transformers_llama_at_every_step():
    """kernel_step's Triton kernels, run by Triton's interpreter on the CPU in fp32 (the GPU
    compiles the same kernels): its logits at every step are transformers', its cache the eager
    step's. A prompt of 150 spreads the positions over three of the attention's chunks, so their
    combination is checked too."""
    env = {**os.environ, "TRITON_INTERPRET": "1", "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", KERNEL_SCRIPT, "150"],
        capture_output=True, text=True, env=env, timeout=600, cwd=ROOT,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    assert r["worst"] < 2e-4 and r["largest"] > 0.1, r
    assert r["same_tokens"] and r["same_pos"] and r["cache"] < 1e-5, r


def test_a_torch_without_triton_still_decodes_with_the_compiled_pieces():
    """CPU-only torch wheels carry no Triton: the decode worker still imports, the kernels say
    they cannot run, and a step is the compiled pieces'."""
    code = (
        "import sys; sys.modules['triton'] = sys.modules['triton.language'] = None\n"
        "from kit.workloads.llm_decode import kernels, worker\n"
        "print(kernels.usable(128, [4096, 14336]), kernels.picked() == '')"
    )
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["False", "True"]


def test_the_replayed_step_keeps_what_it_captured_alive() -> None:
    """The timed loop holds only the Replay: the captured step, and with it the tensors the
    graph writes outside its pool (the attention scratch, the one-shot's symmetric memory), live
    as long as the Replay does (on 2026-11-30 the step was dropped after capture, its symmetric
    memory unmapped, and the first replay read freed memory)."""

    class Step:
        def __call__(self) -> None: ...

    class Graph:
        replays = 0

        def replay(self) -> None:
            self.replays += 1

    step, graph = Step(), Graph()
    alive = weakref.ref(step)
    replay = Replay(graph, step)  # type: ignore[arg-type]
    del step
    gc.collect()
    replay()
    assert alive() is not None and graph.replays == 1
    del replay
    gc.collect()
    assert alive() is None
