"""The one way lengthgen runs an experiment: a spec in, a trained model and typed per-difficulty results out.

    from lengthgen.training import ExperimentSpec, run_experiment
    spec = ExperimentSpec.from_yaml(open("spec.yaml").read())
    result = run_experiment(spec)              # trains with Trainer, then evaluates every split per difficulty
    result.table()["test"]                     # {"all": 0.98, "9": 0.99, "10": 0.97}

`lengthgen train`, the example scripts (`examples/run_classification.py`, `examples/run_mlm.py`), the reproduction
presets, the leaderboard's cells, the recurrent-bias study and distillation all call `run_experiment`.

The data: a lengthgen builder's splits (generated from the spec's parameters) or any dataset with `input`, `target`
and `difficulty` columns. Training uses the `train` split (resuming from the last checkpoint in the output folder);
evaluation every other split, each sorted by difficulty so that a batch holds examples of similar lengths, plus a
sample of training rows as `train` when `eval_train_samples` asks for one. Every evaluation is scored by
`lengthgen.data.scoring.scores_by_difficulty`. The Trainer logs `{prefix}_accuracy`, `_token_accuracy` (not for a
classifier, where it is the accuracy), `_ece`, each also per difficulty (`_accuracy_d9`), and for a masked LM the
negative log-likelihood of the masked tokens (`_nll`, `_bits_per_token`, `_perplexity`).

In the output folder: the model, tokenizer and Trainer state, `lengthgen_results.json` (the spec, the command and
the typed results: `ExperimentResult`), Trainer's `all_results.json`, TensorBoard logs under `runs/` and a model card.
"""

import dataclasses
import inspect
import json
import math
import os
import time

import numpy as np
import torch
from torch.utils.data import SequentialSampler
from transformers import (
    DataCollatorForTokenClassification,
    DataCollatorWithPadding,
    PrinterCallback,
    ProgressCallback,
    Trainer,
    TrainerCallback,
    set_seed,
)
from transformers.trainer_callback import TrainerState
from transformers.trainer_utils import TrainOutput, has_length

from lengthgen.cli import UsageError
from lengthgen.data.answer_slots import answer_end_token, encode_answer_slots
from lengthgen.data.export import load_splits
from lengthgen.data.scoring import scored_rows, scores_by_difficulty

from . import models
from .arguments import log_under_output_dir, time_budget
from .distillation import distillation_loss, teacher_logits
from .hardware import hardware
from .pieces import get_last_checkpoint_or_none
from .results import PAPERS, PIPELINE_TAGS, RESULTS_FILE, ExperimentResult, written_whole
from .sharding import save_full_model, shards_parameters
from .spec import ExperimentSpec


