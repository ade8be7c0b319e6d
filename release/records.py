"""What an example script leaves in its output directory for lengthgen-release: the run record and the plot's name,
and the accuracy tables read back from its metrics."""

import json
import os
import shlex
import statistics
import sys

RUN_RECORD = "lengthgen_run.json"
PLOT = "accuracy.png"


def without_time_budget(argv: list[str]) -> tuple[list[str], float | None]:
    """`argv` without `--max_train_seconds` (a session's wall-clock budget, not part of the recipe) and that budget."""
    budget, rest = None, []
    arguments = iter(argv)
    for argument in arguments:
        if argument == "--max_train_seconds":
            budget = float(next(arguments))
        elif argument.startswith("--max_train_seconds="):
            budget = float(argument.partition("=")[2])
        else:
            rest.append(argument)
    return rest, budget


def record_run(output_dir: str, script: str, argv: list[str] | None, data_args, task: str, trainer=None):
    """Write `lengthgen_run.json` in an example script's output directory: how the model was trained, for the card.
    The command is recorded without its wall-clock budget; the `trainer` that trained says where training stopped and,
    with `--load_best_model_at_end`, which checkpoint's weights were kept."""
    argv, budget = without_time_budget(sys.argv[1:] if argv is None else argv)
    best = trainer.state.best_model_checkpoint if trainer and trainer.args.load_best_model_at_end else None
    record = {
        "command": f"python {script} {shlex.join(argv)}",
        "trained_steps": trainer.state.global_step if trainer else None,
        "best_step": int(best.rsplit("-", 1)[1]) if best else None,
        "max_train_seconds": budget,  # the last session's budget, when it had one
        "task": task,
        "dataset": data_args.dataset_name,
        "dataset_config": data_args.dataset_config_name,
        "dataset_params": list(data_args.dataset_param),
        "num_steps": getattr(data_args, "num_steps", None),  # the NDR's steps at evaluation
    }
    with open(os.path.join(output_dir, RUN_RECORD), "w") as f:
        json.dump(record, f, indent=2)


def record_evaluation(output_dir: str, trained_dir: str, script: str, argv: list[str] | None, data_args):
    """Write `lengthgen_run.json` for an evaluation-only run of the trained folder `trained_dir` (its own record, when
    it has one, plus this evaluation's command and number of NDR steps): the output directory then releases as that
    model with the numbers measured here. A Trainer checkpoint (`RUN/checkpoint-N`) takes its run's record."""
    source = os.path.join(trained_dir, RUN_RECORD)
    if not os.path.isfile(source) and os.path.basename(os.path.normpath(trained_dir)).startswith("checkpoint-"):
        source = os.path.join(os.path.dirname(os.path.normpath(trained_dir)), RUN_RECORD)
    if not os.path.isfile(source):
        return
    with open(source) as f:
        record = json.load(f)
    argv = sys.argv[1:] if argv is None else argv
    record.update(evaluation_command=f"python {script} {shlex.join(argv)}",
                  num_steps=getattr(data_args, "num_steps", None))
    with open(os.path.join(output_dir, RUN_RECORD), "w") as f:
        json.dump(record, f, indent=2)


def metric_tables(metrics: dict, stems: tuple[str, ...]) -> dict:
    """{split: {"all": value, difficulty: value}} from the example scripts' `eval_{split}{stem}[_dN]` metrics, the
    first of `stems` that a key holds counting (token-level metrics left out)."""
    tables = {}
    for key, value in metrics.items():
        if not key.startswith("eval_"):
            continue
        for stem in stems:
            split, found, rest = key[len("eval_"):].partition(stem)
            if found and "token" not in split:
                if rest == "":
                    tables.setdefault(split, {})["all"] = value
                elif rest.startswith("_d") and rest[2:].isdigit():
                    tables.setdefault(split, {})[rest[2:]] = value
                break
    return tables


def accuracy_tables(metrics: dict) -> dict:
    """Accuracy per split and difficulty: `eval_{split}_accuracy[_dN]` (run_classification) or
    `eval_{split}_sequence_accuracy[_dN]` (run_mlm, whole masked span exact)."""
    return metric_tables(metrics, ("_sequence_accuracy", "_accuracy"))


def calibration_tables(metrics: dict) -> dict:
    """Expected calibration error per split and difficulty: run_classification's `eval_{split}_ece[_dN]`."""
    return metric_tables(metrics, ("_ece",))


def spread_over_seeds(tables: list[dict]) -> dict:
    """{difficulty: {"mean", "std", "values"}} over several seeds' {difficulty: value} tables: the mean and the sample
    standard deviation (0 for one seed) of each difficulty's values, a difficulty missing from some seeds taken over
    the others."""
    spread = {}
    for difficulty in sorted({d for table in tables for d in table}):
        values = [table[difficulty] for table in tables if difficulty in table]
        spread[difficulty] = {"mean": statistics.fmean(values),
                              "std": statistics.stdev(values) if len(values) > 1 else 0.0, "values": values}
    return spread
