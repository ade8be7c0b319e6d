"""The arguments of an experiment, as `HfArgumentParser` dataclasses: what a spec's sections hold
(lengthgen.training.spec) and what `lengthgen train` and the example scripts take on the command line, under the same
names.

* `ModelArguments`: the model (a checkpoint, a config folder, or a model type) and how its answer is read (`head`);
* `DataArguments`: the dataset (a lengthgen builder with its generating parameters, or any `load_dataset` path) and
  the evaluation sets;
* `TrainingArguments`: transformers' own, with TensorBoard logs under the output folder by default, a wall-clock
  budget (`max_train_seconds`), the I-BERT paper's per-epoch decay of the learning rate (`lr_decay_per_epoch`), and
  the data loaders' memory pinned only where an accelerator takes it;
* `DistillationArguments`: a teacher to distill from.

Mistakes are named here, before anything is loaded (`UsageError`: one line on the command line).
"""

import difflib
import os
from dataclasses import dataclass, field

import torch
from transformers import HfArgumentParser
from transformers import TrainingArguments as HFTrainingArguments
from transformers.integrations import TensorBoardCallback
from transformers.integrations.integration_utils import default_logdir

from lengthgen.cli import OneLineErrors, UsageError, check_positive, local_path_or_hub_id
from lengthgen.data.export import BUILDERS, check_params, parse_params

