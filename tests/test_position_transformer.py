"""Position Transformer: each position encoding against an independent truth (NoPE = the position signal zeroed by
hand, T5's buckets and bias from transformers' T5, FIRE's formula written out, Abacus places worked by hand, RoPE =
transformers' Llama attention), padding, eager = SDPA, shift invariance of the relative encodings, remote code."""

import math
import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModel, AutoModelForSequenceClassification, LlamaConfig, T5Config
from transformers.models.llama.modeling_llama import LlamaAttention, LlamaRotaryEmbedding
from transformers.models.t5.modeling_t5 import T5Attention

from lengthgen.modeling import (
    PositionTransformerConfig,
    PositionTransformerForSequenceClassification,
    PositionTransformerModel,
)
from lengthgen.modeling.position_transformer.modeling_position_transformer import (
    abacus_positions,
    alibi_slopes,
    relative_position_bucket,
    rotary_cos_sin,
)

ENCODINGS = ["none", "absolute", "rope", "t5_bias", "fire", "alibi", "abacus"]
DIGITS = [5, 6, 7, 8, 9, 10, 11, 12, 13, 14]  # the ids of "0" ... "9" in the vocabulary of the tests below


def tiny(**fields):
    defaults = dict(vocab_size=20, hidden_size=16, num_attention_heads=2, intermediate_size=24, num_hidden_layers=2,
                    num_labels=3, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
                    abacus_digit_token_ids=DIGITS, max_position_embeddings=64)
    return PositionTransformerConfig(**{**defaults, **fields})


def model_for(encoding, seed=0, **fields):
    torch.manual_seed(seed)
    return PositionTransformerModel(tiny(position_encoding=encoding, **fields)).eval()


def batch(lengths=(7, 4), seed=0):
    generator = torch.Generator().manual_seed(seed)
    ids = torch.randint(1, 20, (len(lengths), max(lengths)), generator=generator)
    mask = torch.zeros_like(ids)
    for row, length in enumerate(lengths):
        mask[row, :length] = 1
    return ids.masked_fill(mask == 0, 0), mask


def with_causal(encodings=ENCODINGS):
    """(encoding, is_causal) pairs: both attentions for each encoding, causal only for FIRE."""
    return [(e, c) for e in encodings for c in (True, False) if c or e != "fire"]


