"""Expected calibration error (data/metrics/expected_calibration_error) on hand-worked examples, and the reliability
diagram drawn from its bins."""

import evaluate
import numpy as np
import pytest

from lengthgen.data.calibration import EXPECTED_CALIBRATION_ERROR, calibration_metrics
from lengthgen.plots import reliability_diagram

# four examples: top-label confidences 0.9 (right), 0.8 (wrong), 0.7 (right), 0.6 (right)
PROBABILITIES = [[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]]
LABELS = [0, 1, 1, 0]


@pytest.fixture(scope="module")
def metric():
    return evaluate.load(EXPECTED_CALIBRATION_ERROR)


def test_ten_bins_hand_worked(metric):
    """Each example alone in its bin ((0.8, 0.9], (0.7, 0.8], (0.6, 0.7], (0.5, 0.6]): ECE = mean |acc - conf| =
    (0.1 + 0.8 + 0.3 + 0.4) / 4 = 0.4."""
    result = metric.compute(predictions=PROBABILITIES, references=LABELS)
    assert result["expected_calibration_error"] == pytest.approx(0.4)
    assert result["accuracy"] == pytest.approx(0.75)
    assert result["bin_count"] == [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    assert result["bin_accuracy"][5:9] == [1.0, 1.0, 0.0, 1.0]
    assert result["bin_confidence"][5:9] == pytest.approx([0.6, 0.7, 0.8, 0.9])


def test_two_bins_average_out_and_difficulties_split(metric):
    """With bins (0, 0.5] and (0.5, 1] all four share a bin: accuracy 0.75 = mean confidence 0.75, ECE 0. Per
    difficulty (1: the first two, 2: the last two): (|1 - 0.9| + |0 - 0.8|) / 2 = 0.45 and (0.3 + 0.4) / 2 = 0.35."""
    result = metric.compute(predictions=PROBABILITIES, references=LABELS, num_bins=2, difficulties=[1, 1, 2, 2])
    assert result["expected_calibration_error"] == pytest.approx(0.0, abs=1e-12)
    result = metric.compute(predictions=PROBABILITIES, references=LABELS, difficulties=[1, 1, 2, 2])
    assert result["expected_calibration_error_by_difficulty"] == pytest.approx({1: 0.45, 2: 0.35})
    assert result["accuracy_by_difficulty"] == {1: 0.5, 2: 1.0}


def test_calibration_metrics_from_logits():
    logits = np.log(np.array(PROBABILITIES)) + 3.0  # a softmax gives the probabilities back
    assert calibration_metrics(logits, LABELS, [1, 1, 2, 2]) == pytest.approx({"ece": 0.4, "ece_d1": 0.45,
                                                                               "ece_d2": 0.35})


def test_calibration_metrics_agree_with_the_module(metric):
    rng = np.random.default_rng(0)
    logits, labels, difficulties = rng.normal(size=(200, 4)) * 3, rng.integers(0, 4, 200), rng.integers(1, 4, 200)
    probabilities = np.exp(logits) / np.exp(logits).sum(-1, keepdims=True)
    result = metric.compute(predictions=probabilities.tolist(), references=labels.tolist(),
                            difficulties=difficulties.tolist())
    expected = {"ece": result["expected_calibration_error"],
                **{f"ece_d{d}": v for d, v in result["expected_calibration_error_by_difficulty"].items()}}
    assert calibration_metrics(logits, labels, difficulties) == pytest.approx(expected)


@pytest.mark.parametrize(
    "predictions, references, message",
    [
        ([[2.0, -1.0]], [0], "probabilities"),
        ([[0.5, 0.5]], [2], r"class ids in \[0, 2\)"),
        ([[0.5, 0.5], [1.0]], [0, 0], "same classes"),
    ],
)
def test_bad_input_is_named(metric, predictions, references, message):
    with pytest.raises(ValueError, match=message):
        metric.compute(predictions=predictions, references=references)


def test_reliability_diagram_draws_the_filled_bins():
    result = evaluate.load(EXPECTED_CALIBRATION_ERROR).compute(predictions=PROBABILITIES, references=LABELS)
    figure = reliability_diagram(result["bin_accuracy"], result["bin_confidence"], result["bin_count"], "tiny",
                                 result["expected_calibration_error"])
    top, bottom = figure.axes
    heights = sorted(round(bar.get_height(), 6) for bar in top.containers[0])
    assert heights == [0.0, 1.0, 1.0, 1.0]  # the four filled bins' accuracies
    assert [bar.get_height() for bar in bottom.containers[0]] == result["bin_count"]
    assert "ECE 0.400" in top.get_title()
    with pytest.raises(ValueError, match="one entry per bin"):
        reliability_diagram([1.0], [0.5, 0.5], [1, 1])
