#!/usr/bin/env python
"""Peak training memory of the recurrent models by number of windows, with and without window checkpointing (§3.2).

GPT2WithRecurrence (GPT-2 small architecture, windows of 300 tokens, a document with next-token labels), with
`--model llama` CausalLMWithRecurrence wrapping a Llama of the same size (rotary positions, SwiGLU, RMSNorm; the
rotary family's case), or, with `--model roberta`, RobertaWithRecurrenceForQuestionAnswering (RoBERTa-base
architecture, windows of 512 tokens, a question whose answer span is in the last window); random weights, batch 1.
Each case runs in a fresh subprocess (on CUDA `torch.cuda.max_memory_allocated`, on CPU the process's peak resident
set size from getrusage) and reports two peaks:

* training: the whole footprint of training above the bare interpreter, through two AdamW steps: parameters, their
  gradients, Adam's two moments and the step's activations. This is the memory a run needs, the M of the paper's
  bound M + 2k ceil(N/T) for N tokens with checkpointing: about one window's training memory plus two vectors
  (z_i, h_prev,i) per window.
* step: how far one forward + backward raises the memory above the model and its inputs. With one window, the
  parameter gradients are allocated while that window's activations are being freed; with two or more windows,
  the earlier windows are recomputed while all gradients are held, so the step peak rises once from 1 to 2 windows
  (by about the size of the gradients) and then stays flat.

Without checkpointing the memory grows with every window, so that arm stops at `--max_plain_windows` (20 windows of
GPT-2 small would need about 20 GB on a CPU).

    python benchmarks/recurrence_memory.py --json docs/recurrence_memory_cpu.json   # 1, 2, 5, 20 windows
    python benchmarks/recurrence_memory.py --model llama --json docs/llama_recurrence_memory_cpu.json     # 1 2 5 20
    python benchmarks/recurrence_memory.py --model roberta --json docs/roberta_recurrence_memory_cpu.json  # 1 2 5 10
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

from lengthgen.modeling import (
    CausalLMWithRecurrence,
    GPT2WithRecurrence,
    GPT2WithRecurrenceConfig,
    RobertaWithRecurrenceConfig,
    RobertaWithRecurrenceForQuestionAnswering,
)
from lengthgen.training.hardware import hardware
from lengthgen.training.results import written_whole

# glibc serves large blocks from a heap that fragments as windows come and go, which inflates the peak RSS without
# any tensor being alive; a fixed mmap threshold gives each large tensor its own mapping, returned when freed
ENVIRONMENT = {**os.environ, "MALLOC_MMAP_THRESHOLD_": "65536"}


DEFAULTS = {  # GPT-2 small (§5: windows of 300), a Llama of its size, and RoBERTa-base (§5.4: windows of 512)
    "gpt2": dict(window_size=300, vocab_size=50257, windows=[1, 2, 5, 20]),
    "llama": dict(window_size=300, vocab_size=32000, windows=[1, 2, 5, 20]),
    "roberta": dict(window_size=512, vocab_size=50265, windows=[1, 2, 5, 10]),
}


def allocator() -> str:
    """The memory allocator the process runs on: glibc's malloc unless another is preloaded (LD_PRELOAD=...jemalloc or
    tcmalloc, as PyTorch's CPU performance guide suggests). This machine's pages are slow to fault in the first time,
    and glibc returns every block above 32 MiB to the system when it is freed, so the allocator moves the figures."""
    preloaded = [os.path.basename(path) for path in os.environ.get("LD_PRELOAD", "").split() if "malloc" in path]
    return preloaded[0] if preloaded else "glibc"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", choices=sorted(DEFAULTS), default="gpt2",
                        help="GPT2WithRecurrence, CausalLMWithRecurrence around a Llama, or "
                             "RobertaWithRecurrenceForQuestionAnswering")
    parser.add_argument("--windows", type=int, nargs="+", help="default: 1 2 5 20 (gpt2), 1 2 5 10 (roberta)")
    parser.add_argument("--window_size", type=int, help="default: 300 (gpt2), 512 (roberta)")
    parser.add_argument("--n_layer", type=int, default=12)
    parser.add_argument("--n_embd", type=int, default=768)
    parser.add_argument("--n_head", type=int, default=12)
    parser.add_argument("--vocab_size", type=int, help="default: 50257 (gpt2), 32000 (llama), 50265 (roberta)")
    parser.add_argument("--max_plain_windows", type=int, default=5, help="largest case run without checkpointing")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--throughput_windows", type=int, default=5, help="windows per sequence in the speed test")
    parser.add_argument("--repeats", type=int, default=3, help="timed training steps per model (after one warm-up)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's, all cores)")
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--case", help=argparse.SUPPRESS)  # internal: "windows,checkpointing" in a subprocess
    args = parser.parse_args(argv)
    for name, value in DEFAULTS[args.model].items():
        if getattr(args, name) is None:
            setattr(args, name, value)
    for flag in ("window_size", "n_layer", "n_embd", "n_head", "throughput_windows", "repeats", "threads"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag} must be at least 1, got {value}")
    if min(args.windows) < 1:
        parser.error(f"--windows must each be at least 1, got {min(args.windows)}")
    if args.vocab_size < 4:  # token ids 3 and up are drawn
        parser.error(f"--vocab_size must be at least 4, got {args.vocab_size}")
    return args


def build(args):
    """The recurrent model, GPT-2 small, a Llama of that size or RoBERTa-base architecture, random weights, training
    mode."""
    if args.model == "llama":
        from transformers import LlamaConfig, LlamaForCausalLM

        decoder = LlamaForCausalLM(LlamaConfig(
            vocab_size=args.vocab_size, hidden_size=args.n_embd,
            intermediate_size=256 * round(8 * args.n_embd / 3 / 256),
            num_hidden_layers=args.n_layer, num_attention_heads=args.n_head, num_key_value_heads=args.n_head,
            max_position_embeddings=max(1024, args.window_size + 1),
        ))
        return CausalLMWithRecurrence.wrap(decoder, window_size=args.window_size,
                                           insertion_layer=min(2, args.n_layer - 1)).to(args.device).train()
    if args.model == "gpt2":
        config = GPT2WithRecurrenceConfig(
            vocab_size=args.vocab_size, n_layer=args.n_layer, n_embd=args.n_embd, n_head=args.n_head,
            n_positions=max(1024, args.window_size), window_size=args.window_size,
            insertion_layer=min(2, args.n_layer - 1),
        )
        return GPT2WithRecurrence(config).to(args.device).train()
    config = RobertaWithRecurrenceConfig(
        vocab_size=args.vocab_size, num_hidden_layers=args.n_layer, hidden_size=args.n_embd,
        num_attention_heads=args.n_head, intermediate_size=4 * args.n_embd,
        max_position_embeddings=args.window_size + 2,
        insertion_layer=min(2, args.n_layer - 1), recurrence_hidden_size=args.n_embd,
    )
    return RobertaWithRecurrenceForQuestionAnswering(config).to(args.device).train()


def plain_model(args, recurrent):
    """The same architecture without the recurrence, with the recurrent model's weights (the wrapped Llama itself)."""
    if args.model == "llama":
        return recurrent.decoder
    from transformers import GPT2Config, GPT2LMHeadModel, RobertaConfig, RobertaForQuestionAnswering

    if args.model == "gpt2":
        plain = GPT2LMHeadModel(GPT2Config(**recurrent.config.to_dict()))
    else:
        plain = RobertaForQuestionAnswering(RobertaConfig(**recurrent.config.to_dict()))
    plain.load_state_dict(recurrent.state_dict(), strict=False)
    return plain.to(args.device).train()


