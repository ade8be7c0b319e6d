#!/usr/bin/env python
"""What the Triton kernels of geometric attention ask of an NVIDIA GPU, found without one: Triton compiles them for
the GPU's compute capability on this machine (its own compiler and the ptxas and cuobjdump its wheel ships), and
cuobjdump reads the registers per thread, the stack per thread (where registers that do not fit are spilled) and the
shared memory per program out of the binary. From them, how many programs of the kernel one streaming multiprocessor
holds at once (on an H100 or H200: 65,536 registers in four quarters, 228 KB of shared memory, 64 warps, 32 programs;
CUDA's occupancy rules): a kernel that waits on memory runs faster the more it holds. Also counted in the machine code
(SASS): its instructions and its barriers (BAR.SYNC: every warp of the program waits there, as it does around each
exchange of a tile through shared memory, for a gather, a scan or a change of layout), the whole kernel's, each
written once however often it runs.

The kernels are compiled as one training step of the NDR's attention launches them (its heads, direction bias and
padding mask as the layer hands them over, normalised, 4 heads of d_head 32, 1,024 positions), with the
specialisations Triton makes at run time, for every launch configuration (rows per program x warps) and dtype asked:

    python benchmarks/triton_resources.py                                    # sm_90 (H100, H200), bf16, 16x4 and 32x8
    python benchmarks/triton_resources.py --configs 16x2 16x4 16x8 32x4 32x8 --dtypes bfloat16 float32 \\
        --json docs/ndr_attention_triton_resources.json
    python benchmarks/triton_resources.py --capability 80                     # A100
"""

import argparse
import collections
import contextlib
import json
import os
import re
import subprocess
import sys
import tempfile

if os.environ.get("TRITON_INTERPRET") == "1":
    sys.exit("triton_resources.py compiles the kernels: run it without TRITON_INTERPRET=1")

import torch  # noqa: E402

from lengthgen.cli import launch_configuration  # noqa: E402
from lengthgen.modeling.ndr import geometric_attention_triton as kernels  # noqa: E402
from lengthgen.training.hardware import hardware  # noqa: E402
from lengthgen.training.results import written_whole  # noqa: E402

geometric_module = sys.modules["lengthgen.modeling.ndr.geometric_attention"]  # the package's name is the function
DTYPES = {"bfloat16": torch.bfloat16, "float32": torch.float32, "float64": torch.float64}
# one streaming multiprocessor by compute capability x 10 (CUDA's programming guide): registers (in four quarters, a
# warp's from one quarter), shared memory (1 KB of it kept per program), resident warps, resident programs
SM = {80: dict(registers=65536, shared=164 * 1024, warps=64, programs=32),  # A100
      90: dict(registers=65536, shared=228 * 1024, warps=64, programs=32)}  # H100, H200


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--configs", type=launch_configuration, nargs="+", default=[(16, 4), (32, 8)],
                        metavar="BLOCKxWARPS",
                        help="launch configurations, rows per program x warps (powers of two, rows at least 16)")
    parser.add_argument("--dtypes", nargs="+", choices=sorted(DTYPES), default=["bfloat16"], help="input dtypes")
    parser.add_argument("--capability", type=int, choices=sorted(SM), default=90,
                        help="compute capability x 10: 90 for H100/H200, 80 for A100")
    parser.add_argument("--head_size", type=int, default=32, help="d_k = d_v")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if not kernels.available():
        parser.error("Triton with tl.gather (3.2 or later) is not installed")
    return args


class _CompileOnly:
    """A stand-in for Triton's CUDA driver that names a GPU of compute capability `capability` / 10: with it active,
    a kernel launched with `warmup=True` is specialised and compiled exactly as a launch on that GPU would be, and
    nothing runs."""

    def __init__(self, capability: int):
        from triton.backends.compiler import GPUTarget

        self.target = GPUTarget("cuda", capability, 32)

    def get_current_device(self):
        return 0

    def get_current_stream(self, device=None):
        return 0

    def get_current_target(self):
        return self.target


@contextlib.contextmanager
def _compiling_instead_of_launching(capability: int):
    """While the context holds, a launch of either kernel compiles it for `capability` and records the binary under
    the kernel's name in the dict the context yields. Each kernel's per-device caches (target, binder, binaries) are
    fresh inside and restored after, so that neither this GPU's target nor its binaries outlive the context."""
    from triton.runtime import driver

    binaries, previous = {}, driver._active
    kept = {}
    try:
        driver.set_active(_CompileOnly(capability))
        for name in ("_forward_kernel", "_backward_kernel"):
            kernel = getattr(kernels, name)

            def compile_only(*args, grid, warmup, _kernel=kernel, _name=name, **options):
                binaries[_name] = type(_kernel).run(_kernel, *args, grid=grid, warmup=True, **options)

            kept[name] = kernel.device_caches
            kernel.device_caches = collections.defaultdict(kernel.create_binder)
            kernel.run = compile_only
        yield binaries
    finally:
        driver.set_active(previous)
        for name, caches in kept.items():
            kernel = getattr(kernels, name)
            kernel.device_caches = caches
            del kernel.run


