"""Masked-span accuracy: an `evaluate` metric module for the length-split masked tasks.

Per example it takes the predicted and reference token ids at the masked positions, the example's difficulty, and
optionally the log-probability the model gave each reference token. It reports

* ``sequence_accuracy``: the share of examples whose whole masked span is restored exactly;
* ``token_accuracy``: the share of masked tokens restored;
* ``sequence_accuracy_by_difficulty`` and ``token_accuracy_by_difficulty``: the same per difficulty (digits, length);
* with log-probabilities: ``nll`` (mean nats per masked token), ``bits_per_token`` (bits per character on character
  tasks) and ``perplexity`` over the masked tokens.

    metric = evaluate.load("data/metrics/masked_span_accuracy")
    metric.compute(predictions=[[1, 2]], references=[[1, 3]], difficulties=[2])
"""

import math
from collections import defaultdict

import datasets
import evaluate

_FEATURES = {
    "predictions": datasets.Sequence(datasets.Value("int64")),
    "references": datasets.Sequence(datasets.Value("int64")),
    "difficulties": datasets.Value("int64"),
}


class MaskedSpanAccuracy(evaluate.Metric):
    def _info(self):
        return evaluate.MetricInfo(
            description=__doc__,
            citation="Nam et al., I-BERT: Inductive Generalization of Transformer to Arbitrary Context Lengths, 2020.",
            inputs_description="predictions, references: token ids at the masked positions; difficulties: ints; "
            "target_log_probs (optional): natural-log probabilities of the reference tokens.",
            features=[
                datasets.Features(_FEATURES),
                datasets.Features({**_FEATURES, "target_log_probs": datasets.Sequence(datasets.Value("float64"))}),
            ],
        )

    def _compute(self, predictions, references, difficulties, target_log_probs=None):
        if not predictions:
            raise ValueError("masked_span_accuracy needs at least one example.")
        seq_hits, tok_hits, tok_counts = defaultdict(int), defaultdict(int), defaultdict(int)
        examples = defaultdict(int)
        for predicted, reference, difficulty in zip(predictions, references, difficulties):
            if len(predicted) != len(reference):
                raise ValueError(f"A prediction has {len(predicted)} tokens but its reference has {len(reference)}.")
            hits = sum(p == r for p, r in zip(predicted, reference))
            examples[difficulty] += 1
            seq_hits[difficulty] += hits == len(reference)
            tok_hits[difficulty] += hits
            tok_counts[difficulty] += len(reference)
        n_tokens = sum(tok_counts.values())
        result = {
            "sequence_accuracy": sum(seq_hits.values()) / len(predictions),
            "token_accuracy": sum(tok_hits.values()) / max(n_tokens, 1),
            "sequence_accuracy_by_difficulty": {d: seq_hits[d] / examples[d] for d in sorted(examples)},
            "token_accuracy_by_difficulty": {d: tok_hits[d] / max(tok_counts[d], 1) for d in sorted(examples)},
        }
        if target_log_probs is not None:
            log_probs = [lp for example in target_log_probs for lp in example]
            nll = -sum(log_probs) / max(len(log_probs), 1)
            result.update(nll=nll, bits_per_token=nll / math.log(2), perplexity=math.exp(nll))
        return result
