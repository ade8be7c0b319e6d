"""Knowledge distillation (Hinton, Vinyals and Dean, "Distilling the Knowledge in a Neural Network", 2015), as Abnar,
Dehghani and Zuidema use it to pass a recurrent inductive bias on (2020):

    loss = r T^2 KL(softmax(z_teacher / T) || softmax(z_student / T)) + (1 - r) CE(z_student, gold)

Their LSTM -> Transformer runs use T = 1 and r = 0.9. The teacher is any classifier loadable through the Auto
classes; its logits on the training inputs are computed once (and cached to a .npy file when asked, with the
fingerprint of the teacher, inputs and classes they belong to beside it), so the teacher may have its own tokenizer
and architecture. A spec's `distillation` section (lengthgen.training.arguments) asks for
it; the runner's Trainer trains with this loss when a batch carries `teacher_logits`.
"""

import hashlib
import json
import os

import numpy as np
import torch
from torch.nn import functional as F
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

from lengthgen.cli import UsageError

from .results import written_whole


def distillation_loss(student_logits, teacher_logits, labels, temperature: float, weight: float) -> torch.Tensor:
    """r T^2 KL(teacher_T || student_T) + (1 - r) CE(student, gold), the KL averaged over the batch."""
    kl = F.kl_div(F.log_softmax(student_logits / temperature, dim=-1),
                  F.log_softmax(teacher_logits / temperature, dim=-1), log_target=True, reduction="batchmean")
    return weight * temperature**2 * kl + (1 - weight) * F.cross_entropy(student_logits, labels)


@torch.no_grad()
def teacher_logits(teacher: str, inputs: list[str], labels: list[str], cache_file: str | None = None,
                   batch_size: int = 256, trust_remote_code: bool = False) -> np.ndarray:
    """`(len(inputs), len(labels))` logits of the classifier at `teacher` (a folder or Hub id) on `inputs`, its
    classes put in the student's order `labels`. With `cache_file`, read from it when the fingerprint beside it
    (`cache_file.sha256`) is that of this teacher (its weights' size and time where it is a folder), these inputs and
    these labels; else computed and written there with theirs."""
    weights = [os.path.join(teacher, name) for name in sorted(os.listdir(teacher))] if os.path.isdir(teacher) else []
    stamp = [(os.path.basename(path), os.path.getsize(path), os.path.getmtime(path)) for path in weights
             if path.endswith((".safetensors", ".bin"))]
    fingerprint = hashlib.sha256(json.dumps([os.path.abspath(teacher) if weights else teacher, stamp, inputs,
                                             labels]).encode()).hexdigest()
    if cache_file and os.path.exists(cache_file) and os.path.exists(cache_file + ".sha256"):
        with open(cache_file + ".sha256") as f:
            if f.read().strip() == fingerprint:
                return np.load(cache_file)
    config = AutoConfig.from_pretrained(teacher, trust_remote_code=trust_remote_code)
    teacher_labels = [config.id2label[i] for i in range(config.num_labels)]
    if sorted(teacher_labels) != sorted(labels):
        raise UsageError(f"The teacher {teacher} has the classes {sorted(teacher_labels)[:8]}, the student "
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
        with written_whole(cache_file, "wb") as f:
            np.save(f, logits)
        with written_whole(cache_file + ".sha256") as f:
            f.write(fingerprint + "\n")
    return logits


__all__ = ["distillation_loss", "teacher_logits"]
