#!/usr/bin/env python
"""When does each column of a CTL NDR update? The copy gates' wave through a problem, step by step.

    python benchmarks/ndr_gate_wave.py checkpoints/ndr-ctl-forward checkpoints/ndr-ctl-backward --depth 10
    python benchmarks/ndr_gate_wave.py outputs/reproduce/ndr-ctl-backward-128/checkpoint-9500 --direction backward

An ideal NDR solves a CTL problem of d applications in d + 1 steps (thesis Fig. D.2): at step k the column of the
k-th function applied reads its argument's column, which was updated at step k - 1, and updates; at step d + 1 the
readout column (the end token) copies the result. This script runs `--examples` random problems of `--depth`
applications for `--num_steps` steps and, for every example and column, finds the first step at which the column's
copy gate (the mean over its channels) reaches half of its largest value over the steps: the step at which the
column is updated. It prints the mean of that step over the examples for the k-th applied function, k = 1 ... d,
and for the readout column, beside the ideal k and d + 1. A model that needs more steps than trained on deeper
problems shows where the steps go: a wave that slows down, or a readout that waits.
"""

import argparse
import json
import random

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401  (registers the NDR with the Auto classes)
from lengthgen.cli import UsageError, check_positive, local_path_or_hub_id, run_command
from lengthgen.data.ctl import DIRECTIONS, CTLConfig, ctl_example, ctl_tables, sample_problems
from lengthgen.training.results import written_whole


def function_columns(direction: str, depth: int) -> list[int]:
    """Column of the k-th applied function, k = 1 ... depth, in `[CLS] input [SEP]`: forward `[CLS] x f1 ... fd`,
    backward `[CLS] fd ... f1 x`."""
    if direction == "forward":
        return [1 + k for k in range(1, depth + 1)]
    return [depth + 1 - k for k in range(1, depth + 1)]


def update_steps(gates: torch.Tensor) -> torch.Tensor:
    """(steps, batch, columns) channel-mean gates -> (batch, columns): the first step (1-based) at which each column's
    gate reaches half of its largest value over the steps."""
    reached = gates >= 0.5 * gates.amax(0, keepdim=True)
    return reached.float().argmax(0) + 1


def gate_wave(checkpoint: str, direction: str, depth: int, examples: int, num_steps: int) -> dict:
    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint).eval()
    # random problems over the builder's default function tables (seed 0: the ones the checkpoints were trained on)
    defaults = CTLConfig()
    tables = ctl_tables(defaults.num_symbols, defaults.num_functions, defaults.seed)
    problems = sample_problems(depth, examples, defaults.num_symbols, defaults.num_functions, random.Random(1), set())
    bits = (defaults.num_symbols - 1).bit_length()
    rows = [ctl_example(symbol, functions, tables, direction, bits) for symbol, functions in problems]
    encoded = tokenizer([r["input"] for r in rows], return_tensors="pt")
    if encoded["input_ids"].shape[1] != depth + 3:
        raise UsageError(f"{checkpoint}'s tokenizer does not give one token per symbol and function: "
                         f"{encoded['input_ids'].shape[1]} tokens for {depth + 1} words and [CLS]/[SEP].")
    with torch.no_grad():
        out = model(**encoded, num_steps=num_steps, output_gates=True)
    predictions = out.logits.argmax(-1).tolist()
    labels = [model.config.label2id[r["target"]] for r in rows]
    gates = torch.stack([g.float().mean(-1) for g in out.gates])  # (steps, batch, columns)
    columns = function_columns(direction, depth) + [depth + 2]  # the functions, then the readout ([SEP])
    steps = update_steps(gates[:, :, columns]).float()
    return {
        "checkpoint": checkpoint,
        "direction": direction,
        "depth": depth,
        "examples": len(rows),
        "num_steps": num_steps,
        "trained_steps": model.config.num_layers,
        "accuracy": sum(p == t for p, t in zip(predictions, labels)) / len(rows),
        "function_update_step": [round(s, 2) for s in steps[:, :depth].mean(0).tolist()],
        "readout_update_step": round(steps[:, depth].mean().item(), 2),
        "ideal_function_update_step": list(range(1, depth + 1)),
        "ideal_readout_update_step": depth + 1,
    }


def main(argv=None):
    parser = argparse.ArgumentParser(prog="ndr_gate_wave.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("checkpoints", nargs="+", help="NDR CTL checkpoint folders (Hub layout)")
    parser.add_argument("--direction", choices=DIRECTIONS, default=None,
                        help="CTL direction; default: the one named in the checkpoint's path")
    parser.add_argument("--depth", type=int, default=10, help="applications per problem (default 10: the test split)")
    parser.add_argument("--examples", type=int, default=200)
    parser.add_argument("--num_steps", type=int, default=24, help="steps to run (more than trained, to see the wave)")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    check_positive({"--depth": args.depth, "--examples": args.examples, "--num_steps": args.num_steps})
    if args.threads:
        torch.set_num_threads(args.threads)
    results = []
    for checkpoint in args.checkpoints:
        checkpoint = local_path_or_hub_id(checkpoint, "checkpoint")
        direction = args.direction or next((d for d in DIRECTIONS if d in checkpoint), None)
        if direction is None:
            raise UsageError(f"cannot tell the CTL direction of {checkpoint} from its path: pass --direction")
        result = gate_wave(checkpoint, direction, args.depth, args.examples, args.num_steps)
        results.append(result)
        print(f"{checkpoint} ({direction}, {args.depth} applications, trained with {result['trained_steps']} steps; "
              f"accuracy at {args.num_steps} steps {result['accuracy']:.3f})")
        print("  k-th function updated at step: " + " ".join(f"{s:5.1f}" for s in result["function_update_step"]))
        print("  ideal:                         " + " ".join(f"{s:5d}" for s in result["ideal_function_update_step"]))
        print(f"  readout updated at step {result['readout_update_step']:.1f} (ideal {args.depth + 1})")
    if args.json:
        with written_whole(args.json) as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    run_command(main, "ndr_gate_wave.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
