"""What every sequence classifier of the library shares with transformers' own: the loss of each `problem_type` as
BertForSequenceClassification computes it, the attention implementation switched at run time, and bf16."""

import sys

import pytest
import torch
from torch.nn import functional as F

from lengthgen.modeling import (
    IBertConfig,
    IBertForSequenceClassification,
    LSTMClassifierConfig,
    LSTMForSequenceClassification,
    NDRConfig,
    NDRForSequenceClassification,
    PositionTransformerConfig,
    PositionTransformerForSequenceClassification,
    StackRNNConfig,
    StackRNNForSequenceClassification,
    TapeRNNConfig,
    TapeRNNForSequenceClassification,
    UniversalTransformerConfig,
    UniversalTransformerForSequenceClassification,
)

VOCAB = 12
ATTENTION = dict(hidden_size=16, num_attention_heads=2, intermediate_size=24, hidden_dropout_prob=0.0,
                 attention_probs_dropout_prob=0.0)
CLASSIFIERS = {
    "ibert": lambda **f: IBertForSequenceClassification(IBertConfig(
        vocab_size=VOCAB, num_hidden_layers=2, **ATTENTION, **f)),
    "ndr": lambda **f: NDRForSequenceClassification(NDRConfig(**{  # softmax attention, through transformers' interface
        "vocab_size": VOCAB, "hidden_size": 16, "num_attention_heads": 2, "intermediate_size": 24, "num_layers": 2,
        "hidden_dropout_prob": 0.0, "attention_query_dropout": 0.0, "attention_key_dropout": 0.0,
        "gate_dropout": 0.0, "attention_type": "softmax", "position_encoding": "relative", **f})),
    "universal_transformer": lambda **f: UniversalTransformerForSequenceClassification(UniversalTransformerConfig(
        vocab_size=VOCAB, num_layers=2, max_position_embeddings=32, **ATTENTION, **f)),
    "position_transformer": lambda **f: PositionTransformerForSequenceClassification(PositionTransformerConfig(
        vocab_size=VOCAB, num_hidden_layers=2, max_position_embeddings=32, **ATTENTION, **f)),
    "stack_rnn": lambda **f: StackRNNForSequenceClassification(StackRNNConfig(
        vocab_size=VOCAB, hidden_size=6, stack_cell_size=2, stack_size=3, **f)),
    "tape_rnn": lambda **f: TapeRNNForSequenceClassification(TapeRNNConfig(
        vocab_size=VOCAB, hidden_size=6, tape_cell_size=2, tape_size=5, **f)),
    "lstm": lambda **f: LSTMForSequenceClassification(LSTMClassifierConfig(
        vocab_size=VOCAB, hidden_size=6, hidden_dropout_prob=0.0, **f)),
}


def inputs(batch=3, length=7):
    ids = torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(0))
    ids[:, 0], ids[:, -1] = 1, 2  # begin and end tokens, for the models that read either
    return ids


@pytest.mark.parametrize("name", CLASSIFIERS)
def test_each_problem_type_gives_the_loss_transformers_classifiers_give(name):
    """One label: mean squared error against float targets; integer labels: cross-entropy; float labels of several
    classes: binary cross-entropy with logits; `problem_type` set in the config wins over the labels' dtype. Each
    checked against torch's loss on the model's own logits (BertForSequenceClassification's definitions)."""
    ids = inputs()
    torch.manual_seed(0)
    regression = CLASSIFIERS[name](num_labels=1).eval()
    logits = regression(ids).logits
    targets = torch.tensor([0.5, -1.0, 2.0])
    torch.testing.assert_close(regression(ids, labels=targets).loss, F.mse_loss(logits.squeeze(-1), targets))

    torch.manual_seed(0)
    classifier = CLASSIFIERS[name](num_labels=3).eval()
    logits = classifier(ids).logits
    classes = torch.tensor([0, 2, 1])
    torch.testing.assert_close(classifier(ids, labels=classes).loss, F.cross_entropy(logits, classes))
    several = torch.tensor([[1.0, 0.0, 1.0], [0.0, 0.0, 0.0], [0.0, 1.0, 1.0]])
    for multi_hot in (several, several.bool(), several.to(torch.uint8)):  # single-label only for long or int labels
        torch.testing.assert_close(classifier(ids, labels=multi_hot).loss,
                                   F.binary_cross_entropy_with_logits(logits, several))
    classifier.config.problem_type = "regression"  # several regression targets per row
    torch.testing.assert_close(classifier(ids, labels=several).loss, F.mse_loss(logits, several))
    classifier.config.problem_type = "single_label_classification"
    with pytest.raises(ValueError, match=r"labels have shape \(3, 3\), expected \(3,\) for single_label_classif"):
        classifier(ids, labels=several)
    with pytest.raises(ValueError, match="class ids \\(integers\\), got dtype torch.float32"):
        classifier(ids, labels=classes.float())
    with pytest.raises(ValueError, match=r"Class labels must lie in \[0, 3\)"):
        classifier(ids, labels=torch.tensor([0, 3, 1]))
    with pytest.raises(ValueError, match=r"Class labels must lie in \[0, 3\) \(or be -100"):
        classifier(ids, labels=torch.tensor([0, -1, 1]))
    # a row labelled -100 is left out, as transformers' classifiers (torch's cross-entropy) leave it out
    torch.testing.assert_close(classifier(ids, labels=torch.tensor([0, -100, 1])).loss,
                               F.cross_entropy(logits[[0, 2]], torch.tensor([0, 1])))


