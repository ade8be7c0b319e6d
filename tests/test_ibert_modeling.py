import json
import subprocess
import sys

import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModel,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    BertConfig,
    BertForMaskedLM,
)

import lengthgen.modeling  # noqa: F401  (registers the Auto classes)
from lengthgen.modeling import IBertConfig, IBertForMaskedLM, IBertForSequenceClassification, IBertModel

TINY = dict(vocab_size=23, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64)


def tiny_config(**overrides):
    return IBertConfig(**{**TINY, **overrides})


def batch(seed=0, lengths=(9, 6, 3)):
    g = torch.Generator().manual_seed(seed)
    seq_len = max(lengths)
    input_ids = torch.randint(1, TINY["vocab_size"], (len(lengths), seq_len), generator=g)
    mask = (torch.arange(seq_len)[None, :] < torch.tensor(lengths)[:, None]).long()
    return input_ids * mask, mask


def test_auto_classes_build_from_config():
    config = AutoConfig.for_model("inductive_bert", **TINY)
    assert isinstance(config, IBertConfig)
    assert isinstance(AutoModelForMaskedLM.from_config(config), IBertForMaskedLM)
    assert isinstance(AutoModel.from_config(config), IBertModel)
    assert isinstance(AutoModelForSequenceClassification.from_config(config), IBertForSequenceClassification)


@pytest.mark.parametrize(
    "overrides",
    [{}, {"recurrent_cell": "gru"}, {"position_embedding_type": "absolute"}, {"recurrence_in_every_layer": True}],
)
def test_padding_invariance(overrides):
    torch.manual_seed(0)
    model = IBertForMaskedLM(tiny_config(**overrides)).eval()
    input_ids, mask = batch()
    with torch.no_grad():
        batched = model(input_ids, attention_mask=mask).logits
        for row, length in enumerate(mask.sum(-1).tolist()):
            alone = model(input_ids[row : row + 1, :length]).logits[0]
            # the same sequence padded further than its batch needs
            longer_ids = torch.nn.functional.pad(input_ids[row : row + 1, :length], (0, 7))
            longer_mask = torch.nn.functional.pad(torch.ones(1, length, dtype=torch.long), (0, 7))
            longer = model(longer_ids, attention_mask=longer_mask).logits[0, :length]
            assert (batched[row, :length] - alone).abs().max() <= 1e-5
            assert (longer - alone).abs().max() <= 1e-5


def torch_rnn(layer, cell="lstm"):
    """torch's own bidirectional LSTM (or GRU) with the weights of an `IBertRecurrentLayer`."""
    reference = (torch.nn.LSTM if cell == "lstm" else torch.nn.GRU)(32, 16, batch_first=True, bidirectional=True)
    with torch.no_grad():
        for name, param in layer.forward_rnn.named_parameters():
            getattr(reference, name).copy_(param)
        for name, param in layer.backward_rnn.named_parameters():
            getattr(reference, name + "_reverse").copy_(param)
    return reference


def randomize_layer_norms(model):
    with torch.no_grad():
        for module in model.modules():
            if isinstance(module, torch.nn.LayerNorm):
                module.weight.normal_(1.0, 0.5)
                module.bias.normal_(0.0, 0.5)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_layer_is_torchs_bidirectional_rnn_on_each_unpadded_sequence(cell):
    """The padded batch gives each sequence what torch's own bidirectional RNN gives that sequence alone."""
    torch.manual_seed(0)
    model = IBertModel(tiny_config(recurrent_cell=cell)).eval()
    layer = model.embeddings.recurrent_layer
    reference = torch_rnn(layer, cell)
    input_ids, mask = batch()
    embeds = model.embeddings.word_embeddings(input_ids)
    with torch.no_grad():
        batched = layer(embeds, mask.sum(-1))
        for row, length in enumerate(mask.sum(-1).tolist()):
            alone = reference(embeds[row : row + 1, :length])[0][0]
            assert (batched[row, :length] - alone).abs().max() <= 1e-6


