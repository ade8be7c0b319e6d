"""One reproduction preset, run: train (or resume), evaluate, and write its results JSON and plot.

Each preset (presets/reproduction.yaml) is one model on one task: a spec that the experiment runner trains and
evaluates, and the paper's numbers beside it. `reproduce(name)` writes

* `RESULTS_DIR/<name>.json`: the spec, the model config, training steps and wall time, hardware and precision,
  accuracy per depth or length on every split, the learning curve, the paper's numbers and the baseline's beside
  them, the target and whether it was met, what differs from the paper;
* `RESULTS_DIR/<name>.png`: accuracy against depth or length, the baseline and the paper beside it.

A run that is interrupted resumes from its last checkpoint when it is asked for again; a finished run is only
evaluated again, in fp32 (the released weights are fp32: the numbers are those a user gets). Precision `auto` trains
with bf16 autocast where the device multiplies bf16 natively (a CUDA GPU with bf16; a CPU with AVX-512 BF16 or AMX)
and in fp32 elsewhere. Paper-scale presets train on the GPU when there is one, every other run on the CPU.

In pieces: `max_train_seconds` stops training before the budget with a checkpoint; `lengthgen.training.pieces` packs
it into files that travel to the next machine, where the run continues the same curve.
"""

import json
import os
import shutil
import time

import torch

from lengthgen.cli import UsageError
from lengthgen.data.export import train_difficulties
from lengthgen.plots import Curve, plot_accuracy
from lengthgen.training.hardware import auto_precision, hardware
from lengthgen.training.pieces import get_last_checkpoint_or_none, packed_archive, packed_file, packed_run_folder
from lengthgen.training.results import PLOT, RESULTS_FILE, written_whole
from lengthgen.training.runner import SPEC_FILE, recipe_differences, run_experiment
from lengthgen.training.spec import ExperimentSpec

from .presets import Preset, load_reproduction_presets

PRESETS = load_reproduction_presets()
NUM_STEPS = (14, 18, 24, 32)  # the NDR's steps in the num-steps table
WALL_FILE = "reproduce_wall_seconds.json"  # the training sessions' wall times, beside the checkpoints
PIECE_FILE = "reproduce_piece_started.json"  # the start of the training session under way (gone once it returns)


def preset(name: str) -> Preset:
    if name not in PRESETS:
        raise UsageError(f"Unknown preset {name!r}; choose from {', '.join(PRESETS)}.")
    return PRESETS[name]


def check_piece(name: str, parts_dir: str) -> None:
    """A UsageError unless the piece in `parts_dir` (`--unpack_from`) is one of preset `name`'s run: the model and
    data of the run record packed with it are the preset's, or, in a piece packed without one, the output folder its
    training arguments name is `name` or a preset of the same model and data. Also where its parts do not join into
    one archive."""
    try:
        archive = packed_archive(parts_dir)  # read and joined once
    except ValueError as error:
        raise UsageError(f"--unpack_from: {error}") from None
    record = packed_file(archive, SPEC_FILE) or packed_file(archive, RESULTS_FILE)
    folder = packed_run_folder(archive)
    if record:
        earlier = json.loads(record)
        differences = recipe_differences(earlier.get("spec", earlier), preset(name).experiment().to_dict())
        if differences:
            raise UsageError(f"--unpack_from {parts_dir} holds a piece of a run with another model or data than "
                             f"{name}: {'; '.join(differences)}.")
    elif folder is not None and folder != name and (folder not in PRESETS or recipe_differences(
            preset(folder).experiment().to_dict(), preset(name).experiment().to_dict())):
        # (a preset that goes on from another's piece, as the annealed ListOps runs do, has its model and data)
        raise UsageError(f"--unpack_from {parts_dir} holds a piece of the run {folder!r} (the output folder its "
                         f"training arguments name), not of {name!r}.")


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
            with written_whole(wall_file) as f:
                json.dump(wall, f)
        os.remove(piece_file)
    return wall


def on_gpu(run: Preset) -> bool:
    """Paper-scale presets train on the GPU when there is one; every other run on the CPU."""
    return run.paper_scale and torch.cuda.is_available()