def compiled(dtype: torch.dtype, block: int, warps: int, capability: int = 90, head_size: int = 32,
             heads: int = 4, length: int = 1024) -> dict:
    """Both kernels ("_forward_kernel", "_backward_kernel": Triton's CompiledKernels, whose `asm` holds the PTX and
    the binary) as one training step of the NDR's attention launches them on a GPU of compute capability
    `capability` / 10 with `block` rows per program on `warps` warps: the layer's own tensors (its heads a view of its
    projections, its bfloat16 direction bias, a padding mask broadcast over heads) on this CPU, under bfloat16
    autocast for bfloat16, so that Triton specialises the launch as it does at run time (an integer argument equal
    to 1 becomes a constant; integers and addresses divisible by 16 are marked so, which allows wider loads)."""
    from lengthgen.modeling import NDRConfig
    from lengthgen.modeling.ndr import modeling_ndr

    config = NDRConfig(vocab_size=8, hidden_size=heads * head_size, num_attention_heads=heads,
                       intermediate_size=2 * heads * head_size, normalize_geometric_attention=True)
    attention = modeling_ndr.NDRAttention(config).to(torch.float64 if dtype == torch.float64 else torch.float32)
    hidden_states = torch.randn(2, length, config.hidden_size, dtype=attention.query.weight.dtype, requires_grad=True)
    key_padding_mask = torch.ones(2, length, dtype=torch.bool)
    geometric_attention = modeling_ndr.geometric_attention
    modeling_ndr.geometric_attention = geometric_module._triton_attention  # what CUDA tensors take
    try:
        with kernels.launch_configuration(block, warps), _compiling_instead_of_launching(capability) as binaries:
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype == torch.bfloat16):
                output, _ = attention(hidden_states, key_padding_mask)
            output.sum().backward()
    finally:
        modeling_ndr.geometric_attention = geometric_attention
    return binaries


def resources(binary: bytes) -> dict:
    """Registers and stack bytes per thread of a cubin, as cuobjdump reads them (the shared memory a program takes is
    Triton's metadata: cuobjdump counts only the static part), and its instructions and barriers (`sass_counts`)."""
    from triton import knobs

    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(binary)
        f.flush()
        usage, sass = (subprocess.run([knobs.nvidia.cuobjdump.path, flag, f.name], check=True, capture_output=True,
                                      text=True).stdout for flag in ("--dump-resource-usage", "-sass"))
    found = {key: int(re.search(rf"\b{key}:(\d+)", usage).group(1)) for key in ("REG", "STACK")}
    return {"registers": found["REG"], "stack_bytes": found["STACK"], **sass_counts(sass)}


def sass_counts(sass: str) -> dict:
    """Instructions and barriers (BAR.SYNC) in cuobjdump's SASS listing: a line per instruction, `/*offset*/`, an
    optional predicate (`@P0`, `@!PT`), the opcode."""
    opcodes = re.findall(r"^\s*/\*[0-9a-f]+\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)", sass, flags=re.MULTILINE)
    return {"instructions": len(opcodes), "barriers": sum(op.startswith("BAR.SYNC") for op in opcodes)}


def programs_per_sm(registers: int, shared: int, warps: int, capability: int = 90) -> int | None:
    """Programs of `warps` warps one streaming multiprocessor holds at once, each thread taking `registers` registers
    and each program `shared` bytes of shared memory (None for a capability not in SM). Registers are given to a warp
    in units of 256 from one quarter of the register file, so a quarter holds whole warps only."""
    if capability not in SM:
        return None
    sm = SM[capability]
    per_warp = -(-registers * 32 // 256) * 256
    by_registers = 4 * (sm["registers"] // 4 // per_warp) // warps
    by_shared = sm["shared"] // (shared + 1024)
    return min(by_registers, by_shared, sm["warps"] // warps, sm["programs"])


def main(argv=None) -> dict:
    args = parse_args(argv)
    print(f"Triton kernels of geometric attention compiled for compute capability {args.capability / 10:.1f}, "
          f"d_head {args.head_size}, with bias and mask, normalised")
    print("kernel | dtype | rows x warps | registers | stack bytes | shared bytes | programs per SM | instructions | "
          "barriers")
    rows = []
    for dtype_name in args.dtypes:
        for block, warps in args.configs:
            binaries = compiled(DTYPES[dtype_name], block, warps, args.capability, args.head_size)
            for name, kernel in binaries.items():
                row = {"kernel": name.strip("_").removesuffix("_kernel"), "dtype": dtype_name, "rows": block,
                       "warps": warps, **resources(kernel.asm["cubin"]), "shared_bytes": kernel.metadata.shared}
                row["programs_per_sm"] = programs_per_sm(row["registers"], row["shared_bytes"], warps, args.capability)
                rows.append(row)
                print(f"{row['kernel']} | {dtype_name} | {block}x{warps} | {row['registers']} | {row['stack_bytes']} | "
                      f"{row['shared_bytes']} | {row['programs_per_sm']} | {row['instructions']} | {row['barriers']}",
                      flush=True)
    record = {"hardware": hardware(1), "compute_capability": args.capability,
              "arguments": {k: v for k, v in vars(args).items() if k != "json"}, "results": rows}
    if args.json:
        with written_whole(args.json) as f:
            json.dump(record, f, indent=2)
    return record


if __name__ == "__main__":
    main()
