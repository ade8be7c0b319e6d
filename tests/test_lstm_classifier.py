"""The LSTM classifier of the recurrent-inductive-bias study: the LSTM equations by hand, right padding, the Auto
classes and remote code."""

import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification

from lengthgen.modeling import LSTMClassifierConfig, LSTMForSequenceClassification


def tiny(**fields):
    return LSTMClassifierConfig(**{"vocab_size": 12, "hidden_size": 6, "num_labels": 3, "hidden_dropout_prob": 0.0,
                                   **fields})


def test_logits_are_the_lstm_equations_at_the_last_real_token():
    torch.manual_seed(0)
    model = LSTMForSequenceClassification(tiny()).eval()
    ids = torch.tensor([[3, 5, 7, 2], [4, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    lstm, d = model.lstm, 6
    expected = []
    for row, length in ((0, 4), (1, 2)):
        h, c = torch.zeros(d), torch.zeros(d)
        for token in ids[row, :length]:
            x = model.embeddings.weight[token]
            gates = lstm.weight_ih_l0 @ x + lstm.bias_ih_l0 + lstm.weight_hh_l0 @ h + lstm.bias_hh_l0
            i, f, g, o = gates.split(d)  # PyTorch's gate order
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        expected.append(model.classifier(h))
    with torch.no_grad():
        logits = model(ids, attention_mask=mask).logits
        alone = model(ids[1:, :2]).logits
    torch.testing.assert_close(logits, torch.stack(expected).detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(logits[1:], alone, rtol=1e-6, atol=1e-7)


def test_bidirectional_logits_are_both_directions_final_states_of_the_real_tokens():
    """`bidirectional`: the classifier reads [left-to-right state at the last real token, right-to-left state after
    reading back to the first], each direction the LSTM equations by hand with its own weights; padding changes
    nothing (the right-to-left direction starts at the last real token, not at the padding)."""
    torch.manual_seed(0)
    model = LSTMForSequenceClassification(tiny(bidirectional=True)).eval()
    ids = torch.tensor([[3, 5, 7, 2], [4, 1, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 0, 0]])
    lstm, d = model.lstm, 6

    def run(tokens, suffix):
        h, c = torch.zeros(d), torch.zeros(d)
        for token in tokens:
            x = model.embeddings.weight[token]
            gates = (getattr(lstm, f"weight_ih_l0{suffix}") @ x + getattr(lstm, f"bias_ih_l0{suffix}")
                     + getattr(lstm, f"weight_hh_l0{suffix}") @ h + getattr(lstm, f"bias_hh_l0{suffix}"))
            i, f, g, o = gates.split(d)
            c = torch.sigmoid(f) * c + torch.sigmoid(i) * torch.tanh(g)
            h = torch.sigmoid(o) * torch.tanh(c)
        return h

    expected = [model.classifier(torch.cat([run(ids[row, :length], ""), run(ids[row, :length].flip(0), "_reverse")]))
                for row, length in ((0, 4), (1, 2))]
    with torch.no_grad():
        out = model(ids, attention_mask=mask, output_hidden_states=True)
        alone = model(ids[1:, :2]).logits
    torch.testing.assert_close(out.logits, torch.stack(expected).detach(), rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(out.logits[1:], alone, rtol=1e-6, atol=1e-7)
    assert out.hidden_states[1].shape == (2, 4, 2 * d) and not out.hidden_states[1][1, 2:].any()


def test_auto_classes_save_load_and_trust_remote_code_without_lengthgen(tmp_path):
    config = AutoConfig.for_model("lstm_classifier", vocab_size=12, hidden_size=6, num_layers=2, num_labels=2)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    assert isinstance(model, LSTMForSequenceClassification)
    ids = torch.randint(1, 12, (2, 5))
    with torch.no_grad():
        expected = model(ids).logits
    model.save_pretrained(tmp_path)
    torch.save({"ids": ids, "expected": expected}, tmp_path / "probe.pt")
    script = f"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.modules["lengthgen"] = None
import torch
from transformers import AutoModelForSequenceClassification
model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
probe = torch.load({str(tmp_path / "probe.pt")!r})
with torch.no_grad():
    assert torch.equal(model(probe["ids"]).logits, probe["expected"])
print("REMOTE_CODE_OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE_CODE_OK" in result.stdout


@pytest.mark.parametrize(
    "call, error, message",
    [
        (lambda m: m(torch.tensor([[1, 12]])), ValueError, r"\[0, 12\)"),
        (lambda m: m(torch.ones(1, 3)), ValueError, "integer token ids, got dtype torch.float32"),
        (lambda m: m(torch.zeros(1, 0, dtype=torch.long)), ValueError, "none empty"),
        (lambda m: m(torch.ones(2, 3, dtype=torch.long), labels=torch.tensor([0])), ValueError, "labels have shape"),
        (lambda m: m(torch.ones(1, 3, dtype=torch.long), nosuch=1), TypeError, "nosuch"),
    ],
)
def test_bad_input_is_named(call, error, message):
    with pytest.raises(error, match=message):
        call(LSTMForSequenceClassification(tiny()))
