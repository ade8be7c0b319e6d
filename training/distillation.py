"""Knowledge distillation for the classification script (Hinton, Vinyals and Dean, "Distilling the Knowledge in a
Neural Network", 2015), as Abnar, Dehghani and Zuidema use it to pass a recurrent inductive bias on (2020):

    loss = r T^2 KL(softmax(z_teacher / T) || softmax(z_student / T)) + (1 - r) CE(z_student, gold)

Their LSTM -> Transformer runs use T = 1 and r = 0.9. The teacher is any classifier loadable through the Auto
classes; its logits on the training inputs are computed once (and cached to a .npy file when asked), so the teacher
may have its own tokenizer and architecture. `ClassificationTrainer` trains with this loss when a batch carries
`teacher_logits`, and passes `num_steps` to the model at evaluation (the NDR's and the Universal Transformer's steps).
"""

import os
from dataclasses import dataclass, field

import numpy as np
import torch
from torch.nn import functional as F
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, Trainer

from lengthgen.cli import local_path_or_hub_id


@dataclass
class DistillationArguments:
    teacher_model_name_or_path: str | None = field(
        default=None, metadata={"help": "A trained classifier (folder or Hub id) to distill from; its classes must be "
                                        "the task's. Without it, the student trains on the gold labels alone."})
    distillation_temperature: float = field(default=1.0, metadata={"help": "T (Abnar et al.: 1)."})
    distillation_weight: float = field(default=0.9, metadata={"help": "r, the KL term's weight (Abnar et al.: 0.9)."})
    teacher_logits_cache: str | None = field(
        default=None, metadata={"help": "A .npy file for the teacher's training-set logits: read if it fits, else written."})

    def __post_init__(self):
        if self.distillation_temperature <= 0:
            raise ValueError(f"--distillation_temperature must be positive, got {self.distillation_temperature}.")
        if not 0 <= self.distillation_weight <= 1:
            raise ValueError(f"--distillation_weight must lie in [0, 1], got {self.distillation_weight}.")
        if self.teacher_model_name_or_path:
            local_path_or_hub_id(self.teacher_model_name_or_path, "--teacher_model_name_or_path")


def distillation_loss(student_logits, teacher_logits, labels, temperature: float, weight: float) -> torch.Tensor:
    """r T^2 KL(teacher_T || student_T) + (1 - r) CE(student, gold), the KL averaged over the batch."""
    kl = F.kl_div(F.log_softmax(student_logits / temperature, dim=-1),
                  F.log_softmax(teacher_logits / temperature, dim=-1), log_target=True, reduction="batchmean")
    return weight * temperature**2 * kl + (1 - weight) * F.cross_entropy(student_logits, labels)


@torch.no_grad()
def teacher_logits(teacher: str, inputs: list[str], labels: list[str], cache_file: str | None = None,
                   batch_size: int = 256, trust_remote_code: bool = False) -> np.ndarray:
    """`(len(inputs), len(labels))` logits of the classifier at `teacher` (a folder or Hub id) on `inputs`, its
    classes put in the student's order `labels`. With `cache_file`, read from it when it holds as many rows, else
    computed and written there."""
    if cache_file and os.path.exists(cache_file):
        cached = np.load(cache_file)
        if cached.shape == (len(inputs), len(labels)):
            return cached
    config = AutoConfig.from_pretrained(teacher, trust_remote_code=trust_remote_code)
    teacher_labels = [config.id2label[i] for i in range(config.num_labels)]
    if sorted(teacher_labels) != sorted(labels):
        raise ValueError(f"The teacher {teacher} has the classes {sorted(teacher_labels)[:8]}, the student "
                         f"{sorted(labels)[:8]}: distillation needs the same label set.")
    tokenizer = AutoTokenizer.from_pretrained(teacher, trust_remote_code=trust_remote_code)
    model = AutoModelForSequenceClassification.from_pretrained(teacher, trust_remote_code=trust_remote_code).eval()
    order = [teacher_labels.index(label) for label in labels]
    rows = []
    for start in range(0, len(inputs), batch_size):
        batch = tokenizer(inputs[start:start + batch_size], padding=True, return_tensors="pt")
        rows.append(model(**batch).logits[:, order].float().numpy())
    logits = np.concatenate(rows)
    if cache_file:
        os.makedirs(os.path.dirname(os.path.abspath(cache_file)), exist_ok=True)
        np.save(cache_file, logits)
    return logits


class ClassificationTrainer(Trainer):
    """Trainer for `examples/run_classification.py`: the distillation loss for batches with `teacher_logits`
    (`temperature` T, `distillation_weight` r), and `num_steps`, when set, passed to the model at prediction."""

    def __init__(self, *args, temperature: float = 1.0, distillation_weight: float = 0.9, **kwargs):
        super().__init__(*args, **kwargs)
        self.temperature, self.distillation_weight = temperature, distillation_weight
        self.num_steps: int | None = None

    def _set_signature_columns_if_needed(self):
        super()._set_signature_columns_if_needed()
        if "teacher_logits" not in self._signature_columns:  # kept in the batches, never passed to the model
            self._signature_columns.append("teacher_logits")

    def compute_loss(self, model, inputs, return_outputs=False, num_items_in_batch=None):
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
        return super().prediction_step(model, inputs, prediction_loss_only, ignore_keys=ignore_keys)


__all__ = ["ClassificationTrainer", "DistillationArguments", "distillation_loss", "teacher_logits"]