class ExperimentTrainer(Trainer):
    """Trainer with the distillation loss for batches that carry `teacher_logits` (`temperature` T,
    `distillation_weight` r), `num_steps`, when set, passed to the model at prediction (the NDR's and the Universal
    Transformer's steps at test time), and randomized position ids (`random_positions`) in training and, unless
    `randomized_positions_at_evaluation` is off, at prediction. An evaluation reads its rows in order (`Scorer` pairs
    the i-th prediction with the i-th row's difficulty), also when training batches are grouped by length."""

    def __init__(self, *args, temperature: float = 1.0, distillation_weight: float = 0.9,
                 randomized_positions: int | None = None, randomized_positions_at_evaluation: bool = True, **kwargs):
        super().__init__(*args, **kwargs)
        self.temperature, self.distillation_weight = temperature, distillation_weight
        self.randomized_positions = randomized_positions
        self.randomized_positions_at_evaluation = randomized_positions_at_evaluation
        self.num_steps: int | None = None

    def _get_eval_sampler(self, eval_dataset):
        # transformers' group_by_length shuffles the evaluation batches too (LengthGroupedSampler); here they keep the
        # rows' order, as without it. The rows are sorted by difficulty (`by_difficulty`): in order, they pad as little.
        if self.args.train_sampling_strategy != "group_by_length":
            return super()._get_eval_sampler(eval_dataset)
        if eval_dataset is None or not has_length(eval_dataset):
            return None
        return SequentialSampler(eval_dataset) if self.args.world_size <= 1 else None

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if "teacher_logits" not in self._signature_columns:  # kept in the batches, never passed to the model
            self._signature_columns.append("teacher_logits")

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
        if self.randomized_positions and model.training:
            inputs = {**inputs, "position_ids": random_positions(inputs["input_ids"], self.randomized_positions,
                                                                 inputs.get("attention_mask"))}
        if "teacher_logits" not in inputs:
            return super().compute_loss(model, inputs, return_outputs, num_items_in_batch)
        inputs = dict(inputs)
        teacher, labels = inputs.pop("teacher_logits"), inputs.pop("labels")
        outputs = model(**inputs)
        loss = distillation_loss(outputs.logits.float(), teacher.float(), labels, self.temperature,
                                 self.distillation_weight)
        return (loss, outputs) if return_outputs else loss

    def prediction_step(self, model, inputs, prediction_loss_only, ignore_keys=None):
        if self.num_steps is not None:
            inputs = {**inputs, "num_steps": self.num_steps}
        if self.randomized_positions and self.randomized_positions_at_evaluation:
            inputs = {**inputs, "position_ids": random_positions(inputs["input_ids"], self.randomized_positions,
                                                                 inputs.get("attention_mask"))}
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)


def random_positions(input_ids: torch.Tensor, limit: int, attention_mask: torch.Tensor | None = None) -> torch.Tensor:
    """Position ids for a batch: per row of n real tokens (`attention_mask`, on either side; every token without
    it), n positions drawn without replacement from 0 .. limit-1, in increasing order (Ruoss et al.'s randomized
    positional encodings), whatever the batch's padded length; a padding token gets limit-1."""
    rows, length = input_ids.shape
    if length > limit:
        raise ValueError(f"A training batch of {length} tokens needs more than {limit} randomized positions.")
    draws = torch.rand(rows, limit, device=input_ids.device).argsort(dim=-1)[:, :length]  # random, distinct
    if attention_mask is None:
        return draws.sort(dim=-1).values
    real = attention_mask.bool()
    first = torch.arange(length, device=input_ids.device)[None, :] < real.sum(-1, keepdim=True)
    picked = torch.where(first, draws, limit).sort(dim=-1).values  # a row's n draws, in order, then the padding
    positions = torch.full_like(draws, limit - 1)
    positions[real] = picked[first]
    return positions


class ProgressBarOnly(ProgressCallback):
    """The training progress bar without the metrics printed under it (they still go to the logs and the results)."""

    def on_log(self, args, state, control, logs=None, **kwargs):
        pass


