"""Pick the compute device and precision: cuda > mps > cpu; fp16 on CUDA, bf16 where the CPU has it."""

from __future__ import annotations

import functools
import logging
import os
import sys
from dataclasses import dataclass

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class DeviceChoice:
    device: str  # cuda, mps, cpu
    precision: str  # fp32, fp16, bf16
    reason: str


@functools.cache
def cpu_has_fast_bf16() -> bool:
    """True when the CPU does bf16 matrix math natively (AVX512-BF16 or AMX)."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = f.read()
    except OSError:
        return False
    return "avx512_bf16" in flags or "amx_bf16" in flags


def gpu_impossible() -> bool:
    """True when no torch device but the CPU can exist here, known without importing
    torch: Linux with neither an NVIDIA driver (CUDA) nor the ROCm kernel driver (torch's
    "cuda" on AMD GPUs). Elsewhere (macOS has MPS) it cannot be told, so False."""
    if not sys.platform.startswith("linux"):
        return False
    return not any(os.path.exists(p) for p in ("/proc/driver/nvidia", "/dev/nvidiactl", "/dev/kfd"))


def pick_device(requested: str = "auto", precision: str = "auto") -> DeviceChoice:
    """Resolve ``auto`` device and precision without assuming anything about the machine."""
    import torch

    device = requested
    if requested == "auto":
        if torch.cuda.is_available():
            device = "cuda"
        elif getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
            device = "mps"
        else:
            device = "cpu"
    reason = f"device {device} ({'auto' if requested == 'auto' else 'configured'})"
    if precision != "auto":
        return DeviceChoice(device, precision, reason + f", precision {precision} (configured)")
    if device == "cuda":
        return DeviceChoice(device, "fp16", reason + ", fp16 on CUDA")
    if device == "cpu" and cpu_has_fast_bf16():
        return DeviceChoice(device, "bf16", reason + ", bf16 (CPU has AVX512-BF16/AMX)")
    return DeviceChoice(device, "fp32", reason + ", fp32")


__all__ = ["DeviceChoice", "cpu_has_fast_bf16", "gpu_impossible", "pick_device"]
