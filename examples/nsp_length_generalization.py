#!/usr/bin/env python
"""The quick-start example: I-BERT against BERT on a short NSP length split, on a laptop CPU in minutes.

Trains a small I-BERT and the same-size BERT baseline (absolute positions) on the same generated NSP data, evaluates
both on the trained digit counts and on longer, unseen ones, prints the accuracy per digit count (the whole masked
number right) and writes a plot, one line per model.

    python examples/nsp_length_generalization.py                      # the presets' default, no download
    python examples/nsp_length_generalization.py --task add --train_digits 1 5 --validation_digits 6 8 --epochs 10

The two models are the reproduction presets `ibert-nsp-copy-small` and `bert-nsp-copy-small` (presets/reproduction.yaml,
sized to show the contrast of the paper's Figure 4 in minutes on 2 CPU cores; the paper trains base-size models on
d = 2..12 and validates on 13..16); the flags change their task, data and budget. The trained I-BERT is also written
as a release folder (`OUTPUT_DIR/release/ibert-nsp-TASK`: weights, model code, tokenizer, a card with its results and
training range), which the Space app (examples/space/app.py) offers and `AutoModelForMaskedLM.from_pretrained` loads.
"""

import argparse
import json
import os
import shutil

import torch

from lengthgen.cli import ArgumentParser, UsageError, check_positive, run_command
from lengthgen.plots import Curve, plot_accuracy
from lengthgen.release.folder import release
from lengthgen.reproduction.reproduce import preset
from lengthgen.training.hardware import auto_precision, hardware
from lengthgen.training.arguments import ModelArguments
from lengthgen.training.runner import run_experiment

MODELS = {"I-BERT": "ibert-nsp-copy-small", "BERT": "bert-nsp-copy-small"}


def parse_args(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--task", default="copy", choices=["add", "copy", "reverse"])
    parser.add_argument("--train_digits", type=int, nargs=2, default=[1, 6], metavar=("MIN", "MAX"))
    parser.add_argument("--validation_digits", type=int, nargs=2, default=[7, 9], metavar=("MIN", "MAX"))
    parser.add_argument("--train_size", type=int, default=6000)
    parser.add_argument("--validation_size", type=int, default=600)
    parser.add_argument("--epochs", type=float, default=8)
    parser.add_argument("--batch_size", type=int, default=32)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--model_size", help="config overrides of both models over the presets' (128 wide, 2 layers, 4 "
                                             "heads, 256 feed-forward), e.g. hidden_size=64,num_hidden_layers=1")
    parser.add_argument("--seed", type=int, default=0, help="the data's and the training's seed")
    parser.add_argument("--precision", default="fp32", choices=["auto", "fp32", "bf16"],
                        help="fp32 by default: at this size bf16 autocast is slower even on a CPU with native bf16 "
                             "(docs/results/speed.md); auto: bf16 where the CPU has native bf16")
    parser.add_argument("--threads", type=int, help="torch threads (default: torch's, all cores)")
    parser.add_argument("--output_dir", default="outputs/nsp_length_generalization")
    parser.add_argument("--verbose", action="store_true", help="print the Trainer's logs of every step")
    args = parser.parse_args(argv)
    (train_lo, train_hi), (valid_lo, valid_hi) = args.train_digits, args.validation_digits
    if not 1 <= train_lo <= train_hi:
        raise UsageError(f"--train_digits takes MIN MAX with 1 <= MIN <= MAX, got {train_lo} {train_hi}.")
    if not train_hi < valid_lo <= valid_hi:
        raise UsageError(f"--validation_digits takes MIN MAX above the training range (MIN > {train_hi}, MIN <= MAX), "
                         f"got {valid_lo} {valid_hi}.")
    check_positive({"--train_size": args.train_size, "--validation_size": args.validation_size,
                    "--batch_size": args.batch_size, "--epochs": args.epochs, "--learning_rate": args.learning_rate,
                    "--threads": args.threads})
    return args


