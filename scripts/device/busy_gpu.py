"""A background load on one GPU, for the acceptance device run (scripts/device/acceptance.sh): the
planted slow GPU the box judgement must name. It only runs work beside the kit's: back-to-back
bf16 matmuls and a pass over a 4 GiB buffer (the GPU's SMs and its memory both busy), on the GPU
named, until SIGTERM or --seconds. It never touches the GPU's settings: no clocks, no power
limit, no compute mode (a run that did would measure a reconfigured GPU, not a shared one).

    CUDA_DEVICE_ORDER=PCI_BUS_ID python3 scripts/device/busy_gpu.py --gpu 1 --seconds 900

The GPU index is NVML's (PCI bus order, as the kit numbers GPUs). Every 10 s it prints the
loops done, so the log shows the load ran for the whole measurement.
"""

from __future__ import annotations

import argparse
import os
import signal
import time

import torch

STOP = False


def _stop(signum: int, frame: object) -> None:
    global STOP
    STOP = True


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--gpu", type=int, default=1, help="NVML's index (PCI bus order)")
    p.add_argument("--seconds", type=float, default=900.0, help="stop after this long at most")
    p.add_argument("--size", type=int, default=8192, help="the matmul's m = n = k")
    args = p.parse_args()
    if os.environ.get("CUDA_DEVICE_ORDER") != "PCI_BUS_ID":
        raise SystemExit("set CUDA_DEVICE_ORDER=PCI_BUS_ID: --gpu is NVML's index, as the kit's")
    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    dev = torch.device("cuda", args.gpu)
    torch.cuda.set_device(dev)
    n = args.size
    a = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    b = torch.randn(n, n, device=dev, dtype=torch.bfloat16)
    c = torch.empty(n, n, device=dev, dtype=torch.bfloat16)
    buf = torch.ones(1 << 30, device=dev, dtype=torch.float32)  # 4 GiB
    name = torch.cuda.get_device_name(dev)
    print(f"busy_gpu: load on GPU {args.gpu} ({name}), pid {os.getpid()}", flush=True)
    start = last = time.monotonic()
    loops = 0
    while not STOP and time.monotonic() - start < args.seconds:
        for _ in range(16):
            torch.matmul(a, b, out=c)
        buf.mul_(1.0)  # read and write 4 GiB: memory traffic beside the SMs' work
        torch.cuda.synchronize(dev)
        loops += 1
        if time.monotonic() - last >= 10:
            last = time.monotonic()
            print(f"busy_gpu: {last - start:.0f} s, {loops} loops", flush=True)
    print(f"busy_gpu: stopped after {time.monotonic() - start:.0f} s, {loops} loops", flush=True)


if __name__ == "__main__":
    main()
