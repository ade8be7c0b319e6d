"""How every model reads a task: the input, a separator and one [MASK] slot per answer token; labels at the slots."""

import numpy as np
from lengthgen.data.calibration import expected_calibration_error
from lengthgen.data.nsp import MASK
from lengthgen.data.tokenization import word_tokenizer


def answer_layout(input_text: str, target_text: str) -> tuple[list[str], list[str | None]]:
    """The tokens a model reads and, per token, the answer token expected there (None: not an answer slot)."""
    tokens, target = input_text.split(), target_text.split()
    if MASK in tokens:  # the input marks its own answer slots; the target restores the whole sequence
        if len(target) != len(tokens):
            raise ValueError(f"Masked input of {len(tokens)} tokens but target of {len(target)}: {input_text!r}")
        return tokens, [t if i == MASK else None for i, t in zip(tokens, target)]
    if not target:
        raise ValueError(f"Empty target for input {input_text!r}")
    return tokens + ["[SEP]"] + [MASK] * len(target), [None] * (len(tokens) + 1) + target


def task_tokenizer(splits):
    """A word-level tokenizer over every token of every split's inputs and targets (the task's alphabet)."""
    return word_tokenizer(text for dataset in splits.values() for column in ("input", "target") for text in dataset[column])


def encode(dataset, tokenizer):
    """input_ids (framed by [CLS] ... [SEP]), labels (-100 off the answer slots), difficulty."""

    def encode_batch(batch):
        input_ids, labels = [], []
        for input_text, target_text in zip(batch["input"], batch["target"]):
            tokens, answers = answer_layout(input_text, target_text)
            ids = tokenizer.convert_tokens_to_ids([tokenizer.cls_token, *tokens, tokenizer.sep_token])
            input_ids.append(ids)
            labels.append([-100] + [-100 if a is None else tokenizer.convert_tokens_to_ids(a) for a in answers] + [-100])
        return {"input_ids": input_ids, "labels": labels}

    keep = ["difficulty"]
    return dataset.map(encode_batch, batched=True, remove_columns=[c for c in dataset.column_names if c not in keep])


def accuracy_by_difficulty(predicted, labels, difficulties, confidences=None) -> dict[int, dict[str, float]]:
    """Per difficulty: sequence accuracy (all answer tokens right), token accuracy (fraction right, averaged over
    examples) and, given each prediction's top-label probability (`confidences`, shaped like `predicted`), the
    expected calibration error over the answer tokens (`ece`, 10 bins)."""
    sums: dict[int, list[float]] = {}
    tokens: dict[int, tuple[list, list]] = {}
    for row, (prediction, label, difficulty) in enumerate(zip(predicted, labels, difficulties)):
        slots = np.asarray(label) != -100
        right = np.asarray(prediction)[slots] == np.asarray(label)[slots]
        entry = sums.setdefault(int(difficulty), [0.0, 0.0, 0])
        entry[0] += float(right.all())
        entry[1] += float(right.mean())
        entry[2] += 1
        if confidences is not None:
            confidence, correct = tokens.setdefault(int(difficulty), ([], []))
            confidence.extend(np.asarray(confidences[row])[slots].tolist())
            correct.extend(right.tolist())
    table = {
        d: {"sequence_accuracy": s / n, "token_accuracy": t / n, "examples": n} for d, (s, t, n) in sorted(sums.items())
    }
    for d, (confidence, correct) in tokens.items():
        table[d]["ece"] = expected_calibration_error(confidence, correct)
    return table
