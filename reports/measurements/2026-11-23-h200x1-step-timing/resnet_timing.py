"""Same-process A/B of step-timing methods for the kit's ResNet DDP step on one GPU.

sync   : device synchronize before each clock read (the kit's StepTimer today)
events : a CUDA event recorded at each step boundary, no host sync inside the window
plain  : no per-step timing: wall clock of N steps, one synchronize at each end (a plain loop)
"""

import json
import os
import statistics
import time

import torch
import torch.distributed as dist
import torchvision
from torch.nn.parallel import DistributedDataParallel as DDP

dist.init_process_group("nccl")
dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
torch.cuda.set_device(dev)
torch.backends.cudnn.benchmark = True
out = {"gpu": torch.cuda.get_device_name(dev), "torch": torch.__version__, "cases": []}


def build(arch, size, bs, ncls):
    torch.manual_seed(0)
    m = torchvision.models.get_model(arch, weights=None, num_classes=ncls).to(
        dev, memory_format=torch.channels_last
    )
    ddp = DDP(m, device_ids=[dev.index], gradient_as_bucket_view=True)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(bs, 3, size, size, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, ncls, (bs,), device=dev)

    def step():
        with torch.autocast("cuda", dtype=torch.bfloat16):
            loss = torch.nn.functional.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        return loss.detach()

    return step


def run_sync(step, n):
    times = []
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    for _ in range(n):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - t0)
    return times, time.perf_counter() - w0


def run_events(step, n):
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(n + 1)]
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    ev[0].record()
    for i in range(n):
        step()
        ev[i + 1].record()
    torch.cuda.synchronize()
    w = time.perf_counter() - w0
    return [ev[i].elapsed_time(ev[i + 1]) / 1e3 for i in range(n)], w


def run_plain(step, n):
    torch.cuda.synchronize()
    w0 = time.perf_counter()
    for _ in range(n):
        step()
    torch.cuda.synchronize()
    w = time.perf_counter() - w0
    return [], w


for arch, size, bs, ncls, warm, n, reps in [
    ("resnet50", 224, 256, 1000, 10, 30, 3),
    ("resnet18", 32, 64, 10, 50, 300, 3),
]:
    step = build(arch, size, bs, ncls)
    for _ in range(warm):
        step()
    torch.cuda.synchronize()
    for r in range(reps):
        for mode, fn in (("sync", run_sync), ("events", run_events), ("plain", run_plain)):
            times, w = fn(step, n)
            case = {
                "arch": arch,
                "size": size,
                "bs": bs,
                "repeat": r,
                "mode": mode,
                "steps": n,
                "window_s": w,
                "window_ips": bs * n / w,
            }
            if times:
                med = statistics.median(times)
                h = n // 2
                case.update(
                    median_s=med,
                    median_ips=bs / med,
                    cv=statistics.pstdev(times) / statistics.mean(times),
                    drift=statistics.median(times[h:]) / statistics.median(times[:h]) - 1,
                )
            out["cases"].append(case)
            print(json.dumps(case), flush=True)
with open(os.path.join(os.environ.get("OUT", "/tmp"), "resnet_timing.json"), "w") as f:
    json.dump(out, f, indent=1)
dist.destroy_process_group()
