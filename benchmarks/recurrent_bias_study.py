#!/usr/bin/env python
"""The recurrent-inductive-bias study (Abnar, Dehghani and Zuidema, 2020) on subject-verb agreement: the
Transformer, the Sequential Transformer, the Sequential Universal Transformer and the LSTM of presets/study.yaml,
each trained with the same budget for several seeds; accuracy and expected calibration error per number of
attractors (or per subject-verb distance), mean and standard deviation over the seeds.

    python benchmarks/recurrent_bias_study.py --seeds 5 --threads 1 --output-root /data/study
    python benchmarks/recurrent_bias_study.py --config distance --seeds 5
    python benchmarks/recurrent_bias_study.py --summary-only --output-root /data/study   # tables from finished runs

Each (model, seed) is one `examples/run_classification.py` process (output OUTPUT_ROOT/CONFIG/MODEL/seedN, log
beside it); a finished run is skipped when the command is given again, so an interrupted study resumes. The summary
goes to docs/results/recurrent_bias_<config>.json, .md (the table) and .png (`--results-dir`).
"""

import argparse
import json
import os
import shlex
import time

from lengthgen.cli import UsageError, check_positive, run_command
from lengthgen.presets import load_presets, load_table
from lengthgen.release import accuracy_tables, calibration_tables, spread_over_seeds
from lengthgen.training.hardware import hardware
from lengthgen.training.scripts import run_script

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CLASSIFICATION = os.path.join(REPO, "examples", "run_classification.py")
MODELS = load_presets("study")


def write_config(name: str, folder: str) -> str:
    from transformers import AutoConfig

    import lengthgen.modeling  # noqa: F401  (registers universal_transformer and lstm_classifier)

    fields = dict(MODELS[name]["config"])
    AutoConfig.for_model(fields.pop("model_type"), **fields).save_pretrained(folder)
    return folder


def run_one(name: str, seed: int, args) -> dict:
    """Train and evaluate one model with one seed (or read the finished run's metrics)."""
    output_dir = os.path.join(args.output_root, args.config, name, f"seed{seed}")
    results = os.path.join(output_dir, "all_results.json")
    if os.path.exists(results):
        with open(results) as f:
            return json.load(f)
    config = write_config(name, os.path.join(args.output_root, args.config, name, "config"))
    argv = ["--config_name", config, "--dataset_name", "subject_verb_agreement", "--dataset_config_name", args.config,
            "--output_dir", output_dir, "--do_train", "--do_eval", "--seed", str(seed), "--report_to", "none",
            *shlex.split(args.training or load_table("study")["_training"])]
    if args.dataset_param:
        argv += ["--dataset_param", *args.dataset_param]
    if args.cpu:
        argv.append("--use_cpu")
    start = time.perf_counter()
    metrics = run_script(CLASSIFICATION, argv, output_dir + ".log", threads=args.threads)
    metrics["study_wall_seconds"] = round(time.perf_counter() - start, 1)
    with open(results, "w") as f:
        json.dump(metrics, f, indent=2)
    return metrics


def summarize(runs: dict[str, list[dict]], split: str = "test") -> dict:
    """Per model: mean and standard deviation over seeds of accuracy and ECE, overall and per difficulty."""
    summary = {}
    for name, seeds in runs.items():
        entry = {"seeds": len(seeds)}
        for metric, tables in (("accuracy", accuracy_tables), ("ece", calibration_tables)):
            entry[metric] = spread_over_seeds([tables(m).get(split, {}) for m in seeds])
        summary[name] = entry
    return summary


