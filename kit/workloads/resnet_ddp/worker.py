"""ResNet with DistributedDataParallel on synthetic images made on the device.

torchvision's model by name with random weights, channels_last memory format and bf16 autocast
by default (weights and the optimizer stay fp32), SGD with momentum and weight decay, cuDNN
autotuning on (its first-step search falls in the warm-up). The two shapes people measured:
ResNet-50 at 224 px with 256 images per GPU, and ResNet-18 at 32 px with 64 per GPU (CIFAR-10).

MFU: conv and matmul FLOPs of one training step counted by torch.utils.flop_counter on two
images before the run (what autograd executes: no input gradient for the first conv), per image;
    mfu = images/s/GPU x FLOPs per image / peak FLOP/s per GPU (bf16 or fp32 dense, by precision)
"""

from __future__ import annotations

import torch

from kit.worker.common import Context
from kit.worker.training import DDP_PARALLELISM, Built, autocast_step, ddp, runner
from kit.workloads.resnet_ddp.params import ResnetDdpParams


def count_flops_per_image(
    model: torch.nn.Module, p: ResnetDdpParams, device: torch.device
) -> float:
    """Forward + backward FLOPs of one image, counted on a step of two (batch norm needs two).

    Runs before DDP wraps the model; gradients are dropped and the batch-norm running
    statistics are restored, so the counted step leaves no trace in the measured run.
    """
    from torch.utils.flop_counter import FlopCounterMode

    state = {k: v.clone() for k, v in model.state_dict().items()}
    x = torch.randn(2, 3, p.image_size, p.image_size, device=device)
    y = torch.randint(0, p.num_classes, (2,), device=device)
    if p.channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    counter = FlopCounterMode(display=False)
    with counter:
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
    model.zero_grad(set_to_none=True)
    model.load_state_dict(state)
    return counter.get_total_flops() / 2


def build(ctx: Context, p: ResnetDdpParams) -> Built:
    import torchvision

    if ctx.is_cuda:
        torch.backends.cudnn.benchmark = True
    memory_format = torch.channels_last if p.channels_last else torch.contiguous_format
    model = torchvision.models.get_model(p.arch, weights=None, num_classes=p.num_classes)
    model = model.to(ctx.device, memory_format=memory_format)
    model.train()
    flops_per_image = count_flops_per_image(model, p, ctx.device)
    wrapped = ddp(ctx, model)
    opt = torch.optim.SGD(
        model.parameters(), lr=p.lr, momentum=p.momentum, weight_decay=p.weight_decay
    )
    gen = torch.Generator(device=ctx.device).manual_seed(p.seed * 1000 + ctx.rank)
    shape = (p.batch_per_gpu, 3, p.image_size, p.image_size)
    batches = []
    for _ in range(p.data_batches):
        images = torch.randn(shape, device=ctx.device, generator=gen)
        labels = torch.randint(
            0, p.num_classes, (p.batch_per_gpu,), device=ctx.device, generator=gen
        )
        batches.append((images.contiguous(memory_format=memory_format), labels))

    def loss_of(batch: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        images, labels = batch
        return torch.nn.functional.cross_entropy(wrapped(images), labels)

    step, precision = autocast_step(ctx, p.precision, loss_of, opt)

    images = p.batch_per_gpu * ctx.world_size
    n_params = sum(x.numel() for x in model.parameters())
    return Built(
        step=step,
        batches=batches,
        work="images",
        work_per_step=images,
        flops_per_step=flops_per_image * images,
        precision=precision,
        facts={
            "model": f"torchvision.models.{p.arch}",
            "weights": "random (from torchvision's architecture)",
            "data": "synthetic (normal random images, uniform random labels)",
            "param_count": n_params,
            "parallelism": DDP_PARALLELISM,
            "optimizer": f"SGD lr {p.lr} momentum {p.momentum} weight decay {p.weight_decay}",
            "cudnn_benchmark": torch.backends.cudnn.benchmark,
            "flops_per_image": flops_per_image,
            "flops_formula": (
                "torch.utils.flop_counter.FlopCounterMode over one forward + backward "
                "(conv and matmul FLOPs), per image"
            ),
            "torchvision": torchvision.__version__,
        },
        describe=f"{p.arch}: {n_params / 1e6:.1f}M params, {p.batch_per_gpu} x "
        f"{p.image_size}px images per rank, {p.precision}, "
        f"{'channels_last' if p.channels_last else 'NCHW'}",
    )


run = runner(ResnetDdpParams, build)
