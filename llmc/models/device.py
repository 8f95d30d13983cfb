"""Pick the compute device and precision: cuda > mps > cpu; fp16 on CUDA, bf16 where the CPU has it.

``detect_accelerator`` is the one place that asks the machine which accelerator it has; the
search profile (``machine_profile``: ``cpu`` or ``gpu``) and ``pick_device`` follow it, so a
test fakes a GPU by replacing that one function.
"""

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


@functools.cache
def _accelerator() -> str:
    if gpu_impossible():
        return "cpu"  # known without importing torch
    try:
        import torch
    except ImportError:
        return "cpu"
    if torch.cuda.is_available():
        return "cuda"
    if getattr(torch.backends, "mps", None) and torch.backends.mps.is_available():
        return "mps"
    return "cpu"


def detect_accelerator() -> str:
    """``cuda``, ``mps`` or ``cpu``: the best device torch can use here, asked once per
    process (torch is imported only where a GPU driver exists). The seam tests replace."""
    return _accelerator()


PROFILES = ("auto", "cpu", "gpu")


@dataclass(frozen=True)
class Profile:
    """The search profile of this machine: ``cpu`` or ``gpu`` (the stages each may run are
    in llmc.search.budget), the device kind the cost model records under, and why."""

    name: str  # cpu | gpu
    device: str  # cpu | cuda | mps
    reason: str


def machine_profile(requested: str = "auto") -> Profile:
    """``search.profile`` resolved: ``auto`` is ``gpu`` when CUDA or MPS is usable, else
    ``cpu``; ``cpu`` and ``gpu`` are taken as configured. An unknown name is a ValueError."""
    name = requested.strip().lower()
    if name not in PROFILES:
        raise ValueError(f"search.profile must be one of {', '.join(PROFILES)}, got {requested!r}")
    device = detect_accelerator()
    if name == "auto":
        name = "cpu" if device == "cpu" else "gpu"
        return Profile(name, device, f"{name} (auto: {device} found)")
    if name == "gpu" and device == "cpu":
        return Profile(name, "cpu", "gpu (configured; no GPU found, stages run on the CPU)")
    return Profile(name, device, f"{name} (configured)")


def pick_device(requested: str = "auto", precision: str = "auto") -> DeviceChoice:
    """Resolve ``auto`` device and precision without assuming anything about the machine."""
    device = requested
    if requested == "auto":
        device = detect_accelerator()
    reason = f"device {device} ({'auto' if requested == 'auto' else 'configured'})"
    if precision != "auto":
        return DeviceChoice(device, precision, reason + f", precision {precision} (configured)")
    if device == "cuda":
        return DeviceChoice(device, "fp16", reason + ", fp16 on CUDA")
    if device == "cpu" and cpu_has_fast_bf16():
        return DeviceChoice(device, "bf16", reason + ", bf16 (CPU has AVX512-BF16/AMX)")
    return DeviceChoice(device, "fp32", reason + ", fp32")


__all__ = [
    "PROFILES",
    "DeviceChoice",
    "Profile",
    "cpu_has_fast_bf16",
    "detect_accelerator",
    "gpu_impossible",
    "machine_profile",
    "pick_device",
]
