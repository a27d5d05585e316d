"""GPU spec figures from vendor datasheets: dense peak FLOP/s per dtype, NVLink, PCIe, power.

One table for both halves: the worker divides by `peak_flops` for MFU, the driver's report
states the same peak and its source and measures bus bandwidth against the link figures. It
lives in kit.shared, what both halves read: standard library only, copied into the images.

Conventions:
- Tensor-core figures are dense (the datasheets' "with sparsity" numbers halved). "bf16" and
  "fp16" are tensor-core matmuls with FP32 accumulate (GeForce cards run FP16 accumulate at
  twice that rate; kit does not use it); "tf32" is the TF32 tensor-core rate; "fp32" is plain
  FP32 on the CUDA cores (torch's default "highest" matmul precision).
- NVLink: GB/s per link per direction (nccl-tests' bus bandwidth is per direction), and the
  number of links of the part. nvidia-smi reports NVLink 4 links at 26.56 GB/s (signalling
  rate); the datasheets' 900 GB/s total is 18 x 50 GB/s both directions, i.e. 25 per direction.
- fp8: dense e4m3/e5m2 tensor-core rate, where the datasheet gives one (Hopper, Blackwell).
- hbm_gbs: the datasheet's memory bandwidth (bytes read plus written per second); 0 where a
  family name covers parts with different memories (A100 40 GB and 80 GB).
- memory_gb: the datasheet's memory per GPU as sold (decimal GB as marketed: NVML reads an
  H200's 141 GB as 140.4 GiB); 0 where a family name covers parts with different memories, and
  for GDDR parts, where ECC keeps a share that differs by part.
- First match wins in `SPECS`: specific names ("H100 PCIe") come before family names ("H100").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

T = 1e12


@dataclass(frozen=True)
class GpuSpec:
    """One GPU model's datasheet figures. `match`: substrings of the NVML/CUDA device name."""

    key: str
    match: tuple[str, ...]
    peak_flops: dict[str, float]  # dtype -> dense FLOP/s
    nvlink_links: int  # 0: no NVLink
    nvlink_gbs_per_link: float  # per direction, decimal GB/s
    pcie_gen: int
    tdp_w: float
    source: str
    notes: str = ""
    hbm_gbs: float = 0.0  # memory bandwidth, decimal GB/s (read + write); 0: not one figure
    memory_gb: float = 0.0  # memory per GPU as sold; 0: not one figure

    @property
    def nvlink_total_gbs(self) -> float:
        """Per direction, all links: the figure an all-reduce's bus bandwidth is held against."""
        return self.nvlink_links * self.nvlink_gbs_per_link


def _flops(
    bf16: float, tf32: float, fp32: float, fp16: float | None = None, fp8: float | None = None
) -> dict[str, float]:
    out = {"bf16": bf16 * T, "fp16": (fp16 or bf16) * T, "tf32": tf32 * T, "fp32": fp32 * T}
    return out | ({"fp8": fp8 * T} if fp8 else {})


