#!/usr/bin/env python
"""The papers' length-generalization results, one command per result, on a CPU budget.

    python benchmarks/reproduce.py --list                   # the presets, with the paper's numbers
    python benchmarks/reproduce.py ndr-ctl-backward         # train (or resume), evaluate, write the results
    python benchmarks/reproduce.py ndr-ctl-backward --threads 1 --output-root /data/runs
    python benchmarks/reproduce.py ndr-ctl-backward --results-dir /tmp/results   # a trial: docs/results/ untouched
    python benchmarks/reproduce.py --table                  # docs/reproduction.md's table, from docs/results/*.json

Each preset is one model on one task: a `hub_configs/` folder, a dataset of lengthgen's, config overrides that scale
the model to this machine, and training arguments for `examples/run_classification.py` (NDR, transformer) or
`examples/run_mlm.py` (I-BERT, BERT). The example script does the work (Trainer, checkpoints every `save_steps`,
per-depth accuracy on every split); this file only chooses its arguments and writes

* `docs/results/<name>.json`: model config, training steps and wall time, hardware, accuracy per depth or length on
  every split, the learning curve, the paper's numbers and the baseline's beside them, what differs from the paper;
* `docs/results/<name>.png`: accuracy against depth/length, the baseline beside it, the training range shaded.

A run that is interrupted resumes from its last checkpoint when the same command is given again; a finished run is
only re-evaluated, in fp32 (the released weights are fp32: the numbers are those a user gets). `--precision auto`
trains with bf16 autocast where the device has native bf16 (a CUDA GPU with bf16; a CPU with AVX-512 BF16 or AMX)
and in fp32 elsewhere: on a CPU without it, bf16 matrix products fall back to a slow path
(benchmarks/cpu_precision.py). The hardware and precision go into every results JSON.

Paper scale, in pieces. The `*-paper` presets train the `hub_configs/` model as it is with the paper's arguments
(thesis Tables D.3-D.5, the I-BERT paper's §6.1) on the GPU when there is one (bf16, the Triton geometric attention,
batches binned by length). On machines that do not outlive ten minutes, run them in pieces:

    python benchmarks/reproduce.py ndr-listops-paper --max-train-seconds 480 --unpack-from pieces/ --pack-to $OUT

`--max-train-seconds` stops training before the budget with a checkpoint (weights, optimizer, scheduler, RNG, data
position); `--pack-to` writes that checkpoint as at most 8 files of at most 16 MiB; `--unpack-from` restores it on
the next machine, whose piece continues the same curve (tests/test_training_pieces.py checks the weights against an
uninterrupted run).
"""

import argparse
import json
import os
import shlex
import shutil
import time
from dataclasses import dataclass, field

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402

from lengthgen.cli import UsageError, check_positive, run_command  # noqa: E402
from lengthgen.data.export import parse_param  # noqa: E402
from lengthgen.presets import flags, load_presets  # noqa: E402
from lengthgen.release import PLOT, RUN_RECORD, accuracy_tables  # noqa: E402
from lengthgen.training.hardware import auto_precision, hardware  # noqa: E402
from lengthgen.training.pieces import get_last_checkpoint_or_none, pack_checkpoint, unpack_unless_behind  # noqa: E402
from lengthgen.training.scripts import run_script  # noqa: E402

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS_DIR = os.path.join(REPO_ROOT, "docs", "results")


@dataclass
class Preset:
    """One reproduction run. `paper` holds the paper's accuracy per split ('all') or per difficulty."""

    script: str  # "classification" or "mlm"
    config: str  # hub_configs/ folder
    dataset: str
    dataset_config: str | None
    overrides: str  # config fields scaled to this machine
    training: list[str]  # arguments of the example script
    reference: str  # the paper's table or figure
    paper: dict
    target: tuple[str, str, float] | None  # (split, difficulty or "all", accuracy to reach); None for a baseline
    differences: str  # what differs from the paper, and why
    baseline: str | None = None
    dataset_params: list[str] = field(default_factory=list)
    deeper: dict | None = None  # generating parameters of a test split deeper than any of the task's (NDR only)
    paper_scale: bool = False  # the paper's model and recipe: runs on a GPU where there is one, batches binned by length
    # on a CPU, "auto" = bf16 where the CPU has native bf16; "fp32" where bf16 was measured slower even there
    cpu_precision: str = "auto"
    seed: int = 0  # the example script's --seed (a preset that repeats a run with another draw changes only this)

    def training_flags(self) -> dict[str, list[str]]:
        """The training arguments by flag: {"--max_steps": ["40000"], ...}."""
        return flags(shlex.join(self.training))


