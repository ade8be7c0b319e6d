#!/usr/bin/env python
"""Geometric attention against softmax attention (SDPA): time and peak memory, per call and end to end.

Attention mode (default): the same queries, keys and values (batch 8, 4 heads, d_head 32) through
- geometric (fused): `geometric_attention`, the C++ kernel on CPU (in training it keeps the weights for backward),
  the Triton kernels on CUDA (linear memory: no N x N tensor, in training either);
- geometric (PyTorch): logits -> `geometric_attention_weights` -> weights @ values, the fallback path;
- softmax (SDPA): `torch.nn.functional.scaled_dot_product_attention`; on CUDA held to its FlashAttention backend for
  bfloat16 and float16 inputs;
forward + backward (`--forward_only`: the forward pass alone, without autograd), medians of interleaved repetitions in
this process (each kind at each thread count in turn: a noisy machine slows all alike). Peak memory: on CUDA
`torch.cuda.max_memory_allocated`; on CPU the peak of the torch profiler's allocation events. It is given against
SDPA's and against the size of one fp32 score tensor (batch x heads x N x N x 4 bytes).

End-to-end mode (`--end_to_end`): one NDR training step (forward + backward) at the hub configs' shapes (CTL: 16
tokens, ListOps: 50 tokens) for the NDR (geometric attention, fused and PyTorch) against the same model with softmax
attention and relative or absolute positions, and evaluation (forward only) at 256 and 1024 tokens.

    python benchmarks/ndr_attention.py                    # N = 16, 64, 256, 1024
    python benchmarks/ndr_attention.py --end_to_end
    python benchmarks/ndr_attention.py --device cuda --dtype bfloat16   # N = 16, 64, 256, 1024, 4096, 8192
    python benchmarks/ndr_attention.py --end_to_end --device cuda --dtype bfloat16 --train_batch_size 512

On CUDA the fused rows are the Triton kernels (bf16 inputs enter their products as they are; everything else is fp32);
`--dtype bfloat16` runs end to end under bf16 autocast, as training with `--bf16` does. `--triton_configs 32x8 64x8`
adds a row per Triton launch configuration (rows per program x warps) beside the default's, to tune them:

    python benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 256 1024 4096 \\
        --triton_configs 32x4 32x8 64x4 64x8

`--profile` also records, per length, what one step of the fused kind and of SDPA runs, operation by operation
(torch.profiler: on CUDA each kernel's GPU time and how many kernels, copies and fills the GPU ran; on a CPU each
operator's own time), so that the Triton kernels' forward and backward and everything launched around them are told
apart:

    python benchmarks/ndr_attention.py --device cuda --dtype bfloat16 --lengths 256 1024 4096 --profile
"""

import argparse
import contextlib
import json
import statistics
import sys
import time
from pathlib import Path

import torch
from torch.nn import functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from lengthgen.cli import launch_configuration
from lengthgen.modeling import NDRConfig, NDRForSequenceClassification
from lengthgen.modeling.ndr import geometric_attention, geometric_attention_cpu, geometric_attention_weights
from lengthgen.training.hardware import hardware
from lengthgen.training.results import written_whole

HUB_CONFIGS = Path(__file__).resolve().parent.parent / "hub_configs"
GEOMETRIC_MODULE = sys.modules["lengthgen.modeling.ndr.geometric_attention"]
TRITON_MODULE = sys.modules["lengthgen.modeling.ndr.geometric_attention_triton"]


@contextlib.contextmanager
def pytorch_path():
    """Run geometric attention on the PyTorch fallback, as on a machine without a compiler or Triton."""
    load, triton = GEOMETRIC_MODULE.load_cpu_kernel, GEOMETRIC_MODULE.triton_available
    GEOMETRIC_MODULE.load_cpu_kernel = GEOMETRIC_MODULE.triton_available = lambda: None
    try:
        yield
    finally:
        GEOMETRIC_MODULE.load_cpu_kernel, GEOMETRIC_MODULE.triton_available = load, triton