SPECS: tuple[GpuSpec, ...] = (
    GpuSpec(
        key="GH200",
        match=("GH200",),
        peak_flops=_flops(bf16=989, tf32=494.5, fp32=67, fp8=1979),
        nvlink_links=18,
        nvlink_gbs_per_link=25.0,
        pcie_gen=5,
        tdp_w=1000,
        source="NVIDIA GH200 Grace Hopper Superchip datasheet",
        notes="before H200: its name contains it",
    ),
    GpuSpec(
        key="H200 NVL",
        match=("H200 NVL",),
        peak_flops=_flops(bf16=835, tf32=417.5, fp32=60, fp8=1670.5),
        nvlink_links=18,
        nvlink_gbs_per_link=25.0,
        pcie_gen=5,
        tdp_w=600,
        source="NVIDIA H200 Tensor Core GPU datasheet (H200 NVL column)",
        notes="NVLink through a 2- or 4-way bridge, 900 GB/s total",
        hbm_gbs=4800,
        memory_gb=141,
    ),
    GpuSpec(
        key="H200 SXM",
        match=("H200",),
        peak_flops=_flops(bf16=989, tf32=494.5, fp32=67, fp8=1979),
        nvlink_links=18,
        nvlink_gbs_per_link=25.0,
        pcie_gen=5,
        tdp_w=700,
        source="NVIDIA H200 Tensor Core GPU datasheet (H200 SXM column)",
        hbm_gbs=4800,
        memory_gb=141,
    ),
    GpuSpec(
        key="H100 NVL",
        match=("H100 NVL",),
        peak_flops=_flops(bf16=835, tf32=417.5, fp32=60, fp8=1670.5),
        nvlink_links=12,
        nvlink_gbs_per_link=25.0,
        pcie_gen=5,
        tdp_w=400,
        source="NVIDIA H100 Tensor Core GPU datasheet (H100 NVL column)",
        notes="NVLink bridge, 600 GB/s total",
        hbm_gbs=3900,
        memory_gb=94,
    ),
    GpuSpec(
        key="H100 PCIe",
        match=("H100 PCIe",),
        peak_flops=_flops(bf16=756, tf32=378, fp32=51, fp8=1513),
        nvlink_links=12,
        nvlink_gbs_per_link=25.0,
        pcie_gen=5,
        tdp_w=350,
        source="NVIDIA H100 Tensor Core GPU datasheet (H100 PCIe column)",
        notes="NVLink bridge 600 GB/s total (2 GPUs)",
        hbm_gbs=2000,
        memory_gb=80,
    ),
    GpuSpec(
        key="H100 SXM",
        match=("H100", "H800"),
        peak_flops=_flops(bf16=989, tf32=494.5, fp32=67, fp8=1979),
        nvlink_links=18,
        nvlink_gbs_per_link=25.0,
        pcie_gen=5,
        tdp_w=700,
        source="NVIDIA H100 Tensor Core GPU datasheet (H100 SXM column)",
        notes="H800 listed with the H100 SXM compute figures; its NVLink is 400 GB/s total",
        hbm_gbs=3350,
        memory_gb=80,
    ),
    GpuSpec(
        key="B200",
        match=("B200",),
        peak_flops=_flops(bf16=2250, tf32=1100, fp32=80, fp8=4500),
        nvlink_links=18,
        nvlink_gbs_per_link=50.0,
        pcie_gen=6,
        tdp_w=1000,
        source="NVIDIA HGX B200 datasheet (per GPU: the 8-GPU figures / 8)",
        notes="NVLink 5: 1.8 TB/s total",
        hbm_gbs=8000,
        memory_gb=180,
    ),
    GpuSpec(
        key="A100 PCIe",
        match=("A100-PCIE", "A100 PCIe", "A100 80GB PCIe"),
        peak_flops=_flops(bf16=312, tf32=156, fp32=19.5),
        nvlink_links=12,
        nvlink_gbs_per_link=25.0,
        pcie_gen=4,
        tdp_w=300,
        source="NVIDIA A100 Tensor Core GPU datasheet (A100 PCIe column)",
        notes="NVLink bridge for 2 GPUs, 600 GB/s total",
    ),
    GpuSpec(
        key="A100 SXM",
        match=("A100", "A800"),
        peak_flops=_flops(bf16=312, tf32=156, fp32=19.5),
        nvlink_links=12,
        nvlink_gbs_per_link=25.0,
        pcie_gen=4,
        tdp_w=400,
        source="NVIDIA A100 Tensor Core GPU datasheet (A100 SXM column)",
        notes="A800 listed with the A100 compute figures; its NVLink is 400 GB/s total",
    ),
    GpuSpec(
        key="L40S",
        match=("L40S",),
        peak_flops=_flops(bf16=362.05, tf32=183, fp32=91.6),
        nvlink_links=0,
        nvlink_gbs_per_link=0.0,
        pcie_gen=4,
        tdp_w=350,
        source="NVIDIA L40S GPU datasheet",
    ),
    GpuSpec(
        key="A10G",
        match=("A10G",),
        peak_flops=_flops(bf16=70, tf32=35, fp32=31.2),
        nvlink_links=0,
        nvlink_gbs_per_link=0.0,
        pcie_gen=4,
        tdp_w=300,
        source="NVIDIA A10 Tensor Core GPU datasheet (A10G: AWS's variant, A10 figures)",
    ),
    GpuSpec(
        key="RTX 4090",
        match=("RTX 4090",),
        peak_flops=_flops(bf16=165.2, tf32=82.6, fp32=82.6),
        nvlink_links=0,
        nvlink_gbs_per_link=0.0,
        pcie_gen=4,
        tdp_w=450,
        source="NVIDIA Ada Lovelace architecture whitepaper, GeForce RTX 4090 column",
        notes="FP16/BF16 with FP32 accumulate; no NVLink",
    ),
    GpuSpec(
        key="RTX 3090 Ti",
        match=("RTX 3090 Ti",),
        peak_flops=_flops(bf16=80, tf32=40, fp32=40),
        nvlink_links=4,
        nvlink_gbs_per_link=14.0625,
        pcie_gen=4,
        tdp_w=450,
        source="NVIDIA Ampere GA102 GPU architecture whitepaper (RTX 3090 Ti)",
        notes="NVLink 3 bridge, 112.5 GB/s total (4 links)",
    ),
    GpuSpec(
        key="RTX 3090",
        match=("RTX 3090",),
        peak_flops=_flops(bf16=71, tf32=35.6, fp32=35.6),
        nvlink_links=4,
        nvlink_gbs_per_link=14.0625,
        pcie_gen=4,
        tdp_w=350,
        source="NVIDIA Ampere GA102 GPU architecture whitepaper, GeForce RTX 3090 column",
        notes="FP16/BF16 with FP32 accumulate; NVLink 3 bridge, 112.5 GB/s total (4 links)",
    ),
)

