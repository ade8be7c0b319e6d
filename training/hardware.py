"""What a run ran on, and the precision to train in there.

`auto_precision()` is the default where nothing was measured: bf16 autocast where the device multiplies bf16 natively
(a CUDA GPU with bf16; a CPU with AVX-512 BF16 or AMX, oneDNN's check), fp32 elsewhere. On a CPU without native bf16,
autocast is much slower than fp32; with it, whether bf16 is faster depends on the model's size, so the reproduction
presets name their CPU precision (the measurements: docs/results/speed.md). `hardware()` is recorded beside every
result.
"""

import importlib.metadata
import os
import platform

import torch
import transformers


def native_bf16(device: str = "cpu") -> bool:
    """True where `device` ("cpu" or "cuda") multiplies bf16 matrices natively."""
    if device == "cuda":
        return torch.cuda.is_available() and torch.cuda.is_bf16_supported()
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


def auto_precision(device: str = "cpu") -> str:
    """"bf16" where `device` has native bf16, else "fp32"."""
    return "bf16" if native_bf16(device) else "fp32"


def hardware(threads: int | None = None) -> dict:
    """CPU model, its vector extensions and bf16 flags, threads, GPU (if any), and the torch, transformers and Triton
    (None where it is not installed) versions: a run repeats its numbers only under the same ones. `threads`: the
    torch threads of the runs this records where a command started them with their own (`--threads`), else this
    process's."""
    model, flags = platform.processor(), set()
    if os.path.exists("/proc/cpuinfo"):
        with open("/proc/cpuinfo") as f:
            lines = f.read().splitlines()
        model = next((line.split(":", 1)[1].strip() for line in lines if line.startswith("model name")), model)
        flags = set(next((line.split(":", 1)[1].split() for line in lines if line.startswith("flags")), []))
    return {
        "cpu": model,
        "cpu_capability": torch.backends.cpu.get_cpu_capability(),
        "cpu_bf16_flags": sorted(flags & {"avx512_bf16", "amx_bf16"}),
        "native_bf16": native_bf16(),
        "threads": threads or torch.get_num_threads(),
        "gpu": torch.cuda.get_device_name() if torch.cuda.is_available() else None,
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "triton": _version("triton"),
    }


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None