class Scorer:
    """`compute_metrics` for one evaluation set, whose rows have `difficulties` in order: keeps the typed scores of
    its last call (`scores`) and returns them flat for the Trainer's logs."""

    def __init__(self, difficulties, head: str, bucket: int = 1):
        self.difficulties = [d // bucket * bucket for d in difficulties]
        self.head, self.scores = head, None

    def __call__(self, eval_prediction) -> dict:
        predicted, confidence, label_log_prob, labels = models.answers(eval_prediction.predictions,
                                                                      eval_prediction.label_ids)
        scores = scores_by_difficulty(predicted, labels, self.difficulties[: len(predicted)], confidence)
        self.scores = {str(key): value for key, value in scores.items()}
        names = ("accuracy", "ece") if self.head == "classification" else ("accuracy", "token_accuracy", "ece")
        metrics = {}
        for key, entry in self.scores.items():
            metrics.update({name if key == "all" else f"{name}_d{key}": float(entry[name]) for name in names})
        if self.head == "masked_lm":  # the masked tokens' likelihood (bits per character on character tasks)
            nll = -float(label_log_prob[labels != -100].astype(np.float64).mean())
            metrics.update(nll=nll, bits_per_token=nll / math.log(2), perplexity=math.exp(nll))
        return metrics


# --resume_from_checkpoint values that mean "the last checkpoint in the output folder" (unset, or true as the
# Trainer has it)
RESUME_HERE = (None, True, "True", "true")


def train_and_save(trainer, save: bool = True, log: bool = False):
    """Train (resuming from `resume_from_checkpoint`, else from the last checkpoint in the output folder) and, with
    `save`, write the model, the training metrics and the Trainer state there; the TrainOutput. `log` also prints the
    metrics, as transformers' example scripts do."""
    args = trainer.args
    checkpoint = args.resume_from_checkpoint
    if checkpoint in RESUME_HERE:
        checkpoint = get_last_checkpoint_or_none(args.output_dir)
    elif checkpoint in (False, "False", "false"):
        checkpoint = None
    elif not os.path.isfile(os.path.join(checkpoint, "trainer_state.json")):
        raise UsageError(f"--resume_from_checkpoint {checkpoint}: no checkpoint there (a checkpoint-N folder with its "
                         "trainer_state.json).")
    finished = finished_state(checkpoint, planned_steps(trainer)) if checkpoint else None
    if finished and shards_parameters(args):  # FSDP or DeepSpeed: weights split over the processes
        output = finished_sharded_run(trainer, checkpoint)
    elif finished:
        output = finished_run(trainer, checkpoint, finished)
    else:
        output = trainer.train(resume_from_checkpoint=checkpoint)
    if log:
        trainer.log_metrics("train", output.metrics)
    if save:
        save_full_model(trainer)  # under FSDP: gathered into one checkpoint that from_pretrained loads
        trainer.save_metrics("train", output.metrics)
        trainer.save_state()
    return output


def planned_steps(trainer) -> int:
    """The optimizer steps the run asks for: `max_steps`, or its epochs counted as transformers' Trainer counts them
    (update steps per epoch, rounded up, times the epochs, rounded up)."""
    args = trainer.args
    if args.max_steps > 0:
        return args.max_steps
    batches = len(trainer.get_train_dataloader())
    per_epoch = max(math.ceil(batches / args.gradient_accumulation_steps), 1)
    return math.ceil(args.num_train_epochs * per_epoch)


def finished_state(checkpoint: str, steps: int) -> TrainerState | None:
    """The state of `checkpoint` when it reached the run's `steps` (a finished run), else None."""
    state = TrainerState.load_from_json(os.path.join(checkpoint, "trainer_state.json"))
    return state if state.global_step >= steps else None


class _Finished(Exception):
    pass


class _StopBeforeAnotherStep(TrainerCallback):
    """Ends training as an update past the run's last step begins (raising `_Finished`, in every process alike)."""

    def on_step_begin(self, args, state, control, **kwargs):
        if state.global_step >= state.max_steps:
            raise _Finished


def finished_sharded_run(trainer, checkpoint: str) -> TrainOutput:
    """`finished_run` under FSDP or DeepSpeed: the Trainer resumes from the finished checkpoint, loading its split
    weights (and optimizer) its own way, and is stopped before the update it would otherwise run past max_steps
    (resumed at max_steps in the middle of an epoch, it trains one update before it checks); the training metrics are
    the finished run's."""
    stop = _StopBeforeAnotherStep()
    trainer.add_callback(stop)
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    except _Finished:
        trainer.is_in_train = False  # as the Trainer leaves it after training (evaluation reads it)
    finally:
        trainer.remove_callback(stop)
    return finished_metrics(trainer)


def finished_metrics(trainer) -> TrainOutput:
    """The TrainOutput of a finished run: its global step and the training metrics it saved (train_results.json)."""
    saved = os.path.join(trainer.args.output_dir, "train_results.json")
    metrics = {}
    if os.path.isfile(saved):
        with open(saved) as f:
            metrics = json.load(f)
    return TrainOutput(trainer.state.global_step, metrics.get("train_loss", float("nan")), metrics)


def finished_run(trainer, checkpoint: str, state: TrainerState) -> TrainOutput:
    """A run whose last checkpoint reached `max_steps`, loaded instead of trained (transformers' Trainer, resumed at its
    last step, would train one step more): its state, the weights it ended with (its best checkpoint's under
    `load_best_model_at_end`, found in the output folder by its name) and its training metrics."""
    trainer.state = state
    if trainer.args.load_best_model_at_end and state.best_model_checkpoint:
        best = os.path.join(trainer.args.output_dir, os.path.basename(os.path.normpath(state.best_model_checkpoint)))
        if not os.path.isdir(best):
            raise UsageError(f"The finished run's best checkpoint {best} is not in its output folder; "
                             "load_best_model_at_end needs it.")
        checkpoint = best
    trainer._load_from_checkpoint(checkpoint)
    return finished_metrics(trainer)


SPEC_FILE = "lengthgen_spec.json"  # the spec of the run training in a folder, written when it starts
# what a run resumed from a folder's checkpoint must share with the run that wrote it (its training arguments may
# change: a longer run, another schedule)
RECIPE = {"model": ("model_name_or_path", "config_name", "model_type", "config_overrides", "tokenizer_name", "head",
                    "randomized_positions"),
          "data": ("dataset_name", "dataset_config_name", "dataset_param", "max_train_samples")}


def recipe_differences(earlier: dict, now: dict, recipe: dict = RECIPE) -> list[str]:
    """The fields `recipe` names (by section) where two run records differ, each as "field earlier (asked: now)". A
    path (a config, a checkpoint, a tokenizer, a data file) is compared by its name, so that a piece restored in
    another checkout (`--unpack_from`) goes on."""
    now = json.loads(json.dumps(now))  # tuples as JSON lists, as the files have them

    def named(key, value):
        paths = ("model_name_or_path", "config_name", "tokenizer_name", "train_file", "validation_file", "test_file")
        return os.path.basename(os.path.normpath(value)) if key in paths and isinstance(value, str) else value

    return [f"{key} {earlier.get(section, {}).get(key)!r} (asked: {now.get(section, {}).get(key)!r})"
            for section, keys in recipe.items() for key in keys
            if named(key, earlier.get(section, {}).get(key)) != named(key, now.get(section, {}).get(key))]


def check_same_recipe(output_dir: str, recorded: dict, recipe: dict = RECIPE, inferred: dict | None = None) -> None:
    """Before training resumes from `output_dir`'s last checkpoint: the model and data of the run that wrote it (its
    spec file, or its results' spec) must be those of `recorded` (a spec's `to_dict()`, or the sections a training
    script records), the fields `recipe` names by section (`recipe_differences`); a UsageError naming what differs
    otherwise. Nothing is checked in a folder that records no spec. `inferred` ({section: {field: value}}): what the
    runner decided for a field a record leaves out (None), such as the head a model's config implies; a record
    without it counts as having that value (where the rest of the model is the same, so is what it implies)."""
    if os.path.isfile(os.path.join(output_dir, SPEC_FILE)):
        with open(os.path.join(output_dir, SPEC_FILE)) as f:
            earlier = json.load(f)
    elif os.path.isfile(os.path.join(output_dir, RESULTS_FILE)):
        earlier = ExperimentResult.load(output_dir).spec
    else:
        return

    def filled(record):
        return {section: {**values, **{key: value for key, value in (inferred or {}).get(section, {}).items()
                                       if values.get(key) is None}}
                for section, values in record.items()}

    if found := recipe_differences(filled(earlier), filled(recorded), recipe):
        raise UsageError(f"{output_dir} holds a checkpoint of a run with another model or data, which this run would "
                         f"resume: {'; '.join(found)}. Give another --output_dir, or delete that folder to start "
                         "again.")


def guard_output_dir(training_args, recorded: dict, recipe: dict = RECIPE, inferred: dict | None = None) -> None:
    """Before a run trains: when it would resume its output folder's last checkpoint, the run that wrote it must share
    `recipe`'s fields with `recorded` (`check_same_recipe`, with `inferred`); then `recorded` is written there
    (SPEC_FILE), for the next run in the folder to be compared with."""
    if not training_args.do_train:
        return
    output_dir = training_args.output_dir
    if training_args.resume_from_checkpoint in RESUME_HERE and get_last_checkpoint_or_none(output_dir):
        check_same_recipe(output_dir, recorded, recipe, inferred)
    if training_args.should_save:  # written whole: another process never reads half of it
        os.makedirs(output_dir, exist_ok=True)
        with written_whole(os.path.join(output_dir, SPEC_FILE)) as f:
            json.dump(recorded, f, indent=2)


def guard_recurrent_run(training_args, model_args, model, recurrence: tuple[str, ...], data_args,
                        data: tuple[str, ...]) -> None:
    """`guard_output_dir` for the recurrence scripts: a run resumed from its output folder's checkpoint is the run that
    wrote it, with the same model, the same recurrence fields (as the loaded model has them) and the same `data`
    fields."""
    recorded = {
        "model": {**{k: getattr(model_args, k) for k in ("model_name_or_path", "config_name", "config_overrides")},
                  **{k: getattr(model.config, k, None) for k in recurrence}},
        "data": {k: getattr(data_args, k) for k in data},
    }
    guard_output_dir(training_args, recorded, {section: tuple(fields) for section, fields in recorded.items()})


def exponential_decay_optimizer(model, args, num_train_rows: int):
    """AdamW whose learning rate is multiplied by `lr_decay_per_epoch` after every epoch (I-BERT paper §6.1), after a
    linear warm-up over `warmup_steps` as transformers' schedules have it."""
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, betas=(args.adam_beta1, args.adam_beta2),
                                  eps=args.adam_epsilon, weight_decay=args.weight_decay)
    rows_per_step = args.per_device_train_batch_size * args.world_size * args.gradient_accumulation_steps
    steps_per_epoch = max(1, math.ceil(num_train_rows / rows_per_step))
    gamma = args.lr_decay_per_epoch
    total = args.max_steps if args.max_steps > 0 else math.ceil(args.num_train_epochs * steps_per_epoch)
    warmup = args.get_warmup_steps(total)

    def factor(step: int) -> float:
        return (step / max(1, warmup) if step < warmup else 1.0) * gamma ** (step // steps_per_epoch)

    return optimizer, torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def quiet_logs():
    """Only warnings from transformers and datasets, and no progress bars of weight loading or data generation: a
    command's own output stays readable (the training progress bar and the metrics still show)."""
    import datasets
    import transformers

    transformers.utils.logging.set_verbosity_warning()
    transformers.utils.logging.disable_progress_bar()
    datasets.utils.logging.set_verbosity_warning()
    datasets.disable_progress_bars()


def evaluation_sets(splits, data_args) -> dict:
    """Every split but `train` (the first `max_eval_samples` rows of each), then a sample of `eval_train_samples`
    training rows as `train` (drawn with seed 0, the same for every run)."""
    sets = {name: scored_rows(name, dataset, eval_rows=data_args.max_eval_samples)
            for name, dataset in splits.items() if name != "train"}
    if data_args.eval_train_samples and "train" in splits:
        sets["train"] = scored_rows("train", splits["train"], eval_train_rows=data_args.eval_train_samples)
    return sets


KEEP = ("difficulty",)  # the column the evaluation scores by, kept beside the model's inputs


def prepare(head: str, spec: ExperimentSpec, splits):
    """(tokenizer, model, encode, collator) of the spec's head; `encode(dataset, training)` gives the model's features
    (`training`: of the training split, whose labels may differ: `masked_lm_loss`)."""
    model_args, data_args = spec.model, spec.data
    if head == "classification":
        tokenizer, labels = models.classifier_tokenizer_and_labels(model_args, splits)
        set_seed(spec.training.seed)
        model = models.load_classifier(model_args, tokenizer, labels)
        return tokenizer, model, lambda d, training=False: models.encode_classification(d, tokenizer, labels, KEEP), \
            DataCollatorWithPadding(tokenizer)
    if head == "masked_lm":
        tokenizer = models.masked_lm_tokenizer(
            model_args, data_args.dataset_name, data_args.dataset_config_name, splits
        )
        set_seed(spec.training.seed)
        model = models.load_masked_lm(model_args, tokenizer)
        every_token = model_args.masked_lm_loss == "all"
        return tokenizer, model, lambda d, training=False: models.encode_masked(d, tokenizer, KEEP,
                                                                               training and every_token), \
            DataCollatorForTokenClassification(tokenizer)
    tokenizer = models.answer_slots_tokenizer(splits, model_args)
    set_seed(spec.training.seed)
    model = models.load_answer_reader(model_args, tokenizer)
    end_token = answer_end_token(data_args.dataset_name)
    return tokenizer, model, lambda d, training=False: encode_answer_slots(d, tokenizer, KEEP, end_token), \
        DataCollatorForTokenClassification(tokenizer)


def by_difficulty(dataset):
    """The rows sorted by difficulty (stable): examples of similar length share a batch."""
    return dataset.select(np.argsort(dataset["difficulty"], kind="stable"))


def run_experiment(spec: ExperimentSpec, splits=None, command: str | None = None, quiet: bool = False,
                   save: bool = True) -> ExperimentResult:
    """Train (when `spec.training.do_train`) and evaluate (when `do_eval`) the spec's model on its dataset.

    `splits`: the dataset already loaded (a `DatasetDict`), instead of loading it from the spec. `command`: the command
    line that asked for this run, recorded for the model card. `quiet`: no per-step printout (`quiet_logs`). `save`:
    write the model, the Trainer state and the results to the output folder (the leaderboard's cells keep only their
    numbers)."""
    model_args, data_args, training_args, distill_args = spec.model, spec.data, spec.training, spec.distillation
    recorded = spec.to_dict()  # the spec as given, before the runner fills in what it decides
    head = models.infer_head(model_args)
    if model_args.masked_lm_loss != "masked" and head != "masked_lm":
        raise UsageError(f"--masked_lm_loss {model_args.masked_lm_loss} is a masked LM's loss; this run's head is "
                         f"{head}.")
    if training_args.ddp_find_unused_parameters is None:
        training_args.ddp_find_unused_parameters = False  # every parameter takes part in the loss
    if quiet:
        quiet_logs()

    if training_args.do_predict:  # transformers' example scripts predict the test split with it: nothing to add here
        raise UsageError("--do_predict: --do_eval scores every split but train, the test split included, by "
                         "difficulty; give --do_eval.")
    if not training_args.do_train and not model_args.model_name_or_path:
        raise UsageError("Nothing to evaluate: without training (--do_train, training.do_train in a spec, not given or "
                         "false), give the trained model with --model_name_or_path.")
    if save:  # a spec without --head and one naming the head its config implies are the same model
        implied = head if not model_args.head else models.infer_head(dataclasses.replace(model_args, head=None))
        guard_output_dir(training_args, recorded, inferred={"model": {"head": implied}})
    if splits is None:
        with training_args.main_process_first(desc="dataset generation"):
            splits = load_splits(data_args.dataset_name, data_args.dataset_config_name, data_args.params)
    splits = dict(splits)
    if training_args.do_train and "train" not in splits:
        raise UsageError(f"{data_args.dataset_name} has no 'train' split to train on; it has {sorted(splits)}.")
    if data_args.max_train_samples is not None and "train" in splits:
        splits["train"] = splits["train"].select(range(min(data_args.max_train_samples, len(splits["train"]))))
    eval_sets = evaluation_sets(splits, data_args)
    if training_args.do_eval and not eval_sets:
        raise UsageError(
            f"{data_args.dataset_name} has no split to evaluate besides 'train' (it has {sorted(splits)})."
        )
    first_eval = data_args.eval_split or ("validation" if "validation" in eval_sets else next(iter(eval_sets), None))
    if first_eval is not None and first_eval not in eval_sets:
        raise UsageError(
            f"--eval_split {first_eval!r} is not an evaluation split; the dataset has {sorted(eval_sets)}."
        )

    tokenizer, model, encode, collator = prepare(head, spec, splits)
    if model_args.num_steps is not None and "num_steps" not in inspect.signature(model.forward).parameters:
        raise UsageError("--num_steps applies to the NDR and the Universal Transformer; "
                         f"{models.model_type_of(model)} has no steps to set.")
    if model_args.randomized_positions is not None:
        reader = getattr(model, "base", model)  # the answer-slots head passes position ids on to its base model
        if "position_ids" not in inspect.signature(reader.forward).parameters:
            raise UsageError(f"--randomized_positions needs a model whose forward takes position_ids; "
                             f"{models.model_type_of(model)} has none.")
        encoding = getattr(reader.config, "position_encoding", None)
        if reader.config.model_type == "position_transformer" and encoding in ("none", "abacus"):
            raise UsageError(f"--randomized_positions: a position transformer with position_encoding {encoding!r} "
                             "reads no position ids.")
    with training_args.main_process_first(desc="tokenization"):
        train_dataset = encode(splits["train"], training=True) if training_args.do_train else None
        if train_dataset is not None and distill_args.teacher_model_name_or_path:  # the teacher's logits, once
            if head != "classification":
                raise UsageError("Distillation takes a classifier student (--head classification).")
            logits = teacher_logits(
                distill_args.teacher_model_name_or_path, splits["train"]["input"][: len(train_dataset)],
                [model.config.id2label[i] for i in range(model.config.num_labels)],
                distill_args.teacher_logits_cache, trust_remote_code=model_args.trust_remote_code,
            )
            train_dataset = train_dataset.add_column("teacher_logits", logits.tolist())
        features = {name: by_difficulty(encode(dataset)) for name, dataset in eval_sets.items()}

    if model_args.randomized_positions is not None:
        drawn_for = [train_dataset] if train_dataset is not None else []
        drawn_for += list(features.values()) if model_args.randomized_positions_at_evaluation else []
        longest = max((len(ids) for dataset in drawn_for for ids in dataset["input_ids"]), default=0)
        if longest > model_args.randomized_positions:
            raise UsageError(f"--randomized_positions {model_args.randomized_positions} is fewer positions than the "
                             f"longest example ({longest} tokens).")
    scorers = {
        name: Scorer(dataset["difficulty"], head, data_args.difficulty_bucket) for name, dataset in features.items()
    }
    trainer = ExperimentTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=features.get(first_eval),
        processing_class=tokenizer,
        data_collator=collator,
        compute_metrics=scorers.get(first_eval),
        preprocess_logits_for_metrics=models.answer_predictions,
        optimizers=(exponential_decay_optimizer(model, training_args, len(train_dataset))
                    if training_args.lr_decay_per_epoch and train_dataset is not None else (None, None)),
        callbacks=time_budget(training_args),
        temperature=distill_args.distillation_temperature,
        distillation_weight=distill_args.distillation_weight,
        randomized_positions=model_args.randomized_positions,
        randomized_positions_at_evaluation=model_args.randomized_positions_at_evaluation,
    )
    if quiet:
        trainer.remove_callback(PrinterCallback)
        if trainer.pop_callback(ProgressCallback):
            trainer.add_callback(ProgressBarOnly)
    log_under_output_dir(trainer)

    metrics, training = {}, None
    if training_args.do_train:
        start = time.perf_counter()
        train_output = train_and_save(trainer, save)
        # a finished run loaded again reports the training time it had (its train_runtime), not the load's
        seconds = max(time.perf_counter() - start, float(train_output.metrics.get("train_runtime", 0)))
        losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]
        best = trainer.state.best_model_checkpoint if training_args.load_best_model_at_end else None
        training = {"steps": trainer.state.global_step, "epochs": trainer.state.epoch,
                    "best_step": int(best.rsplit("-", 1)[1]) if best else None, "seconds": round(seconds, 3),
                    "loss_first_last": [losses[0], losses[-1]] if losses else None,
                    "max_train_seconds": training_args.max_train_seconds}
        metrics.update(train_output.metrics)

    scores, start = {}, time.perf_counter()
    if training_args.do_eval:
        trainer.num_steps = model_args.num_steps
        for name, dataset in features.items():
            trainer.compute_metrics = scorers[name]
            evaluation = trainer.evaluate(eval_dataset=dataset, metric_key_prefix=f"eval_{name}")
            scores[name] = scorers[name].scores
            metrics.update(evaluation)
            if save:
                trainer.save_metrics(f"eval_{name}", evaluation)
    result = ExperimentResult(
        scores=scores, head=head, model_type=models.model_type_of(model),
        spec=recorded, command=command, metrics=metrics, training=training,
        evaluation_seconds=round(time.perf_counter() - start, 1),
        parameters=sum(p.numel() for p in model.parameters()), hardware=hardware(),
    )
    path = None
    if save and training_args.should_save:
        if (
            not training_args.do_train
            and model_args.model_name_or_path
            and os.path.isdir(model_args.model_name_or_path)
        ):
            # an evaluation of a trained folder (e.g. with more NDR steps): the output folder becomes a copy of that
            # model with these numbers, which `lengthgen release` can publish
            trainer.save_model()
            result.trained_by = trained_by(model_args.model_name_or_path)
        path = result.save(training_args.output_dir)
        write_model_card(trainer, result)
        if training_args.push_to_hub:
            upload_output_dir(trainer.hub_model_id, training_args.output_dir)
    if not quiet and scores and trainer.is_world_process_zero():  # the Trainer's own log ends with training
        print(result.summary() + (f"\n(all scores: {path})" if path else ""))
    return result


