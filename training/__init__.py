"""Running experiments: a spec (`ExperimentSpec`: model, data, training and distillation arguments) in, one runner
(`run_experiment`: Trainer, every split scored per difficulty) and typed results (`ExperimentResult`) out; training
in pieces under a wall-clock budget; the recurrent LM and question-answering training of the window-recurrence
models."""

from .arguments import DataArguments, DistillationArguments, ModelArguments, TrainingArguments
from .results import RESULTS_FILE, ExperimentResult
from .runner import run_experiment
from .spec import ExperimentSpec

__all__ = ["DataArguments", "DistillationArguments", "ExperimentResult", "ExperimentSpec", "ModelArguments",
           "RESULTS_FILE", "TrainingArguments", "run_experiment"]