def load_reproduction_presets() -> dict[str, Preset]:
    """presets/reproduction.yaml (the table of recipes, `lengthgen.presets`) as Presets."""
    presets = {}
    for name, fields in load_presets("reproduction").items():
        fields = {**fields, "training": shlex.split(fields["training"])}
        if fields.get("target"):
            fields["target"] = tuple(fields["target"])
        if fields.get("deeper"):
            fields["deeper"] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields["deeper"].items()}
        presets[name] = Preset(**fields)
    return presets


PRESETS = load_reproduction_presets()

NUM_STEPS = (14, 18, 24, 32)
WALL_FILE = "reproduce_wall_seconds.json"  # the training sessions' wall times, beside the checkpoints
PIECE_FILE = "reproduce_piece_started.json"  # the start of the training session under way (gone once it returns)


def training_wall_seconds(output_dir: str) -> list[float]:
    """The wall times of the run's training sessions so far (WALL_FILE). A session stopped by a kill left its start in
    PIECE_FILE and no wall time: it counts until its last checkpoint, the work after that being lost."""
    wall_file, piece_file = os.path.join(output_dir, WALL_FILE), os.path.join(output_dir, PIECE_FILE)
    wall = json.load(open(wall_file)) if os.path.exists(wall_file) else []
    if os.path.exists(piece_file):
        started = json.load(open(piece_file))["started"]
        checkpoint = get_last_checkpoint_or_none(output_dir)
        saved = os.path.getmtime(os.path.join(checkpoint, "trainer_state.json")) if checkpoint else started
        if saved > started:
            wall.append(round(saved - started, 1))
            with open(wall_file, "w") as f:
                json.dump(wall, f)
        os.remove(piece_file)
    return wall


def on_gpu(preset: Preset) -> bool:
    """Paper-scale presets train on the GPU when there is one; every other run on the CPU."""
    return preset.paper_scale and torch.cuda.is_available()


def script_arguments(name: str, preset: Preset, output_dir: str, precision: str, trained: bool = False,
                     max_train_seconds: float | None = None) -> list[str]:
    """The example script's command line for this preset; once `trained`, one that evaluates the trained model."""
    model = ["--model_name_or_path", output_dir] if trained else [
        "--config_name", os.path.relpath(os.path.join(REPO_ROOT, preset.config)),
        "--config_overrides", preset.overrides,
    ]
    args = [
        *model,
        "--dataset_name", preset.dataset,
        *(["--dataset_config_name", preset.dataset_config] if preset.dataset_config else []),
        *(["--dataset_param", *preset.dataset_params] if preset.dataset_params else []),
        "--output_dir", output_dir,
        *([] if trained else ["--do_train"]), "--do_eval",
        *([] if on_gpu(preset) else ["--use_cpu"]),
        "--seed", str(preset.seed), "--dataloader_num_workers", "0",
        "--eval_strategy", "steps", "--save_strategy", "steps", "--save_total_limit", "2",
        "--logging_steps", "100", "--per_device_eval_batch_size", "256", "--report_to", "tensorboard",
        *preset.training,
    ]
    if preset.script == "classification":
        args += ["--load_best_model_at_end", "--metric_for_best_model", "accuracy"]
    if precision == "bf16" and not trained:  # a trained model is evaluated again in fp32, as a user runs it
        args.append("--bf16")
    if max_train_seconds and not trained:
        args += ["--max_train_seconds", str(max_train_seconds)]
    return args


def training_finished(output_dir: str, preset: Preset) -> bool:
    """True once the example script has finished training in `output_dir` (it writes trainer_state.json there at the
    end; checkpoints hold their own). Resuming from the final checkpoint would train one step more than asked."""
    state_file = os.path.join(output_dir, "trainer_state.json")
    if not os.path.exists(state_file):
        return False
    with open(state_file) as f:
        state = json.load(f)
    training = preset.training_flags()
    if "--max_steps" in training:
        return state["global_step"] >= int(training["--max_steps"][0])
    return state["epoch"] >= float(training["--num_train_epochs"][0]) - 1e-6