def markdown_table(summary: dict, config: str) -> str:
    """Test accuracy per difficulty and overall, and ECE, as mean +- std over seeds, one row per model."""
    difficulties = sorted({d for e in summary.values() for d in e["accuracy"] if d != "all"}, key=int)
    unit = "attractors" if config == "attractors" else "words"
    header = ["model", "seeds", *[f"accuracy, {d} {unit}" for d in difficulties], "accuracy", "ECE"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, entry in summary.items():
        cells = [f"{entry['accuracy'][d]['mean']:.3f} +- {entry['accuracy'][d]['std']:.3f}"
                 for d in [*difficulties, "all"]]
        ece = entry["ece"]["all"]
        lines.append(f"| {name} | {entry['seeds']} | " + " | ".join(cells) + f" | {ece['mean']:.3f} +- {ece['std']:.3f} |")
    return "\n".join(lines) + "\n"


def plot(summary: dict, path: str, config: str):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figure, (left, right) = plt.subplots(1, 2, figsize=(10, 3.8))
    for name, entry in summary.items():
        difficulties = sorted((d for d in entry["accuracy"] if d != "all"), key=int)
        x = [int(d) for d in difficulties]
        left.errorbar(x, [entry["accuracy"][d]["mean"] for d in difficulties],
                      yerr=[entry["accuracy"][d]["std"] for d in difficulties], marker="o", capsize=3, label=name)
    left.set(xlabel="attractors" if config == "attractors" else "subject-verb distance (words)",
             ylabel="test accuracy (mean +- std over seeds)")
    left.legend(fontsize="small")
    names = list(summary)
    right.bar(range(len(names)), [summary[n]["ece"]["all"]["mean"] for n in names],
              yerr=[summary[n]["ece"]["all"]["std"] for n in names], capsize=3, color="tab:gray")
    right.set_xticks(range(len(names)), [n.replace("_", "\n") for n in names], fontsize=7)
    right.set(ylabel="test ECE (mean +- std)")
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    plt.close(figure)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--config", default="attractors", choices=["attractors", "distance"])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--dataset-param", nargs="*", default=[], help="KEY=VALUE generating parameters")
    parser.add_argument("--training", help="run_classification.py arguments instead of study.yaml's _training")
    parser.add_argument("--threads", type=int, default=None, help="torch threads of each run (two at once: 1 each)")
    parser.add_argument("--cpu", action="store_true", help="train on the CPU even where there is a GPU")
    parser.add_argument("--output-root", default="outputs/study")
    parser.add_argument("--results-dir", default=os.path.join(REPO, "docs", "results"))
    parser.add_argument("--summary-only", action="store_true", help="only summarize the finished runs")
    args = parser.parse_args(argv)
    check_positive({"--seeds": args.seeds, "--threads": args.threads})
    runs = {}
    for name in args.models:
        for seed in range(args.seeds):
            if args.summary_only:
                path = os.path.join(args.output_root, args.config, name, f"seed{seed}", "all_results.json")
                if os.path.exists(path):
                    with open(path) as f:
                        runs.setdefault(name, []).append(json.load(f))
                continue
            print(f"{name} seed {seed}", flush=True)
            runs.setdefault(name, []).append(run_one(name, seed, args))
    if not runs:
        raise UsageError(f"No finished run under {os.path.join(args.output_root, args.config)}.")
    summary = summarize(runs)
    os.makedirs(args.results_dir, exist_ok=True)
    stem = os.path.join(args.results_dir, f"recurrent_bias_{args.config}")
    record = {
        "study": "recurrent inductive bias (Abnar, Dehghani and Zuidema 2020), subject-verb agreement",
        "config": args.config, "dataset_param": args.dataset_param,
        "training": args.training or load_table("study")["_training"],
        "models": {name: MODELS[name] for name in runs}, "summary": summary,
        "hardware": hardware(args.threads),
        "cpu_seconds": sum(m.get("study_wall_seconds", 0.0) for seeds in runs.values() for m in seeds),
    }
    with open(stem + ".json", "w") as f:
        json.dump(record, f, indent=2)
    plot(summary, stem + ".png", args.config)
    with open(stem + ".md", "w") as f:
        f.write(markdown_table(summary, args.config))
    for name, entry in summary.items():
        accuracy, ece = entry["accuracy"]["all"], entry["ece"]["all"]
        print(f"{name:34s} accuracy {accuracy['mean']:.3f} +- {accuracy['std']:.3f}   "
              f"ECE {ece['mean']:.3f} +- {ece['std']:.3f}   ({entry['seeds']} seeds)")
    return record


if __name__ == "__main__":
    run_command(main, "recurrent_bias_study.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
