"""Reference for the kit's gpt2_ddp worker: the same workload under the Hugging Face Trainer.

GPT-2 124M from GPT2Config() with random weights, a synthetic dataset of 1024-token sequences,
per_device_train_batch_size 4, fp32 (no --tf32), the Trainer's defaults otherwise (AdamW fused,
clipping 1.0, DDP through accelerate): the run_clm.py shape of the HF hardware guide and the NVLink
blog, without the download. Time both in one session on the same GPUs:

    torchrun --standalone --nproc-per-node 2 benchmarks/reference/hf_trainer_gpt2.py --max-steps 200
    NCCL_P2P_DISABLE=1 torchrun --standalone --nproc-per-node 2 benchmarks/reference/hf_trainer_gpt2.py
    kit reproduce recipes/gpt2_ddp.yaml

Rank 0 prints the Trainer's metrics and one line `REFERENCE {json}` with train_samples_per_second
(samples / train_runtime, warm-up included, as the Trainer reports it) and the environment.
On a CPU (a smoke test of this script): add --cpu --n-layer 2 --n-embd 64 --vocab 1024 --seq 64.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile

import torch
import transformers
from transformers import GPT2Config, GPT2LMHeadModel, Trainer, TrainingArguments


class SyntheticTokens(torch.utils.data.Dataset):
    """Uniform random token ids; the same on every rank (the sampler splits them)."""

    def __init__(self, count: int, seq: int, vocab: int, seed: int) -> None:
        gen = torch.Generator().manual_seed(seed)
        self.data = torch.randint(0, vocab, (count, seq), generator=gen)

    def __len__(self) -> int:
        return len(self.data)

    def __getitem__(self, i: int) -> dict[str, torch.Tensor]:
        return {"input_ids": self.data[i], "labels": self.data[i]}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-steps", type=int, default=200)
    ap.add_argument("--batch", type=int, default=4, help="per_device_train_batch_size")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--n-layer", type=int, default=12)
    ap.add_argument("--n-embd", type=int, default=768)
    ap.add_argument("--n-head", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--bf16", action="store_true", help="mixed precision (default fp32)")
    ap.add_argument("--cpu", action="store_true", help="run on the CPU (gloo), a smoke test")
    args = ap.parse_args()

    world = int(os.environ.get("WORLD_SIZE", "1"))
    config = GPT2Config(
        n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head, vocab_size=args.vocab,
        n_positions=max(1024, args.seq), bos_token_id=min(50256, args.vocab - 1),
        eos_token_id=min(50256, args.vocab - 1),
    )  # fmt: skip
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    dataset = SyntheticTokens(args.max_steps * args.batch * world, args.seq, args.vocab, seed=0)
    with tempfile.TemporaryDirectory() as out:
        targs = TrainingArguments(
            output_dir=out, per_device_train_batch_size=args.batch, max_steps=args.max_steps,
            bf16=args.bf16, use_cpu=args.cpu, save_strategy="no", report_to="none",
            logging_steps=max(1, args.max_steps // 4), disable_tqdm=True, seed=0,
        )  # fmt: skip
        trainer = Trainer(model=model, args=targs, train_dataset=dataset)
        result = trainer.train()
    metrics = result.metrics
    if targs.process_index == 0:
        record = {
            "workload": "gpt2 DDP, HF Trainer",
            "world_size": world,
            "max_steps": args.max_steps,
            "per_device_train_batch_size": args.batch,
            "seq": args.seq,
            "precision": "bf16" if args.bf16 else "fp32",
            "matmul_precision": torch.get_float32_matmul_precision(),
            "optim": str(targs.optim),
            "train_runtime_s": metrics["train_runtime"],
            "train_samples_per_second": metrics["train_samples_per_second"],
            "train_tokens_per_second": metrics["train_samples_per_second"] * args.seq,
            "train_loss": metrics.get("train_loss"),
            "NCCL_P2P_DISABLE": os.environ.get("NCCL_P2P_DISABLE"),
            "gpu": torch.cuda.get_device_name()
            if torch.cuda.is_available() and not args.cpu
            else None,
            "torch": torch.__version__,
            "transformers": transformers.__version__,
        }
        print(metrics, flush=True)
        print("REFERENCE " + json.dumps(record), flush=True)


if __name__ == "__main__":
    main()
