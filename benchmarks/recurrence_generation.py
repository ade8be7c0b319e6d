#!/usr/bin/env python
"""Generation speed of window-level recurrence: tokens per second of `CausalLMWithRecurrence.generate` (h_prev at
layer index 2, the window's key-value cache kept from token to token) against the plain model's own cached
`generate`, the same weights (the wrapped model itself), the same prompt and the same number of new tokens, greedy.

The model: a Llama of 4 layers, 256 wide (4 heads, SwiGLU of 768), a vocabulary of 8,000, SDPA attention, random
weights. For each window size T the prompt is 64 tokens and generation runs to a total of 2T tokens (`--total`), so
it crosses a window boundary, where the recurrent model runs the finished window once more for its summary h_prev and
starts the next window's cache. `--uncached` also times the recurrent model with `use_cache=False` (each new token
runs its unfinished window again). Runs are interleaved in this process (a noisy machine slows all alike), after one
short warm-up each; medians of `--repeats`.

    python benchmarks/recurrence_generation.py --threads 1 --json docs/recurrence_generation_cpu.json
    python benchmarks/recurrence_generation.py --threads 1 --windows 128 512 --uncached
    python benchmarks/recurrence_generation.py --device cuda --dtype bfloat16 --json docs/recurrence_generation_gpu.json
"""

import argparse
import json
import statistics
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from lengthgen.modeling import CausalLMWithRecurrence
from lengthgen.training.hardware import hardware
from lengthgen.training.results import written_whole

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--windows", type=int, nargs="+", default=[128, 512, 2048], help="window sizes T")
    parser.add_argument("--prompt", type=int, default=64, help="prompt tokens")
    parser.add_argument("--total", type=int, nargs="+",
                        help="total tokens (prompt + new) for each window, in the order of --windows (default: 2T)")
    parser.add_argument("--layers", type=int, default=4)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--intermediate_size", type=int, default=768)
    parser.add_argument("--vocab_size", type=int, default=8000)
    parser.add_argument("--insertion_layer", type=int, default=2)
    parser.add_argument("--batch_size", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=1, help="timed runs of each model per window (medians)")
    parser.add_argument("--uncached", action="store_true", help="also time the recurrent model with use_cache=False")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="float32")
    parser.add_argument("--device", default="cpu", help="cpu or cuda (timings synchronize the device)")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's, all cores)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    for flag in ("prompt", "layers", "hidden_size", "heads", "intermediate_size", "vocab_size", "batch_size",
                 "repeats", "threads"):
        value = getattr(args, flag)
        if value is not None and value < 1:
            parser.error(f"--{flag} must be at least 1, got {value}")
    if min(args.windows) < 1:
        parser.error(f"--windows must each be at least 1, got {min(args.windows)}")
    if args.device.startswith("cuda") and not torch.cuda.is_available():
        parser.error(f"--device {args.device}: no CUDA device is available")
    if args.total is None:
        args.total = [2 * window for window in args.windows]
    if len(args.total) != len(args.windows):
        parser.error(f"--total takes one value per window ({len(args.windows)}), got {len(args.total)}")
    for window, total in zip(args.windows, args.total):
        if total <= args.prompt:
            parser.error(f"--total must exceed --prompt={args.prompt}, got {total} for window {window}")
    return args


def build(args, window: int) -> CausalLMWithRecurrence:
    """The recurrent model; its `decoder` is the plain model with the same weights."""
    torch.manual_seed(0)
    decoder = LlamaForCausalLM(LlamaConfig(
        vocab_size=args.vocab_size, hidden_size=args.hidden_size, intermediate_size=args.intermediate_size,
        num_hidden_layers=args.layers, num_attention_heads=args.heads, num_key_value_heads=args.heads,
        max_position_embeddings=max(max(args.total), window + 1), bos_token_id=None, eos_token_id=None,
        pad_token_id=None, attn_implementation="sdpa",
    )).to(device=args.device, dtype=DTYPES[args.dtype])
    return CausalLMWithRecurrence.wrap(decoder, window_size=window, insertion_layer=args.insertion_layer)


def synchronize(device: str) -> None:
    if device.startswith("cuda"):
        torch.cuda.synchronize()


def measure(args, window: int, total: int) -> dict:
    """Tokens per second of each way of generating `total - prompt` tokens after the same prompt."""
    model = build(args, window)
    prompt = torch.randint(0, args.vocab_size, (args.batch_size, args.prompt),
                           generator=torch.Generator().manual_seed(1)).to(args.device)
    new_tokens = total - args.prompt
    common = dict(do_sample=False, pad_token_id=0, attention_mask=torch.ones_like(prompt))
    ways = {"plain": lambda n: model.decoder.generate(prompt, max_new_tokens=n, min_new_tokens=n, **common),
            "recurrent": lambda n: model.generate(prompt, max_new_tokens=n, min_new_tokens=n, **common)}
    if args.uncached:
        ways["recurrent, use_cache=False"] = lambda n: model.generate(prompt, max_new_tokens=n, min_new_tokens=n,
                                                                      use_cache=False, **common)
    seconds = {name: [] for name in ways}
    with torch.inference_mode():
        for generate in ways.values():  # warm-up
            generate(4)
        for _ in range(args.repeats):
            for name, generate in ways.items():
                synchronize(args.device)
                start = time.perf_counter()
                out = generate(new_tokens)
                synchronize(args.device)
                seconds[name].append(time.perf_counter() - start)
                assert out.shape[1] == total
    tokens_per_second = {name: args.batch_size * new_tokens / statistics.median(times)
                         for name, times in seconds.items()}
    return {"window": window, "total": total, "new_tokens": new_tokens, "tokens_per_second": tokens_per_second,
            "ratio": {name: value / tokens_per_second["plain"] for name, value in tokens_per_second.items()}}


def main(argv=None) -> dict:
    """Measures window after window, printing each row and rewriting the JSON as it comes (a run stopped at a time
    limit keeps the windows it finished)."""
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"greedy generate, tokens/s: Llama {args.layers}x{args.hidden_size}, vocabulary {args.vocab_size}, "
          f"{args.dtype}, SDPA, batch {args.batch_size}, prompt {args.prompt}, {torch.get_num_threads()} thread(s); "
          f"ratio to the plain model's cached generate", flush=True)
    record = {"hardware": hardware(args.threads), "precision": args.dtype,
              "arguments": {k: v for k, v in vars(args).items() if k != "json"}}
    results = []
    for window, total in zip(args.windows, args.total):
        r = measure(args, window, total)
        names = list(r["tokens_per_second"])
        if not results:
            header = ["window", "total"] + [f"{name}{suffix}" for name in names for suffix in ("", " ratio")]
            print(" | ".join(header))
        results.append(r)
        cells = [str(r["window"]), str(r["total"])]
        for name in names:
            cells += [f"{r['tokens_per_second'][name]:.1f}", f"{r['ratio'][name]:.2f}x"]
        print(" | ".join(cells), flush=True)
        if args.json:  # whole or not at all: a run stopped while writing keeps the last file
            with written_whole(args.json) as f:
                json.dump({**record, "results": results}, f, indent=2)
    return {"results": results}


if __name__ == "__main__":
    main()