@pytest.mark.parametrize("position_embedding_type", ["none", "absolute"])
def test_embeddings_are_the_layer_norm_of_the_bidirectional_lstm_of_the_tokens(position_embedding_type):
    """I-BERT's input (§4): LayerNorm(BiLSTM(E[x])), or with the absolute-position ablation LayerNorm(BiLSTM(E[x]) +
    P), by hand with torch's LSTM on each sequence alone and a non-identity LayerNorm."""
    torch.manual_seed(0)
    model = IBertModel(tiny_config(position_embedding_type=position_embedding_type)).eval()
    randomize_layer_norms(model)
    embeddings = model.embeddings
    reference = torch_rnn(embeddings.recurrent_layer)
    input_ids, mask = batch()
    with torch.no_grad():
        got = embeddings(input_ids=input_ids, lengths=mask.sum(-1))
        for row, length in enumerate(mask.sum(-1).tolist()):
            h = reference(embeddings.word_embeddings(input_ids[row : row + 1, :length]))[0][0]
            if position_embedding_type == "absolute":
                h = h + embeddings.position_embeddings.weight[:length]
            expected = torch.nn.functional.layer_norm(h, (32,), embeddings.LayerNorm.weight, embeddings.LayerNorm.bias,
                                                      embeddings.LayerNorm.eps)
            torch.testing.assert_close(got[row, :length], expected, rtol=1e-5, atol=1e-5)


def test_ibert2_layer_is_attention_then_layer_norm_of_the_state_plus_its_bidirectional_lstm():
    """I-BERT2 (`recurrence_in_every_layer`, §4): each layer's feed-forward block is replaced by a bidirectional
    LSTM, LayerNorm(a + BiLSTM(a)) after BERT's attention block a; by hand with torch's LSTM, per sequence."""
    torch.manual_seed(0)
    model = IBertModel(tiny_config(recurrence_in_every_layer=True, num_hidden_layers=1,
                                   hidden_dropout_prob=0.0)).eval()
    randomize_layer_norms(model)
    layer = model.encoder.layer[0]
    block = layer.recurrent_feed_forward
    reference = torch_rnn(block.recurrent_layer)
    input_ids, mask = batch()
    with torch.no_grad():
        got = model(input_ids, attention_mask=mask).last_hidden_state
        for row, length in enumerate(mask.sum(-1).tolist()):
            ids = input_ids[row : row + 1, :length]
            h = model.embeddings(input_ids=ids, lengths=torch.tensor([length]))
            a = layer.attention(h)[0]
            expected = torch.nn.functional.layer_norm(a + reference(a)[0], (32,), block.LayerNorm.weight,
                                                      block.LayerNorm.bias, block.LayerNorm.eps)
            torch.testing.assert_close(got[row, :length], expected[0], rtol=1e-5, atol=1e-5)


def test_encoder_and_head_are_berts():
    """Above the recurrent layer, I-BERT is BERT: with the same weights, BERT (position and token-type embeddings
    zeroed) fed I-BERT's recurrent output as inputs_embeds gives the same MLM logits."""
    torch.manual_seed(0)
    ibert = IBertForMaskedLM(tiny_config(hidden_dropout_prob=0.0)).eval()
    bert = BertForMaskedLM(
        BertConfig(**TINY, max_position_embeddings=64, attn_implementation="eager", layer_norm_eps=1e-12)
    ).eval()
    bert_state = bert.state_dict()
    ibert_state = ibert.state_dict()
    for name in bert_state:
        source = name.replace("bert.encoder.", "ibert.encoder.").replace("cls.predictions.transform.", "cls.")
        source = (
            source.replace("cls.predictions.decoder.", "cls.decoder.")
            .replace("cls.predictions.bias", "cls.decoder.bias")
        )
        if name.startswith("bert.embeddings."):
            continue
        bert_state[name] = ibert_state[source]
    bert_state["bert.embeddings.position_embeddings.weight"].zero_()
    bert_state["bert.embeddings.token_type_embeddings.weight"].zero_()
    bert.load_state_dict(bert_state)
    input_ids, mask = batch()
    with torch.no_grad():
        embedded = ibert.ibert.embeddings(input_ids=input_ids, lengths=mask.sum(-1))
        expected = bert(inputs_embeds=embedded, attention_mask=mask).logits
        got = ibert(input_ids, attention_mask=mask).logits
    real = mask.bool()
    assert (expected[real] - got[real]).abs().max() <= 1e-5


