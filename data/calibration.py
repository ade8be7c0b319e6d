"""Calibration of a classifier's probabilities for run_classification.py and the leaderboard: the expected calibration
error overall and per difficulty, as the `expected_calibration_error` evaluate module in data/metrics/ defines it (the
module stays a file of its own for `evaluate.load`; tests/test_calibration.py checks the two agree)."""

import os

import numpy as np

EXPECTED_CALIBRATION_ERROR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics",
                                          "expected_calibration_error")


def softmax(logits: np.ndarray) -> np.ndarray:
    shifted = np.exp(logits - logits.max(-1, keepdims=True))
    return shifted / shifted.sum(-1, keepdims=True)


def expected_calibration_error(confidence, correct, num_bins: int = 10) -> float:
    """ECE of predictions given by their top-label `confidence` and whether they were `correct` (the same equal-width
    bins as the evaluate module, which takes whole probability vectors and must stay a file of its own)."""
    confidence, correct = np.asarray(confidence, dtype=np.float64), np.asarray(correct, dtype=np.float64)
    if confidence.size == 0:
        raise ValueError("expected_calibration_error needs at least one prediction.")
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)
    count = np.bincount(index, minlength=num_bins)
    gap = np.abs(np.bincount(index, weights=correct, minlength=num_bins)
                 - np.bincount(index, weights=confidence, minlength=num_bins))  # per bin: |B| |acc - conf|
    return float(gap.sum() / count.sum())


def calibration_metrics(logits, labels, difficulties=None, num_bins: int = 10) -> dict:
    """`{"ece": ..., "ece_d<difficulty>": ...}` of a classifier's logits `(examples, classes)` against `labels` (the
    evaluate module's definition, computed here without loading it at every evaluation)."""
    probabilities, labels = softmax(np.asarray(logits, dtype=np.float64)), np.asarray(labels)
    confidence, correct = probabilities.max(-1), probabilities.argmax(-1) == labels
    metrics = {"ece": expected_calibration_error(confidence, correct, num_bins)}
    if difficulties is not None:
        difficulties = np.asarray(difficulties)
        for d in sorted(set(difficulties.tolist())):
            rows = difficulties == d
            metrics[f"ece_d{d}"] = expected_calibration_error(confidence[rows], correct[rows], num_bins)
    return metrics


__all__ = ["EXPECTED_CALIBRATION_ERROR", "calibration_metrics", "expected_calibration_error", "softmax"]