@pytest.mark.parametrize("encoding", ["absolute", "rope", "t5_bias", "fire", "alibi", "abacus"])
def test_nope_is_the_model_with_its_position_signal_zeroed_by_hand(encoding):
    nope = model_for("none")
    model = model_for(encoding, seed=1)
    missing = model.load_state_dict(nope.state_dict(), strict=False).missing_keys  # the backbone of `nope`
    assert all(k.split(".")[0] in ("position_embeddings", "relative_attention_bias", "fire", "abacus_embeddings")
               for k in missing)
    assert bool(missing) == (encoding not in ("rope", "alibi"))  # rope and alibi have no parameters
    ids, mask = batch()
    ids[:, 1:4] = torch.tensor([6, 7, 8])  # a number, for the Abacus embeddings
    position_ids = None
    with torch.no_grad():
        before = model(ids, attention_mask=mask).last_hidden_state
        if encoding == "absolute":
            model.position_embeddings.weight.zero_()
        elif encoding == "t5_bias":
            model.relative_attention_bias.weight.zero_()
        elif encoding == "fire":  # f_theta's output layer: a zero bias for every distance
            model.fire.mlp_out.weight.zero_()
            model.fire.mlp_out.bias.zero_()
        elif encoding == "abacus":
            model.abacus_embeddings.weight.zero_()
        else:  # rope, alibi: every position 0, every rotation the identity, every distance 0
            position_ids = torch.zeros_like(ids)
        zeroed = model(ids, attention_mask=mask, position_ids=position_ids).last_hidden_state
        expected = nope(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    torch.testing.assert_close(zeroed[real], expected[real], rtol=1e-5, atol=1e-6)
    assert not torch.allclose(before[real], expected[real], atol=1e-4)  # the signal was there


@pytest.mark.parametrize("bidirectional", [True, False])
@pytest.mark.parametrize("num_buckets, max_distance", [(32, 128), (16, 20), (8, 64), (6, 7)])
def test_t5_buckets_are_transformers_t5s(bidirectional, num_buckets, max_distance):
    relative = torch.arange(-400, 401)[None, :] + torch.arange(0, 3)[:, None]
    ours = relative_position_bucket(relative, bidirectional, num_buckets, max_distance)
    t5 = T5Attention._relative_position_bucket(relative, bidirectional=bidirectional, num_buckets=num_buckets,
                                               max_distance=max_distance)
    assert torch.equal(ours, t5)


@pytest.mark.parametrize("causal", [True, False])
def test_t5_bias_is_t5s_compute_bias_on_the_same_table(causal):
    model = model_for("t5_bias", is_causal=causal, relative_attention_num_buckets=8, relative_attention_max_distance=12)
    t5_config = T5Config(d_model=16, num_heads=2, d_kv=8, relative_attention_num_buckets=8,
                         relative_attention_max_distance=12, is_decoder=causal)
    t5 = T5Attention(t5_config, has_relative_attention_bias=True, layer_idx=0)
    with torch.no_grad():
        t5.relative_attention_bias.weight.copy_(model.relative_attention_bias.weight)
        n = 30
        torch.testing.assert_close(model.position_bias(torch.arange(n)[None]), t5.compute_bias(n, n), rtol=0, atol=0)


def test_alibi_slopes_by_hand():
    """Press et al.: 8 heads take 1/2, 1/4, ..., 1/256; 6 heads the 4 of 4 heads (1/4, 1/16, 1/64, 1/256), then every
    other slope of 8 heads (1/2, 1/8)."""
    assert alibi_slopes(8).tolist() == [2.0**-k for k in range(1, 9)]
    assert alibi_slopes(6).tolist() == [2.0**-2, 2.0**-4, 2.0**-6, 2.0**-8, 2.0**-1, 2.0**-3]
    assert alibi_slopes(1).tolist() == [2.0**-8]


@pytest.mark.parametrize("heads", [2, 4, 6])
@pytest.mark.parametrize("causal", [True, False])
def test_alibi_bias_is_blooms_up_to_each_querys_constant(heads, causal):
    """transformers' BLOOM adds m_h p_j to the logits of key j; ALiBi's -m_h (p_i - p_j) differs by m_h p_i, a constant
    of each query's row that the softmax ignores. Bidirectional: -m_h |p_i - p_j|."""
    from transformers.models.bloom.modeling_bloom import build_alibi_tensor

    model = model_for("alibi", is_causal=causal, hidden_size=4 * heads, num_attention_heads=heads)
    n = 9
    bloom = build_alibi_tensor(torch.ones(1, n, dtype=torch.long), heads, torch.float32)[:, 0]  # (heads, key j)
    slopes = bloom[:, 1]  # m_h: BLOOM's bias at key position 1
    ours = model.position_bias(torch.arange(n)[None])[0]  # (heads, query i, key j)
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    below = (j <= i).expand(heads, n, n)
    torch.testing.assert_close((ours + slopes[:, None, None] * i)[below], bloom[:, None, :].expand(heads, n, n)[below])
    if not causal:
        torch.testing.assert_close(ours, ours.transpose(1, 2))


def test_fire_bias_is_the_formula_on_a_hand_set_example():
    model = model_for("fire", fire_mlp_width=2, fire_init_threshold=4.0)
    w1, b1 = [[1.0], [-2.0]], [0.5, 1.0]  # f_theta: R -> R^2 (hidden) -> R^2 (one output per head)
    w2, b2 = [[1.0, 0.5], [-1.0, 2.0]], [0.1, -0.2]
    c, scale = 0.5, -1.5  # L = |s| L_0 = 1.5 * 4 = 6
    with torch.no_grad():
        fire = model.fire
        fire.mlp_in.weight.copy_(torch.tensor(w1))
        fire.mlp_in.bias.copy_(torch.tensor(b1))
        fire.mlp_out.weight.copy_(torch.tensor(w2))
        fire.mlp_out.bias.copy_(torch.tensor(b2))
        fire.c.fill_(c)
        fire.threshold_scale.fill_(scale)
        positions = [0, 1, 3, 7, 12]  # some below L = 6, some above
        bias = fire(torch.tensor([positions]))[0]
    psi = lambda x: math.log(c * x + 1)  # noqa: E731
    for i, p_i in enumerate(positions):
        for j, p_j in enumerate(positions[: i + 1]):
            x = psi(p_i - p_j) / (psi(max(6.0, p_i)) + 1e-6)
            hidden = [max(0.0, w1[k][0] * x + b1[k]) for k in range(2)]
            for h in range(2):
                expected = sum(w2[h][k] * hidden[k] for k in range(2)) + b2[h]
                assert bias[h, i, j].item() == pytest.approx(expected, abs=1e-5), (h, i, j)


def test_fire_starts_at_the_papers_initialisation_and_learns_c_and_l():
    model = PositionTransformerForSequenceClassification(tiny(position_encoding="fire"))
    fire = model.position_transformer.fire
    assert fire.c.item() == pytest.approx(0.1) and fire.threshold_scale.item() == 1.0 and fire.init_threshold == 512
    # torch's default initialisation of f_theta (as the paper's code), not N(0, 0.02)
    assert fire.mlp_in.weight.abs().max() > 0.2
    ids, mask = batch()
    model(ids, attention_mask=mask, labels=torch.tensor([0, 2])).loss.backward()
    assert fire.c.grad is not None and fire.c.grad.abs() > 0 and fire.mlp_out.weight.grad.abs().sum() > 0


def test_abacus_places_by_hand():
    # [CLS] 1 2 3 + 4 5 = [MASK] 9 0 [SEP] [PAD] with [CLS] 2, [SEP] 3, [MASK] 4, "0" ... "9" 5-14, "+" 15, "=" 16
    ids = torch.tensor([[2, 6, 7, 8, 15, 9, 10, 16, 4, 14, 5, 3, 0]])
    places = [[0, 1, 2, 3, 0, 1, 2, 0, 0, 1, 2, 0, 0]]
    assert abacus_positions(ids, torch.tensor(DIGITS)).tolist() == places
    model = model_for("abacus")
    assert model.digit_places(ids).tolist() == places  # evaluation: no offset
    model.train()
    torch.manual_seed(0)
    rows = torch.cat([ids] * 64)
    shifted = model.digit_places(rows)
    offsets = shifted[:, 1] - 1
    assert torch.equal(shifted, torch.where(rows.new_tensor(places) > 0, rows.new_tensor(places) + offsets[:, None], 0))
    assert offsets.min() >= 0 and offsets.max() <= 99 and len(set(offsets.tolist())) > 20  # one offset per sequence


def test_abacus_table_and_its_limit():
    model = model_for("abacus", abacus_max_offset=3, abacus_max_digits=4)
    assert model.abacus_embeddings.num_embeddings == 8 and not model.abacus_embeddings.weight[0].any()
    model(torch.tensor([[2] + [6] * 7 + [3]]))  # seven digits at evaluation: places 1 ... 7 = 3 + 4
    with pytest.raises(ValueError, match="abacus_max_offset \\+ abacus_max_digits"):
        model(torch.tensor([[2] + [6] * 8 + [3]]))


@pytest.mark.parametrize("sorted_positions", [False, True])
def test_rope_attention_is_llamas_on_the_same_weights(sorted_positions):
    model = model_for("rope", num_hidden_layers=1)
    ours = model.layers[0].attention
    config = LlamaConfig(hidden_size=16, num_attention_heads=2, num_key_value_heads=2, attention_bias=True,
                         attention_dropout=0.0)
    config._attn_implementation = "eager"
    llama = LlamaAttention(config, layer_idx=0).eval()
    with torch.no_grad():
        for theirs, mine in ((llama.q_proj, ours.query), (llama.k_proj, ours.key), (llama.v_proj, ours.value),
                             (llama.o_proj, ours.output)):
            theirs.weight.copy_(mine.weight)
            theirs.bias.copy_(mine.bias)
    torch.manual_seed(3)
    hidden = torch.randn(2, 9, 16)
    positions = torch.arange(9).expand(2, 9)
    if sorted_positions:  # randomized positions: sorted draws from a larger range, one draw per row
        positions = torch.stack([torch.randperm(200)[:9].sort().values for _ in range(2)])
    causal = torch.zeros(1, 1, 9, 9).masked_fill(torch.ones(9, 9).triu(1).bool(), float("-inf"))
    with torch.no_grad():
        cos, sin = LlamaRotaryEmbedding(config)(hidden, positions)
        expected = llama(hidden, position_embeddings=(cos, sin), attention_mask=causal)[0]
        rotary = rotary_cos_sin(positions, 8, model.config.rope_theta, hidden.dtype)
        torch.testing.assert_close(rotary, (cos, sin))
        out = ours(hidden, causal, rotary)[0]
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("encoding, causal", with_causal())
def test_right_padding_leaves_each_sequence_its_own_result(encoding, causal):
    model = model_for(encoding, is_causal=causal)
    ids, mask = batch((7, 4))
    with torch.no_grad():
        together = model(ids, attention_mask=mask).last_hidden_state
        alone = model(ids[1:, :4]).last_hidden_state
        padded_more = model(torch.cat([ids, torch.zeros_like(ids)], 1),
                            attention_mask=torch.cat([mask, torch.zeros_like(mask)], 1)).last_hidden_state
    torch.testing.assert_close(together[1, :4], alone[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(padded_more[:, :7][mask.bool()], together[mask.bool()], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("encoding, causal", with_causal())
def test_eager_and_sdpa_agree(encoding, causal):
    ids, mask = batch((7, 4))
    position_ids = torch.tensor([[0, 2, 3, 7, 8, 11, 20], [1, 4, 5, 6, 0, 0, 0]])
    outputs = []
    for implementation in ("eager", "sdpa"):
        model = model_for(encoding, is_causal=causal)
        model.set_attn_implementation(implementation)
        assert model.config._attn_implementation == implementation
        with torch.no_grad():
            outputs.append(model(ids, attention_mask=mask, position_ids=position_ids).last_hidden_state)
    real = mask.bool()
    torch.testing.assert_close(outputs[0][real], outputs[1][real], rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_causal_models_do_not_look_ahead(encoding):
    model = model_for(encoding)
    ids, _ = batch((9,))
    changed = ids.clone()
    changed[0, 6:] = (changed[0, 6:] % 19) + 1
    with torch.no_grad():
        before, after = model(ids).last_hidden_state, model(changed).last_hidden_state
    torch.testing.assert_close(before[:, :6], after[:, :6], rtol=0, atol=1e-6)
    assert not torch.allclose(before[:, 6:], after[:, 6:])


def test_a_padding_not_read_on_the_host_is_masked(monkeypatch):
    """Where the mask's values are not read (a GPU, without LENGTHGEN_CHECK_INPUTS), right padding is not checked, so
    the padding mask is kept: a left-padded NoPE row (no position signal) gives its tokens' outputs alone."""
    import lengthgen.modeling.position_transformer.modeling_position_transformer as module

    model = model_for("none")
    ids, _ = batch((7,))
    padded = torch.cat([torch.zeros(1, 3, dtype=torch.long), ids], 1)
    mask = torch.cat([torch.zeros(1, 3, dtype=torch.long), torch.ones_like(ids)], 1)
    monkeypatch.setattr(module, "_values_are_free", lambda tensor: False)
    with torch.no_grad():
        alone = model(ids).last_hidden_state
        left = model(padded, attention_mask=mask).last_hidden_state
    torch.testing.assert_close(left[:, 3:], alone, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_causal_weights_returned_without_padding_are_lower_triangular(encoding):
    """Asking for the weights (the eager path) of an unpadded causal batch changes no output, and no query weighs a
    later key."""
    model = model_for(encoding)
    ids, _ = batch((9,))
    with torch.no_grad():
        fused = model(ids).last_hidden_state
        out = model(ids, output_attentions=True)
    torch.testing.assert_close(out.last_hidden_state, fused, rtol=1e-5, atol=1e-6)
    for weights in out.attentions:
        assert torch.all(weights.triu(diagonal=1) == 0)
        torch.testing.assert_close(weights.sum(-1), torch.ones_like(weights.sum(-1)))


@pytest.mark.parametrize("encoding", ENCODINGS)
def test_relative_encodings_ignore_a_shift_of_every_position(encoding):
    """p_i - p_j is all that rope, t5_bias, alibi and fire (below its threshold L) read: shifting every position id by
    a constant changes nothing; it changes the absolute model; NoPE and Abacus read no position ids."""
    model = model_for(encoding)
    ids, mask = batch((7, 5))
    positions = torch.tensor([[0, 1, 3, 4, 9, 10, 30], [2, 3, 4, 8, 9, 0, 0]])  # sorted draws, as randomized positions
    with torch.no_grad():
        plain = model(ids, attention_mask=mask, position_ids=positions).last_hidden_state
        shifted = model(ids, attention_mask=mask, position_ids=positions + 25).last_hidden_state
        default = model(ids, attention_mask=mask).last_hidden_state
    real = mask.bool()
    if encoding == "absolute":
        assert not torch.allclose(plain[real], shifted[real], atol=1e-3)
    else:
        torch.testing.assert_close(plain[real], shifted[real], rtol=1e-4, atol=1e-5)
    # the given positions are used (0, 1, 2, ... are not): except by the encodings that read none
    assert torch.allclose(plain[real], default[real], atol=1e-6) == (encoding in ("none", "abacus"))


def test_sequence_classifier_reads_the_last_real_token_and_records_outputs():
    torch.manual_seed(0)
    model = PositionTransformerForSequenceClassification(tiny(position_encoding="t5_bias")).eval()
    ids, mask = batch((7, 4))
    labels = torch.tensor([0, 2])
    with torch.no_grad():
        out = model(ids, attention_mask=mask, labels=labels, output_hidden_states=True, output_attentions=True)
        hidden = model.position_transformer(ids, attention_mask=mask).last_hidden_state
    logits = model.classifier(hidden[[0, 1], [6, 3]])
    torch.testing.assert_close(out.logits, logits)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(logits, labels))
    assert len(out.hidden_states) == 3 and len(out.attentions) == 2  # embeddings + 2 blocks; 2 blocks' weights
    assert out.attentions[0].shape == (2, 2, 7, 7)
    torch.testing.assert_close(out.hidden_states[-1], hidden)


def test_auto_classes_save_load_and_trust_remote_code_without_lengthgen(tmp_path):
    ids, mask = batch()
    ids[:, 1:3] = torch.tensor([6, 7])
    probe = {"ids": ids, "mask": mask}
    for encoding in ENCODINGS:
        fields = {k: v for k, v in tiny(position_encoding=encoding).to_diff_dict().items() if k != "model_type"}
        config = AutoConfig.for_model("position_transformer", **fields)
        assert isinstance(config, PositionTransformerConfig)
        assert isinstance(AutoModel.from_config(config), PositionTransformerModel)
        torch.manual_seed(0)
        model = AutoModelForSequenceClassification.from_config(config).eval()
        with torch.no_grad():
            probe[encoding] = model(ids, attention_mask=mask).logits
        model.save_pretrained(tmp_path / encoding)
        reloaded = AutoModelForSequenceClassification.from_pretrained(tmp_path / encoding).eval()
        with torch.no_grad():
            assert torch.equal(reloaded(ids, attention_mask=mask).logits, probe[encoding])
    torch.save(probe, tmp_path / "probe.pt")
    script = f"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.modules["lengthgen"] = None
import torch
from transformers import AutoModelForSequenceClassification
probe = torch.load({str(tmp_path / "probe.pt")!r})
for encoding in {ENCODINGS!r}:
    model = AutoModelForSequenceClassification.from_pretrained({str(tmp_path)!r} + "/" + encoding,
                                                               trust_remote_code=True).eval()
    with torch.no_grad():
        assert torch.equal(model(probe["ids"], attention_mask=probe["mask"]).logits, probe[encoding]), encoding
print("REMOTE_CODE_OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE_CODE_OK" in result.stdout


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(position_encoding="xpos"), "position_encoding"),
        (dict(position_encoding="fire", is_causal=False), "is_causal=True"),
        (dict(position_encoding="abacus", abacus_digit_token_ids=[]), "abacus_digit_token_ids"),
        (dict(abacus_digit_token_ids=[-1]), "abacus_digit_token_ids"),
        (dict(position_encoding="rope", hidden_size=18, num_attention_heads=2), "must be even"),
        (dict(position_encoding="t5_bias", relative_attention_num_buckets=2, is_causal=False),
         "relative_attention_num_buckets"),
        (dict(position_encoding="t5_bias", relative_attention_max_distance=8, relative_attention_num_buckets=16),
         "relative_attention_max_distance"),
        (dict(hidden_size=15), "multiple"),
        (dict(fire_init_threshold=0), "fire_init_threshold"),
        (dict(abacus_max_offset=-1), "abacus_max_offset"),
        (dict(is_causal=True, classifier_position="first"), "classifier_position='last'"),
        (dict(hidden_dropout_prob=1.0), "hidden_dropout_prob"),
    ],
)
def test_bad_config_raises_value_error(fields, message):
    with pytest.raises(ValueError, match=message):
        tiny(**fields)


def test_bad_input_raises_value_error():
    absolute = model_for("absolute")
    with pytest.raises(ValueError, match="max_position_embeddings=64"):
        absolute(torch.ones(1, 65, dtype=torch.long))
    with pytest.raises(ValueError, match="max_position_embeddings=64"):
        absolute(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([[0, 1, 64]]))
    with pytest.raises(ValueError, match="position_ids have shape"):
        absolute(torch.ones(2, 3, dtype=torch.long), position_ids=torch.arange(4))
    with pytest.raises(ValueError, match="position_ids must be >= 0"):
        model_for("rope")(torch.ones(1, 3, dtype=torch.long), position_ids=torch.tensor([-1, 0, 1]))
    with pytest.raises(ValueError, match="right padding"):
        absolute(torch.ones(2, 3, dtype=torch.long), attention_mask=torch.tensor([[0, 1, 1], [1, 1, 1]]))
    with pytest.raises(ValueError, match="pass input_ids"):
        model_for("abacus")(inputs_embeds=torch.randn(1, 3, 16))
    with pytest.raises(ValueError, match="not all in the vocabulary"):
        PositionTransformerModel(tiny(position_encoding="abacus", abacus_digit_token_ids=[3, 20]))
    with pytest.raises(TypeError, match="nosuch"):
        absolute(torch.ones(1, 3, dtype=torch.long), nosuch=1)
    model_for("t5_bias")(torch.ones(1, 100, dtype=torch.long))  # the relative encodings have no length limit