@pytest.mark.parametrize("name", ["ibert", "ndr", "universal_transformer", "position_transformer"])
def test_the_attention_implementation_switches_at_run_time_and_computes_the_same(name, monkeypatch):
    """`set_attn_implementation("eager")` takes effect, as in transformers' own models: the eager attention runs where
    SDPA ran before, with the same logits."""
    torch.manual_seed(0)
    model = CLASSIFIERS[name](num_labels=3).eval()
    module = sys.modules[type(model).__module__]
    eager_calls, eager = [], module.eager_attention_forward
    monkeypatch.setattr(module, "eager_attention_forward", lambda *a, **k: eager_calls.append(1) or eager(*a, **k))
    ids = inputs()
    sdpa = model(ids).logits
    assert not eager_calls
    model.set_attn_implementation("eager")
    torch.testing.assert_close(model(ids).logits, sdpa, rtol=1e-5, atol=1e-6)
    assert eager_calls


@pytest.mark.parametrize("encoding", ["relative", "abs_rel_gated"])
def test_an_ndr_with_relative_positions_runs_in_bf16(encoding):
    """The relative position keys take the model's dtype: in bf16 the logits are fp32's to bf16's precision."""
    torch.manual_seed(0)
    model = CLASSIFIERS["ndr"](num_labels=3, position_encoding=encoding).eval()
    ids = inputs()
    full = model(ids).logits
    half = model.to(torch.bfloat16)(ids).logits
    assert half.dtype == torch.bfloat16
    torch.testing.assert_close(half.float(), full, rtol=0.05, atol=0.05)


def test_the_lstm_classifier_reads_each_rows_last_real_token_and_refuses_left_padding():
    torch.manual_seed(0)
    model = CLASSIFIERS["lstm"](num_labels=3).eval()
    ids = inputs(batch=2)
    mask = torch.ones_like(ids)
    mask[1, 4:] = 0
    torch.testing.assert_close(model(ids, attention_mask=mask).logits[1], model(ids[1:, :4]).logits[0])
    with pytest.raises(ValueError, match="right padding"):
        model(ids, attention_mask=mask.flip(-1))
    mask[1] = 0
    with pytest.raises(ValueError, match="Empty sequence"):
        model(ids, attention_mask=mask)


@pytest.mark.parametrize("encoding", ["absolute", "relative", "abs_rel_gated"])
def test_an_ndr_reads_inputs_longer_than_max_position_embeddings(encoding):
    """Its position encodings are sinusoids computed for any length: the config's max_position_embeddings bounds
    nothing, as a model meant to run on longer inputs than it trained on needs."""
    torch.manual_seed(0)
    model = CLASSIFIERS["ndr"](num_labels=3, position_encoding=encoding, max_position_embeddings=4).eval()
    roomy = CLASSIFIERS["ndr"](num_labels=3, position_encoding=encoding, max_position_embeddings=64).eval()
    roomy.load_state_dict(model.state_dict())
    with torch.no_grad():
        torch.testing.assert_close(model(inputs(length=9)).logits, roomy(inputs(length=9)).logits, rtol=0, atol=0)


@pytest.mark.parametrize("model_type", ["inductive_bert", "ndr", "universal_transformer", "position_transformer",
                                        "lstm_classifier", "stack_rnn", "tape_rnn"])
@pytest.mark.parametrize("field, value", [("hidden_size", "64"), ("hidden_size", 0), ("vocab_size", -1)])
def test_every_config_names_a_size_that_is_not_a_positive_integer(model_type, field, value):
    """Before any division by it or tensor of its size: a ValueError naming the field and the value given."""
    from transformers import AutoConfig

    with pytest.raises(ValueError, match=rf"{field} must be (a positive integer|an integer >= 1), got {value!r}"):
        AutoConfig.for_model(model_type, **{field: value})
