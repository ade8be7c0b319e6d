#!/usr/bin/env python
"""Geometric attention vs. softmax attention (SDPA): forward + backward time and peak memory.

Both take the same queries, keys and values (batch 8, 4 heads, d_head 32 by default) and return the attended values;
geometric attention = scores -> `geometric_attention_weights` (Eq. 5.7-5.8, log space) -> weights @ values; softmax =
`torch.nn.functional.scaled_dot_product_attention`. Times are medians of interleaved repetitions in this process,
so a noisy machine slows both alike. Peak memory: on CUDA `torch.cuda.max_memory_allocated`; on CPU the peak of the
torch profiler's allocation events.

    python benchmarks/ndr_attention.py                    # N = 16, 64, 256, 1024
    python benchmarks/ndr_attention.py --device cuda --dtype bfloat16
"""

import argparse
import json
import statistics
import time

import torch
from torch.nn import functional as F

from lengthgen.modeling.ndr import geometric_attention_weights


def geometric(q, k, v):
    return geometric_attention_weights(q @ k.transpose(-1, -2) * q.shape[-1] ** -0.5) @ v


def softmax(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


KINDS = {"geometric": geometric, "softmax (SDPA)": softmax}


def inputs(args, n):
    g = torch.Generator().manual_seed(n)
    shape = (args.batch_size, args.heads, n, args.head_size)
    return [torch.randn(shape, generator=g).to(args.device, getattr(torch, args.dtype)).requires_grad_() for _ in range(3)]


def step(fn, q, k, v):
    fn(q, k, v).float().sum().backward()
    if q.is_cuda:
        torch.cuda.synchronize()


def peak_memory_bytes(args, kind, n) -> int:
    """Peak memory allocated by one forward + backward beyond its inputs: CUDA's allocator statistics, or on CPU the
    running sum of the torch profiler's leaf allocation and free events."""
    q, k, v = inputs(args, n)
    if args.device == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        step(KINDS[kind], q, k, v)
        return torch.cuda.max_memory_allocated() - base
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
        step(KINDS[kind], q, k, v)
    events = sorted(
        (e for e in prof.events() if e.cpu_memory_usage and not e.cpu_children), key=lambda e: e.time_range.start
    )
    current = peak = 0
    for event in events:
        current += event.cpu_memory_usage
        peak = max(peak, current)
    return peak


def measure(args):
    results = {}
    for n in args.lengths:
        tensors = {kind: inputs(args, n) for kind in KINDS}
        times = {kind: [] for kind in KINDS}
        for repeat in range(args.warmup + args.repeats):
            for kind, fn in KINDS.items():
                q, k, v = tensors[kind]
                start = time.perf_counter()
                step(fn, q, k, v)
                if repeat >= args.warmup:
                    times[kind].append(time.perf_counter() - start)
                q.grad = k.grad = v.grad = None
        seconds = {kind: statistics.median(t) for kind, t in times.items()}
        memory = {kind: peak_memory_bytes(args, kind, n) for kind in KINDS}
        results[n] = {
            "seconds": seconds,
            "peak_bytes": memory,
            "time_ratio": seconds["geometric"] / seconds["softmax (SDPA)"],
            "memory_ratio": memory["geometric"] / max(memory["softmax (SDPA)"], 1),
        }
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--lengths", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-size", type=int, default=32)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--dtype", default="float32")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    results = measure(args)
    print(f"forward + backward, batch {args.batch_size}, {args.heads} heads, d_head {args.head_size}, "
          f"{args.device} {args.dtype}, median of {args.repeats}")
    print(f"{'N':>6} {'geometric ms':>13} {'softmax ms':>11} {'time ratio':>11} {'geometric MiB':>14} "
          f"{'softmax MiB':>12} {'memory ratio':>13}")
    for n, r in results.items():
        s, m = r["seconds"], r["peak_bytes"]
        print(f"{n:>6} {s['geometric'] * 1e3:>13.2f} {s['softmax (SDPA)'] * 1e3:>11.2f} {r['time_ratio']:>10.2f}x "
              f"{m['geometric'] / 2**20:>14.1f} {m['softmax (SDPA)'] / 2**20:>12.1f} {r['memory_ratio']:>12.1f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"args": vars(args), "results": results}, f, indent=2)
    return results


if __name__ == "__main__":
    main()
