"""The ResNet DDP training workload as the driver sees it."""

from kit.workloads.resnet_ddp.params import ResnetDdpParams
from kit.workloads.training_spec import training_spec

SPEC = training_spec(
    "resnet_ddp",
    "ResNet DDP",
    "torchvision ResNet, DDP, bf16 autocast, channels_last",
    ResnetDdpParams,
)
