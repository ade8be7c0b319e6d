"""One cell of the leaderboard: a (model, task, seed) trained with the common budget and scored on every split."""

import math
import statistics
import tempfile
import time
from dataclasses import dataclass

import numpy as np
import torch

from lengthgen.training.hardware import hardware

from .encoding import accuracy_by_difficulty, encode, task_tokenizer
from .models import build_model, position_limit
from .tasks import Task

TRAIN_SAMPLE = 512  # training examples evaluated for the fit column


@dataclass
class Budget:
    max_steps: int = 2_000
    batch_size: int = 32
    learning_rate: float = 5e-4
    warmup_ratio: float = 0.1
    eval_batch_size: int = 64
    threads: int | None = None


def cell_name(model: str, task: str, seed: int) -> str:
    safe = lambda text: text.replace("hf:", "hf-").replace("/", "-").replace(":", "-")  # noqa: E731
    return f"{safe(model)}__{safe(task)}__seed{seed}"


@dataclass
class PreparedTask:
    """A task's splits encoded for every model: what one cell reads."""

    task: Task
    tokenizer: object
    train: object  # datasets.Dataset: input_ids, labels
    eval_sets: dict  # split -> datasets.Dataset: input_ids, labels, difficulty; "train_sample" is the fit
    train_difficulties: list[int]
    longest: int  # tokens of the longest example a model must take


def prepare_task(task: Task, splits=None) -> PreparedTask:
    splits = splits if splits is not None else task.load()
    if "train" not in splits or len(splits) < 2:
        raise ValueError(f"Task {task.name!r} needs a 'train' split and another to evaluate; it has {sorted(splits)}.")
    tokenizer = task_tokenizer(splits)
    sample = splits["train"].shuffle(seed=0).select(range(min(TRAIN_SAMPLE, len(splits["train"]))))
    eval_sets = {"train_sample": encode(sample, tokenizer)}
    eval_sets.update({name: encode(dataset, tokenizer) for name, dataset in splits.items() if name != "train"})
    train = encode(splits["train"], tokenizer)
    longest = max(max(len(ids) for ids in dataset["input_ids"]) for dataset in [train, *eval_sets.values()])
    return PreparedTask(task, tokenizer, train, eval_sets, sorted(set(splits["train"]["difficulty"])), longest)


def check_model_takes_task(model_name: str, prepared: PreparedTask) -> None:
    """ValueError naming the problem when the model cannot take the task's longest example (before any training)."""
    vocab_size = len(prepared.tokenizer)
    model = build_model(model_name, vocab_size, prepared.tokenizer.pad_token_id, seed=0)
    longest, name = prepared.longest, prepared.task.name
    limit = position_limit(model)
    if limit is not None and longest > limit:
        raise ValueError(
            f"Model {model_name!r} cannot take task {name!r}: its position table holds {limit} positions and the "
            f"task's longest example is {longest} tokens (input, separator and answer slots)."
        )
    model.eval()
    try:
        with torch.no_grad():
            ids = torch.full((1, longest), prepared.tokenizer.mask_token_id)
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    except Exception as error:
        raise ValueError(
            f"Model {model_name!r} cannot take task {name!r} (vocabulary {vocab_size} tokens, longest example "
            f"{longest} tokens): {type(error).__name__}: {error}"
        ) from error


def top_label(logits, labels):
    """Per position the predicted token and its probability (what accuracy and calibration need of the logits)."""
    return torch.stack([logits.argmax(-1).to(logits.dtype), logits.softmax(-1).amax(-1)], dim=-1)


def run_cell(model_name: str, prepared: PreparedTask, seed: int, budget: Budget) -> dict:
    """Train `model_name` on the task's train split and evaluate every other split; the cell's results dict."""
    with tempfile.TemporaryDirectory() as work_dir:  # Trainer wants an output folder; nothing in it is kept
        return _run_cell(model_name, prepared, seed, budget, work_dir)


def _run_cell(model_name: str, prepared: PreparedTask, seed: int, budget: Budget, work_dir: str) -> dict:
    import transformers
    from transformers import DataCollatorForTokenClassification, PrinterCallback, Trainer, TrainingArguments, set_seed

    set_seed(seed)
    task, tokenizer = prepared.task, prepared.tokenizer
    model = build_model(model_name, len(tokenizer), tokenizer.pad_token_id, seed)
    args = TrainingArguments(
        output_dir=work_dir,
        max_steps=budget.max_steps,
        per_device_train_batch_size=budget.batch_size,
        per_device_eval_batch_size=budget.eval_batch_size,
        learning_rate=budget.learning_rate,
        warmup_steps=math.ceil(budget.warmup_ratio * budget.max_steps),
        weight_decay=0.01,
        max_grad_norm=1.0,
        seed=seed,
        data_seed=seed,
        save_strategy="no",
        report_to=[],
        logging_steps=max(1, budget.max_steps // 20),
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False,
    )
    transformers.utils.logging.set_verbosity_warning()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=prepared.train.remove_columns("difficulty"),
        data_collator=DataCollatorForTokenClassification(tokenizer),  # pads inputs, labels with -100
        preprocess_logits_for_metrics=top_label,
    )
    trainer.remove_callback(PrinterCallback)  # the losses go to the JSON, not to the terminal
    start = time.perf_counter()
    train_result = trainer.train()
    train_seconds = time.perf_counter() - start
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]

    start = time.perf_counter()
    by_split = {}
    for name, dataset in prepared.eval_sets.items():
        ordered = dataset.select(np.argsort(dataset["difficulty"], kind="stable"))  # similar lengths share a batch
        output = trainer.predict(ordered.remove_columns("difficulty"))
        predicted, confidence = output.predictions[..., 0].astype(np.int64), output.predictions[..., 1]
        accuracies = accuracy_by_difficulty(predicted, output.label_ids, ordered["difficulty"], confidence)
        by_split[name] = {str(d): values for d, values in accuracies.items()}
    eval_seconds = time.perf_counter() - start

    top = max(prepared.train_difficulties)
    longer = {int(d): v[task.metric] for split in by_split.values() for d, v in split.items() if int(d) > top}
    return {
        "model": model_name,
        "task": task.name,
        "seed": seed,
        "status": "ok",
        "metric": task.metric,
        "score": statistics.fmean(longer.values()) if longer else None,
        "score_difficulties": sorted(longer),
        "train_difficulties": [min(prepared.train_difficulties), top],
        "accuracy": by_split,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_loss_first_last": [losses[0], losses[-1]] if losses else None,
        "train_steps": train_result.global_step,
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
        "budget": vars(budget),
        "data_parameters": {k: list(v) if isinstance(v, tuple) else v for k, v in task.params.items()},
        "threads": torch.get_num_threads(),
        "hardware": hardware(),
    }
