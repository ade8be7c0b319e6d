#!/usr/bin/env python
"""bf16 autocast against fp32 on this CPU, per reproduction model: training-step time and loss-curve agreement.

    python benchmarks/cpu_precision.py --json docs/cpu_precision.json            # the CTL and NSP add presets
    python benchmarks/cpu_precision.py --models ndr-ctl-backward --compile       # also torch.compile of the model

For each model (a preset of `lengthgen reproduce`, from `lengthgen.reproduction.reproduce`: its hub config, overrides
and task), one process builds the model and a fixed sequence of training batches, then
* times training steps (forward, backward, AdamW) in fp32 and under `torch.autocast("cpu", torch.bfloat16)`, the two
  interleaved step by step (median of `--repeats`), and reports bf16 / fp32;
* trains `--curve_steps` steps three times on the same batches: fp32 and bf16 from one initialisation, and fp32 from
  another seed, and compares |bf16 - fp32| of the mean loss over the last quarter with the seed-to-seed difference.

Whether bf16 pays depends on the CPU: with AVX-512 BF16 or AMX, oneDNN multiplies bf16 matrices natively; without,
bf16 products run on a slow fallback. `lengthgen reproduce --precision auto` picks accordingly.
"""

import argparse
import copy
import json
import statistics
import time

import torch

from lengthgen.data.export import load_splits
from lengthgen.reproduction.reproduce import PRESETS
from lengthgen.training.hardware import hardware
from lengthgen.training.models import (
    classifier_tokenizer_and_labels,
    encode_classification,
    encode_masked,
    infer_head,
    load_classifier,
    load_masked_lm,
    masked_lm_tokenizer,
)
from lengthgen.training.results import written_whole


def model_and_batches(name: str, batch_size: int, count: int, seed: int):
    """The preset's model (initialised with `seed`) and `count` training batches of its task."""
    spec = PRESETS[name].experiment()
    splits = load_splits(spec.data.dataset_name, spec.data.dataset_config_name, spec.data.params)
    rows = splits["train"].shuffle(seed=0).select(range(batch_size * count))
    torch.manual_seed(seed)
    args = spec.model
    if infer_head(args) == "classification":
        tokenizer, labels = classifier_tokenizer_and_labels(args, splits)
        model = load_classifier(args, tokenizer, labels)
        features = list(encode_classification(rows, tokenizer, labels))
        from transformers import DataCollatorWithPadding as Collator
    else:
        tokenizer = masked_lm_tokenizer(args, spec.data.dataset_name, spec.data.dataset_config_name, splits)
        model = load_masked_lm(args, tokenizer)
        features = list(encode_masked(rows, tokenizer, keep_columns=()))
        from transformers import DataCollatorForTokenClassification as Collator
    collate = Collator(tokenizer)
    batches = [collate(features[i * batch_size : (i + 1) * batch_size]) for i in range(count)]
    return model, batches


def train_step(model, optimizer, batch, bf16: bool) -> float:
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        loss = model(**batch).loss
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    return loss.item()


def step_times(batches, repeats: int, modes: dict) -> dict:
    """Median seconds per training step for each mode ({name: (model, bf16)}), interleaved step by step."""
    optimizers = {m: torch.optim.AdamW(mod.parameters(), lr=1e-4) for m, (mod, _) in modes.items()}
    times = {m: [] for m in modes}
    for i in range(repeats + 1):
        for m, (mod, bf16) in modes.items():
            start = time.perf_counter()
            train_step(mod, optimizers[m], batches[i % len(batches)], bf16)
            if i:  # the first step of each is warm-up (and torch.compile's compilation)
                times[m].append(time.perf_counter() - start)
    return {m: statistics.median(t) for m, t in times.items()}


def loss_curve(model, batches, bf16: bool, lr: float) -> list[float]:
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    return [train_step(model, optimizer, b, bf16) for b in batches]


def measure(name: str, args) -> dict:
    model, batches = model_and_batches(name, args.batch_size, args.curve_steps, seed=0)
    modes = {"fp32": (model, False), "bf16": (copy.deepcopy(model), True)}
    result = {"model": name, "batch_size": args.batch_size}
    if args.compile:
        start = time.perf_counter()
        compiled = torch.compile(copy.deepcopy(model))
        train_step(compiled, torch.optim.AdamW(compiled.parameters()), batches[0], False)
        result["compile_seconds"] = time.perf_counter() - start
        modes["fp32_compiled"] = (compiled, False)
    seconds = step_times(batches, args.repeats, modes)
    result["seconds_per_step"] = seconds
    result["bf16_over_fp32"] = seconds["bf16"] / seconds["fp32"]
    if args.compile:
        result["compiled_over_eager"] = seconds["fp32_compiled"] / seconds["fp32"]
        saved = seconds["fp32"] - seconds["fp32_compiled"]
        result["compile_break_even_steps"] = result["compile_seconds"] / saved if saved > 0 else None

    lr = PRESETS[name].experiment().training.learning_rate
    curves = {}
    for label, seed, bf16 in (("fp32", 0, False), ("bf16", 0, True), ("fp32_seed1", 1, False)):
        fresh, _ = model_and_batches(name, args.batch_size, 1, seed=seed)
        curves[label] = loss_curve(fresh, batches, bf16, lr)
    tail = args.curve_steps // 4
    final = {k: sum(v[-tail:]) / tail for k, v in curves.items()}
    result["final_loss"] = final
    result["bf16_minus_fp32"] = abs(final["bf16"] - final["fp32"])
    result["seed_noise"] = abs(final["fp32_seed1"] - final["fp32"])
    result["curves"] = curves
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=[n for n in PRESETS if n.endswith(("ctl-backward", "nsp-add"))],
                        choices=list(PRESETS))
    parser.add_argument("--batch_size", type=int, default=64)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--curve_steps", type=int, default=120)
    parser.add_argument("--compile", action="store_true", help="also time torch.compile of the model (fp32)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    for flag in ("batch_size", "repeats"):
        if getattr(args, flag) < 1:
            parser.error(f"--{flag} must be at least 1, got {getattr(args, flag)}")
    if args.curve_steps < 4:  # the final loss is the mean over the last quarter of the curve: at least one step
        parser.error(f"--curve_steps must be at least 4 (the final loss averages its last quarter), "
                     f"got {args.curve_steps}")
    if args.threads:
        torch.set_num_threads(args.threads)
    results = {"hardware": hardware(), "arguments": vars(args), "models": []}
    print(f"{'model':<26} {'fp32 s/step':>11} {'bf16 s/step':>11} {'bf16/fp32':>9} {'|bf16-fp32| loss':>16} "
          f"{'seed noise':>10}")
    for name in args.models:
        r = measure(name, args)
        results["models"].append(r)
        s = r["seconds_per_step"]
        print(f"{name:<26} {s['fp32']:>11.3f} {s['bf16']:>11.3f} {r['bf16_over_fp32']:>8.2f}x "
              f"{r['bf16_minus_fp32']:>16.3f} {r['seed_noise']:>10.3f}", flush=True)
        if args.compile:
            print(f"{'':<26} compiled {s['fp32_compiled']:.3f} s/step ({r['compiled_over_eager']:.2f}x eager), "
                  f"compile {r['compile_seconds']:.0f} s, break-even after {r['compile_break_even_steps']} steps")
    if args.json:
        with written_whole(args.json) as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
