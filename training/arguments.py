"""The example scripts' training arguments and callbacks: transformers' `TrainingArguments` with a wall-clock budget
(`--max_train_seconds`, lengthgen.training.pieces) and TensorBoard logging unless `--report_to none` says otherwise.

transformers reads `--report_to none` and no `--report_to` alike (an empty list), so the default is set here, where
the two still differ. TensorBoard logs go to `<output_dir>/runs/<date>_<host>`, also in a run that only evaluates
(transformers' callback would otherwise open `./runs` in the working directory: it picks its folder when training
begins).
"""

import os
from dataclasses import dataclass, field

from transformers import TrainingArguments as HFTrainingArguments
from transformers.integrations import TensorBoardCallback
from transformers.integrations.integration_utils import default_logdir

from lengthgen.training.pieces import TimeBudgetCallback


@dataclass
class TrainingArguments(HFTrainingArguments):
    report_to: None | str | list[str] = field(default="tensorboard", metadata={
        "help": "Where to log: TensorBoard by default (under <output_dir>/runs), 'none' for nowhere, 'all' for every "
                "installed integration, or names (wandb, trackio, ...)."})
    max_train_seconds: float | None = field(default=None, metadata={
        "help": "Wall-clock budget of this training session in seconds: stop before it ends with a checkpoint (resume "
                "by running the same command again)."})


def script_callbacks(args: TrainingArguments) -> list:
    """The callbacks every example script's Trainer gets from its arguments: the time budget when one is set."""
    return [TimeBudgetCallback(args.max_train_seconds)] if args.max_train_seconds else []


def log_under_output_dir(trainer):
    """Point the Trainer's TensorBoard callback (if any) at `<output_dir>/runs/...` now, as training would."""
    for callback in trainer.callback_handler.callbacks:
        if isinstance(callback, TensorBoardCallback) and callback.logging_dir is None:
            callback.logging_dir = os.path.join(trainer.args.output_dir, default_logdir())
