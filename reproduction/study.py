"""Comparisons over seeds: the recurrent-inductive-bias study (presets/study.yaml) and distillation.

A study preset is a group of specs: every model of its `models`, with its `data` and `training`, for seeds
0 .. seeds-1. `run_study(name)` runs each through the experiment runner (a finished run is read back, so an
interrupted study resumes) and writes, in the results folder, `NAME.json` (the specs, the mean and sample standard
deviation over seeds of accuracy and ECE per difficulty on the test split, the hardware), `NAME.md` (the table) and
`NAME.png` (accuracy against difficulty, the median over seeds and the band from the worst to the best seed).

`compare_distillation` trains a student with and without a teacher (same spec, same seeds) and evaluates the teacher
beside them: the comparison of Abnar et al.'s distillation experiments.
"""

import json
import os
import time

from lengthgen.cli import UsageError
from lengthgen.data.scoring import spread_over_seeds
from lengthgen.plots import Curve, plot_accuracy
from lengthgen.presets import load_presets
from lengthgen.training.hardware import hardware
from lengthgen.training.results import RESULTS_FILE, ExperimentResult, written_whole
from lengthgen.training.runner import run_experiment
from lengthgen.training.spec import ExperimentSpec

STUDIES = load_presets("study")
SCORES = ("accuracy", "ece")


def study_spec(name: str, model: str, seed: int, output_dir: str) -> ExperimentSpec:
    study = STUDIES[name]
    return ExperimentSpec.from_dict({
        "model": study["models"][model]["model"], "data": study["data"],
        "training": {**study["training"], "seed": seed, "output_dir": output_dir},
    }, source=f"presets/study.yaml: {name} / {model}")


def finished(output_dir: str, trained: bool = True) -> ExperimentResult | None:
    """The result of a run that evaluated (and, when `trained`, trained) in `output_dir`, or None."""
    if not os.path.isfile(os.path.join(output_dir, RESULTS_FILE)):
        return None
    result = ExperimentResult.load(output_dir)
    return result if result.scores and (result.training or not trained) else None


def summarize(results: dict[str, list[ExperimentResult]], split: str = "test") -> dict:
    """Per run name: the number of seeds, and per score the mean and standard deviation over seeds per difficulty."""
    return {name: {"seeds": len(runs), **{score: spread_over_seeds([r.table(score).get(split, {}) for r in runs])
                                          for score in SCORES}}
            for name, runs in results.items()}


def markdown_table(summary: dict, unit: str) -> str:
    """Accuracy per difficulty and overall, and ECE, as mean +- std over seeds, one row per run."""
    difficulties = sorted({d for e in summary.values() for d in e["accuracy"] if d != "all"}, key=int)
    header = ["model", "seeds", *[f"accuracy, {d} {unit}" for d in difficulties], "accuracy", "ECE"]
    lines = ["| " + " | ".join(header) + " |", "|" + " --- |" * len(header)]
    for name, entry in summary.items():
        cells = [f"{entry['accuracy'][d]['mean']:.3f} +- {entry['accuracy'][d]['std']:.3f}" if d in entry["accuracy"]
                 else "" for d in [*difficulties, "all"]]
        ece = entry["ece"]["all"]
        lines.append(f"| {name} | {entry['seeds']} | " + " | ".join(cells)
                     + f" | {ece['mean']:.3f} +- {ece['std']:.3f} |")
    return "\n".join(lines) + "\n"


def write_summary(stem: str, record: dict, results: dict[str, list[ExperimentResult]], unit: str, title: str):
    """`stem`.json (the record), .md (the table) and .png (accuracy against difficulty over seeds)."""
    with written_whole(stem + ".json") as f:
        json.dump(record, f, indent=2)
    with written_whole(stem + ".md") as f:
        f.write(markdown_table(record["summary"], unit))
    curves = [Curve(f"{name} ({len(runs)} seed{'s' if len(runs) > 1 else ''})",
                    {d: [r.table()["test"][d] for r in runs if d in r.table().get("test", {})]
                     for d in runs[0].table().get("test", {}) if d != "all"})
              for name, runs in results.items()]
    plot_accuracy(curves, stem + ".png", title=title, xlabel=unit, ylabel="test accuracy")