def run_precision(run: Preset, asked: str | None) -> str:
    """fp32 or bf16: what was asked, else the preset's CPU precision (auto: bf16 where the device has native bf16)."""
    precision = asked or ("auto" if on_gpu(run) else run.cpu_precision)
    return auto_precision("cuda" if on_gpu(run) else "cpu") if precision == "auto" else precision


def training_finished(output_dir: str, run: Preset) -> bool:
    """True once training has finished in `output_dir` (the Trainer writes trainer_state.json there at the end;
    checkpoints hold their own). Resuming from the final checkpoint would train one step more than asked."""
    state_file = os.path.join(output_dir, "trainer_state.json")
    if not os.path.exists(state_file):
        return False
    with open(state_file) as f:
        state = json.load(f)
    training = run.experiment().training
    if training.max_steps > 0:
        return state["global_step"] >= training.max_steps
    return state["epoch"] >= training.num_train_epochs - 1e-6


def experiment(name: str, output_dir: str, precision: str, trained: bool = False,
               max_train_seconds: float | None = None):
    """The preset's spec for this machine: on the CPU unless it is a paper-scale run and there is a GPU, in bf16 when
    `precision` says so; once `trained`, a spec that evaluates the trained model again, in fp32."""
    run = preset(name)
    spec = run.experiment(output_dir)
    device = {"use_cpu": not on_gpu(run)}
    if trained:
        data = spec.to_dict()["data"]
        model = {"model_name_or_path": output_dir,
                 **({"num_steps": spec.model.num_steps} if spec.model.num_steps else {})}
        training = {key: value for key, value in spec.to_dict()["training"].items()
                    if key in ("per_device_eval_batch_size", "dataloader_num_workers", "report_to", "seed")}
        return ExperimentSpec.from_dict({"model": model, "data": data, "training": {
            **training, **device, "do_eval": True, "output_dir": output_dir}})
    return spec.replace(training={**device, "bf16": precision == "bf16", "output_dir": output_dir,
                                  **({"max_train_seconds": max_train_seconds} if max_train_seconds else {})})


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


def train_range(run: Preset) -> tuple[int, int]:
    data = run.experiment().data
    return train_difficulties(data.dataset_name, data.dataset_config_name, data.params)


def plot(name: str, result: dict, baseline: dict | None, path: str):
    """The run against depth or length, its baseline, its accuracy at other numbers of NDR steps and the paper's."""
    curves = []
    for run, style in ((result, "o-"), (baseline, "s--")):
        if run is not None:  # the splits' difficulties never overlap (generation asserts it): one line through all
            points = {d: acc for table in run["accuracy"].values() for d, acc in table.items() if d != "all"}
            if points:
                curves.append(Curve(run["name"], points, style))
    steps_table = result.get("num_steps_table") or {}
    checkpoint = steps_table.get("model", "saved") != "saved"  # the saved model's table repeats its trained steps
    colors = ("tab:orange", "tab:green", "tab:purple", "tab:brown")
    for num_steps, color in list(zip(NUM_STEPS, colors))[0 if checkpoint else 1:]:
        points = {d: acc for tables in steps_table.get("accuracy", {}).values()
                  for d, acc in tables.get(str(num_steps), {}).items() if d != "all"}
        if points:
            model = f"{steps_table['model']} in fp32" if checkpoint else result["name"]
            curves.append(Curve(f"{model}, {num_steps} steps", points, ".:", color))
    for table in result["paper"].values():
        if any(d != "all" for d in table):
            curves.append(Curve("paper", table, "k^:"))
    plot_accuracy(curves, path, train_range=tuple(result["train_range"]), title=f"{name} ({result['reference']})",
                  xlabel="digits" if result["task"]["dataset"] == "nsp_inductive" else "depth")


def saved_result(results_dir: str, name: str | None) -> dict | None:
    """A run's results JSON in `results_dir`, or None when that run has not been reproduced yet."""
    path = os.path.join(results_dir, f"{name}.json")
    if name is None or not os.path.exists(path):
        return None
    with open(path) as f:
        return json.load(f)