def trained_by(folder: str) -> dict | None:
    """How the model in `folder` was trained (spec, command, training, and the hardware it trained on), from its
    results file or, for a Trainer checkpoint (`RUN/checkpoint-N`), its run's."""
    for candidate in (folder, os.path.dirname(os.path.normpath(folder))):
        if os.path.isfile(os.path.join(candidate, RESULTS_FILE)):
            source = ExperimentResult.load(candidate)
            if source.trained_by:
                return source.trained_by
            return {"spec": source.spec, "command": source.command, "training": source.training,
                    "hardware": source.hardware}
    return None


def write_model_card(trainer, result: ExperimentResult):
    """The Trainer's model card with the paper and the accuracy per split and difficulty appended."""
    dataset = result.dataset
    trainer.create_model_card(
        finetuned_from=result.spec["model"].get("model_name_or_path"),
        tasks=PIPELINE_TAGS[result.head],
        dataset=f"{dataset['name']} ({dataset['config']})" if dataset["config"] else dataset["name"],
        tags=["lengthgen", "length-generalization", result.model_type],
    )
    lines = ["", "## lengthgen", "", f"Trained and evaluated with lengthgen on {result.task_sentence()}"]
    if result.model_type in PAPERS:
        lines += ["", f"Paper: {PAPERS[result.model_type]}."]
    if result.scores:
        lines += ["", *result.markdown_table()]
    with open(os.path.join(trainer.args.output_dir, "README.md"), "a") as f:
        f.write("\n".join(lines) + "\n")


def upload_output_dir(repo_id: str, output_dir: str):
    """Upload an output folder as it stands at the end of training (the model, its code, the tokenizer, the results
    and the card; Trainer.push_to_hub would write its own card over it), without the checkpoints."""
    from huggingface_hub import HfApi

    HfApi().upload_folder(repo_id=repo_id, folder_path=output_dir, commit_message="lengthgen: end of training",
                          ignore_patterns=["_*", "checkpoint-*"])


__all__ = ["ExperimentTrainer", "Scorer", "quiet_logs", "run_experiment", "train_and_save", "trained_by",
           "upload_output_dir"]
