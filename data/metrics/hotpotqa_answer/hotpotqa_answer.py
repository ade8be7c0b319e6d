"""HotpotQA answer scores: an `evaluate` metric module with the official answer normalisation (Yang et al., 2018).

An answer is normalised by lower-casing it, dropping punctuation, dropping the articles "a", "an" and "the", and
collapsing whitespace. Exact match compares the normalised strings. F1 is the harmonic mean of precision and recall
over the normalised answers' word bags; when either answer normalises to "yes", "no" or "noanswer" and the two
differ, F1 is 0 (no partial credit for a wrong yes/no). Scores are averaged over examples and reported in percent,
as HotpotQA's answer-only columns (and the paper's Table 3) are.

    metric = evaluate.load("data/metrics/hotpotqa_answer")
    metric.compute(predictions=["the Eiffel Tower"], references=["Eiffel Tower"])  # {"exact_match": 100.0, "f1": 100.0}
"""

import re
import string
from collections import Counter

import datasets
import evaluate

SPECIAL_ANSWERS = ("yes", "no", "noanswer")


def normalize_answer(text: str) -> str:
    """Lower case, no punctuation, no articles, single spaces."""
    text = "".join(ch for ch in text.lower() if ch not in set(string.punctuation))
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def answer_f1(prediction: str, reference: str) -> float:
    """F1 over the words of the normalised answers, 0 for a mismatched yes / no / noanswer."""
    predicted, gold = normalize_answer(prediction), normalize_answer(reference)
    if (predicted in SPECIAL_ANSWERS or gold in SPECIAL_ANSWERS) and predicted != gold:
        return 0.0
    common = Counter(predicted.split()) & Counter(gold.split())
    overlap = sum(common.values())
    if overlap == 0:
        return 0.0
    precision, recall = overlap / len(predicted.split()), overlap / len(gold.split())
    return 2 * precision * recall / (precision + recall)


class HotpotQAAnswer(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation="Yang et al., HotpotQA: A Dataset for Diverse, Explainable Multi-hop Question Answering, "
                     "EMNLP 2018.",
            inputs_description="predictions, references: answer strings, one per question.",
            features=datasets.Features({"predictions": datasets.Value("string"),
                                        "references": datasets.Value("string")}),
        )

    def _compute(self, predictions, references):
        if not predictions:
            raise ValueError("hotpotqa_answer needs at least one answer.")
        exact = [normalize_answer(p) == normalize_answer(r) for p, r in zip(predictions, references)]
        f1 = [answer_f1(p, r) for p, r in zip(predictions, references)]
        return {"exact_match": 100.0 * sum(exact) / len(exact), "f1": 100.0 * sum(f1) / len(f1)}