def reproduce(name: str, output_root: str, precision: str | None, results_dir: str,
              max_train_seconds: float | None = None, verbose: bool = False) -> dict:
    """Train (or resume, or only evaluate again once finished) one preset and write its results JSON and plot."""
    run = preset(name)
    precision = run_precision(run, precision)
    output_dir = os.path.join(output_root, name)
    trained = training_finished(output_dir, run)
    wall = training_wall_seconds(output_dir)  # the training sessions' wall time, resumptions included
    piece_file = os.path.join(output_dir, PIECE_FILE)
    start = time.time()
    if not trained:
        os.makedirs(output_dir, exist_ok=True)
        with written_whole(piece_file) as f:
            json.dump({"started": start}, f)
    spec = experiment(name, output_dir, precision, trained, max_train_seconds)
    outcome = run_experiment(spec, command=f"lengthgen reproduce {name}", quiet=not verbose)
    if not trained:
        wall.append(time.time() - start)
        with open(os.path.join(output_dir, WALL_FILE), "w") as f:
            json.dump(wall, f)
        os.remove(piece_file)
    with open(os.path.join(output_dir, "config.json")) as f:
        model_config = json.load(f)
    with open(os.path.join(output_dir, "trainer_state.json")) as f:
        state = json.load(f)

    # how the model was trained: the precision and machine of this call when it trains; for a finished run evaluated
    # again, the training's, from its run record, else from the results JSON written when it finished training
    trained_on = {"precision": precision, "hardware": hardware()}
    previous = saved_result(results_dir, name)
    if trained:
        source = outcome.trained_by or {}
        fallback = previous if previous and previous["training"]["steps"] == state["global_step"] else trained_on
        spec = source.get("spec")
        trained_in = ("bf16" if spec.get("training", {}).get("bf16") else "fp32") if spec else fallback["precision"]
        trained_on = {
            "precision": trained_in,
            "hardware": source.get("hardware") or fallback["hardware"],
        }
    accuracy = outcome.table()
    target = None
    if run.target:
        split, difficulty, goal = run.target
        reached = accuracy.get(split, {}).get(difficulty)
        target = {"split": split, "difficulty": difficulty, "accuracy": goal, "reached": reached,
                  "met": reached is not None and reached >= goal}
    data = run.experiment().data
    result = {
        "name": name,
        "reference": run.reference,
        "command": f"lengthgen reproduce {name}",
        "spec": run.experiment().to_dict(),
        "device": "cuda" if on_gpu(run) else "cpu",
        "task": {"dataset": data.dataset_name, "config": data.dataset_config_name, "params": data.dataset_param},
        "train_range": list(train_range(run)),
        "model_config": model_config,
        "precision": trained_on["precision"],
        "evaluation_precision": "fp32" if trained else precision,
        "training": {
            "steps": state["global_step"],
            "epochs": state.get("epoch"),
            "wall_seconds": round(sum(wall), 1),
            "best_checkpoint": state.get("best_model_checkpoint"),
            "finished": training_finished(output_dir, run),
        },
        "hardware": trained_on["hardware"],
        "accuracy": accuracy,
        "target": target,
        "paper": run.paper,
        "differences_from_paper": run.differences,
        "learning_curve": learning_curve(output_dir),
        "baseline": None,
    }
    if previous and "num_steps_table" in previous and previous["training"]["steps"] == state["global_step"]:
        result["num_steps_table"] = previous["num_steps_table"]  # evaluated again: the same checkpoint's table
    baseline = saved_result(results_dir, run.baseline)
    os.makedirs(results_dir, exist_ok=True)
    if baseline:  # each run of the pair carries the other's numbers, whichever finished first
        result["baseline"] = {"name": run.baseline, "accuracy": baseline["accuracy"]}
        baseline["baseline"] = {"name": name, "accuracy": accuracy}
        with open(os.path.join(results_dir, f"{run.baseline}.json"), "w") as f:
            json.dump(baseline, f, indent=2)
        plot(run.baseline, baseline, result, os.path.join(results_dir, f"{run.baseline}.png"))
    with open(os.path.join(results_dir, f"{name}.json"), "w") as f:
        json.dump(result, f, indent=2)
    plot(name, result, baseline, os.path.join(results_dir, f"{name}.png"))
    shutil.copy(os.path.join(results_dir, f"{name}.png"), os.path.join(output_dir, PLOT))  # the release folder's plot
    return result


