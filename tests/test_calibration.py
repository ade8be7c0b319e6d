"""Expected calibration error (lengthgen.data.scoring) on hand-worked examples, the same numbers through the
classification head of the runner's scorer, and the reliability diagram drawn from its bins."""

import numpy as np
import pytest
from transformers import EvalPrediction

from lengthgen.data.scoring import calibration_bins, expected_calibration_error, scores_by_difficulty
from lengthgen.plots import reliability_diagram
from lengthgen.training.runner import Scorer

# four examples: top-label confidences 0.9 (right), 0.8 (wrong), 0.7 (right), 0.6 (right)
CONFIDENCE = [0.9, 0.8, 0.7, 0.6]
CORRECT = [True, False, True, True]


def test_ten_bins_hand_worked():
    """Each example alone in its bin ((0.8, 0.9], (0.7, 0.8], (0.6, 0.7], (0.5, 0.6]): ECE = mean |acc - conf| =
    (0.1 + 0.8 + 0.3 + 0.4) / 4 = 0.4."""
    assert expected_calibration_error(CONFIDENCE, CORRECT) == pytest.approx(0.4)
    accuracy, confidence, count = calibration_bins(CONFIDENCE, CORRECT)
    assert count.tolist() == [0, 0, 0, 0, 0, 1, 1, 1, 1, 0]
    assert accuracy[5:9].tolist() == [1.0, 1.0, 0.0, 1.0] and confidence[5:9] == pytest.approx([0.6, 0.7, 0.8, 0.9])
    assert np.isnan(accuracy[0]) and np.isnan(confidence[9])  # empty bins


def test_bins_are_weighted_by_their_counts():
    """Two right at 0.95 share the bin (0.9, 1], one wrong at 0.55 is alone in (0.5, 0.6]: ECE = (2 |1 - 0.95| +
    1 |0 - 0.55|) / 3 = 0.65 / 3, not the mean over the two bins (0.05 + 0.55) / 2 = 0.3."""
    assert expected_calibration_error([0.95, 0.95, 0.55], [True, True, False]) == pytest.approx(0.65 / 3)


def test_two_bins_average_out_and_difficulties_split():
    """With bins (0, 0.5] and (0.5, 1] all four share a bin: accuracy 0.75 = mean confidence 0.75, ECE 0. Per
    difficulty (1: the first two, 2: the last two): (|1 - 0.9| + |0 - 0.8|) / 2 = 0.45 and (0.3 + 0.4) / 2 = 0.35."""
    assert expected_calibration_error(CONFIDENCE, CORRECT, num_bins=2) == pytest.approx(0.0, abs=1e-12)
    predicted, labels = [0, 0, 1, 0], [0, 1, 1, 0]  # the second example wrong
    scores = scores_by_difficulty(predicted, labels, [1, 1, 2, 2], confidences=CONFIDENCE)
    assert scores[1]["ece"] == pytest.approx(0.45) and scores[2]["ece"] == pytest.approx(0.35)
    assert scores[1]["accuracy"] == 0.5 and scores[2]["accuracy"] == 1.0 and scores["all"]["ece"] == pytest.approx(0.4)


def test_a_classifiers_scores_from_its_logits():
    """The runner's scorer takes what the classification head's evaluation leaves (per example: the predicted class,
    its probability, the label's log-probability) and reports accuracy and ECE overall and per difficulty."""
    probabilities = np.array([[0.9, 0.1], [0.8, 0.2], [0.3, 0.7], [0.6, 0.4]])
    labels = np.array([0, 1, 1, 0])
    predictions = np.stack([probabilities.argmax(-1), probabilities.max(-1),
                            np.log(probabilities[np.arange(4), labels])], axis=-1)
    metrics = Scorer([1, 1, 2, 2], "classification")(EvalPrediction(predictions=predictions, label_ids=labels))
    assert metrics == pytest.approx({"accuracy": 0.75, "ece": 0.4, "accuracy_d1": 0.5, "ece_d1": 0.45,
                                     "accuracy_d2": 1.0, "ece_d2": 0.35})


@pytest.mark.parametrize("confidence, correct, bins, message", [
    ([], [], 10, "at least one prediction"),
    ([0.5], [True], 0, "num_bins must be at least 1"),
])
def test_bad_input_is_named(confidence, correct, bins, message):
    with pytest.raises(ValueError, match=message):
        expected_calibration_error(confidence, correct, bins)


def test_reliability_diagram_draws_the_filled_bins():
    accuracy, confidence, count = calibration_bins(CONFIDENCE, CORRECT)
    figure = reliability_diagram(accuracy, confidence, count, "tiny", expected_calibration_error(CONFIDENCE, CORRECT))
    top, bottom = figure.axes
    heights = sorted(round(bar.get_height(), 6) for bar in top.containers[0])
    assert heights == [0.0, 1.0, 1.0, 1.0]  # the four filled bins' accuracies
    assert [bar.get_height() for bar in bottom.containers[0]] == count.tolist()
    assert "ECE 0.400" in top.get_title()
