#!/usr/bin/env python3
"""Why a workload reads slower in a GPU container than on the host: one probe, several places.

    python3 reports/measurements/2026-11-24-h100x1-llama-container-rounds/container_probe.py [--image kit-host-stack:local] [--rounds 2]
        [--places host,kit,...] [--lora-only] [--steps 15]

Run on a lent GPU machine after `scripts/device/containers.sh daemon` (dockerd with CDI and the
machine's own stack imported as an image). The same probe runs on the host and in containers
that differ in one thing each, interleaved round by round:

  host        the machine's own Python
  kit         a container with the options the kit gives its runs (CDI GPUs, network none, a
              private /tmp and 16 GB /dev/shm, memlock unlimited, an init process)
  unconfined  the same, with Docker's seccomp filter off (every system call otherwise passes
              a BPF filter: the CUDA driver's ioctls too)
  host-env    the same as kit, with the host's environment variables copied in
  privileged  the same as kit, privileged (no seccomp, every capability, every device)
  host-cgroup the host's Python in a cgroup beside the containers' (the container's cgroup
              without its namespaces, image or runtime)
  host-ns     the host's Python in new mount, PID, IPC and UTS namespaces (unshare)
  bare        a container with Docker's defaults and the GPUs only

The probe prints: the environment variables, the CPUs it may use, the shared libraries torch
loaded (cuBLAS, cuDNN, NCCL: a container may find other copies than the host), and three
timings: host-side launch cost (tiny in-place adds, synchronized at the end), a bf16 matmul of
the Llama-8B MLP shape, and flash attention at sequence 4096; the cost of a system call
(os.stat); and a LoRA training step of four Llama-8B-shaped layers (its mean, and the median and
90th percentile of its steps timed by CUDA events, as the kit times them; `--lora-only` skips the
rest, `--steps N` times N steps), with each place's cgroup limits and CPU throttling. Output: a
table on stdout and probe.json under $OUT.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

PROBE = r"""
import json, os, time, torch
import torch.nn.functional as F
out = {"cpus": len(os.sched_getaffinity(0)), "env": dict(sorted(os.environ.items()))}
out["status"] = {k: v.strip() for k, v in (l.split(":", 1) for l in open("/proc/self/status"))
                 if k in ("Seccomp", "NoNewPrivs", "Speculation_Store_Bypass",
                          "SpeculationIndirectBranch", "Cpus_allowed_list")}
out["cgroup"] = open("/proc/self/cgroup").read().strip()
CG = "/sys/fs/cgroup/" + out["cgroup"].split("::", 1)[-1].lstrip("/")
def cgroup_files(names=("cpu.max", "cpu.weight", "memory.max", "memory.high", "cpu.stat",
                        "cgroup.controllers")):
    found = {}
    for n in names:
        try:
            found[n] = " ".join(open(os.path.join(CG, n)).read().split())
        except OSError:
            pass
    return found
out["cgroup_files"] = cgroup_files()
LORA_ONLY = os.environ.get("PROBE_LORA_ONLY") == "1"
def python_loop(n=3_000_000):
    t0 = time.perf_counter(); d = {}
    for i in range(n):
        d[i & 1023] = i * 2
    return (time.perf_counter() - t0) / n * 1e9
dev = torch.device("cuda")
if not LORA_ONLY:
    out["python_ns"] = min(python_loop() for _ in range(3))
if not LORA_ONLY:
    x = torch.zeros(16, device=dev)
    def launches(n=20000):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n):
            x.add_(1)
        torch.cuda.synchronize(); return (time.perf_counter() - t0) / n * 1e6
    launches(2000)
    out["launch_us"] = min(launches() for _ in range(3))
    a = torch.randn(4096, 4096, device=dev, dtype=torch.bfloat16)
    b = torch.randn(4096, 14336, device=dev, dtype=torch.bfloat16)
    def mm(n=50):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n):
            a @ b
        torch.cuda.synchronize(); return 2 * 4096 * 4096 * 14336 * n / (time.perf_counter() - t0) / 1e12
    mm(10)
    out["matmul_tflops"] = max(mm() for _ in range(3))
    q = torch.randn(1, 32, 4096, 128, device=dev, dtype=torch.bfloat16, requires_grad=True)
    def attn(n=20):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        for _ in range(n):
            F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
        torch.cuda.synchronize(); return (time.perf_counter() - t0) / n * 1e3
    attn(3)
    out["attention_ms"] = min(attn() for _ in range(3))
    def syscalls(n=200000):
        t0 = time.perf_counter()
        for _ in range(n):
            os.stat("/")
        return (time.perf_counter() - t0) / n * 1e6
    out["syscall_us"] = min(syscalls() for _ in range(3))
