"""Reference for the kit's resnet_ddp worker: a plain torchvision DDP loop of the same shape, no kit.

torchvision model by name (random weights), channels_last, bf16 autocast (weights and SGD stay
fp32), SGD lr 0.1 momentum 0.9 weight decay 1e-4, cuDNN autotuning on, one batch of random images
made on the GPU and reused every step. Timed with the host clock around `--steps` steps after
`--warmup` steps, one synchronize at each end (no per-step sync): images/s = steps x global batch
/ elapsed; Python's collector frozen for the timed steps, as in the kit's loop. Time it with the
kit's recipe in one session on the same GPUs:

    torchrun --standalone --nproc-per-node 2 benchmarks/reference/plain_resnet_ddp.py
    NCCL_P2P_DISABLE=1 torchrun --standalone --nproc-per-node 2 benchmarks/reference/plain_resnet_ddp.py
    kit reproduce recipes/resnet_ddp.yaml

Rank 0 prints one line `REFERENCE {json}`. On a CPU (a smoke test of this script): add
--cpu --arch resnet18 --image-size 32 --batch 4 --warmup 1 --steps 2.
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP


def measure() -> None:
    """Set up, time the steps, print the record (rank 0)."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--arch", default="resnet50")
    ap.add_argument("--image-size", type=int, default=224)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--batch", type=int, default=256, help="images per GPU")
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--steps", type=int, default=30)
    ap.add_argument("--cpu", action="store_true", help="gloo on the CPU, fp32 (a smoke test)")
    args = ap.parse_args()

    cuda = not args.cpu
    dist.init_process_group("nccl" if cuda else "gloo")
    rank, world = dist.get_rank(), dist.get_world_size()
    if cuda:
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        torch.backends.cudnn.benchmark = True
    else:
        device = torch.device("cpu")
    torch.manual_seed(0)
    model = torchvision.models.get_model(args.arch, weights=None, num_classes=args.classes)
    model = model.to(device, memory_format=torch.channels_last)
    ddp = DDP(model, device_ids=[device.index] if cuda else None, gradient_as_bucket_view=True)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    shape = (args.batch, 3, args.image_size, args.image_size)
    images = torch.randn(shape, device=device).contiguous(memory_format=torch.channels_last)
    labels = torch.randint(0, args.classes, (args.batch,), device=device)

    def step() -> None:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=cuda):
            loss = torch.nn.functional.cross_entropy(ddp(images), labels)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)

    def sync() -> None:
        if cuda:
            torch.cuda.synchronize(device)

    for _ in range(args.warmup):
        step()
    sync()
    gc.collect()
    gc.freeze()  # as the kit's loop: no full collection of the heap inside the timed steps
    dist.barrier()
    t0 = time.perf_counter()
    for _ in range(args.steps):
        step()
    sync()
    elapsed = torch.tensor([time.perf_counter() - t0], dtype=torch.float64, device=device)
    gc.unfreeze()
    dist.all_reduce(elapsed, op=dist.ReduceOp.MAX)
    if rank == 0:
        out = {
            "script": "plain_resnet_ddp",
            "arch": args.arch,
            "image_size": args.image_size,
            "batch_per_gpu": args.batch,
            "world_size": world,
            "steps": args.steps,
            "elapsed_s": elapsed.item(),
            "images_per_s": args.steps * args.batch * world / elapsed.item(),
            "p2p_disabled": os.environ.get("NCCL_P2P_DISABLE", "0"),
            "gpu": torch.cuda.get_device_name(device) if cuda else None,
            "torch": torch.__version__,
        }
        print("REFERENCE " + json.dumps(out), flush=True)


def main() -> None:
    measure()
    # The model is freed (measure returned) before the process group goes: left to interpreter
    # exit, a DDP/FSDP model's reference cycles are torn down after it, where gloo's threads can
    # abort the process ("terminate called without an active exception"), as the kit's worker says
    gc.collect()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
