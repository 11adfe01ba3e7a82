"""Mixed precision: `train.precision: bf16` runs the training forward under torch.autocast in
bfloat16 (matmuls in bf16; weights, gradients and Adam state stay float32; evaluation stays float32,
so scores are computed as in fp32 runs). Measured on this CPU (1 thread, batch 32, bellman_ford): the
RT trains 1.5x faster.

The hand-written autograd Functions (the MPNN's fused messages, the max-plus aggregation, the ET's
triangular product, pointer logits) assume one dtype throughout their in-place kernels, so under
autocast they run in float32 (`float32_apply`): their inputs are cast up and autocast is off inside.
"""

from __future__ import annotations

import contextlib
from typing import Any, Callable

import torch

from relreason.errors import RelreasonError


def autocast(precision: str, device: torch.device):
    """The context a training forward runs in: bf16 autocast, or nothing for fp32 (train.precision)."""
    if precision == "fp32":
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=torch.bfloat16)


def set_tf32(tf32: bool, device: torch.device) -> None:
    """train.tf32: float32 matrix products (and cuDNN convolutions) on CUDA through TF32 tensor cores, or in
    full float32 (the default, as on the CPU). Process-wide (torch's backend flags).

    Raises:
        RelreasonError: TF32 asked for a run on another `device` than CUDA (it would compute in full float32
            and be recorded as TF32)."""
    if tf32 and device.type != "cuda":
        raise RelreasonError(f"train.tf32 rounds CUDA matrix products through TF32, but this run trains on "
                             f"{device.type}: it would compute in full float32 and be recorded as TF32",
                             "set train.tf32: false, or train on a CUDA device")
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32


def float32_apply(apply: Callable[..., Any], *args: Any) -> Any:
    """`apply(*args)` (a custom Function's apply), in float32 when autocast is on; as is otherwise."""
    device = next((a.device.type for a in args if isinstance(a, torch.Tensor)), "cpu")
    if not torch.is_autocast_enabled(device):
        return apply(*args)
    cast = [a.float() if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]
    with torch.autocast(device, enabled=False):
        return apply(*cast)
