#!/usr/bin/env python
"""What one training step of the leaderboard's models costs: against its arithmetic, and through the leaderboard's
runner (Trainer) against the same step without it, all measured in one process.

For each model of presets/leaderboard.yaml, on batches of one Chomsky-hierarchy task at the protocol's training
lengths (answer-slots layout, the protocol's batch size):

* FLOPs of one training step (forward and backward), counted by `torch.utils.flop_counter.FlopCounterMode` (it has no
  formula for torch's fused LSTM, so the LSTM's count is its answer layer's alone);
* the *bare* step: forward, backward and AdamW on batches collated beforehand, the models taking turns so that a
  noisy machine slows them alike (median over `--repeats` rounds of `--steps` steps);
* the *runner* step: seconds per training step of a leaderboard cell (`lengthgen.leaderboard.cell.run_cell`, the
  Trainer with its data loading and collation), its batches drawn at random as the bare steps' are: two cells, of
  `--runner_steps` and of twice as many steps, and the difference of their training times over the difference of
  their steps, so that what a run pays once (the Trainer's set-up, the first steps' allocations) is reported apart,
  as the runner's fixed seconds.

It prints and writes (`--json`) the FLOPs, both step times, the achieved GFLOP/s of the bare step and the runner's
overhead (runner / bare).

    python benchmarks/leaderboard_step.py --models lstm rope nope stack_rnn --threads 1
    python benchmarks/leaderboard_step.py --task chomsky_hierarchy/duplicate_string --json step.json
"""

import argparse
import json
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from lengthgen.cli import check_positive, run_command
from lengthgen.leaderboard import cell
from lengthgen.leaderboard.models import model_section
from lengthgen.leaderboard.protocol import protocol
from lengthgen.leaderboard.tasks import resolve_task, with_params
from lengthgen.training.arguments import ModelArguments
from lengthgen.training.hardware import hardware
from lengthgen.data.answer_slots import answer_end_token, encode_answer_slots
from lengthgen.training.models import answer_slots_tokenizer, load_answer_reader
from lengthgen.training.results import written_whole


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=["lstm", "rope", "nope", "stack_rnn"])
    parser.add_argument("--task", default="chomsky_hierarchy/parity_check")
    parser.add_argument("--protocol", default="chomsky", help="whose training lengths, batch size and data scale")
    parser.add_argument("--steps", type=int, default=10, help="bare steps per model per round")
    parser.add_argument("--repeats", type=int, default=3, help="rounds of bare steps")
    parser.add_argument("--runner_steps", type=int, default=100,
                        help="steps of the shorter leaderboard cell (the longer one trains twice as many)")
    parser.add_argument("--train_size", type=int, default=4000, help="training strings generated")
    parser.add_argument("--threads", type=int, help="torch threads")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    check_positive({"--steps": args.steps, "--repeats": args.repeats, "--runner_steps": args.runner_steps,
                    "--train_size": args.train_size, "--threads": args.threads})
    for model in args.models:
        model_section(model)  # an unknown model named before any work
    return args


def batches(prepared, tokenizer, batch_size: int, count: int, seed: int = 0) -> list[dict]:
    """`count` batches of the task's training strings in the answer-slots layout, right-padded and collated."""
    from transformers import DataCollatorForTokenClassification

    rows = prepared.splits["train"].shuffle(seed=seed).select(range(batch_size * count))
    encoded = encode_answer_slots(rows, tokenizer, end_token=answer_end_token(prepared.task.dataset))
    collate = DataCollatorForTokenClassification(tokenizer)
    return [collate([encoded[i] for i in range(start, start + batch_size)])
            for start in range(0, batch_size * count, batch_size)]


def step_flops(model, batch) -> int:
    counter = FlopCounterMode(display=False)
    with counter:
        model(**batch).loss.backward()
    model.zero_grad(set_to_none=True)
    return counter.get_total_flops()


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    chosen = protocol(args.protocol)
    task = with_params([resolve_task(args.task, chosen.data_scale)],
                       {**chosen.dataset_param, **chosen.task_params.get(args.task, {}), "train_size": args.train_size,
                        "test_size": 8})[0]
    prepared = cell.prepare_task(task)
    tokenizer = answer_slots_tokenizer(prepared.splits)
    batch_size = chosen.training.get("per_device_train_batch_size", 32)
    data = batches(prepared, tokenizer, batch_size, args.steps)

    models, optimizers, results = {}, {}, {}
    for name in args.models:
        torch.manual_seed(0)
        models[name] = load_answer_reader(ModelArguments(**model_section(name)), tokenizer).train()
        optimizers[name] = torch.optim.AdamW(models[name].parameters(), lr=1e-4)
        results[name] = {"flops_per_step": statistics.fmean(step_flops(models[name], b) for b in data[:3]),
                         "bare_seconds": []}
    for _ in range(args.repeats):  # the models take turns
        for name, model in models.items():
            start = time.perf_counter()
            for batch in data:
                model(**batch).loss.backward()
                optimizers[name].step()
                optimizers[name].zero_grad(set_to_none=True)
            results[name]["bare_seconds"].append((time.perf_counter() - start) / len(data))
    for name in args.models:
        # the runner's batches drawn at random, as the bare steps' (not grouped by length)
        budget = {k: v for k, v in chosen.training.items() if k != "train_sampling_strategy"}
        short, long = (cell.run_cell(name, prepared, 0, {**budget, "max_steps": steps})
                       for steps in (args.runner_steps, 2 * args.runner_steps))
        entry = results[name]
        entry["bare_seconds_per_step"] = statistics.median(entry.pop("bare_seconds"))
        entry["runner_seconds_per_step"] = (
            (long["train_seconds"] - short["train_seconds"]) / (long["train_steps"] - short["train_steps"])
        )
        entry["runner_fixed_seconds"] = short["train_seconds"] - short["train_steps"] * entry["runner_seconds_per_step"]
        entry["gflops_per_second"] = entry["flops_per_step"] / entry["bare_seconds_per_step"] / 1e9
        entry["runner_over_bare"] = entry["runner_seconds_per_step"] / entry["bare_seconds_per_step"]
        print(f"{name:>16}: {entry['flops_per_step'] / 1e9:6.2f} GFLOP per step, bare "
              f"{1e3 * entry['bare_seconds_per_step']:7.1f} ms ({entry['gflops_per_second']:5.1f} GFLOP/s), runner "
              f"{1e3 * entry['runner_seconds_per_step']:7.1f} ms ({entry['runner_over_bare']:.2f}x bare) and "
              f"{entry['runner_fixed_seconds']:.2f} s once", flush=True)
    output = {"task": args.task, "protocol": args.protocol, "batch_size": batch_size, "models": results,
              "threads": torch.get_num_threads(), "precision": "fp32", "hardware": hardware()}
    if args.json:
        with written_whole(args.json) as f:
            json.dump(output, f, indent=2)
    return output


if __name__ == "__main__":
    run_command(main, "leaderboard_step.py")
