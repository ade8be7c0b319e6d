#!/usr/bin/env python
"""Distill a teacher into a student and compare: the teacher, the distilled student and the same student trained
alone (same budget, same seed), each with accuracy and expected calibration error per difficulty.

    python examples/run_distillation.py --teacher outputs/lstm-agreement \
        --student_config hub_configs/ndr-ctl --student_overrides attention_type=softmax,copy_gate=False \
        --dataset_name subject_verb_agreement --dataset_config_name attractors --output_dir outputs/distill \
        -- --max_steps 2000 --per_device_train_batch_size 64 --learning_rate 5e-4

Everything after `--` goes to both students' `examples/run_classification.py` runs (their training arguments). The
three runs are `examples/run_classification.py` processes (the teacher evaluated as it is; the students trained with
and without `--teacher_model_name_or_path`), logged to OUTPUT_DIR/*.log; the comparison is written to
OUTPUT_DIR/distillation.json and distillation.md. The distillation loss is r T^2 KL(teacher_T || student_T) +
(1 - r) CE (Hinton et al. 2015; Abnar, Dehghani and Zuidema 2020 use T = 1, r = 0.9 for LSTM -> Transformer).

`--seeds N` runs the students with seeds 0 .. N-1, each in OUTPUT_DIR/seed<n> (a seed whose distillation.json exists
is kept, so an interrupted command resumes; the teacher is evaluated and its logits computed once, in
OUTPUT_DIR/teacher_logits.npy), then writes the mean and sample standard deviation over the seeds of every number
to OUTPUT_DIR/distillation_seeds.json and .md.
"""

import argparse
import json
import os

from lengthgen.cli import UsageError, check_positive, local_path_or_hub_id, run_command
from lengthgen.release import accuracy_tables, calibration_tables, spread_over_seeds
from lengthgen.training.hardware import hardware
from lengthgen.training.scripts import run_script

CLASSIFICATION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "run_classification.py")


