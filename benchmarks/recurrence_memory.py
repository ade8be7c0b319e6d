#!/usr/bin/env python
"""Peak training memory of GPT2WithRecurrence by number of windows, with and without window checkpointing (§3.2).

GPT-2 small architecture with random weights, batch 1, windows of 300 tokens. Each case runs in a fresh subprocess
(on CUDA `torch.cuda.max_memory_allocated`, on CPU the process's peak resident set size from getrusage) and reports
two peaks:

* training: the whole footprint of training above the bare interpreter, through two AdamW steps: parameters, their
  gradients, Adam's two moments and the step's activations. This is the memory a run needs, the M of the paper's
  bound M + 2k ceil(N/T) for N tokens with checkpointing: about one window's training memory plus two vectors
  (z_i, h_prev,i) per window.
* step: how far one forward + backward raises the memory above the model and its inputs. With one window, the
  parameter gradients are allocated while that window's activations are being freed; with two or more windows,
  the earlier windows are recomputed while all gradients are held, so the step peak rises once from 1 to 2 windows
  (by about the size of the gradients) and then stays flat.

Without checkpointing the memory grows with every window, so that arm stops at `--max-plain-windows` (20 windows of
GPT-2 small would need about 20 GB on a CPU).

    python benchmarks/recurrence_memory.py --json docs/recurrence_memory_cpu.json   # 1, 2, 5, 20 windows
    python benchmarks/recurrence_memory.py --windows 1 5 --device cuda
"""

import argparse
import gc
import json
import os
import resource
import statistics
import subprocess
import sys
import time

import torch

from lengthgen.modeling import GPT2WithRecurrence, GPT2WithRecurrenceConfig


