import pytest
import torch
from transformers import AutoModelForSequenceClassification

from lengthgen.data.tokenization import word_tokenizer
from lengthgen.modeling import NDRConfig
from lengthgen.training.models import predict_classes


def test_predict_classes_in_padded_batches_answers_as_one_problem_at_a_time():
    """The batched, padded predictions equal the model's answer to each problem alone, with the forward arguments
    passed on (a tiny untrained NDR, its gates open, so that its answers differ from problem to problem and a mixed-up
    order would show)."""
    problems = ["[SM [MIN 1 2 ] 3 ]", "[MAX 7 2 ]", "[MED [SM 4 4 ] 9 1 [MIN 3 5 ] ]", "[MIN 0 9 ]"]
    tokenizer = word_tokenizer(problems)
    torch.manual_seed(0)
    config = NDRConfig(vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_attention_heads=2,
                       num_layers=3, num_labels=10, pad_token_id=tokenizer.pad_token_id, gate_bias_init=3.0)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    batched = predict_classes(model, tokenizer, problems, batch_size=3, num_steps=5)
    alone = [model(**tokenizer([p], return_tensors="pt"), num_steps=5).logits.argmax(-1).item() for p in problems]
    assert batched.tolist() == alone and len(set(alone)) > 1
    assert predict_classes(model, tokenizer, problems, num_steps=1).tolist() != alone  # num_steps reaches the model


def test_config_overrides_take_values_of_their_fields_kinds():
    """An integer stands for a number (initializer_range=1), None for any field; a string for an integer does not,
    and one of lengthgen's own models refuses a field it lacks, where another model's config keeps it (it may read
    some fields only when set)."""
    from transformers import AutoConfig, BertConfig

    from lengthgen.cli import UsageError
    from lengthgen.training.models import check_overrides

    ndr = AutoConfig.for_model("ndr")
    check_overrides(ndr, {"initializer_range": 1, "num_steps": None, "hidden_size": 64})
    with pytest.raises(UsageError, match=r"hidden_size of ndr takes an integer \(now 128\), got '64'"):
        check_overrides(ndr, {"hidden_size": "64"})
    with pytest.raises(UsageError, match=r"hidden_dropout_prob of ndr takes a number \(now 0.1\), got True"):
        check_overrides(ndr, {"hidden_dropout_prob": True})
    with pytest.raises(UsageError, match="ndr has no config field 'depth'"):
        check_overrides(ndr, {"depth": 3})
    check_overrides(BertConfig(), {"depth": 3})  # kept, with a warning