# four decoder layers of the Llama-3.1-8B shape, LoRA r8 on every linear layer, non-reentrant
# gradient checkpointing, AdamW on the adapters: the kit's Llama step at a tenth of its depth
# (the host-side launch pace matters as it does in the whole model)
from transformers import LlamaConfig, LlamaForCausalLM
from peft import LoraConfig, get_peft_model
torch.manual_seed(0)
cfg = LlamaConfig(vocab_size=32000, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=4, num_attention_heads=32, num_key_value_heads=8,
                  max_position_embeddings=4096, rope_theta=500000.0)
model = LlamaForCausalLM(cfg).to(dev, torch.bfloat16)
model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
model = get_peft_model(model, LoraConfig(r=8, lora_alpha=16, lora_dropout=0.05,
    target_modules=["q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj"]))
opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-4)
ids = torch.randint(0, 32000, (1, 4096), device=dev)
def step():
    loss = model(input_ids=ids, labels=ids).loss
    loss.backward(); opt.step(); opt.zero_grad(set_to_none=True)
STEPS = int(os.environ.get("PROBE_STEPS", "15"))
for _ in range(3):
    step()
# step times as the kit takes them: CUDA events between steps, one synchronize after the window
events = [torch.cuda.Event(enable_timing=True) for _ in range(STEPS + 1)]
torch.cuda.synchronize(); t0 = time.perf_counter(); events[0].record()
for i in range(STEPS):
    step(); events[i + 1].record()
