"""Universal Transformer: one step and several against a hand-written layer (coordinate embedding, relative bias),
causality, ACT on hand-worked halting cases and per position as Graves writes it,
the Auto classes and remote code."""

import math
import subprocess
import sys

import pytest
import torch
from torch.nn import functional as F
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification

from lengthgen.modeling import (
    UniversalTransformerConfig,
    UniversalTransformerForSequenceClassification,
    UniversalTransformerModel,
)


def tiny(**fields):
    defaults = dict(vocab_size=20, hidden_size=16, num_attention_heads=2, intermediate_size=24, num_layers=3,
                    num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    max_position_embeddings=32)
    return UniversalTransformerConfig(**{**defaults, **fields})


def batch(lengths=(7, 5), seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 20, (len(lengths), max(lengths)), generator=generator)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return ids.masked_fill(mask == 0, 0), mask


def sinusoid(position: float, dim: int) -> torch.Tensor:
    """Eq. 4 of Dehghani et al. written out: sin(pos / 10000^(2j/d)) at 2j, cos at 2j + 1."""
    return torch.tensor([math.sin(position / 10000 ** (2 * (k // 2) / dim)) if k % 2 == 0
                         else math.cos(position / 10000 ** (2 * (k // 2) / dim)) for k in range(dim)])


def hand_layer(layer, h, key_mask, causal=False, bias=None):
    """A post-LayerNorm transformer layer written from its equations with the module's weights (`bias`: an additive
    `(heads, n, n)` term of the attention logits)."""
    attention, heads = layer.attention, 2
    n, d = h.shape[1], h.shape[2]
    split = lambda x: x.view(h.shape[0], n, heads, d // heads).transpose(1, 2)  # noqa: E731
    q, k, v = split(attention.query(h)), split(attention.key(h)), split(attention.value(h))
    scores = q @ k.transpose(-1, -2) / math.sqrt(d // heads) + (0 if bias is None else bias)
    allowed = key_mask[:, None, None, :].bool()
    if causal:
        allowed = allowed & torch.ones(n, n).tril().bool()
    scores = scores.masked_fill(~allowed, float("-inf"))
    context = (scores.softmax(-1) @ v).transpose(1, 2).reshape(h.shape)
    a = F.layer_norm(h + attention.output(context), (d,), layer.attention_norm.weight, layer.attention_norm.bias,
                     layer.attention_norm.eps)
    transition = layer.transition_out(torch.relu(layer.transition_in(a)))
    return F.layer_norm(a + transition, (d,), layer.transition_norm.weight, layer.transition_norm.bias,
                        layer.transition_norm.eps)


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("implementation", ["eager", "sdpa"])
def test_one_step_is_a_hand_written_layer_on_the_coordinate_embedded_input(causal, implementation):
    torch.manual_seed(0)
    model = UniversalTransformerModel(tiny(num_layers=1, is_causal=causal)).eval()
    model.set_attn_implementation(implementation)
    ids, mask = batch()
    with torch.no_grad():
        # Vaswani et al. 3.4: token embeddings times sqrt(d_model) (scale_embedding, the default), d_model = 16
        h = model.embeddings(ids) * 4.0 + torch.stack([sinusoid(i, 16) + sinusoid(1, 16) for i in range(ids.shape[1])])
        expected = hand_layer(model.layer, h, mask, causal)
        out = model(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(out[real], expected[real], rtol=1e-4, atol=1e-5)


def test_steps_share_one_layer_and_num_steps_goes_deeper():
    torch.manual_seed(0)
    model = UniversalTransformerModel(tiny(position_encoding="none")).eval()
    ids, mask = batch()
    with torch.no_grad():
        h = model.embeddings(ids) * 4.0  # sqrt(d_model)
        for _ in range(5):
            h = hand_layer(model.layer, h, mask)
        out = model(ids, attention_mask=mask, num_steps=5, output_hidden_states=True)
    real = mask.bool()
    torch.testing.assert_close(out.last_hidden_state[real], h[real], rtol=1e-4, atol=1e-5)
    assert len(out.hidden_states) == 6  # the first step's input and five steps
    with pytest.raises(ValueError, match="num_steps must be >= 1"):
        model(ids, num_steps=0)


def test_every_step_adds_the_coordinate_embedding_of_its_position_and_its_step():
    """Eq. 4 at every step t = 1..4: H^t = layer(H^{t-1} + P^t), P^t_i = sinusoid(i) + sinusoid(t); with relative
    positions the step signal sinusoid(t) alone (the positions are in the attention bias)."""
    torch.manual_seed(0)
    ids, mask = batch()
    for encoding in ("absolute", "relative"):
        model = UniversalTransformerModel(tiny(position_encoding=encoding)).eval()
        n = ids.shape[1]
        bias = None
        if encoding == "relative":
            with torch.no_grad():
                model.relative_bias.weight.normal_()
            bias = torch.stack([torch.stack([model.relative_bias.weight[min(max(j - i, -16), 16) + 16]
                                             for j in range(n)]) for i in range(n)]).permute(2, 0, 1)
        with torch.no_grad():
            h = model.embeddings(ids) * 4.0
            for t in range(1, 5):
                signal = torch.stack([(sinusoid(i, 16) if encoding == "absolute" else 0) + sinusoid(t, 16)
                                      for i in range(n)])
                h = hand_layer(model.layer, h + signal, mask, bias=bias)
            out = model(ids, attention_mask=mask, num_steps=4).last_hidden_state
        real = mask.bool()
        torch.testing.assert_close(out[real], h[real], rtol=1e-4, atol=1e-5)


def test_relative_bias_is_one_learned_scalar_per_head_and_clipped_offset():
    """Attention logits of the relative encoding: the content term plus w[clip(j - i, -k, k)] of the head, set here
    to 10 * (j - i clipped) + head, so the weights are hand-computable from the offsets (k = 2)."""
    torch.manual_seed(0)
    model = UniversalTransformerModel(tiny(position_encoding="relative", max_relative_position=2, num_layers=1)).eval()
    with torch.no_grad():
        for offset in range(-2, 3):
            model.relative_bias.weight[offset + 2] = torch.tensor([10.0 * offset, 10.0 * offset + 1])
        for linear in (model.layer.attention.query, model.layer.attention.key):  # content logits of zero
            linear.weight.zero_()
            linear.bias.zero_()
        out = model(batch((6,))[0], output_attentions=True)
    for head in range(2):
        for i in range(6):
            logits = torch.tensor([10.0 * min(max(j - i, -2), 2) + head for j in range(6)])
            torch.testing.assert_close(out.attentions[0][0, head, i], logits.softmax(-1), rtol=1e-5, atol=1e-6)


def test_act_per_position_is_graves_halting_with_a_padded_ponder_cost():
    """A halting unit with random weights (a different p at every position and step, read from the step's input
    with its coordinate embedding): per position, written out as Graves (2016) states it, the steps before the one
    where the sum of p would reach the threshold are weighted by p, that one by the remainder R; ponder time N + R;
    the ponder cost the mean over the real positions only."""
    torch.manual_seed(0)
    model = UniversalTransformerModel(tiny(use_act=True, act_threshold=0.99)).eval()
    with torch.no_grad():
        model.halting_unit.weight.normal_(0, 1.0)
        model.halting_unit.bias.fill_(-0.5)
    ids, mask = batch((7, 5))
    n, steps = ids.shape[1], 6
    with torch.no_grad():
        h, inputs, states = model.embeddings(ids) * 4.0, [], []
        for t in range(1, steps + 1):
            h = h + torch.stack([sinusoid(i, 16) + sinusoid(t, 16) for i in range(n)])
            inputs.append(h)
            h = hand_layer(model.layer, h, mask)
            states.append(h)
        out = model(ids, attention_mask=mask, num_steps=steps)
    expected, ponder = torch.zeros_like(h), torch.zeros(2, n)
    counts = []
    for row in range(2):
        for i in range(n):
            total = 0.0
            for t in range(steps):
                p = torch.sigmoid(model.halting_unit(inputs[t][row, i])).item()
                if t == steps - 1 or total + p >= 0.99:
                    expected[row, i] += (1 - total) * states[t][row, i]
                    ponder[row, i] = t + 1 + (1 - total)
                    counts.append(t + 1)
                    break
                total += p
                expected[row, i] += p * states[t][row, i]
    assert len(set(counts)) > 1  # positions halt at different steps
    torch.testing.assert_close(out.last_hidden_state, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.ponder_times, ponder, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(out.ponder_cost, (ponder[0].sum() + ponder[1, :5].sum()) / 12, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("fields", [dict(), dict(position_encoding="relative"), dict(use_act=True)])
def test_causal_mode_leaks_nothing_from_later_tokens(fields):
    torch.manual_seed(0)
    model = UniversalTransformerForSequenceClassification(tiny(is_causal=True, **fields)).eval()
    ids, _ = batch((9,))
    changed = ids.clone()
    changed[0, 6:] = (changed[0, 6:] % 19) + 1
    with torch.no_grad():
        before = model.universal_transformer(ids).last_hidden_state
        after = model.universal_transformer(changed).last_hidden_state
        # the classifier reads the last token: a prefix's logits are those of the prefix alone
        prefix = model(ids[:, :6]).logits
    torch.testing.assert_close(before[:, :6], after[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(before[:, 6:], after[:, 6:])
    torch.testing.assert_close(prefix, model.classifier(before[:, 5]), rtol=1e-5, atol=1e-6)


def test_right_padding_gives_each_sequence_its_own_result():
    torch.manual_seed(0)
    model = UniversalTransformerForSequenceClassification(tiny(position_encoding="relative")).eval()
    ids, mask = batch((7, 4))
    with torch.no_grad():
        together = model(ids, attention_mask=mask).logits
        alone = model(ids[1:, :4]).logits
    torch.testing.assert_close(together[1:], alone, rtol=1e-5, atol=1e-6)


def act_model(p: float, threshold=0.99, accumulation="sum"):
    torch.manual_seed(0)
    model = UniversalTransformerModel(tiny(position_encoding="none", use_act=True, act_threshold=threshold,
                                           act_accumulation=accumulation)).eval()
    with torch.no_grad():  # a constant halting probability p at every position and step
        model.halting_unit.weight.zero_()
        model.halting_unit.bias.fill_(math.log(p / (1 - p)))
    return model


@pytest.mark.parametrize(
    "p, steps, weights, ponder",
    [
        (0.3, 6, [0.3, 0.3, 0.3, 0.1], 4.1),  # 0.3, 0.6, 0.9, then 1.2 >= 0.99: halts at 4, R = 1 - 0.9
        (0.5, 6, [0.5, 0.5], 2.5),  # 0.5, then 1.0 >= 0.99 at step 2: R = 0.5
        (0.1, 3, [0.1, 0.1, 0.8], 3.8),  # never reaches 0.99: the last step halts it, R = 0.8
    ],
)
def test_act_halts_where_the_cumulative_halting_probability_crosses_the_threshold(p, steps, weights, ponder):
    model = act_model(p)
    ids, mask = batch((6, 6))
    with torch.no_grad():
        states, h = [], model.embeddings(ids) * 4.0  # sqrt(d_model)
        for _ in range(steps):
            h = hand_layer(model.layer, h, mask)
            states.append(h)
        expected = sum(w * s for w, s in zip(weights, states))
        out = model(ids, attention_mask=mask, num_steps=steps)
    torch.testing.assert_close(out.last_hidden_state, expected, rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(out.ponder_times, torch.full((2, 6), ponder), rtol=0, atol=1e-5)
    torch.testing.assert_close(out.ponder_cost, torch.tensor(ponder), rtol=0, atol=1e-5)


def test_act_interpolate_is_the_authors_running_mix():
    model = act_model(0.3, accumulation="interpolate")
    ids, mask = batch((6, 6))
    with torch.no_grad():
        expected, h = torch.zeros(2, 6, 16), model.embeddings(ids) * 4.0
        for w in [0.3, 0.3, 0.3, 0.1]:
            h = hand_layer(model.layer, h, mask)
            expected = w * h + (1 - w) * expected
        out = model(ids, attention_mask=mask, num_steps=6)
    torch.testing.assert_close(out.last_hidden_state, expected, rtol=1e-4, atol=1e-5)


def test_act_ponder_cost_joins_the_loss_and_trains():
    torch.manual_seed(0)
    model = UniversalTransformerForSequenceClassification(tiny(use_act=True, act_loss_weight=0.5))
    ids, mask = batch()
    labels = torch.tensor([0, 2])
    out = model(ids, attention_mask=mask, labels=labels)
    cross_entropy = F.cross_entropy(out.logits, labels)
    torch.testing.assert_close(out.loss, cross_entropy + 0.5 * out.ponder_cost)
    out.loss.backward()
    assert model.universal_transformer.halting_unit.weight.grad.abs().sum() > 0


def test_auto_classes_save_load_and_trust_remote_code_without_lengthgen(tmp_path):
    fields = {k: v for k, v in tiny(is_causal=True, use_act=True).to_diff_dict().items() if k != "model_type"}
    config = AutoConfig.for_model("universal_transformer", **fields)
    assert isinstance(config, UniversalTransformerConfig)
    torch.manual_seed(0)
    model = AutoModelForSequenceClassification.from_config(config).eval()
    assert isinstance(AutoModel.from_config(config), UniversalTransformerModel)
    ids, mask = batch()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).logits
    model.save_pretrained(tmp_path)
    reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(reloaded(ids, attention_mask=mask).logits, expected)
    torch.save({"ids": ids, "mask": mask, "expected": expected}, tmp_path / "probe.pt")
    script = f"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.modules["lengthgen"] = None
import torch
from transformers import AutoModelForSequenceClassification
model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
probe = torch.load({str(tmp_path / "probe.pt")!r})
with torch.no_grad():
    assert torch.equal(model(probe["ids"], attention_mask=probe["mask"]).logits, probe["expected"])
print("REMOTE_CODE_OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE_CODE_OK" in result.stdout


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(position_encoding="rotary"), "position_encoding"),
        (dict(is_causal=True, classifier_position="first"), "classifier_position='last'"),
        (dict(hidden_size=15), "multiple"),
        (dict(act_accumulation="mean"), "act_accumulation"),
        (dict(act_threshold=0.0), "act_threshold"),
    ],
)
def test_bad_config_raises_value_error(fields, message):
    with pytest.raises(ValueError, match=message):
        tiny(**fields)


@pytest.mark.parametrize(
    "ids, mask, message",
    [
        (torch.tensor([[1, 20]]), None, "outside the vocabulary"),
        (torch.ones(1, 3), None, "integer token ids, got dtype torch.float32"),
        (torch.zeros(1, 0, dtype=torch.long), None, "Empty"),
        (torch.ones(1, 33, dtype=torch.long), None, "max_position_embeddings"),
        (torch.ones(2, 3, dtype=torch.long), torch.tensor([[0, 1, 1], [1, 1, 1]]), "right padding"),
    ],
)
def test_bad_input_raises_value_error(ids, mask, message):
    model = UniversalTransformerForSequenceClassification(tiny())
    with pytest.raises(ValueError, match=message):
        model(ids, attention_mask=mask)
    with pytest.raises(TypeError, match="nosuch"):
        model(torch.ones(1, 3, dtype=torch.long), nosuch=1)


def test_scaled_token_embeddings_start_at_the_scale_of_the_coordinate_embedding():
    """`scale_embedding` (default): embeddings drawn with std d^-1/2 and multiplied by sqrt(d), so a token's vector
    has about the root-mean-square of P^t's unit sines and cosines (0.71), not BERT's 0.02; off: BERT's, unscaled."""
    torch.manual_seed(0)
    d = 256
    scaled = UniversalTransformerModel(tiny(hidden_size=d, vocab_size=4000))
    tokens = scaled.embeddings.weight[1:] * scaled.embedding_scale
    assert abs(tokens.pow(2).mean().sqrt().item() - 1.0) < 0.02 and scaled.embedding_scale == 16.0
    bert_like = UniversalTransformerModel(tiny(hidden_size=d, vocab_size=4000, scale_embedding=False))
    assert bert_like.embedding_scale == 1.0
    assert abs(bert_like.embeddings.weight[1:].std().item() - bert_like.config.initializer_range) < 0.002