def fused(q, k, v):
    return geometric_attention(q, k, v)


def pytorch(q, k, v):  # in the inputs' dtype, as the model's fallback under autocast
    return geometric_attention_weights(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5) @ v


def softmax(q, k, v):
    if q.device.type == "cuda" and q.dtype in (torch.float16, torch.bfloat16):
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            return F.scaled_dot_product_attention(q, k, v)
    return F.scaled_dot_product_attention(q, k, v)


KINDS = {"geometric (fused)": fused, "geometric (PyTorch)": pytorch, "softmax (SDPA)": softmax}


def inputs(args, n):
    g = torch.Generator().manual_seed(n)
    shape = (args.batch_size, args.heads, n, args.head_size)
    return [
        torch.randn(shape, generator=g).to(args.device, getattr(torch, args.dtype)).requires_grad_() for _ in range(3)
    ]


def synchronize(device):
    if device == "cuda":
        torch.cuda.synchronize()


def step(fn, q, k, v, backward=True):
    if backward:
        fn(q, k, v).float().sum().backward()
    else:
        with torch.no_grad():
            fn(q, k, v)
    synchronize(q.device.type)


def peak_memory_bytes(device, fn) -> int:
    """Peak memory allocated while `fn()` runs beyond what existed before: CUDA's allocator statistics, or on CPU
    the running sum of the torch profiler's leaf allocation and free events."""
    if device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        fn()
        return torch.cuda.max_memory_allocated() - base
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        fn()
    events = sorted(
        (e for e in prof.events() if e.cpu_memory_usage and not e.cpu_children), key=lambda e: e.time_range.start
    )
    current = peak = 0
    for event in events:
        current += event.cpu_memory_usage
        peak = max(peak, current)
    return peak


def interleaved_medians(functions: dict, counts: list[int], warmup: int, repeats: int) -> dict:
    """{count: {name: median seconds}}: every repetition runs each function at each thread count in turn, so that a
    slow spell of this shared machine falls on all of them alike, the thread scaling included."""
    times = {(count, name): [] for count in counts for name in functions}
    for repeat in range(warmup + repeats):
        for count, name in times:
            torch.set_num_threads(count)
            start = time.perf_counter()
            functions[name]()
            if repeat >= warmup:
                times[count, name].append(time.perf_counter() - start)
    return {count: {name: statistics.median(times[count, name]) for name in functions} for count in counts}


def measure(args, counts: list[int]) -> dict:
    results = {count: {} for count in counts}
    for n in args.lengths:
        kinds = {kind: fn for kind, fn in KINDS.items() if not (kind == "geometric (PyTorch)" and n > args.pytorch_max)}
        launches = {f"geometric (Triton {block}x{warps})": (block, warps) for block, warps in args.triton_configs}
        kinds.update({kind: fused for kind in launches})
        tensors = {kind: inputs(args, n) for kind in kinds}

        def run(kind):
            q, k, v = tensors[kind]
            with TRITON_MODULE.launch_configuration(*launches[kind]) if kind in launches else contextlib.nullcontext():
                step(kinds[kind], q, k, v, backward=not args.forward_only)
            q.grad = k.grad = v.grad = None

        by_count = interleaved_medians({kind: (lambda kind=kind: run(kind)) for kind in kinds}, counts, args.warmup,
                                       args.repeats)
        score_bytes = args.batch_size * args.heads * n * n * 4
        base = "softmax (SDPA)"
        for count, seconds in by_count.items():
            torch.set_num_threads(count)
            memory = {kind: peak_memory_bytes(args.device, lambda kind=kind: run(kind)) for kind in kinds}
            results[count][n] = {
                "seconds": seconds,
                "peak_bytes": memory,
                "fp32_score_tensor_bytes": score_bytes,
                "time_ratio": {kind: seconds[kind] / seconds[base] for kind in kinds if kind != base},
                "memory_ratio": {kind: memory[kind] / max(memory[base], 1) for kind in kinds if kind != base},
                "memory_over_score_tensor": {kind: memory[kind] / score_bytes for kind in kinds},
            }
    return results


