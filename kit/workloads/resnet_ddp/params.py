"""ResNet DDP parameters: a torchvision ResNet, random weights, SGD with momentum."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from kit.workloads.base import TrainingParams, check


@dataclass
class ResnetDdpParams(TrainingParams):
    """A torchvision ResNet with random weights, DistributedDataParallel, SGD with momentum."""

    arch: Literal[
        "resnet18", "resnet34", "resnet50", "resnet101", "resnet152", "wide_resnet50_2"
    ] = "resnet50"
    image_size: int = 224
    num_classes: int = 1000
    batch_per_gpu: int = 256
    precision: Literal["bf16", "fp32"] = "bf16"  # bf16 = autocast, weights stay fp32
    channels_last: bool = True
    lr: float = 0.1
    momentum: float = 0.9
    weight_decay: float = 1e-4
    warmup_steps: int = 5
    steps: int = 30
    min_window_s: float = 0.0  # the timed window lasts at least this long (steps permitting more)
    data_batches: int = 2
    seed: int = 0

    def __post_init__(self) -> None:
        check(self.image_size >= 32, "image_size", "at least 32")
        check(self.num_classes >= 2, "num_classes", "at least 2")
        check(self.batch_per_gpu >= 2, "batch_per_gpu", "at least 2 (batch norm needs two)")
        check(self.lr > 0, "lr", "greater than 0")
        check(0 <= self.momentum < 1, "momentum", "in [0, 1)")
        check(self.weight_decay >= 0, "weight_decay", "0 or more")
        self.check_loop()