def test_outputs_attentions_hidden_states_and_tuple():
    model = IBertForMaskedLM(tiny_config()).eval()
    input_ids, mask = batch()
    out = model(input_ids, attention_mask=mask, output_attentions=True, output_hidden_states=True)
    assert len(out.hidden_states) == TINY["num_hidden_layers"] + 1
    assert len(out.attentions) == TINY["num_hidden_layers"]
    attn = out.attentions[0]
    assert attn.shape == (3, 4, 9, 9)
    # padded keys get no attention, and every row is a distribution
    assert attn[2, :, :, 3:].abs().max() == 0
    torch.testing.assert_close(attn.sum(-1), torch.ones(3, 4, 9))
    as_tuple = model(input_ids, attention_mask=mask, return_dict=False)
    torch.testing.assert_close(as_tuple[0], out.logits)


def test_sdpa_matches_eager():
    torch.manual_seed(0)
    model = IBertForMaskedLM(tiny_config()).eval()
    assert model.config._attn_implementation == "sdpa"
    input_ids, mask = batch()
    with torch.no_grad():
        sdpa = model(input_ids, attention_mask=mask).logits
        model.set_attn_implementation("eager")
        eager = model(input_ids, attention_mask=mask).logits
    assert (sdpa - eager)[mask.bool()].abs().max() <= 1e-5


