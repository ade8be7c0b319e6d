"""One cell of the leaderboard: a (model, task, seed) trained with the common budget and scored on every split,
through the experiment runner with the answer-slots head (lengthgen.training.models)."""

import statistics
import tempfile
import time
from dataclasses import MISSING, dataclass

import torch

from lengthgen.cli import UsageError
from lengthgen.data.answer_slots import answer_layout
from lengthgen.presets import load_table
from lengthgen.training import models
from lengthgen.training.arguments import ModelArguments, TrainingArguments
from lengthgen.training.runner import run_experiment
from lengthgen.training.spec import ExperimentSpec

from .models import model_section
from .tables import file_safe, held_out
from .tasks import Task

_TABLE = load_table("leaderboard")
TRAINING = _TABLE["_training"]  # the budget of every cell (presets/leaderboard.yaml)
TRAIN_SAMPLE = _TABLE["_train_sample"]  # training examples evaluated for the fit column


def cell_name(model: str, task: str, seed: int, learning_rate: float | None = None) -> str:
    """`MODEL__TASK__seedN`, or `MODEL__TASK__lrRATE__seedN` in a sweep of learning rates."""
    rate = f"__lr{learning_rate:g}" if learning_rate is not None else ""
    return f"{file_safe(model)}__{file_safe(task)}{rate}__seed{seed}"