torch.cuda.synchronize(); out["lora_step_ms"] = (time.perf_counter() - t0) / STEPS * 1e3
steps_ms = sorted(events[i].elapsed_time(events[i + 1]) for i in range(STEPS))
out["lora_steps_ms"] = [events[i].elapsed_time(events[i + 1]) for i in range(STEPS)]
out["lora_median_ms"] = steps_ms[STEPS // 2]
out["lora_p90_ms"] = steps_ms[min(STEPS - 1, int(0.9 * STEPS))]
out["cgroup_after"] = cgroup_files(("cpu.stat",))
libs = set()
for line in open("/proc/self/maps"):
    p = line.split()[-1]
    if any(k in p for k in ("cublas", "cudnn", "nccl", "cudart", "libcuda.so", "nvrtc")):
        libs.add(p)
out["libs"] = sorted(libs)
out["versions"] = {"torch": torch.__version__, "cuda": torch.version.cuda,
                   "cudnn": torch.backends.cudnn.version(), "nccl": list(torch.cuda.nccl.version())}
print("PROBE " + json.dumps(out))
"""

SKIP_ENV = {"HOSTNAME", "HOME", "PWD", "OLDPWD", "SHLVL", "_", "TERM"}


def parse(text: str) -> dict:
    line = next((x for x in text.splitlines() if x.startswith("PROBE ")), None)
    if line is None:
        raise RuntimeError(f"the probe printed no result: {text[-800:]}")
    return json.loads(line[len("PROBE ") :])


PROBE_ENV: dict[str, str] = {}
"""PROBE_LORA_ONLY and PROBE_STEPS, handed to the probe in every place."""


def probe_cgroup() -> Path:
    """A cgroup beside Docker's containers (cgroupfs driver: /sys/fs/cgroup/docker/<id>) with the
    controllers they get, for the host's Python: the container's cgroup without its namespaces,
    its image or its runtime."""
    root = Path("/sys/fs/cgroup")
    parent = root / "docker"
    parent.mkdir(exist_ok=True)
    for ctl in ("cpu", "memory", "pids", "io", "cpuset"):
        for level in (root, parent):
            with contextlib.suppress(OSError):
                (level / "cgroup.subtree_control").write_text(f"+{ctl}")
    leaf = parent / "kit-probe-host"
    leaf.mkdir(exist_ok=True)
    return leaf


def on_host(cgroup: Path | None = None, wrap: tuple[str, ...] = ()) -> dict:
    def enter() -> None:
        if cgroup is not None:
            (cgroup / "cgroup.procs").write_text(str(os.getpid()))

    proc = subprocess.run(
        [*wrap, sys.executable, "-c", PROBE],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, **PROBE_ENV},
        preexec_fn=enter,
    )
    return parse(proc.stdout + proc.stderr)


def in_container(client, image: str, extra: dict) -> dict:
    import docker

    opts = {
        "image": image,
        "command": ["python3", "-c", PROBE],
        "device_requests": [
            docker.types.DeviceRequest(driver="cdi", device_ids=["nvidia.com/gpu=all"])
        ],
        "network_mode": "none",
        "shm_size": "16g",
        "tmpfs": {"/tmp": "rw,exec,mode=1777"},
        "ulimits": [docker.types.Ulimit(name="memlock", soft=-1, hard=-1)],
        "init": True,
        "detach": True,
        "environment": dict(PROBE_ENV),
        **extra,
    }
    if extra.get("environment") is not None:
        opts["environment"] = {**extra["environment"], **PROBE_ENV}
    c = client.containers.run(**opts)
    try:
        c.wait(timeout=300)
        return parse(c.logs().decode(errors="replace"))
    finally:
        c.remove(force=True)


def row_text(name: str, row: dict) -> str:
    def f(key: str, width: int, digits: int) -> str:
        return f"{row[key]:>{width}.{digits}f}" if key in row else f"{'-':>{width}}"

    return (
        f"{name:<12} {f('launch_us', 10, 2)} {f('syscall_us', 11, 3)} {f('python_ns', 10, 1)} "
        f"{f('matmul_tflops', 15, 1)} {f('attention_ms', 13, 2)} {f('lora_step_ms', 13, 1)} "
        f"{f('lora_median_ms', 10, 1)} {f('lora_p90_ms', 8, 1)} {row['cpus']}"
    )


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--image", default="kit-host-stack:local")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--places", default="host,kit,unconfined,host-env")
    ap.add_argument("--out", type=Path, default=Path(os.environ.get("OUT", "/tmp/out")))
    ap.add_argument("--lora-only", action="store_true", help="time only the LoRA step")
    ap.add_argument("--steps", type=int, default=15, help="timed LoRA steps a probe")
    a = ap.parse_args()
    PROBE_ENV.update(PROBE_STEPS=str(a.steps), PROBE_LORA_ONLY="1" if a.lora_only else "0")
    import docker

    client = docker.from_env()
    host_env = {k: v for k, v in os.environ.items() if k not in SKIP_ENV}
    places = {
        "host": on_host,
        "kit": lambda: in_container(client, a.image, {}),
        "unconfined": lambda: in_container(
            client, a.image, {"security_opt": ["seccomp=unconfined"]}
        ),
        "host-env": lambda: in_container(client, a.image, {"environment": host_env}),
        "privileged": lambda: in_container(client, a.image, {"privileged": True}),
        # the host's Python in a cgroup beside the containers' (no namespaces, no image)
        "host-cgroup": lambda: on_host(cgroup=probe_cgroup()),
        # the host's Python in new mount, PID, IPC and UTS namespaces (no cgroup, no image)
        "host-ns": lambda: on_host(
            wrap=("unshare", "--mount", "--pid", "--ipc", "--uts", "--fork", "--mount-proc")
        ),
        # a container with Docker's defaults and the GPUs only (no init, 64 MB /dev/shm, the
        # default limits, the host's network)
        "bare": lambda: in_container(
            client,
            a.image,
            {
                "network_mode": "host",
                "shm_size": None,
                "tmpfs": None,
                "ulimits": None,
                "init": None,
            },
        ),
    }
    places = {k: v for k, v in places.items() if k in a.places.split(",")}
    found: dict[str, list[dict]] = {name: [] for name in places}
    names = list(places)
    for r in range(a.rounds):
        # each round starts one place later, so no place always runs first (or on a warmer GPU)
        for name in names[r % len(names) :] + names[: r % len(names)]:
            probe = places[name]
            try:
                found[name].append(probe())
            except Exception as exc:  # one place failing must not hide the others
                print(f"{name} round {r}: {type(exc).__name__}: {exc}", flush=True)
                continue
            print(f"round {r} {row_text(name, found[name][-1])}", flush=True)
            # kept as it goes: a call killed at its limit keeps the rows it has
            a.out.mkdir(parents=True, exist_ok=True)
            (a.out / "probe.json").write_text(json.dumps(found, indent=1))
    a.out.mkdir(parents=True, exist_ok=True)
    (a.out / "probe.json").write_text(json.dumps(found, indent=1))
    print(
        f"{'place':<12} {'launch us':>10} {'syscall us':>11} {'python ns':>10} "
        f"{'matmul TFLOP/s':>15} {'attention ms':>13} {'LoRA step ms':>13} "
        f"{'median ms':>10} {'p90 ms':>8} cpus"
    )
    for name, rows in found.items():
        for row in rows:
            print(row_text(name, row))
    base = found["host"][0] if found["host"] else None
    for name, rows in found.items():
        if not rows or base is None:
            continue
        env = rows[0]["env"]
        only_host = sorted(set(base["env"]) - set(env) - SKIP_ENV)
        only_here = sorted(set(env) - set(base["env"]) - SKIP_ENV)
        differ = sorted(
            k for k in set(env) & set(base["env"]) - SKIP_ENV if env[k] != base["env"][k]
        )
        print(f"\n{name}: env only on the host: {only_host}")
        print(f"{name}: env only here: {only_here}; differing: {differ}")
        for k in differ:
            print(f"   {k}: host={base['env'][k][:200]!r} here={env[k][:200]!r}")
        print(f"{name}: {rows[0]['status']} cgroup {rows[0]['cgroup']}")
        print(f"{name}: cgroup files {rows[0].get('cgroup_files')}")
        print(f"{name}: cpu.stat after {[r.get('cgroup_after') for r in rows]}")
        if rows[0]["libs"] != base["libs"]:
            print(f"{name}: libraries differ:\n   host {base['libs']}\n   here {rows[0]['libs']}")
        else:
            print(f"{name}: the same libraries as the host")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
