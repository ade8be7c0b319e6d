"""Calibration of a classifier's probabilities: the expected calibration error overall and per difficulty, through the
`expected_calibration_error` evaluate module in data/metrics/ (for run_classification.py and the leaderboard)."""

import os

import evaluate
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
    """`{"ece": ..., "ece_d<difficulty>": ...}` of a classifier's logits `(examples, classes)` against `labels`."""
    result = evaluate.load(EXPECTED_CALIBRATION_ERROR).compute(
        predictions=softmax(np.asarray(logits, dtype=np.float64)).tolist(), references=list(labels),
        difficulties=None if difficulties is None else list(difficulties), num_bins=num_bins,
    )
    flat = {"ece": result["expected_calibration_error"]}
    flat.update({f"ece_d{d}": v for d, v in result.get("expected_calibration_error_by_difficulty", {}).items()})
    return flat


__all__ = ["EXPECTED_CALIBRATION_ERROR", "calibration_metrics", "expected_calibration_error", "softmax"]