def experiment(name: str, output_dir: str, args):
    """The preset's spec with the flags' task, data, size and budget."""
    spec = preset(name).experiment()
    data = {"dataset_config_name": args.task, "eval_train_samples": args.validation_size,
            "dataset_param": {**spec.data.params, "train_size": args.train_size,
                              "validation_size": args.validation_size, "seed": args.seed,
                              "train_difficulties": list(args.train_digits),
                              "validation_difficulties": list(args.validation_digits)}}
    # the flag's fields over the preset's (hidden_size=64 keeps the preset's heads, layers and feed-forward width)
    sized = ModelArguments(model_type="bert", config_overrides=args.model_size).overrides
    model = {"config_overrides": {**spec.model.overrides, **sized}} if args.model_size else {}
    training = {"output_dir": output_dir, "num_train_epochs": args.epochs,
                "per_device_train_batch_size": args.batch_size, "learning_rate": args.learning_rate,
                "seed": args.seed, "use_cpu": True, "bf16": args.precision == "bf16"}
    return spec.replace(model=model, data=data, training=training)


def format_table(results: dict[str, dict[str, float]], first_unseen: int) -> str:
    models = list(results)
    digits = sorted({int(d) for table in results.values() for d in table})
    lines = ["digits  " + "  ".join(f"{m:>8}" for m in models)]
    for d in digits:
        mark = " *" if d >= first_unseen else "  "
        lines.append(f"{d:>4}{mark}  " + "  ".join(f"{results[m].get(str(d), float('nan')):>8.3f}" for m in models))
    lines.append("(* = digit count never seen in training; accuracy = the whole masked number right)")
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.precision == "auto":
        args.precision = auto_precision()
    os.makedirs(args.output_dir, exist_ok=True)
    results, throughput = {}, {}
    for model, name in MODELS.items():
        print(f"{model}: training on {args.task}, {args.train_digits[0]}-{args.train_digits[1]} digits", flush=True)
        output_dir = os.path.join(args.output_dir, model.lower().replace("-", ""))
        result = run_experiment(experiment(name, output_dir, args),
                                command="python examples/nsp_length_generalization.py", quiet=not args.verbose)
        tables = result.table()
        results[model] = {d: acc for split in ("train", "validation") for d, acc in tables.get(split, {}).items()
                          if d != "all"}
        throughput[model] = result.metrics.get("train_samples_per_second")
    first_unseen = args.validation_digits[0]
    title = f"NSP {args.task}: trained on {args.train_digits[0]}-{args.train_digits[1]} digits"
    plot_path = os.path.join(args.output_dir, f"nsp_{args.task}_accuracy.png")
    plot_accuracy([Curve(model, table) for model, table in results.items()], plot_path,
                  train_range=tuple(args.train_digits), title=title, xlabel="digits")
    machine = hardware()
    with open(os.path.join(args.output_dir, "results.json"), "w") as f:
        json.dump({"args": vars(args), "hardware": machine, "accuracy": results,
                   "train_samples_per_second": throughput}, f, indent=2)
    print(f"\n{title}\n{format_table(results, first_unseen)}")
    threads = f"{machine['threads']} thread" + ("s" if machine["threads"] != 1 else "")
    print(f"precision {args.precision} on {machine['cpu']} ({machine['cpu_capability']}), {threads}")
    print("training sequences/s: " + ", ".join(f"{m} {v:.0f}" for m, v in throughput.items() if v))
    target = os.path.join(args.output_dir, "release", f"ibert-nsp-{args.task}")
    shutil.rmtree(target, ignore_errors=True)  # this run's model replaces the last one's
    release(os.path.join(args.output_dir, "ibert"), f"lengthgen/ibert-nsp-{args.task}-small", target)
    print(f"plot: {plot_path}")
    print(f"I-BERT release folder (python examples/space/app.py offers it): {target}")
    return results


if __name__ == "__main__":
    run_command(main, "nsp_length_generalization.py")