def cell_spec(model: str, task: Task, seed: int, training: dict, output_dir: str) -> ExperimentSpec:
    """The spec of one cell: the model's section, the task's data, the budget with the cell's seed (also the data
    order's), the loss logged 20 times."""
    budget = {**TRAINING, **training}
    return ExperimentSpec.from_dict({
        "model": model_section(model),
        "data": {"dataset_name": task.dataset, "dataset_config_name": task.config, "dataset_param": dict(task.params),
                 "eval_train_samples": TRAIN_SAMPLE},
        "training": {**budget, "seed": seed, "data_seed": seed, "output_dir": output_dir,
                     "logging_steps": max(1, budget["max_steps"] // 20)},
    }, source=f"cell {model} / {task.name}")


LEGACY_BUDGET_KEYS = {"batch_size": "per_device_train_batch_size", "eval_batch_size": "per_device_eval_batch_size",
                      "warmup_ratio": "warmup_steps"}  # the names of cells written by earlier versions


def current_names(budget: dict) -> dict:
    """A recorded budget with the fields of earlier versions under today's names."""
    return {LEGACY_BUDGET_KEYS.get(key, key): value for key, value in budget.items()}


def budget_value(budget: dict, key: str):
    """A recorded budget's `key` (under today's name): the value it names, or, where it names none (a cell records the
    fields its run set), the Trainer's default that the run had."""
    budget = current_names(budget)
    if key in budget:
        return budget[key]
    field = TrainingArguments.__dataclass_fields__.get(key)
    if field is None:
        return None
    if field.default is MISSING and field.default_factory is not MISSING:
        return field.default_factory()
    return field.default


def recorded_budget(spec: ExperimentSpec) -> dict:
    """The budget a cell records: its spec's training section without what differs from cell to cell by design."""
    return {key: value for key, value in spec.to_dict()["training"].items()
            if key not in ("seed", "data_seed", "logging_steps", "do_train", "do_eval", "output_dir")}


def data_parameters(params: dict) -> dict:
    """A task's generating parameters as a cell records them (JSON lists for tuples)."""
    return {key: list(value) if isinstance(value, tuple) else value for key, value in params.items()}


@dataclass
class PreparedTask:
    """A task's splits, generated once for every model, and the length of its longest example as the models read it."""

    task: Task
    splits: object  # datasets.DatasetDict
    train_difficulties: list[int]
    longest: int  # tokens of the longest example a model must take: [CLS], input, separator, answer slots, [SEP]
    tokenizer: object  # the answer-slots tokenizer over the task's alphabet (built once for every model's check)


def prepare_task(task: Task) -> PreparedTask:
    splits = task.load()
    if "train" not in splits or len(splits) < 2:
        raise UsageError(f"Task {task.name!r} needs a 'train' split and another to evaluate; it has {sorted(splits)}.")
    longest = max(len(answer_layout(i, t)[0]) + 2 for dataset in splits.values()
                  for i, t in zip(dataset["input"], dataset["target"]))
    return PreparedTask(task, splits, sorted(set(splits["train"]["difficulty"])), longest,
                        models.answer_slots_tokenizer(splits))


def check_model_takes_task(model_name: str, prepared: PreparedTask) -> None:
    """UsageError naming the problem when the model cannot take the task's longest example (before any training)."""
    tokenizer, longest, name = prepared.tokenizer, prepared.longest, prepared.task.name
    torch.manual_seed(0)
    try:
        model = models.load_answer_reader(ModelArguments(**model_section(model_name)), tokenizer)
    except UsageError:
        raise
    except Exception as error:
        raise UsageError(f"Model {model_name!r} could not be built for task {name!r} (vocabulary {len(tokenizer)} "
                         f"tokens): {type(error).__name__}: {error}") from error
    limit = models.position_limit(model)
    if limit is not None and longest > limit:
        raise UsageError(
            f"Model {model_name!r} cannot take task {name!r}: its position table holds {limit} positions and the "
            f"task's longest example is {longest} tokens (input, separator and answer slots)."
        )
    model.eval()
    try:
        with torch.no_grad():
            ids = torch.full((1, longest), tokenizer.mask_token_id)
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    except Exception as error:
        raise UsageError(
            f"Model {model_name!r} cannot take task {name!r} (vocabulary {len(tokenizer)} tokens, longest example "
            f"{longest} tokens): {type(error).__name__}: {error}"
        ) from error


def run_cell(model_name: str, prepared: PreparedTask, seed: int, training: dict) -> dict:
    """Train `model_name` on the task's train split and evaluate every other split; the cell's results dict."""
    task = prepared.task
    cpu_start = time.process_time()  # the cell's processor time: its cost even when other work shares the machine
    with tempfile.TemporaryDirectory() as work_dir:  # Trainer wants an output folder; nothing in it is kept
        spec = cell_spec(model_name, task, seed, training, work_dir)
        result = run_experiment(spec, splits=prepared.splits, quiet=True, save=False)
    by_split = {name: {d: entry for d, entry in table.items() if d != "all"} for name, table in result.scores.items()}
    top = max(prepared.train_difficulties)
    longer = {d: value for d, value in held_out(by_split, task.metric).items() if d > top}
    return {
        "model": model_name,
        "task": task.name,
        "seed": seed,
        "learning_rate": spec.training.learning_rate,
        "status": "ok",
        "metric": task.metric,
        "score": statistics.fmean(longer.values()) if longer else None,
        "score_difficulties": sorted(longer),
        "train_difficulties": [min(prepared.train_difficulties), top],
        "accuracy": by_split,
        "parameters": result.parameters,
        "train_loss_first_last": result.training["loss_first_last"],
        "train_steps": result.training["steps"],
        "train_seconds": result.training["seconds"],
        "eval_seconds": result.evaluation_seconds,
        "cpu_seconds": round(time.process_time() - cpu_start, 1),
        "budget": recorded_budget(spec),
        "data_parameters": data_parameters(task.params),
        "threads": torch.get_num_threads(),
        "hardware": result.hardware,
        "evaluation_order": "rows",  # each answer scored at its own string's difficulty (tables.per_length)
        "position_draws": "per_row",  # randomized positions drawn over a row's own tokens (tables.positions_per_row)
    }


__all__ = ["PreparedTask", "TRAINING", "TRAIN_SAMPLE", "cell_name", "cell_spec", "check_model_takes_task",
           "budget_value", "current_names", "data_parameters", "prepare_task", "recorded_budget", "run_cell"]
