"""How every result in lengthgen is scored: accuracy per difficulty, calibration, and the spread over seeds.

One function, `scores_by_difficulty`, turns a model's answers into the numbers every command reports. An example's
answer is a sequence of tokens at its answer positions (a classifier's answer is one token, its class; a masked LM's
the tokens at its `[MASK]` positions; the leaderboard's the tokens at its answer slots). Per difficulty (digits,
length, depth):

* ``accuracy``: the share of examples whose whole answer is right (the papers' accuracy; for a masked span the
  I-BERT paper's sequence accuracy; for a classifier, plain accuracy);
* ``token_accuracy``: per example the share of its answer tokens that are right, averaged over the examples
  (Delétang et al., "Neural Networks and the Chomsky Hierarchy", ICLR 2023, score their tasks so);
* ``ece``: the expected calibration error of the answer tokens, given the top-label probability of each (Naeini,
  Cooper and Hauskrecht, AAAI 2015; Guo, Pleiss, Sun and Weinberger, ICML 2017): the confidences fall into M
  equal-width bins (0, 1/M], ..., ((M-1)/M, 1] and ECE = sum_m |B_m| / n |accuracy(B_m) - mean confidence(B_m)|;
* ``examples``: how many examples have that difficulty.

The key ``"all"`` holds the same numbers over every example.
"""

import statistics

import numpy as np

NUM_BINS = 10


def _binned(confidence, correct, num_bins: int):
    """Per equal-width bin of the confidences: (summed correctness, summed confidence, count)."""
    confidence, correct = np.asarray(confidence, dtype=np.float64), np.asarray(correct, dtype=np.float64)
    if confidence.size == 0:
        raise ValueError("Calibration needs at least one prediction.")
    if num_bins < 1:
        raise ValueError(f"num_bins must be at least 1, got {num_bins}.")
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)  # edges[i] < c <= edges[i+1]
    return (np.bincount(index, weights=correct, minlength=num_bins),
            np.bincount(index, weights=confidence, minlength=num_bins), np.bincount(index, minlength=num_bins))


def calibration_bins(confidence, correct, num_bins: int = NUM_BINS):
    """Per equal-width bin of the top-label `confidence`: (accuracy, mean confidence, count) of the predictions in it,
    NaN for an empty bin; what a reliability diagram (`lengthgen.plots.reliability_diagram`) draws."""
    right, confident, count = _binned(confidence, correct, num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        return right / count, confident / count, count


def expected_calibration_error(confidence, correct, num_bins: int = NUM_BINS) -> float:
    """ECE of predictions given by their top-label `confidence` and whether each was `correct`."""
    right, confident, count = _binned(confidence, correct, num_bins)
    return float(np.abs(right - confident).sum() / count.sum())  # per bin |B| |accuracy - confidence|, over n


def scores_by_difficulty(predicted, labels, difficulties, confidences=None, ignore_index: int = -100) -> dict:
    """{difficulty: {"accuracy", "token_accuracy", "examples"[, "ece"]}} and the same under "all".

    `predicted` and `labels` hold one row per example (token ids; a classifier's rows are one id each); positions whose
    label is `ignore_index` are not part of the answer. `confidences`, shaped like `predicted`, gives each prediction's
    top-label probability; with it each difficulty also has the ECE of its answer tokens."""
    sums: dict = {}
    tokens: dict = {}
    for row, (prediction, label, difficulty) in enumerate(zip(predicted, labels, difficulties)):
        label = np.atleast_1d(np.asarray(label))
        slots = label != ignore_index
        if not slots.any():
            raise ValueError(f"Example {row} has no answer position (every label is {ignore_index}).")
        right = np.atleast_1d(np.asarray(prediction))[slots] == label[slots]
        for key in (int(difficulty), "all"):
            entry = sums.setdefault(key, [0.0, 0.0, 0])
            entry[0] += float(right.all())
            entry[1] += float(right.mean())
            entry[2] += 1
            if confidences is not None:
                confidence, correct = tokens.setdefault(key, ([], []))
                confidence.extend(np.atleast_1d(np.asarray(confidences[row]))[slots].tolist())
                correct.extend(right.tolist())
    if not sums:
        raise ValueError("Scoring needs at least one example.")
    order = sorted((k for k in sums if k != "all")) + ["all"]
    table = {key: {"accuracy": sums[key][0] / sums[key][2], "token_accuracy": sums[key][1] / sums[key][2],
                   "examples": sums[key][2]} for key in order}
    for key, (confidence, correct) in tokens.items():
        table[key]["ece"] = expected_calibration_error(confidence, correct)
    return table


def scored_rows(split: str, rows, eval_rows: int | None = None, eval_train_rows: int | None = None,
                train_rows: int | None = None):
    """The rows of split `split` (a `datasets.Dataset`) that an evaluation scores: the first `eval_rows` of an
    evaluation split (all without it); of `train`, `eval_train_rows` rows drawn with seed 0, the same for every run,
    from its first `train_rows` (all without it). The training run and `lengthgen verify` both draw them here."""
    if split != "train":
        return rows.select(range(min(eval_rows, len(rows)))) if eval_rows is not None else rows
    if train_rows:
        rows = rows.select(range(min(train_rows, len(rows))))
    if eval_train_rows:
        rows = rows.shuffle(seed=0)
        rows = rows.select(range(min(eval_train_rows, len(rows))))
    return rows


def spread_over_seeds(tables: list[dict]) -> dict:
    """{key: {"mean", "std", "values"}} over several seeds' {key: value} tables: the mean and the sample standard
    deviation (0 for one seed) of each key's values, a key missing from some seeds taken over the others."""
    spread = {}
    for key in sorted({k for table in tables for k in table}, key=lambda k: (k == "all", str(k).zfill(6))):
        values = [table[key] for table in tables if key in table]
        spread[key] = {"mean": statistics.fmean(values), "std": statistics.stdev(values) if len(values) > 1 else 0.0,
                       "values": values}
    return spread


__all__ = ["NUM_BINS", "calibration_bins", "expected_calibration_error", "scored_rows", "scores_by_difficulty",
           "spread_over_seeds"]