# glibc serves large blocks from a heap that fragments as windows come and go, which inflates the peak RSS without
# any tensor being alive; a fixed mmap threshold gives each large tensor its own mapping, returned when freed
ENVIRONMENT = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="+", default=[1, 2, 5, 20])
    parser.add_argument("--window-size", type=int, default=300)
    parser.add_argument("--n-layer", type=int, default=12)
    parser.add_argument("--n-embd", type=int, default=768)
    parser.add_argument("--n-head", type=int, default=12)
    parser.add_argument("--vocab-size", type=int, default=50257)
    parser.add_argument("--max-plain-windows", type=int, default=5, help="largest case run without checkpointing")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--throughput-windows", type=int, default=5, help="windows per sequence in the speed test")
    parser.add_argument("--repeats", type=int, default=3, help="timed training steps per model (after one warm-up)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: "windows,checkpointing" in a subprocess
    return parser.parse_args(argv)


def build(args) -> GPT2WithRecurrence:
    config = GPT2WithRecurrenceConfig(
        vocab_size=args.vocab_size, n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head,
        n_positions=max(1024, args.window_size), window_size=args.window_size, insertion_layer=min(2, args.n_layer - 1),
    )
    return GPT2WithRecurrence(config).to(args.device).train()


def peak_bytes(args, windows: int, checkpointing: bool) -> dict:
    """Two peaks, in bytes, of one process that builds the model and trains it on `windows` windows:

    * "step": how far one forward + backward raises the memory above the model and its inputs (activations and
      parameter gradients);
    * "training": the whole training footprint above the bare interpreter, through two AdamW steps: parameters,
      gradients, Adam's two moments and the activations of the step, what a user has to fit in memory."""
    cuda = args.device == "cuda"

    def now():
        if cuda:
            torch.cuda.synchronize()
            return torch.cuda.max_memory_allocated()
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # ru_maxrss is in KiB on Linux

    gc.collect()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    start = torch.cuda.memory_allocated() if cuda else now()
    torch.manual_seed(0)
    model = build(args)
    if checkpointing:
        model.gradient_checkpointing_enable()
    ids = torch.randint(0, args.vocab_size, (1, windows * args.window_size), device=args.device)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gc.collect()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before_step = torch.cuda.memory_allocated() if cuda else now()
    model(ids, labels=ids).loss.backward()
    step = now() - before_step
    for repeat in range(2):
        if repeat:
            model(ids, labels=ids).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return {"step": step, "training": now() - start}


def throughput(args) -> dict:
    """Training tokens per second of the recurrent model and of plain GPT-2 (GPT2LMHeadModel, same weights) on the
    same windows, no overlap: one sequence of `--throughput-windows` windows vs. those windows as a batch of plain
    GPT-2 inputs. Steps are interleaved in this process, so a noisy machine slows both alike; medians are reported."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    recurrent = build(args)
    plain = GPT2LMHeadModel(GPT2Config(**recurrent.config.to_dict())).to(args.device).train()
    plain.load_state_dict(recurrent.state_dict(), strict=False)
    ids = torch.randint(0, args.vocab_size, (1, args.throughput_windows * args.window_size), device=args.device)
    windows = ids.view(args.throughput_windows, args.window_size)
    steps = {"recurrent": lambda: recurrent(ids, labels=ids).loss.backward(),
             "plain GPT-2": lambda: plain(windows, labels=windows).loss.backward()}
    seconds = {name: [] for name in steps}
    for repeat in range(args.repeats + 1):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            if repeat:  # the first round warms up
                seconds[name].append(time.perf_counter() - start)
    tokens_per_second = {name: ids.numel() / statistics.median(times) for name, times in seconds.items()}
    return {"tokens_per_second": tokens_per_second,
            "ratio": tokens_per_second["recurrent"] / tokens_per_second["plain GPT-2"]}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.case:
        windows, checkpointing = args.case.split(",")
        print(json.dumps(peak_bytes(args, int(windows), checkpointing == "1")))
        return {}
    forwarded = [f"--{name.replace('_', '-')}={value}" for name, value in vars(args).items()
                 if name not in ("json", "case", "windows")]
    results = {}
    for checkpointing in (False, True):
        for windows in args.windows:
            if not checkpointing and windows > args.max_plain_windows:
                continue
            command = [sys.executable, __file__, *forwarded, "--case", f"{windows},{int(checkpointing)}"]
            output = subprocess.run(command, capture_output=True, text=True, check=True, env=ENVIRONMENT).stdout
            results[f"{windows},{int(checkpointing)}"] = json.loads(output.strip().splitlines()[-1])
    print(f"peak memory (MiB), GPT-2 {args.n_layer}x{args.n_embd}, windows of {args.window_size}, {args.device}; "
          f"ratio: to {args.windows[0]} window(s) with the same checkpointing")
    print("step = one forward + backward above the model; training = the whole process above the interpreter through "
          "two AdamW steps")
    header = ["windows"] + [f"{kind} {arm}" for arm in ("plain", "ckpt") for kind in ("step", "ratio", "training",
                                                                                      "ratio")]
    print(" ".join(f"{h:>14}" for h in header))
    for windows in args.windows:
        cells = [str(windows)]
        for c in (0, 1):
            peak, base = results.get(f"{windows},{c}"), results.get(f"{args.windows[0]},{c}")
            for kind in ("step", "training"):
                if peak is None:
                    cells += ["-", "-"]
                    continue
                ratio = f"{peak[kind] / base[kind]:.2f}x" if base and base[kind] else "-"  # a tiny model may not
                cells += [f"{peak[kind] / 2**20:.1f}", ratio]  # raise the peak RSS at all
        print(" ".join(f"{cell:>14}" for cell in cells))
    speed = throughput(args)
    print(f"training tokens/s, {args.throughput_windows} windows of {args.window_size}: "
          + ", ".join(f"{name} {value:.0f}" for name, value in speed["tokens_per_second"].items())
          + f"; recurrent / plain = {speed['ratio']:.2f}x")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"arguments": {k: v for k, v in vars(args).items() if k not in ("json", "case")},
                       "peak_bytes": results, **speed}, f, indent=2)
    return {"peak_bytes": results, **speed}


if __name__ == "__main__":
    main()
