#!/usr/bin/env python
"""Batches binned by length against random batches on this CPU: padded tokens and training time, per NDR preset.

    python benchmarks/length_binning.py --models ndr-simple-arithmetic-128 ndr-listops-128 \\
        --json docs/length_binning.json

`--train_sampling_strategy group_by_length` makes the Trainer draw batches with transformers' `LengthGroupedSampler`:
it shuffles, cuts the data into mega-batches of 50 batches, sorts each by length and splits it into batches, so each
batch pads to the length of problems like its own instead of to the longest of a random draw. For each model (a preset
of `lengthgen reproduce`, from `lengthgen.reproduction.reproduce`: its hub config, overrides and task), one process
takes one mega-batch of training problems, orders them both ways (random batches, and the sampler's), and trains one
copy of the model on each sequence, the two interleaved batch by batch: the ratio of the two totals is what binning
saves per epoch. A model's step cost grows with the padded length (and faster: attention is quadratic in it), so the
ratio depends on the task's spread of lengths. With `--batches` below 50, both sides train the same evenly spread
subset of batch positions (the binned side's sorted from shortest to longest; one batch: the middle one).
"""

import argparse
import copy
import json
import time

import torch
from transformers import DataCollatorWithPadding
from transformers.trainer_pt_utils import LengthGroupedSampler

from lengthgen.data.export import load_splits
from lengthgen.reproduction.reproduce import PRESETS
from lengthgen.training.hardware import auto_precision, hardware
from lengthgen.training.models import (
    classifier_tokenizer_and_labels,
    encode_classification,
    infer_head,
    load_classifier,
)
from lengthgen.training.results import written_whole

MEGA_BATCH = 50  # LengthGroupedSampler's mega-batch, in batches


def spread(batches: int) -> list[int]:
    """Indices of `batches` of the MEGA_BATCH batches, spread evenly from the first to the last: batch i is the one
    nearest i * (MEGA_BATCH - 1) / (batches - 1) (halves round up), so all MEGA_BATCH keep every batch in order and one
    keeps the middle one. Taken from batches sorted by length, they sample the whole spread of lengths."""
    if not 1 <= batches <= MEGA_BATCH:
        raise ValueError(f"batches must be between 1 and {MEGA_BATCH}, got {batches}")
    if batches == 1:
        return [(MEGA_BATCH - 1) // 2]
    # integer arithmetic: floor(i * (MEGA_BATCH - 1) / (batches - 1) + 1/2), with no rounding of floats
    return [(2 * i * (MEGA_BATCH - 1) + batches - 1) // (2 * (batches - 1)) for i in range(batches)]


def two_orderings(name: str, batch_size: int, batches: int):
    """The preset's model and the same `batches` x `batch_size` training problems as random and as binned batches."""
    spec = PRESETS[name].experiment()
    if infer_head(spec.model) != "classification":
        raise SystemExit(f"{name}: length binning is measured for the classification presets (NDR, transformer).")
    splits = load_splits(spec.data.dataset_name, spec.data.dataset_config_name, spec.data.params)
    rows = splits["train"].shuffle(seed=0).select(range(batch_size * MEGA_BATCH))
    torch.manual_seed(0)
    args = spec.model
    tokenizer, labels = classifier_tokenizer_and_labels(args, splits)
    model = load_classifier(args, tokenizer, labels)
    features = list(encode_classification(rows, tokenizer, labels))
    collate = DataCollatorWithPadding(tokenizer)
    lengths = [len(f["input_ids"]) for f in features]
    binned = list(LengthGroupedSampler(batch_size, lengths=lengths, generator=torch.Generator().manual_seed(0)))
    batches_of = {
        "random": [list(range(b * batch_size, (b + 1) * batch_size)) for b in range(MEGA_BATCH)],
        # the sampler's batches from shortest to longest, so that a subset of them spreads evenly over the lengths
        "binned": sorted((binned[b * batch_size:(b + 1) * batch_size] for b in range(MEGA_BATCH)),
                         key=lambda batch: max(lengths[i] for i in batch)),
    }
    chosen = spread(batches)
    return model, {mode: [collate([features[i] for i in all_batches[b]]) for b in chosen]
                   for mode, all_batches in batches_of.items()}


def measure(name: str, args, bf16: bool) -> dict:
    model, batches = two_orderings(name, args.batch_size, args.batches)
    models = {"random": model, "binned": copy.deepcopy(model)}
    lr = PRESETS[name].experiment().training.learning_rate
    optimizers = {m: torch.optim.AdamW(models[m].parameters(), lr=lr) for m in models}
    seconds = {m: 0.0 for m in models}
    for i in range(args.batches):
        for m in models:  # interleaved batch by batch, so that the machine's drift hits both alike
            start = time.perf_counter()
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
                loss = models[m](**batches[m][i]).loss
            loss.backward()
            optimizers[m].step()
            optimizers[m].zero_grad()
            seconds[m] += time.perf_counter() - start
    padding = {  # padded tokens per real token
        m: sum(b["input_ids"].numel() for b in batches[m]) / sum(int(b["attention_mask"].sum()) for b in batches[m])
        for m in models
    }
    return {
        "model": name, "batch_size": args.batch_size, "batches": args.batches,
        "seconds_per_step": {m: s / args.batches for m, s in seconds.items()},
        "binned_over_random": seconds["binned"] / seconds["random"],
        "padded_over_real_tokens": padding,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["ndr-simple-arithmetic-128", "ndr-listops-128"],
                        choices=list(PRESETS))
    parser.add_argument("--batch_size", type=int, default=128)
    parser.add_argument("--batches", type=int, default=MEGA_BATCH,
                        help=f"of the {MEGA_BATCH} of one mega-batch (fewer: spread evenly over the binned lengths)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"], default="auto")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if args.batch_size < 1:
        parser.error(f"--batch_size must be at least 1, got {args.batch_size}")
    if not 1 <= args.batches <= MEGA_BATCH:
        parser.error(f"--batches must be between 1 and {MEGA_BATCH} (one mega-batch), got {args.batches}.")
    if args.threads:
        torch.set_num_threads(args.threads)
    precision = auto_precision("cpu") if args.precision == "auto" else args.precision
    results = {"hardware": hardware(), "precision": precision, "arguments": vars(args), "models": []}
    print(f"{'model':<28} {'random s/step':>13} {'binned s/step':>13} {'binned/random':>13} {'padding random':>14} "
          f"{'padding binned':>14}   ({precision})")
    for name in args.models:
        r = measure(name, args, precision == "bf16")
        results["models"].append(r)
        s, p = r["seconds_per_step"], r["padded_over_real_tokens"]
        print(f"{name:<28} {s['random']:>13.3f} {s['binned']:>13.3f} {r['binned_over_random']:>12.2f}x "
              f"{p['random']:>13.2f}x {p['binned']:>13.2f}x", flush=True)
    if args.json:
        with written_whole(args.json) as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