def learning_curve(output_dir: str) -> list[dict]:
    """Training loss and in-training evaluation accuracy (overall, per difficulty) by step, from the Trainer's state."""
    state_file = os.path.join(output_dir, "trainer_state.json")
    if not os.path.exists(state_file):
        return []
    with open(state_file) as f:
        history = json.load(f)["log_history"]
    def kept(key):  # the loss, the learning rate, the evaluation accuracy overall and per difficulty
        return key in ("loss", "learning_rate") or key.startswith(("eval_accuracy", "eval_sequence_accuracy"))

    return [{"step": h["step"], **{k: v for k, v in h.items() if kept(k)}} for h in history if any(map(kept, h))]


def train_range(preset: Preset) -> tuple[int, int]:
    from lengthgen.data.export import train_difficulties

    return train_difficulties(preset.dataset, preset.dataset_config, dict(parse_param(p) for p in preset.dataset_params))


def plot(name: str, result: dict, baseline: dict | None, path: str):
    fig, ax = plt.subplots(figsize=(6.4, 4))
    lo, hi = result["train_range"]
    ax.axvspan(lo - 0.5, hi + 0.5, color="0.9", label=f"training range ({lo}-{hi})")
    for run, style in ((result, "o-"), (baseline, "s--")):
        if run is None:
            continue
        # the splits' difficulties never overlap (generation asserts it): one line through all of them
        points = sorted((int(d), acc) for table in run["accuracy"].values() for d, acc in table.items() if d != "all")
        ax.plot([p[0] for p in points], [p[1] for p in points], style, label=run["name"])
    steps_table = result.get("num_steps_table") or {}
    # the table of the model the run saved repeats its trained number of steps; a checkpoint's does not
    checkpoint = steps_table.get("model", "saved") != "saved"
    first = 0 if checkpoint else 1
    for num_steps, color in zip(NUM_STEPS[first:], ("tab:orange", "tab:green", "tab:purple", "tab:brown")[first:]):
        points = sorted((int(d), acc) for tables in steps_table.get("accuracy", {}).values()
                        for d, acc in tables.get(str(num_steps), {}).items() if d != "all")
        if points:
            model = f"{steps_table['model']} in fp32" if checkpoint else result["name"]
            ax.plot(*zip(*points), ".:", color=color, label=f"{model}, {num_steps} steps")
    for table in result["paper"].values():
        paper_points = sorted((int(d), acc) for d, acc in table.items() if d != "all")
        if paper_points:
            ax.plot(*zip(*paper_points), "k^:", label="paper")
    ax.set_xlabel("depth" if result["task"]["dataset"] != "nsp_inductive" else "digits")
    ax.set_ylabel("accuracy")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title(f"{name} ({result['reference']})")
    ax.legend(loc="lower left", fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def saved_result(results_dir: str, name: str | None) -> dict | None:
    """A run's results JSON in `results_dir`, or None when that run has not been reproduced yet."""
    path = os.path.join(results_dir, f"{name}.json")
    if name is None or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def reproduce(name: str, output_root: str, precision: str | None = None, results_dir: str = RESULTS_DIR,
              max_train_seconds: float | None = None, verbose: bool = False) -> dict:
    """Train (or resume) and evaluate preset `name`, write its results JSON and plot. With `max_train_seconds`, training
    stops before that budget with a checkpoint, and the results are those of the model so far (`finished`: false)."""
    preset = PRESETS[name]
    device = "cuda" if on_gpu(preset) else "cpu"
    precision = precision or ("auto" if device == "cuda" else preset.cpu_precision)
    if precision == "auto":
        precision = auto_precision(device)
    output_dir = os.path.join(output_root, name)
    trained = training_finished(output_dir, preset)
    argv = script_arguments(name, preset, output_dir, precision, trained, max_train_seconds)
    script = os.path.join(REPO_ROOT, "examples", f"run_{preset.script}.py")
    wall = training_wall_seconds(output_dir)  # the training sessions' wall time, resumptions included
    piece_file = os.path.join(output_dir, PIECE_FILE)
    start = time.time()
    if not trained:
        os.makedirs(output_dir, exist_ok=True)
        with open(piece_file, "w") as f:
            json.dump({"started": start}, f)
    # the script's printout goes to the log beside the run, its progress bar to the terminal
    metrics = run_script(script, argv, os.path.join(output_root, f"{name}.log"), torch.get_num_threads(), verbose)
    if not trained:
        wall.append(time.time() - start)
        with open(os.path.join(output_dir, WALL_FILE), "w") as f:
            json.dump(wall, f)
        os.remove(piece_file)
    with open(os.path.join(output_dir, "config.json")) as f:
        model_config = json.load(f)
    with open(os.path.join(output_dir, "trainer_state.json")) as f:
        state = json.load(f)

    accuracy = accuracy_tables(metrics)
    target = None
    if preset.target:
        split, difficulty, goal = preset.target
        reached = accuracy.get(split, {}).get(difficulty)
        target = {"split": split, "difficulty": difficulty, "accuracy": goal, "reached": reached,
                  "met": reached is not None and reached >= goal}
    result = {
        "name": name,
        "reference": preset.reference,
        "command": f"python benchmarks/reproduce.py {name}",
        "script": f"examples/run_{preset.script}.py",
        "script_arguments": script_arguments(name, preset, output_dir, precision),
        "task": {"dataset": preset.dataset, "config": preset.dataset_config, "params": preset.dataset_params},
        "train_range": list(train_range(preset)),
        "model_config": model_config,
        "precision": precision,
        "evaluation_precision": "fp32" if trained else precision,
        "training": {
            "steps": state["global_step"],
            "epochs": state.get("epoch"),
            "wall_seconds": round(sum(wall), 1),
            "best_checkpoint": state.get("best_model_checkpoint"),
            "finished": training_finished(output_dir, preset),
        },
        "hardware": hardware(),
        "accuracy": accuracy,
        "target": target,
        "paper": preset.paper,
        "differences_from_paper": preset.differences,
        "learning_curve": learning_curve(output_dir),
        "baseline": None,
    }
    previous = saved_result(results_dir, name)
    if previous and "num_steps_table" in previous and previous["training"]["steps"] == state["global_step"]:
        result["num_steps_table"] = previous["num_steps_table"]  # evaluated again: the same checkpoint's table
    baseline = saved_result(results_dir, preset.baseline)
    os.makedirs(results_dir, exist_ok=True)
    if baseline:  # each run of the pair carries the other's numbers, whichever finished first
        result["baseline"] = {"name": preset.baseline, "accuracy": baseline["accuracy"]}
        baseline["baseline"] = {"name": name, "accuracy": accuracy}
        with open(os.path.join(results_dir, f"{preset.baseline}.json"), "w") as f:
            json.dump(baseline, f, indent=2)
        plot(preset.baseline, baseline, result, os.path.join(results_dir, f"{preset.baseline}.png"))
    with open(os.path.join(results_dir, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    plot(name, result, baseline, os.path.join(results_dir, f"{name}.png"))
    # what lengthgen-release puts in the model folder: the plot, and this command beside the example script's
    shutil.copy(os.path.join(results_dir, f"{name}.png"), os.path.join(output_dir, PLOT))
    with open(os.path.join(output_dir, RUN_RECORD)) as f:
        record = json.load(f)
    with open(os.path.join(output_dir, RUN_RECORD), "w") as f:
        json.dump({**record, "reproduce_command": result["command"]}, f, indent=2)
    return result


@torch.no_grad()
def num_steps_table(name: str, output_root: str, results_dir: str = RESULTS_DIR, steps=NUM_STEPS,
                    last_checkpoint: bool = False) -> dict:
    """Accuracy of a trained NDR against the number of steps of the shared layer, on the task's validation and test
    splits and on problems deeper than any split (the preset's `deeper` test split, generated by the builder); {split: {steps:
    {"all": acc, depth: acc}}}, in fp32, also stored in its results JSON. The model is the one the run saved (its best
    checkpoint by validation, where it keeps one) or, with `last_checkpoint`, its last checkpoint: the model at the end
    of a piece of training, such as one brought back from a GPU."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import lengthgen.modeling  # noqa: F401  (the NDR in this checkout, not the code copied into the output)
    from lengthgen.data.export import load_splits
    from lengthgen.training.models import predict_classes

    preset = PRESETS[name]
    if not preset.deeper:
        raise ValueError(f"{name} has no deeper test split (only NDR presets do).")
    output_dir = os.path.join(output_root, name)
    result_file = os.path.join(results_dir, f"{name}.json")
    if not os.path.exists(result_file):  # the table goes into the run's results JSON: say so before evaluating
        raise UsageError(f"{name}: no results JSON {result_file} to add the table to (run the preset, or copy the "
                         "piece's JSON there)")
    params = dict(parse_param(p) for p in preset.dataset_params)
    model_dir = output_dir
    if last_checkpoint:
        model_dir = get_last_checkpoint_or_none(output_dir)
        if model_dir is None:
            raise UsageError(f"{name}: no checkpoint in {output_dir} (restore a piece with --unpack-from)")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    table = {}
    splits = load_splits(preset.dataset, preset.dataset_config, params)
    deeper = load_splits(preset.dataset, preset.dataset_config, {**params, **preset.deeper})["test"]
    for split, rows in (("validation", splits["validation"]), ("test", splits["test"]), ("deeper", deeper)):
        labels = torch.tensor([model.config.label2id[t] for t in rows["target"]])
        depths = torch.tensor(rows["difficulty"])
        for num_steps in steps:
            predicted = predict_classes(model, tokenizer, rows["input"], num_steps=num_steps)
            correct = (predicted == labels).float()
            table.setdefault(split, {})[str(num_steps)] = {
                "all": correct.mean().item(), **{str(int(d)): correct[depths == d].mean().item() for d in depths.unique()}
            }
            print(f"{name} {split} num_steps {num_steps}: "
                  + " ".join(f"{k} {v:.3f}" for k, v in table[split][str(num_steps)].items()))
    with open(result_file) as f:
        result = json.load(f)
    result["num_steps_table"] = {"deeper_split": preset.deeper, "trained_steps": model.config.num_layers,
                                 "model": os.path.basename(model_dir) if last_checkpoint else "saved",
                                 "precision": "fp32", "accuracy": table}
    with open(result_file, "w") as f:
        json.dump(result, f, indent=2)
    plot(name, result, saved_result(results_dir, preset.baseline), os.path.join(results_dir, f"{name}.png"))
    shutil.copy(os.path.join(results_dir, f"{name}.png"), os.path.join(output_dir, PLOT))
    return table


def results_table(results_dir: str = RESULTS_DIR) -> str:
    """Markdown: one row per preset's results JSON, the measured accuracy next to the paper's, per split (other
    JSONs in the folder, such as the recurrent-bias study's, are not reproduction runs)."""
    lines = [
        "| run | reference | split | measured | paper | baseline | steps | wall | target | trained on |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for file in sorted(os.listdir(results_dir)):
        if not file.endswith(".json") or file[: -len(".json")] not in PRESETS:
            continue
        with open(os.path.join(results_dir, file)) as f:
            r = json.load(f)
        base = (r.get("baseline") or {}).get("accuracy", {})
        trained_on_gpu = r["hardware"].get("gpu") and "--use_cpu" not in r["script_arguments"]
        device = r["hardware"]["gpu"] if trained_on_gpu else f"{r['hardware']['cpu'].replace('(R)', '')} ({r['hardware']['cpu_capability']})"
        where = f"{device}, {r['precision']}"
        for split, table in r["accuracy"].items():
            if split == "train":
                continue
            target = r["target"]
            for key in [k for k in table if k != "all"] + ["all"]:
                paper = r["paper"].get(split, {}).get(key)
                is_target = bool(target) and (target["split"], target["difficulty"]) == (split, key)
                if paper is None and key != "all" and not is_target:
                    continue
                mark = "" if target else "baseline"
                if is_target:
                    mark = f">= {target['accuracy']:.2f}: " + ("met" if target["met"] else "**missed**")
                lines.append(
                    f"| {r['name']} | {r['reference']} | {split} {'' if key == 'all' else key} | "
                    f"{table[key]:.3f} | {'' if paper is None else f'{paper:.2f}'} | "
                    f"{'' if key not in base.get(split, {}) else f'{base[split][key]:.3f}'} | "
                    f"{r['training']['steps']} | {r['training']['wall_seconds'] / 60:.0f} min | {mark} | {where} |"
                )
    return "\n".join(lines)


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help=f"presets: {', '.join(PRESETS)}")
    parser.add_argument("--list", action="store_true", help="list the presets")
    parser.add_argument("--table", action="store_true", help="print the Markdown table of RESULTS_DIR/*.json")
    parser.add_argument("--output-root", default=os.path.join(REPO_ROOT, "outputs", "reproduce"),
                        help="the runs' folders (checkpoints, logs)")
    parser.add_argument("--results-dir", default=RESULTS_DIR,
                        help="the results JSON and plots (default docs/results/: the published ones; a scratch "
                             "folder for a trial run)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"],
                        help="default: the preset's (auto = bf16 where the device has native bf16, else fp32)")
    parser.add_argument("--num-steps-table", nargs="?", const="saved", choices=["saved", "last-checkpoint"],
                        help=f"after training, NDR accuracy on deeper problems at num_steps {NUM_STEPS} in fp32 (NDR "
                             "presets), of the model the run saved; 'last-checkpoint': of its last checkpoint, without "
                             "training (a piece brought back from a GPU, restored with --unpack-from)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (two runs at once: 1 each)")
    parser.add_argument("--verbose", action="store_true",
                        help="print the example script's output here instead of OUTPUT_ROOT/NAME.log")
    parser.add_argument("--max-train-seconds", type=float, default=None,
                        help="wall-clock budget of this piece of training: stop before it with a checkpoint")
    parser.add_argument("--pack-to", metavar="DIR",
                        help="afterwards, write the last checkpoint as at most 8 files of at most 16 MiB in DIR")
    parser.add_argument("--unpack-from", metavar="DIR",
                        help="first, restore the checkpoint --pack-to wrote in DIR (unless the run's own last "
                             "checkpoint is at its step or later)")
    args = parser.parse_args(argv)
    if (args.pack_to or args.unpack_from) and len(args.names) != 1:
        parser.error("--pack-to and --unpack-from take exactly one preset name")
    if args.num_steps_table == "last-checkpoint" and (args.max_train_seconds or args.pack_to):
        raise UsageError("--num-steps-table last-checkpoint evaluates without training: it takes no "
                         "--max-train-seconds or --pack-to")
    check_positive({"--threads": args.threads, "--max-train-seconds": args.max_train_seconds})
    if args.unpack_from and not os.path.isdir(args.unpack_from):
        raise UsageError(f"--unpack-from: no such directory: {args.unpack_from}")
    unknown = [n for n in args.names if n not in PRESETS]
    if unknown:
        parser.error(f"unknown preset(s) {unknown}; choose from {', '.join(PRESETS)}")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.list:
        for name, preset in PRESETS.items():
            print(f"{name:<28} {preset.reference:<20} paper {json.dumps(preset.paper)}")
    if args.table:
        print(results_table(args.results_dir))
    for name in args.names:
        output_dir = os.path.join(args.output_root, name)
        if args.unpack_from:
            restored = unpack_unless_behind(args.unpack_from, output_dir)
            print(f"restored {restored}" if restored else
                  f"kept {get_last_checkpoint_or_none(output_dir)}: not behind the piece in {args.unpack_from}")
        if args.num_steps_table == "last-checkpoint":
            num_steps_table(name, args.output_root, args.results_dir, last_checkpoint=True)
            continue
        result = reproduce(name, args.output_root, args.precision, args.results_dir,
                           max_train_seconds=args.max_train_seconds, verbose=args.verbose)
        if args.pack_to:
            # the run record goes with the piece: the folder it is unpacked into evaluates and releases as this run
            records = [os.path.join(output_dir, WALL_FILE), os.path.join(output_dir, RUN_RECORD)]
            parts = pack_checkpoint(get_last_checkpoint_or_none(output_dir), args.pack_to, extra_files=records)
            print(f"packed into {len(parts)} file(s): {', '.join(parts)}")
        print(json.dumps({"name": name, "accuracy": result["accuracy"], "target": result["target"]}, indent=1))
        if args.num_steps_table and PRESETS[name].deeper:
            num_steps_table(name, args.output_root, args.results_dir)


if __name__ == "__main__":
    run_command(main, "reproduce.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
