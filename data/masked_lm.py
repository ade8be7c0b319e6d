"""Turning `input`/`target` rows into masked-LM features, and scoring the restored spans.

Inputs and targets are space-separated tokens of equal count, so with a word-level tokenizer they align one to one:
the label of a position is the target's token where the input has the mask token, and -100 (ignored) elsewhere.
"""

import os

import numpy as np

MASKED_SPAN_ACCURACY = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics", "masked_span_accuracy")


def tokenize_masked_examples(examples: dict, tokenizer) -> dict:
    """Batched `datasets.map` function: input_ids/attention_mask of `input`, labels from `target` at masked positions."""
    inputs = tokenizer(examples["input"])
    targets = tokenizer(examples["target"])["input_ids"]
    labels = []
    for row, (input_ids, target_ids) in enumerate(zip(inputs["input_ids"], targets)):
        if len(input_ids) != len(target_ids):
            raise ValueError(
                f"Row {row}: input and target tokenize to {len(input_ids)} and {len(target_ids)} tokens; "
                "masked tasks need one target token per input token."
            )
        labels.append([t if i == tokenizer.mask_token_id else -100 for i, t in zip(input_ids, target_ids)])
    return {**inputs, "labels": labels}


def predictions_and_label_log_probs(logits, labels):
    """`preprocess_logits_for_metrics` for Trainer: keep only the argmax ids and the log-probability of each label,
    not the (batch, length, vocab) logits."""
    import torch

    log_probs = torch.log_softmax(logits.float(), dim=-1)
    label_log_probs = log_probs.gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return logits.argmax(-1), label_log_probs


def masked_spans(predicted_ids, label_log_probs, label_ids):
    """Per example, the predicted ids, reference ids and reference log-probs at the labelled (masked) positions."""
    predictions, references, log_probs = [], [], []
    for predicted, log_prob, labels in zip(predicted_ids, label_log_probs, label_ids):
        masked = np.asarray(labels) != -100
        predictions.append(np.asarray(predicted)[masked].tolist())
        references.append(np.asarray(labels)[masked].tolist())
        log_probs.append(np.asarray(log_prob)[masked].astype(float).tolist())
    return predictions, references, log_probs


def flatten_metrics(result: dict) -> dict:
    """Nested per-difficulty dicts -> flat float entries (`sequence_accuracy_d13`), as Trainer logs want."""
    flat = {}
    for key, value in result.items():
        if isinstance(value, dict):
            stem = key.replace("_by_difficulty", "")
            flat.update({f"{stem}_d{d}": float(v) for d, v in value.items()})
        else:
            flat[key] = float(value)
    return flat