@torch.no_grad()
def num_steps_table(name: str, output_root: str, results_dir: str, steps=NUM_STEPS,
                    last_checkpoint: bool = False) -> dict:
    """Accuracy of a trained NDR against the number of steps of its shared layer, on the task's validation and test
    splits and on problems deeper than any split (the preset's `deeper` test split, generated by the builder): {split:
    {steps: {"all": acc, depth: acc}}}, in fp32, also stored in its results JSON. The model is the one the run saved
    (its best checkpoint by validation, where it keeps one) or, with `last_checkpoint`, its last checkpoint: the model
    at the end of a piece of training, such as one brought back from a GPU."""
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    import lengthgen.modeling  # noqa: F401  (the NDR of this installation, not the code copied into the output)
    from lengthgen.data.export import load_splits
    from lengthgen.data.scoring import scores_by_difficulty
    from lengthgen.training.models import predict_classes

    run = preset(name)
    if not run.deeper:
        raise UsageError(f"{name} has no deeper test split (only NDR presets do).")
    output_dir = os.path.join(output_root, name)
    result_file = os.path.join(results_dir, f"{name}.json")
    if not os.path.exists(result_file):  # the table goes into the run's results JSON: say so before evaluating
        raise UsageError(f"{name}: no results JSON {result_file} to add the table to (run the preset, or copy the "
                         "piece's JSON there)")
    model_dir = output_dir
    if last_checkpoint:
        model_dir = get_last_checkpoint_or_none(output_dir)
        if model_dir is None:
            raise UsageError(f"{name}: no checkpoint in {output_dir} (restore a piece with --unpack_from)")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, dtype=torch.float32).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    data = run.experiment().data
    splits = load_splits(data.dataset_name, data.dataset_config_name, data.params)
    deeper = load_splits(data.dataset_name, data.dataset_config_name, {**data.params, **run.deeper})["test"]
    table = {}
    for split, rows in (("validation", splits["validation"]), ("test", splits["test"]), ("deeper", deeper)):
        labels = [model.config.label2id[t] for t in rows["target"]]
        for num_steps in steps:
            predicted = predict_classes(model, tokenizer, rows["input"], num_steps=num_steps).tolist()
            scores = scores_by_difficulty(predicted, labels, rows["difficulty"])
            table.setdefault(split, {})[str(num_steps)] = {
                "all": scores["all"]["accuracy"], **{str(d): s["accuracy"] for d, s in scores.items() if d != "all"}}
            print(f"{name} {split} num_steps {num_steps}: "
                  + " ".join(f"{k} {v:.3f}" for k, v in table[split][str(num_steps)].items()))
    with open(result_file) as f:
        result = json.load(f)
    result["num_steps_table"] = {"deeper_split": run.deeper, "trained_steps": model.config.num_layers,
                                 "model": os.path.basename(model_dir) if last_checkpoint else "saved",
                                 "precision": "fp32", "accuracy": table}
    with written_whole(result_file) as f:
        json.dump(result, f, indent=2)
    plot(name, result, saved_result(results_dir, run.baseline), os.path.join(results_dir, f"{name}.png"))
    if os.path.isdir(output_dir):
        shutil.copy(os.path.join(results_dir, f"{name}.png"), os.path.join(output_dir, PLOT))
    return table


def results_table(results_dir: str) -> str:
    """Markdown: one row per preset's results JSON, the measured accuracy next to the paper's, per split (other JSONs
    in the folder are not reproduction runs)."""
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
        hardware_ = r["hardware"]
        device = hardware_["gpu"] if r["device"] == "cuda" else \
            f"{hardware_['cpu'].replace('(R)', '')} ({hardware_['cpu_capability']})"
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


__all__ = ["NUM_STEPS", "PRESETS", "WALL_FILE", "check_piece", "num_steps_table", "preset", "reproduce",
           "results_table", "training_finished", "training_wall_seconds"]