# PCIe per lane per direction, decimal GB/s (transfer rate x line-code efficiency / 8), PCI-SIG.
PCIE_LANE_GBS = {1: 0.25, 2: 0.5, 3: 0.985, 4: 1.969, 5: 3.938, 6: 7.563}
PCIE_SOURCE = "PCI-SIG base specifications 1.0-6.0: transfer rate x encoding, per direction"


def spec_for(device_name: str | None) -> GpuSpec | None:
    """The table row for an NVML/CUDA device name ("NVIDIA H200"), or None if unknown."""
    if not device_name:
        return None
    for spec in SPECS:
        if any(m in device_name for m in spec.match):
            return spec
    return None


def peak_flops(device_name: str | None, dtype: str) -> tuple[float, str] | None:
    """(dense peak FLOP/s per GPU, a phrase naming the row, dtype and source) or None."""
    spec = spec_for(device_name)
    if spec is None or dtype not in spec.peak_flops:
        return None
    value = spec.peak_flops[dtype]
    return value, f"{spec.key} {dtype} dense {value / T:,g} TFLOP/s, {spec.source}"


def pcie_gbs(gen: int | None, width: int | None) -> float | None:
    """Per-direction PCIe bandwidth of a link (gen, lanes), or None when either is unknown."""
    if not gen or not width or gen not in PCIE_LANE_GBS:
        return None
    return PCIE_LANE_GBS[gen] * width


GPU_MODEL = re.compile(r"[A-Z]*\d+[A-Z]*")


def gpu_model_key(name: str | None) -> str | None:
    """The model number a GPU name carries: "NVIDIA H100 80GB HBM3", "H100 SXM" -> "H100";
    "NVIDIA A100-SXM4-80GB" -> "A100"; "NVIDIA H200" -> "H200". None when there is none."""
    if not name:
        return None
    words = re.split(r"[\s\-_/]+", name.upper().replace("NVIDIA", ""))
    found = next((w for w in words if w and GPU_MODEL.fullmatch(w) and w[0].isalpha()), None)
    found = found or next((w for w in words if w and GPU_MODEL.fullmatch(w)), None)
    return found