def markdown(tables: dict, cell=lambda value: f"{value:.3f}") -> str:
    """{run: {"accuracy" | "ece": {split: {difficulty: entry}}}} as one row per split and difficulty, `cell` writing
    an entry (a number, or a summary over seeds) and an empty cell where a run lacks it."""
    runs = list(tables)
    lines = ["| split | difficulty | " + " | ".join(f"{r} accuracy | {r} ECE" for r in runs) + " |",
             "| --- | --- | " + " | ".join("--- | ---" for _ in runs) + " |"]
    for split in sorted({s for r in tables.values() for s in r["accuracy"]}):
        keys = sorted({d for r in tables.values() for d in r["accuracy"].get(split, {})},
                      key=lambda d: (d != "all", int(d) if d.isdigit() else 0))
        for d in keys:
            cells = [cell(entry) if (entry := tables[r][metric].get(split, {}).get(d)) is not None else ""
                     for r in runs for metric in ("accuracy", "ece")]
            lines.append(f"| {split} | {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def seed_summary(per_seed: list[dict]) -> dict:
    """{run: {"accuracy" | "ece": {split: {difficulty: {"mean", "std", "values"}}}}} over the seeds' results
    (`spread_over_seeds`: sample standard deviation, as the recurrent-bias study's)."""
    summary = {}
    for run in per_seed[0]:
        for metric in ("accuracy", "ece"):
            tables = [results[run][metric] for results in per_seed]
            splits = sorted({split for table in tables for split in table})
            summary.setdefault(run, {})[metric] = {
                split: spread_over_seeds([table.get(split, {}) for table in tables]) for split in splits}
    return summary


def summary_markdown(summary: dict) -> str:
    return markdown(summary, cell=lambda entry: f"{entry['mean']:.3f} +- {entry['std']:.3f}")


def distill(args, training: list[str], seed: int, output_dir: str, logits_cache: str, teacher: dict | None = None):
    """The teacher, the distilled student and the student alone with `seed`, in `output_dir`; their tables. The
    teacher's training-set logits are read from or written to `logits_cache`; `teacher`, its tables from an earlier
    seed, saves evaluating it again."""
    data = ["--dataset_name", args.dataset_name]
    data += ["--dataset_config_name", args.dataset_config_name] if args.dataset_config_name else []
    data += ["--dataset_param", *args.dataset_param] if args.dataset_param else []
    student = ["--config_name", args.student_config, "--seed", str(seed), "--do_train", "--do_eval", *training]
    student += ["--config_overrides", args.student_overrides] if args.student_overrides else []
    runs = {
        "teacher": ["--model_name_or_path", args.teacher, "--do_eval"],
        "distilled": [*student, "--teacher_model_name_or_path", args.teacher, "--distillation_temperature",
                      str(args.temperature), "--distillation_weight", str(args.weight),
                      "--teacher_logits_cache", logits_cache],
        "alone": student,
    }
    results = {"teacher": teacher} if teacher is not None else {}
    for name, arguments in runs.items():
        if name in results:
            continue
        run_dir = os.path.join(output_dir, name)
        print(f"{name}: examples/run_classification.py -> {run_dir}", flush=True)
        metrics = run_script(CLASSIFICATION, [*arguments, *data, "--output_dir", run_dir],
                             os.path.join(output_dir, f"{name}.log"), threads=args.threads)
        results[name] = {"accuracy": accuracy_tables(metrics), "ece": calibration_tables(metrics)}
    with open(os.path.join(output_dir, "distillation.json"), "w") as f:
        json.dump({"teacher": args.teacher, "temperature": args.temperature, "weight": args.weight,
                   "seed": seed, "training_arguments": training, "hardware": hardware(args.threads),
                   "results": results}, f, indent=2)
    table = markdown(results)
    with open(os.path.join(output_dir, "distillation.md"), "w") as f:
        f.write(table)
    print(table)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--teacher", required=True, help="a trained classifier: folder or Hub id")
    parser.add_argument("--student_config", required=True, help="the student's config folder (hub_configs/...)")
    parser.add_argument("--student_overrides", default="", help="config fields: 'hidden_size=64,num_layers=4'")
    parser.add_argument("--dataset_name", required=True)
    parser.add_argument("--dataset_config_name")
    parser.add_argument("--dataset_param", nargs="*", default=[], help="KEY=VALUE generating parameters")
    parser.add_argument("--temperature", type=float, default=1.0, help="T (default 1)")
    parser.add_argument("--weight", type=float, default=0.9, help="r (default 0.9)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--seeds", type=int, default=None,
                        help="run seeds 0 .. N-1 in OUTPUT_DIR/seed<n> and summarize them (instead of --seed)")
    parser.add_argument("--output_dir", required=True)
    parser.add_argument("--threads", type=int, default=None, help="torch threads of each run")
    argv = list(argv) if argv is not None else None
    args, training = parser.parse_known_args(argv)
    training = [a for a in training if a != "--"]
    local_path_or_hub_id(args.teacher, "--teacher")
    if not os.path.isdir(args.student_config):
        raise UsageError(f"--student_config: no such folder: {args.student_config}")
    for flag in ("--output_dir", "--seed", "--teacher_model_name_or_path", "--do_train", "--do_eval"):
        if flag in training:
            raise UsageError(f"{flag} is set by this script; pass it before `--` as this script's argument.")
    check_positive({"--seeds": args.seeds, "--threads": args.threads})
    os.makedirs(args.output_dir, exist_ok=True)
    logits_cache = os.path.join(args.output_dir, "teacher_logits.npy")  # one teacher, one training set: once
    if args.seeds is None:
        return distill(args, training, args.seed, args.output_dir, logits_cache)
    per_seed = []
    for seed in range(args.seeds):
        seed_dir = os.path.join(args.output_dir, f"seed{seed}")
        record = os.path.join(seed_dir, "distillation.json")
        if os.path.exists(record):  # finished: kept
            with open(record) as f:
                per_seed.append(json.load(f)["results"])
            continue
        os.makedirs(seed_dir, exist_ok=True)
        teacher = per_seed[0]["teacher"] if per_seed else None
        per_seed.append(distill(args, training, seed, seed_dir, logits_cache, teacher))
    summary = seed_summary(per_seed)
    with open(os.path.join(args.output_dir, "distillation_seeds.json"), "w") as f:
        json.dump({"teacher": args.teacher, "temperature": args.temperature, "weight": args.weight,
                   "seeds": args.seeds, "training_arguments": training, "hardware": hardware(args.threads),
                   "summary": summary}, f, indent=2)
    table = summary_markdown(summary)
    with open(os.path.join(args.output_dir, "distillation_seeds.md"), "w") as f:
        f.write(table)
    print(table)
    return summary


if __name__ == "__main__":
    run_command(main, "run_distillation.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