def profile_steps(args, top: int = 12) -> dict:
    """{N: {kind: {"operations": [{"name", "calls", "self_us"}, ...] (the `top` costliest, costliest first),
    "total_us", "gpu_operations"}}} for one step of the fused kind and of SDPA after a warm-up one: on CUDA the GPU
    time of each kernel (Triton's included) and how many kernels, copies and fills the GPU ran; on a CPU each
    operator's own CPU time (and no GPU count)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = args.device.startswith("cuda")
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    profiles = {}
    for n in args.lengths:
        profiles[n] = {}
        for kind in ("geometric (fused)", "softmax (SDPA)"):
            q, k, v = inputs(args, n)
            step(KINDS[kind], q, k, v, backward=not args.forward_only)  # compiles and caches what it needs
            q.grad = k.grad = v.grad = None
            with profile(activities=activities) as prof:
                step(KINDS[kind], q, k, v, backward=not args.forward_only)
            rows = []
            for event in prof.key_averages():
                on_device = str(event.device_type).endswith("CUDA")
                if cuda != on_device:
                    continue
                own = event.self_device_time_total if cuda else event.self_cpu_time_total
                if own > 0:
                    rows.append({"name": event.key, "calls": event.count, "self_us": own})
            rows.sort(key=lambda row: -row["self_us"])
            profiles[n][kind] = {"operations": rows[:top], "total_us": sum(row["self_us"] for row in rows),
                                 "gpu_operations": sum(row["calls"] for row in rows) if cuda else None}
    return profiles


def report_profiles(profiles: dict):
    print("profile: one step's operations, own time in microseconds (calls)")
    for n, kinds in profiles.items():
        for kind, p in kinds.items():
            launched = f", {p['gpu_operations']} on the GPU" if p["gpu_operations"] is not None else ""
            operations = "; ".join(f"{row['name'][:60]} {row['self_us']:.0f} ({row['calls']})"
                                   for row in p["operations"][:6])
            print(f"N={n} {kind}: {p['total_us']:.0f} us in all{launched}: {operations}")


# ---- end to end: the NDR of the hub configs against its softmax variants ----

SHAPES = {  # hub config, tokens, training batch (the papers' batch where it fits this machine's budget)
    "ctl": ("ndr-ctl", 16, 128),
    "listops": ("ndr-listops", 50, 32),
}
VARIANTS = {
    "geometric (fused)": {},
    "geometric (PyTorch)": {},
    "softmax + relative": {"attention_type": "softmax", "position_encoding": "relative"},
    "softmax + absolute": {"attention_type": "softmax", "position_encoding": "absolute"},
}


def ndr_model(hub_config: str, changes: dict, device: str = "cpu") -> NDRForSequenceClassification:
    config = NDRConfig.from_pretrained(HUB_CONFIGS / hub_config)
    for key, value in changes.items():
        if not hasattr(config, key):
            raise ValueError(f"NDRConfig has no field {key!r}")
        setattr(config, key, value)
    torch.manual_seed(0)
    return NDRForSequenceClassification(config).to(device)


def ndr_batch(config, n, batch_size, device="cpu"):
    g = torch.Generator().manual_seed(n)
    input_ids = torch.randint(4, config.vocab_size, (batch_size, n), generator=g)
    input_ids[:, 0], input_ids[:, -1] = config.bos_token_id, config.eos_token_id  # the classifier reads the end token
    labels = torch.randint(0, config.num_labels, (batch_size,), generator=g)
    return input_ids.to(device), torch.ones_like(input_ids).to(device), labels.to(device)


def variant_call(name, model, input_ids, mask, labels, train, dtype="float32"):
    """One training step (forward + backward) or evaluation call, under autocast to `dtype` unless it is float32."""
    device = input_ids.device.type
    autocast = torch.autocast(device, getattr(torch, dtype), enabled=dtype != "float32")

    def call():
        context = pytorch_path() if name == "geometric (PyTorch)" else contextlib.nullcontext()
        with context, autocast:
            if train:
                model(input_ids, attention_mask=mask, labels=labels).loss.backward()
                model.zero_grad(set_to_none=True)
            else:
                with torch.no_grad():
                    model(input_ids, attention_mask=mask)
        synchronize(device)

    return call


def measure_end_to_end(args, counts: list[int]) -> dict:
    results = {count: {} for count in counts}
    base = "softmax + relative"
    for shape, (hub_config, n, batch_size) in SHAPES.items():
        cases = [("train", n, args.train_batch_size or batch_size),
                 *[("eval", length, args.eval_batch_size) for length in args.eval_lengths]]
        models = {name: ndr_model(hub_config, {**args.overrides, **changes}, args.device)
                  for name, changes in VARIANTS.items()}
        for mode, length, batch in cases:
            variants = {
                name: model for name, model in models.items()
                if not (name == "geometric (PyTorch)" and length > args.pytorch_max)
            }
            for model in variants.values():
                model.train(mode == "train")
            input_ids, mask, labels = ndr_batch(models[base].config, length, batch, args.device)
            calls = {
                name: variant_call(name, model, input_ids, mask, labels, mode == "train", args.dtype)
                for name, model in variants.items()
            }
            repeats = args.end_to_end_repeats if length <= 256 else 1
            for count, seconds in interleaved_medians(calls, counts, warmup=1, repeats=repeats).items():
                results[count][f"{shape} {mode} N={length} batch={batch}"] = {
                    "seconds": seconds,
                    "ratio_to_softmax_relative": {name: s / seconds[base] for name, s in seconds.items()},
                }
    return results


def overrides(text: str) -> dict:
    """'num_layers=2,hidden_size=32' -> {'num_layers': 2, 'hidden_size': 32} (values read as JSON where they parse)."""
    changes = {}
    for item in filter(None, text.split(",")):
        key, _, value = item.partition("=")
        try:
            changes[key.strip()] = json.loads(value)
        except json.JSONDecodeError:
            changes[key.strip()] = value
    return changes


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+",
                        help="sequence lengths (default: 16 64 256 1024 on a CPU, up to 8192 on CUDA)")
    parser.add_argument("--batch_size", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head_size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--pytorch_max", type=int, default=1024, help="longest N run on the PyTorch path")
    parser.add_argument("--forward_only", action="store_true",
                        help="attention mode: time the forward pass alone (no autograd), not forward + backward")
    parser.add_argument("--end_to_end", action="store_true", help="NDR training and evaluation steps instead")
    parser.add_argument("--eval_lengths", type=int, nargs="*", default=[256, 1024])
    parser.add_argument("--train_batch_size", type=int,
                        help="end to end: training batch (default: CTL 128, ListOps 32)")
    parser.add_argument("--eval_batch_size", type=int, default=4)
    parser.add_argument("--end_to_end_repeats", type=int, default=5)
    parser.add_argument("--overrides", type=overrides, default={},
                        help="end to end: config changes for every variant, e.g. num_layers=2,hidden_size=32")
    parser.add_argument("--threads", type=int, nargs="+",
                        help="thread counts to measure at (default: 1 and all cores), each with torch.set_num_threads")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", choices=["float32", "bfloat16", "float16"], default="float32",
                        help="the inputs' dtype (attention mode); the autocast dtype end to end")
    parser.add_argument("--triton_configs", type=launch_configuration, nargs="*", default=[], metavar="BLOCKxWARPS",
                        help="CUDA: also time the Triton kernels at these launch configurations (e.g. 32x8 64x8)")
    parser.add_argument("--profile", action="store_true",
                        help="attention mode: also profile one step of the fused kind and of SDPA per length")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    for flag in ("batch_size", "heads", "head_size", "repeats", "train_batch_size", "eval_batch_size",
                 "end_to_end_repeats"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag} must be at least 1, got {value}")
    if args.warmup < 0:
        parser.error(f"--warmup must be at least 0, got {args.warmup}")
    for flag in ("lengths", "eval_lengths", "threads"):
        if getattr(args, flag) and min(getattr(args, flag)) < 1:
            parser.error(f"--{flag} must each be at least 1, got {min(getattr(args, flag))}")
    if args.triton_configs and not (args.device.startswith("cuda") and GEOMETRIC_MODULE.triton_available()):
        parser.error("--triton_configs times the Triton kernels: it needs --device cuda and Triton installed")
    for flag in ("triton_configs", "forward_only", "profile"):
        if getattr(args, flag) and args.end_to_end:
            parser.error(f"--{flag} is for the attention rows, not --end_to_end")
    if args.lengths is None:
        args.lengths = [16, 64, 256, 1024] + ([4096, 8192] if args.device.startswith("cuda") else [])
    counts = list(dict.fromkeys(args.threads or [1, torch.get_num_threads()]))
    kernel = args.device == "cpu" and geometric_attention_cpu.load() is not None
    kernel_state = (
        "built for " + geometric_attention_cpu.native_isa() if kernel
        else "not available (the fused rows run the PyTorch path)"
    )
    print(f"fused CPU kernel: {kernel_state}")
    threads = torch.get_num_threads()
    try:
        by_threads = measure_end_to_end(args, counts) if args.end_to_end else measure(args, counts)
    finally:
        torch.set_num_threads(threads)
    for count in counts:
        report(args, by_threads[count], count)
    scaling = thread_scaling(by_threads, counts)
    if scaling:
        print(f"scaling, time at {counts[0]} thread(s) / time at {counts[-1]}:")
        for case, kinds in scaling.items():
            print(f"  {case}: " + ", ".join(f"{kind} {value:.2f}x" for kind, value in kinds.items()))
    results = {"by_threads": by_threads, "scaling": scaling}
    if args.profile:
        results["profile"] = profile_steps(args)
        report_profiles(results["profile"])
    if args.json:
        with written_whole(args.json) as f:
            json.dump({"args": vars(args), "hardware": hardware(), "fused_kernel": kernel,
                       "isa": geometric_attention_cpu.native_isa() if kernel else None, **results}, f, indent=2)
    return results


def report(args, results: dict, threads: int):
    if args.end_to_end:
        print(f"{threads} thread(s): NDR step time (s), median; ratio to softmax + relative")
        for case, r in results.items():
            row = "  ".join(
                f"{name} {s:.3f} ({r['ratio_to_softmax_relative'][name]:.2f}x)" for name, s in r["seconds"].items()
            )
            print(f"{case}: {row}")
        return
    passes = "forward" if args.forward_only else "forward + backward"
    print(f"{threads} thread(s): {passes}, batch {args.batch_size}, {args.heads} heads, d_head {args.head_size}, "
          f"{args.device} {args.dtype}, median of {args.repeats}; peak memory in MiB, against SDPA's (and x one fp32 "
          "score tensor)")
    for n, r in results.items():
        cells = []
        for kind, s in r["seconds"].items():
            ratio = f" = {r['time_ratio'][kind]:.2f}x SDPA" if kind in r["time_ratio"] else ""
            mib = r["peak_bytes"][kind] / 2**20
            memory = f" = {r['memory_ratio'][kind]:.2f}x SDPA" if kind in r["memory_ratio"] else ""
            cells.append(f"{kind} {s * 1e3:.2f} ms{ratio}, {mib:.1f} MiB{memory} "
                         f"({r['memory_over_score_tensor'][kind]:.2f}x)")
        print(f"N={n}: " + "; ".join(cells))


def thread_scaling(by_threads: dict, counts: list[int]) -> dict:
    """Time at the first thread count / time at the last, per case (N or end-to-end shape) and kind, side by side."""
    if len(counts) < 2:
        return {}
    first, last = by_threads[counts[0]], by_threads[counts[-1]]
    return {case: {kind: first[case]["seconds"][kind] / seconds for kind, seconds in last[case]["seconds"].items()}
            for case in last}


if __name__ == "__main__":
    main()