HEADS = ("classification", "masked_lm", "answer_slots")


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(default=None, metadata={
        "help": "A checkpoint (folder or Hub id) to fine-tune."})
    config_name: str | None = field(default=None, metadata={
        "help": "A config (folder or Hub id, e.g. hub_configs/ndr-ctl) to train from scratch."})
    model_type: str | None = field(default=None, metadata={
        "help": "Train from scratch from this model type's default config (AutoConfig.for_model), e.g. bert, ndr; "
                "the leaderboard's LSTM baseline is 'lstm'."})
    config_overrides: str | None = field(default=None, metadata={
        "help": "Config fields to change when training from scratch: 'num_layers=8,hidden_size=64' (a mapping in a "
                "spec file)."})
    tokenizer_name: str | None = field(default=None, metadata={
        "help": "A tokenizer (folder or Hub id); default: the checkpoint's, else the task's."})
    head: str | None = field(default=None, metadata={
        "help": "How the model's answer is read: 'classification' (a sequence classifier: the answer is the class), "
                "'masked_lm' (the tokens at the input's [MASK] positions) or 'answer_slots' (any model: one [MASK] "
                "slot per answer token after the input, read by a linear layer; the leaderboard's). Default: from "
                "the config's architecture."})
    num_steps: int | None = field(default=None, metadata={
        "help": "NDR and Universal Transformer: steps of the shared layer in the final evaluation (default: the "
                "model's num_layers; training and the evaluations during it use the model's)."})
    randomized_positions: int | None = field(default=None, metadata={
        "help": "Randomized positions (Ruoss et al., Randomized Positional Encodings Boost Length Generalization of "
                "Transformers, ACL 2023, arXiv:2305.16843): in training, the position ids of each sequence of n tokens "
                "are n positions drawn without replacement from 0 .. N-1 and sorted (N, larger than any test length, "
                "is this value). For models whose forward takes position_ids and reads them (not a position "
                "transformer with position_encoding none or abacus)."})
    randomized_positions_at_evaluation: bool = field(default=True, metadata={
        "help": "With --randomized_positions: draw the positions at evaluation too, as Ruoss et al. do (their code "
                "draws them on every call); false: evaluate with the plain positions 0 .. n-1."})
    masked_lm_loss: str = field(default="masked", metadata={
        "help": "With head masked_lm, the training loss: 'masked', the cross-entropy at the [MASK] positions (the "
                "answer; the I-BERT paper's 'restore the original sequence' read as restoring what is masked), or "
                "'all', at every token of the target (the I-BERT authors' code). Evaluations score the masked "
                "positions either way."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow model code shipped with a checkpoint."})

    def __post_init__(self):
        if self.masked_lm_loss not in ("masked", "all"):
            raise UsageError(f"--masked_lm_loss must be masked or all, got {self.masked_lm_loss!r}.")
        sources = [flag for flag in ("model_name_or_path", "config_name", "model_type") if getattr(self, flag)]
        if len(sources) != 1:
            raise UsageError("Give one of --model_name_or_path (fine-tune), --config_name or --model_type (train from "
                             f"scratch); got {', '.join('--' + s for s in sources) or 'none'}.")
        check_model_paths(self)
        if self.head is not None and self.head not in HEADS:
            raise UsageError(f"--head must be one of {', '.join(HEADS)}, got {self.head!r}.")
        if self.model_name_or_path and self.config_overrides:
            raise UsageError("--config_overrides applies to a model trained from scratch (--config_name or "
                             "--model_type), not to a checkpoint.")
        check_positive({"--num_steps": self.num_steps, "--randomized_positions": self.randomized_positions})

    @property
    def overrides(self) -> dict:
        """`config_overrides` as a mapping (a command line's 'a=1,b=x' is parsed as transformers parses it)."""
        if not self.config_overrides:
            return {}
        if isinstance(self.config_overrides, dict):
            return dict(self.config_overrides)
        pairs = [item.partition("=") for item in self.config_overrides.split(",")]
        bad = [key for key, sign, _ in pairs if not sign or not key]
        if bad:
            raise UsageError(f"--config_overrides takes KEY=VALUE[,KEY=VALUE ...], got {self.config_overrides!r}.")
        return {key: _typed(value) for key, _, value in pairs}


def _typed(text: str):
    """A command line's config value: an integer, a number, true / false, or the text."""
    for kind in (int, float):
        try:
            return kind(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


@dataclass
class DataArguments:
    dataset_name: str | None = field(default=None, metadata={
        "help": "A lengthgen builder (ctl, listops, nsp_inductive, chomsky_hierarchy, ...) or anything load_dataset "
                "reads with input, target and difficulty columns (an exported folder, a Hub repository)."})
    dataset_config_name: str | None = field(default=None, metadata={
        "help": "The dataset's config (add, backward, ...)."})
    dataset_param: list[str] = field(default_factory=list, metadata={
        "help": "Generating parameters of a lengthgen builder: KEY=VALUE [KEY=VALUE ...], JSON values (a mapping in a "
                "spec file)."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training rows."})
    max_eval_samples: int | None = field(default=None, metadata={
        "help": "Keep the first N rows of every evaluation set."})
    eval_train_samples: int = field(default=0, metadata={
        "help": "Also evaluate on this many training rows, as the evaluation set 'train' (accuracy at the trained "
                "lengths)."})
    eval_split: str | None = field(default=None, metadata={
        "help": "The split evaluated during training, whose numbers --metric_for_best_model reads (default: "
                "'validation', else the first split other than 'train')."})
    difficulty_bucket: int = field(default=1, metadata={
        "help": "Report per-difficulty numbers in buckets of this width (e.g. 16 for PTB's character lengths)."})

    def __post_init__(self):
        if not self.dataset_name:
            raise UsageError("--dataset_name is required: a lengthgen builder (e.g. ctl) or a load_dataset path.")
        if self.dataset_name in BUILDERS:  # an unknown config or generating parameter is named before generating
            check_params(self.dataset_name, self.dataset_config_name, self.params)
        else:
            local_path_or_hub_id(self.dataset_name, "--dataset_name")
            near = difflib.get_close_matches(self.dataset_name, list(BUILDERS), n=1, cutoff=0.8)
            if near and not os.path.exists(self.dataset_name):
                raise UsageError(f"--dataset_name {self.dataset_name!r} is not a lengthgen builder (did you mean "
                                 f"{near[0]!r}?) nor a folder here.")
        if self.params and self.dataset_name not in BUILDERS:
            raise UsageError(f"--dataset_param applies to lengthgen's builders ({', '.join(sorted(BUILDERS))}), not to "
                             f"{self.dataset_name}.")
        check_positive({"--max_train_samples": self.max_train_samples, "--max_eval_samples": self.max_eval_samples,
                        "--difficulty_bucket": self.difficulty_bucket})
        if self.eval_train_samples < 0:
            raise UsageError(f"--eval_train_samples must be at least 0, got {self.eval_train_samples}.")

    @property
    def params(self) -> dict:
        """The generating parameters as a mapping (lists as tuples, as the builders' configs hold them)."""
        return parse_params(self.dataset_param)


def pinned_memory_helps() -> bool:
    """Whether pinning the data loaders' memory speeds up copies to an accelerator: there is one, and it is not
    Apple's MPS, which torch does not pin for (torch.accelerator came with torch 2.6; before it, CUDA is the one asked
    about)."""
    if not hasattr(torch, "accelerator"):
        return torch.cuda.is_available()
    device = torch.accelerator.current_accelerator(check_available=True)
    return device is not None and device.type != "mps"


@dataclass
class TrainingArguments(HFTrainingArguments):
    report_to: None | str | list[str] = field(default="tensorboard", metadata={
        "help": "Where to log: TensorBoard by default (under <output_dir>/runs), 'none' for nowhere, 'all' for every "
                "installed integration, or names (wandb, trackio, ...)."})
    max_train_seconds: float | None = field(default=None, metadata={
        "help": "Wall-clock budget of this training session in seconds: stop before it ends with a checkpoint (resume "
                "by running the same command again)."})
    lr_decay_per_epoch: float | None = field(default=None, metadata={
        "help": "Multiply the learning rate by this factor after every epoch (the I-BERT paper: 0.97), with AdamW and "
                "--warmup_steps, instead of --lr_scheduler_type and --optim."})

    def __post_init__(self):
        check_positive({"--max_train_seconds": self.max_train_seconds, "--lr_decay_per_epoch": self.lr_decay_per_epoch,
                        "--per_device_train_batch_size": self.per_device_train_batch_size,
                        "--per_device_eval_batch_size": self.per_device_eval_batch_size})
        if self.learning_rate < 0:
            raise UsageError(f"--learning_rate must not be negative, got {self.learning_rate}.")
        if self.max_steps == 0 or self.max_steps < -1:
            raise UsageError(f"--max_steps must be at least 1 (or -1: train --num_train_epochs), got {self.max_steps}.")
        if self.max_steps == -1 and self.num_train_epochs <= 0:
            raise UsageError(f"--num_train_epochs must be positive, got {self.num_train_epochs} (evaluating a trained "
                             "model needs no training: leave out --do_train).")
        if self.output_dir and os.path.exists(self.output_dir) and not os.path.isdir(self.output_dir):
            raise UsageError(f"--output_dir {self.output_dir} is a file, not a folder.")
        if self.lr_decay_per_epoch is not None:
            chosen = {name: getattr(getattr(self, name), "value", getattr(self, name))
                      for name in ("lr_scheduler_type", "optim")}  # (an enum after transformers' own checks)
            if given := [f"--{name} {value}" for name, value in chosen.items()
                         if value != type(self).__dataclass_fields__[name].default]:
                raise UsageError(f"--lr_decay_per_epoch is its own schedule, with AdamW: it takes no "
                                 f"{', '.join(given)}.")
        if not pinned_memory_helps():
            self.dataloader_pin_memory = False  # torch would warn at every data loader
        super().__post_init__()


@dataclass
class DistillationArguments:
    teacher_model_name_or_path: str | None = field(default=None, metadata={
        "help": "A trained classifier (folder or Hub id) to distill from; its classes must be the task's. Without it, "
                "the student trains on the gold labels alone."})
    distillation_temperature: float = field(default=1.0, metadata={"help": "T (Abnar et al.: 1)."})
    distillation_weight: float = field(default=0.9, metadata={"help": "r, the KL term's weight (Abnar et al.: 0.9)."})
    teacher_logits_cache: str | None = field(default=None, metadata={
        "help": "A .npy file for the teacher's training-set logits: read if it fits, else written."})

    def __post_init__(self):
        if self.distillation_temperature <= 0:
            raise UsageError(f"--distillation_temperature must be positive, got {self.distillation_temperature}.")
        if not 0 <= self.distillation_weight <= 1:
            raise UsageError(f"--distillation_weight must lie in [0, 1], got {self.distillation_weight}.")
        if self.teacher_model_name_or_path:
            local_path_or_hub_id(self.teacher_model_name_or_path, "--teacher_model_name_or_path")


def check_model_paths(model_args):
    """A mistyped local folder in `model_name_or_path`, `config_name` or `tokenizer_name` is named as missing before any
    Hub lookup (every script's model arguments call this)."""
    for flag in ("model_name_or_path", "config_name", "tokenizer_name"):
        if getattr(model_args, flag, None):
            local_path_or_hub_id(getattr(model_args, flag), f"--{flag}")


class ArgumentParser(OneLineErrors, HfArgumentParser):
    """transformers' parser of dataclass fields, with one-line errors (an unknown flag named with the nearest known
    one)."""


def parse_command_line(dataclass_types: tuple, argv: list[str]) -> tuple:
    """The dataclasses of a command line, or of one JSON or YAML file named alone (as transformers' example scripts
    read them)."""
    parser = ArgumentParser(dataclass_types)
    if len(argv) == 1 and argv[0].endswith((".json", ".yaml", ".yml")):
        return parser.parse_json_file(argv[0]) if argv[0].endswith(".json") else parser.parse_yaml_file(argv[0])
    lists = {option for action in parser._actions if action.nargs in ("+", "*") for option in action.option_strings}
    *parsed, rest = parser.parse_args_into_dataclasses(args=merge_repeated(argv, lists), return_remaining_strings=True)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    return tuple(parsed)


def merge_repeated(argv: list[str], flags: set[str]) -> list[str]:
    """`argv` with the values of a list flag given more than once (`--dataset_param a=1 --dataset_param b=2`) gathered
    under its first occurrence, where argparse would keep only the last."""
    spelled = []  # `--flag=value` as `--flag value`
    for arg in argv:
        flag, equals, value = arg.partition("=")
        spelled += [flag, value] if equals and flag in flags else [arg]
    groups, first, current = [], {}, None  # current: the list flag whose values come next
    for arg in spelled:
        if arg.startswith("-") and not arg[1:2].isdigit():
            current = arg if arg in flags else None
            if current is not None and current in first:
                continue
            if current is not None:
                first[current] = len(groups)
            groups.append([arg])
        elif current is not None:
            groups[first[current]].append(arg)
        else:
            groups.append([arg])
    return [arg for group in groups for arg in group]


def time_budget(args: TrainingArguments) -> list:
    """The Trainer callbacks of `max_train_seconds`: stop before the budget ends, with a checkpoint."""
    from .pieces import TimeBudgetCallback

    return [TimeBudgetCallback(args.max_train_seconds)] if args.max_train_seconds else []


def log_under_output_dir(trainer):
    """Point the Trainer's TensorBoard callback (if any) at `<output_dir>/runs/...` now, as training would.

    transformers' callback picks its folder when training begins, so a run that only evaluates would otherwise open
    `./runs` in the working directory."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
            callback.logging_dir = os.path.join(trainer.args.output_dir, default_logdir())


__all__ = ["DataArguments", "DistillationArguments", "HEADS", "ModelArguments", "TrainingArguments",
           "check_model_paths", "log_under_output_dir", "parse_command_line", "time_budget"]