def test_gradient_checkpointing_gives_same_gradients():
    torch.manual_seed(0)
    model = IBertForMaskedLM(tiny_config(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).train()
    input_ids, mask = batch()
    labels = input_ids.masked_fill(mask == 0, -100)

    def grads():
        model.zero_grad()
        model(input_ids, attention_mask=mask, labels=labels).loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    plain = grads()
    model.gradient_checkpointing_enable()
    checkpointed = grads()
    assert plain.keys() == checkpointed.keys()
    for name in plain:
        torch.testing.assert_close(checkpointed[name], plain[name], rtol=1e-5, atol=1e-6)


def test_mlm_loss_is_cross_entropy_over_labelled_positions():
    model = IBertForMaskedLM(tiny_config()).eval()
    input_ids, mask = batch()
    labels = torch.full_like(input_ids, -100)
    labels[0, 2], labels[1, 4] = 5, 7
    out = model(input_ids, attention_mask=mask, labels=labels)
    log_probs = out.logits.log_softmax(-1)
    expected = -(log_probs[0, 2, 5] + log_probs[1, 4, 7]) / 2
    torch.testing.assert_close(out.loss, expected)


def test_mlm_loss_with_num_items_in_batch_is_a_sum_over_the_accumulated_count():
    model = IBertForMaskedLM(tiny_config()).eval()
    input_ids, mask = batch()
    labels = input_ids.masked_fill(mask == 0, -100)
    out = model(input_ids, attention_mask=mask, labels=labels, num_items_in_batch=40)
    log_probs = out.logits.log_softmax(-1)
    real = labels != -100
    expected = -log_probs[real].gather(-1, labels[real][:, None]).sum() / 40
    torch.testing.assert_close(out.loss, expected)


def test_sequence_classification_loss():
    model = IBertForSequenceClassification(tiny_config(num_labels=3)).eval()
    input_ids, mask = batch()
    labels = torch.tensor([0, 2, 1])
    out = model(input_ids, attention_mask=mask, labels=labels)
    torch.testing.assert_close(out.loss, torch.nn.functional.cross_entropy(out.logits, labels))


@pytest.mark.parametrize(
    "call, message",
    [
        (lambda m: m(torch.tensor([[1, 2, 23]])), "outside the vocabulary"),
        (lambda m: m(torch.tensor([[1, -1]])), "outside the vocabulary"),
        (lambda m: m(torch.ones(1, 3)), "integer token ids, got dtype torch.float32"),
        (lambda m: m(torch.zeros(0, 5, dtype=torch.long)), "Empty batch"),
        (lambda m: m(torch.zeros(2, 0, dtype=torch.long)), "Empty sequence"),
        (lambda m: m(torch.ones(2, 4, dtype=torch.long), labels=torch.ones(2, 5, dtype=torch.long)),
         "labels have shape"),
        (lambda m: m(torch.ones(1, 3, dtype=torch.long), labels=torch.tensor([[-100, 23, -100]])),
         r"Label 23 is outside the vocabulary \[0, 23\)"),
        (lambda m: m(torch.ones(2, 4, dtype=torch.long), attention_mask=torch.ones(2, 3)), "attention_mask has shape"),
        (lambda m: m(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.tensor([[0, 1, 1, 1]])), "right padding"),
        (lambda m: m(torch.ones(2, 4, dtype=torch.long), attention_mask=torch.tensor([[1, 1, 0, 0], [0, 0, 0, 0]])),
         "no real token"),
        (lambda m: m(torch.ones(4, dtype=torch.long)), "batch_size, sequence_length"),
    ],
)
def test_bad_input_raises_clear_value_error(call, message):
    model = IBertForMaskedLM(tiny_config()).eval()
    with pytest.raises(ValueError, match=message):
        call(model)


def test_absolute_positions_reject_too_long_inputs():
    model = IBertForMaskedLM(tiny_config(position_embedding_type="absolute", max_position_embeddings=8)).eval()
    with pytest.raises(ValueError, match="max_position_embeddings"):
        model(torch.ones(1, 9, dtype=torch.long))


def test_bad_config_values_raise():
    with pytest.raises(ValueError, match="recurrent_cell"):
        tiny_config(recurrent_cell="rnn")
    with pytest.raises(ValueError, match="position_embedding_type"):
        tiny_config(position_embedding_type="relative")


def test_save_load_and_trust_remote_code_without_lengthgen(tmp_path):
    torch.manual_seed(0)
    model = IBertForMaskedLM(tiny_config(recurrent_cell="gru")).eval()
    input_ids, mask = batch()
    with torch.no_grad():
        expected = model(input_ids, attention_mask=mask).logits
    model.save_pretrained(tmp_path)
    files = {p.name for p in tmp_path.iterdir()}
    assert {"config.json", "model.safetensors", "modeling_ibert.py", "configuration_ibert.py"} <= files
    assert not any(name.endswith(".bin") for name in files)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_ibert.IBertForMaskedLM"

    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(reloaded(input_ids, attention_mask=mask).logits, expected)

    torch.save({"input_ids": input_ids, "mask": mask, "expected": expected}, tmp_path / "probe.pt")
    script = f"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.modules["lengthgen"] = None  # lengthgen cannot be imported in this process
import torch
from transformers import AutoModelForMaskedLM
model = AutoModelForMaskedLM.from_pretrained({str(tmp_path)!r}, trust_remote_code=True).eval()
assert "lengthgen" not in type(model).__module__, type(model).__module__
probe = torch.load({str(tmp_path / "probe.pt")!r})
with torch.no_grad():
    logits = model(probe["input_ids"], attention_mask=probe["mask"]).logits
assert torch.equal(logits, probe["expected"]), float((logits - probe["expected"]).abs().max())
print("REMOTE_CODE_OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE_CODE_OK" in result.stdout


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_trains_under_cpu_bf16_autocast_with_the_recurrence_in_fp32(cell):
    """`--bf16` on CPU: the LSTM/GRU runs in fp32 (oneDNN lacks bf16 RNNs on CPUs without native bf16), so the
    recurrent layer's output equals fp32 exactly and the logits stay within bf16 rounding of fp32."""
    torch.manual_seed(0)
    model = IBertForMaskedLM(tiny_config(recurrent_cell=cell)).eval()
    input_ids, mask = batch()
    with torch.no_grad():
        expected = model(input_ids, attention_mask=mask).logits
        embedded = model.ibert.embeddings.word_embeddings(input_ids)
        lengths = mask.sum(-1)
        rnn_fp32 = model.ibert.embeddings.recurrent_layer(embedded, lengths)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            rnn_autocast = model.ibert.embeddings.recurrent_layer(embedded, lengths)
            logits = model(input_ids, attention_mask=mask).logits
    assert rnn_autocast.dtype == torch.float32 and torch.equal(rnn_autocast, rnn_fp32)
    assert logits.dtype == torch.bfloat16 and torch.allclose(logits.float(), expected, atol=0.1, rtol=0.05)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        loss = model(input_ids, attention_mask=mask, labels=input_ids).loss
    loss.backward()
    assert all(p.grad is None or torch.isfinite(p.grad).all() for p in model.parameters())