def run_study(name: str, output_root: str, results_dir: str, verbose: bool = False) -> dict:
    """Every (model, seed) of study preset `name` not yet finished under OUTPUT_ROOT/NAME/MODEL/seedN, then the
    summary in RESULTS_DIR/NAME.{json,md,png}."""
    if name not in STUDIES:
        raise UsageError(f"Unknown study {name!r}; choose from {', '.join(STUDIES)}.")
    study, results, seconds = STUDIES[name], {}, 0.0
    for model in study["models"]:
        for seed in range(study["seeds"]):
            output_dir = os.path.join(output_root, name, model, f"seed{seed}")
            result = finished(output_dir)
            if result is None:
                print(f"{name}: {model} seed {seed}", flush=True)
                start = time.perf_counter()
                result = run_experiment(study_spec(name, model, seed, output_dir),
                                        command=f"lengthgen reproduce {name}", quiet=not verbose)
                seconds += time.perf_counter() - start
            results.setdefault(model, []).append(result)
    summary = summarize(results)
    config = study["data"].get("dataset_config_name")
    record = {"name": name, "reference": study["reference"], "command": f"lengthgen reproduce {name}",
              "data": study["data"], "training": study["training"], "seeds": study["seeds"],
              "models": {model: study["models"][model] for model in results}, "summary": summary,
              "hardware": hardware(), "cpu_seconds": round(seconds, 1)}
    os.makedirs(results_dir, exist_ok=True)
    write_summary(os.path.join(results_dir, name), record, results,
                  "attractors" if config == "attractors" else "words", f"{name} ({study['reference']})")
    for model, entry in summary.items():
        accuracy, ece = entry["accuracy"]["all"], entry["ece"]["all"]
        print(f"{model:34s} accuracy {accuracy['mean']:.3f} +- {accuracy['std']:.3f}   "
              f"ECE {ece['mean']:.3f} +- {ece['std']:.3f}   ({entry['seeds']} seeds)")
    return record


def compare_distillation(spec: ExperimentSpec, seeds: list[int], output_dir: str, command: str | None = None,
                         verbose: bool = False) -> dict:
    """The teacher of `spec.distillation` evaluated as it is, the student of `spec` trained with it ("distilled") and
    without it ("alone"), with each of `seeds`, under OUTPUT_DIR/seed<n>/{teacher,distilled,alone}; a finished run is
    read back. The teacher's training-set logits are computed once (OUTPUT_DIR/teacher_logits.npy). Returns and writes
    OUTPUT_DIR/distillation.json and .md: per run the mean and standard deviation over seeds of accuracy and ECE."""
    teacher = spec.distillation.teacher_model_name_or_path
    if not teacher:
        raise UsageError("--teacher_model_name_or_path is required: the classifier to distill from.")
    sections = spec.to_dict()
    results: dict[str, list[ExperimentResult]] = {}
    for seed in seeds:
        seed_dir = os.path.join(output_dir, f"seed{seed}")
        student = {**sections, "training": {**sections["training"], "seed": seed, "do_train": True, "do_eval": True}}
        runs = {
            "teacher": {"model": {"model_name_or_path": teacher, "head": "classification"}, "data": sections["data"],
                        "training": {**student["training"], "do_train": False}},
            "distilled": {**student, "distillation": {**sections.get("distillation", {}),
                                                      "teacher_logits_cache": os.path.join(output_dir,
                                                                                           "teacher_logits.npy")}},
            "alone": {key: value for key, value in student.items() if key != "distillation"},
        }
        for run, values in runs.items():
            if run == "teacher" and results.get("teacher"):  # the same teacher for every seed
                results["teacher"].append(results["teacher"][0])
                continue
            run_dir = os.path.join(seed_dir, run)
            result = finished(run_dir, trained=run != "teacher")
            if result is None:
                print(f"seed {seed}: {run} -> {run_dir}", flush=True)
                values = {**values, "training": {**values["training"], "output_dir": run_dir}}
                result = run_experiment(ExperimentSpec.from_dict(values, source=run), command=command,
                                        quiet=not verbose)
            results.setdefault(run, []).append(result)
    summary = {run: {"seeds": len(runs), **{score: {split: spread_over_seeds([r.table(score).get(split, {})
                                                                              for r in runs])
                                                    for split in sorted({s for r in runs for s in r.scores})}
                                            for score in SCORES}}
               for run, runs in results.items()}
    record = {"teacher": teacher, "temperature": spec.distillation.distillation_temperature,
              "weight": spec.distillation.distillation_weight, "seeds": seeds, "spec": sections, "command": command,
              "summary": summary, "hardware": hardware()}
    os.makedirs(output_dir, exist_ok=True)
    with open(os.path.join(output_dir, "distillation.json"), "w") as f:
        json.dump(record, f, indent=2)
    table = distillation_markdown(summary)
    with open(os.path.join(output_dir, "distillation.md"), "w") as f:
        f.write(table)
    print(table)
    return record


def distillation_markdown(summary: dict) -> str:
    """One row per split and difficulty: accuracy and ECE of each run, mean +- std over seeds."""
    runs = list(summary)
    lines = ["| split | difficulty | " + " | ".join(f"{r} accuracy | {r} ECE" for r in runs) + " |",
             "| --- | --- | " + " | ".join("--- | ---" for _ in runs) + " |"]
    splits = sorted({s for r in summary.values() for s in r["accuracy"]})
    for split in splits:
        keys = sorted({d for r in summary.values() for d in r["accuracy"].get(split, {})},
                      key=lambda d: (d != "all", int(d) if d.isdigit() else 0))
        for d in keys:
            cells = []
            for run in runs:
                for score in SCORES:
                    entry = summary[run][score].get(split, {}).get(d)
                    cells.append("" if entry is None else f"{entry['mean']:.3f} +- {entry['std']:.3f}")
            lines.append(f"| {split} | {d} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


__all__ = ["STUDIES", "compare_distillation", "run_study", "study_spec", "summarize"]
