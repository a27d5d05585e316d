"""The transformers model a training workload trains, built one way for all of them.

A recipe's `model_path` names a local directory: its pretrained weights when it holds them,
else its config with random weights; without one, the workload's own config from its
parameters. Either way the model is made on the device, in the dtype the workload asks for.

Standard library and torch only at import: this runs inside the container, and transformers
is the caller's (its config and model classes are passed in).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from kit.worker.common import Context
from kit.worker.training import data_file


@contextlib.contextmanager
def default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    """Create parameters in `dtype`, None: torch's default (transformers' rotary inv_freq stays
    fp32: it asks for it)."""
    previous = torch.get_default_dtype()
    if dtype is not None:
        torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def dtype_kwarg() -> str:
    """transformers 5 names the load dtype `dtype`; 4.x named it `torch_dtype`."""
    import transformers

    return "dtype" if int(transformers.__version__.split(".")[0]) >= 5 else "torch_dtype"


def model_dir(path_text: str) -> Path:
    """A recipe's model_path, refused unless it holds a config.json."""
    path = Path(path_text)
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"model_path {path_text}: no config.json there")
    return path


def check_local_paths(model_path: str, data_path: str) -> None:
    """A recipe's model_path and data_path, checked before the worker imports transformers and
    peft (3-5 s of CPU a rank): a path that is not on this machine fails the run at once, in the
    words the later reads would use."""
    if model_path:
        model_dir(model_path)
    if data_path:
        data_file(data_path)


def local_model(path_text: str, config_cls: Any, model_cls: Any, **load: Any) -> tuple[Any, str]:
    """A recipe's model_path: its pretrained model when it holds weights (safetensors or
    pytorch_model*.bin), else its config (random weights); and words saying which."""
    path = model_dir(path_text)
    if any(path.glob("*.safetensors")) or any(path.glob("pytorch_model*.bin")):
        model = model_cls.from_pretrained(
            path, local_files_only=True, attn_implementation="sdpa", **load
        )
        return model, f"pretrained weights from {path_text}"
    config = config_cls.from_pretrained(path, local_files_only=True)
    config._attn_implementation = "sdpa"
    return config, f"random (from config at {path_text})"


def hf_model(
    ctx: Context,
    model_path: str,
    config_cls: Any,
    model_cls: Any,
    own_config: Callable[[], Any],
    dtype: torch.dtype | None = None,
) -> tuple[torch.nn.Module, str]:
    """The model on the device, and a sentence saying where its weights came from: `model_path`'s
    (local_model), else random weights from `own_config()`; loaded or made in `dtype` (None:
    torch's default)."""
    if model_path:
        load = {dtype_kwarg(): dtype} if dtype is not None else {}
        found, weights = local_model(model_path, config_cls, model_cls, **load)
        if isinstance(found, model_cls):
            return found.to(ctx.device), weights
        config = found
    else:
        config, weights = own_config(), "random (from config)"
    with torch.device(ctx.device), default_dtype(dtype):
        model = model_cls(config)
    return model, weights
