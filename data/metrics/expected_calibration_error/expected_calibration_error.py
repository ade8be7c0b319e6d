"""Expected calibration error: an `evaluate` metric module (Naeini, Cooper and Hauskrecht, AAAI 2015; Guo, Pleiss,
Sun and Weinberger, ICML 2017).

Each example gives the model's class probabilities and the true class. Its confidence is the top-label probability,
its prediction the top label. The confidences are put into M equal-width bins ((0, 1/M], (1/M, 2/M], ..., ((M-1)/M,
1]) and

    ECE = sum_m |B_m| / n * |accuracy(B_m) - mean confidence(B_m)|

It reports ``expected_calibration_error``, ``accuracy``, the per-bin ``bin_accuracy``, ``bin_confidence`` and
``bin_count`` (a reliability diagram: `lengthgen.plots.reliability_diagram`), and with ``difficulties`` the error and
accuracy per difficulty (``expected_calibration_error_by_difficulty``, ``accuracy_by_difficulty``).

    metric = evaluate.load("data/metrics/expected_calibration_error")
    metric.compute(predictions=[[0.9, 0.1], [0.8, 0.2]], references=[0, 1], num_bins=10)
"""

from collections import defaultdict

import datasets
import evaluate
import numpy as np

_FEATURES = {"predictions": datasets.Sequence(datasets.Value("float64")), "references": datasets.Value("int64")}


def calibration_bins(probabilities: np.ndarray, references: np.ndarray, num_bins: int):
    """Per equal-width bin of the top-label confidence: (accuracy, mean confidence, count); empty bins give NaN."""
    confidence, correct = probabilities.max(-1), probabilities.argmax(-1) == references
    edges = np.linspace(0.0, 1.0, num_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, num_bins - 1)  # edges[i] < c <= edges[i+1]
    count = np.bincount(index, minlength=num_bins)
    with np.errstate(invalid="ignore", divide="ignore"):
        accuracy = np.bincount(index, weights=correct, minlength=num_bins) / count
        mean_confidence = np.bincount(index, weights=confidence, minlength=num_bins) / count
    return accuracy, mean_confidence, count


def expected_calibration_error(probabilities: np.ndarray, references: np.ndarray, num_bins: int) -> float:
    accuracy, confidence, count = calibration_bins(probabilities, references, num_bins)
    filled = count > 0
    return float((count[filled] / count.sum() * np.abs(accuracy[filled] - confidence[filled])).sum())


class ExpectedCalibrationError(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation="Naeini, Cooper and Hauskrecht, Obtaining Well Calibrated Probabilities Using Bayesian Binning, "
            "AAAI 2015; Guo, Pleiss, Sun and Weinberger, On Calibration of Modern Neural Networks, ICML 2017.",
            inputs_description="predictions: class probabilities per example (rows summing to 1); references: the "
            "true class; difficulties (optional): an int per example; num_bins (compute argument, default 10).",
            features=[
                datasets.Features(_FEATURES),
                datasets.Features({**_FEATURES, "difficulties": datasets.Value("int64")}),
            ],
        )

    def _compute(self, predictions, references, difficulties=None, num_bins: int = 10):
        if not predictions:
            raise ValueError("expected_calibration_error needs at least one example.")
        if num_bins < 1:
            raise ValueError(f"num_bins must be at least 1, got {num_bins}.")
        if len({len(p) for p in predictions}) != 1:
            raise ValueError("Every prediction must give a probability for each of the same classes.")
        probabilities, labels = np.asarray(predictions, dtype=np.float64), np.asarray(references)
        if probabilities.min() < 0 or probabilities.max() > 1 or not np.allclose(probabilities.sum(-1), 1, atol=1e-3):
            raise ValueError("predictions must be probabilities (each row in [0, 1], summing to 1): apply a softmax "
                             "to logits first.")
        if labels.min() < 0 or labels.max() >= probabilities.shape[1]:
            raise ValueError(f"references must be class ids in [0, {probabilities.shape[1]}).")
        accuracy, confidence, count = calibration_bins(probabilities, labels, num_bins)
        result = {
            "expected_calibration_error": expected_calibration_error(probabilities, labels, num_bins),
            "accuracy": float((probabilities.argmax(-1) == labels).mean()),
            "bin_accuracy": accuracy.tolist(),
            "bin_confidence": confidence.tolist(),
            "bin_count": count.tolist(),
        }
        if difficulties is not None:
            rows = defaultdict(list)
            for row, difficulty in enumerate(difficulties):
                rows[difficulty].append(row)
            result["expected_calibration_error_by_difficulty"] = {
                d: expected_calibration_error(probabilities[r], labels[r], num_bins) for d, r in sorted(rows.items())
            }
            result["accuracy_by_difficulty"] = {
                d: float((probabilities[r].argmax(-1) == labels[r]).mean()) for d, r in sorted(rows.items())
            }
        return result