def training_inputs(args, windows: int) -> tuple[dict, dict]:
    """One training example of `windows` windows for the recurrent model, and the same windows as a batch for the
    plain model. GPT-2: a document with next-token labels; RoBERTa: a question's windows with the answer span in the
    last one (every window is read before the loss)."""
    ids = torch.randint(3, args.vocab_size, (windows, args.window_size), device=args.device)
    if args.model in ("gpt2", "llama"):
        document = ids.reshape(1, -1)
        return {"input_ids": document, "labels": document}, {"input_ids": ids, "labels": ids}
    position = torch.tensor([args.window_size // 2], device=args.device)
    recurrent = {"input_ids": ids[None], "answer_window": torch.tensor([windows - 1], device=args.device),
                 "start_positions": position, "end_positions": position + 1,
                 "answer_types": torch.zeros(1, dtype=torch.long, device=args.device)}
    plain = {"input_ids": ids, "start_positions": position.expand(windows),
             "end_positions": (position + 1).expand(windows)}
    return recurrent, plain


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
    inputs, _ = training_inputs(args, windows)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-5)
    gc.collect()
    if cuda:
        torch.cuda.reset_peak_memory_stats()
    before_step = torch.cuda.memory_allocated() if cuda else now()
    model(**inputs).loss.backward()
    step = now() - before_step
    for repeat in range(2):
        if repeat:
            model(**inputs).loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    return {"step": step, "training": now() - start}


def throughput(args) -> dict:
    """Training tokens per second of the recurrent model and of the plain model (GPT2LMHeadModel, the wrapped Llama
    or RobertaForQuestionAnswering, same weights) on the same windows: one example of `--throughput_windows` windows
    vs. those windows as a batch of plain inputs (the ratio), and vs. the plain model reading them one after another
    as the recurrence must (the ratio to one window at a time: what the batch shape alone is worth). Steps are
    interleaved in this process, so a noisy machine slows both alike; medians are reported."""
    torch.manual_seed(0)
    recurrent = build(args)
    plain = plain_model(args, recurrent)
    recurrent_inputs, plain_inputs = training_inputs(args, args.throughput_windows)
    plain_name = {"gpt2": "plain GPT-2", "llama": "plain Llama", "roberta": "plain RoBERTa"}[args.model]

    def plain_one_window_at_a_time():
        for i in range(args.throughput_windows):
            plain(**{name: value[i:i + 1] for name, value in plain_inputs.items()}).loss.backward()

    steps = {"recurrent": lambda: recurrent(**recurrent_inputs).loss.backward(),
             plain_name: lambda: plain(**plain_inputs).loss.backward(),
             f"{plain_name}, one window at a time": plain_one_window_at_a_time}
    seconds = {name: [] for name in steps}
    for repeat in range(args.repeats + 1):
        for name, step in steps.items():
            start = time.perf_counter()
            step()
            if args.device == "cuda":
                torch.cuda.synchronize()
            if repeat:  # the first round warms up
                seconds[name].append(time.perf_counter() - start)
    tokens = args.throughput_windows * args.window_size
    tokens_per_second = {name: tokens / statistics.median(times) for name, times in seconds.items()}
    return {"tokens_per_second": tokens_per_second,
            "ratio": tokens_per_second["recurrent"] / tokens_per_second[plain_name],
            "ratio_to_one_window_at_a_time": tokens_per_second["recurrent"]
            / tokens_per_second[f"{plain_name}, one window at a time"]}


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.case:
        windows, checkpointing = args.case.split(",")
        print(json.dumps(peak_bytes(args, int(windows), checkpointing == "1")))
        return {}
    forwarded = [f"--{name}={value}" for name, value in vars(args).items()
                 if name not in ("json", "case", "windows") and value is not None]
    results = {}
    for checkpointing in (False, True):
        for windows in args.windows:
            if not checkpointing and windows > args.max_plain_windows:
                continue
            command = [sys.executable, __file__, *forwarded, "--case", f"{windows},{int(checkpointing)}"]
            case = subprocess.run(command, capture_output=True, text=True, env=ENVIRONMENT)
            if case.returncode:  # the end of the case's stderr (its traceback) says why it failed
                tail = "\n".join(case.stderr.strip().splitlines()[-20:])
                raise RuntimeError(f"the case of {windows} window(s) {'with' if checkpointing else 'without'} "
                                   f"checkpointing failed (exit status {case.returncode}):\n{tail}")
            results[f"{windows},{int(checkpointing)}"] = json.loads(case.stdout.strip().splitlines()[-1])
    print(f"peak memory (MiB), {args.model} {args.n_layer}x{args.n_embd}, windows of {args.window_size}, "
          f"{args.device}; ratio: to {args.windows[0]} window(s) with the same checkpointing")
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
          + f"; recurrent / plain = {speed['ratio']:.2f}x, / plain one window at a time = "
          f"{speed['ratio_to_one_window_at_a_time']:.2f}x")
    if args.json:
        with written_whole(args.json) as f:
            json.dump({"hardware": hardware(), "allocator": allocator(),
                       "arguments": {k: v for k, v in vars(args).items() if k not in ("json", "case")},
                       "peak_bytes": results, **speed}, f, indent=2)
    return {"peak_bytes": results, **speed}


if __name__ == "__main__":
    main()
