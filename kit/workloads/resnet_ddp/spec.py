"""The ResNet DDP training workload as the driver sees it."""

from kit.workloads.base import Phrase
from kit.workloads.resnet_ddp.params import ResnetDdpParams
from kit.workloads.training_spec import PRECISION, training_spec

SPEC = training_spec(
    "resnet_ddp",
    "ResNet DDP",
    "torchvision ResNet, DDP, bf16 autocast, channels_last",
    ResnetDdpParams,
    (
        Phrase(("arch",)),
        Phrase(("image_size",), "{} px images"),
        Phrase(("batch_per_gpu",), "batch {} per GPU"),
        PRECISION,
        Phrase(("channels_last",), "channels-last"),
    ),
)
