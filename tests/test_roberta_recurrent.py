import json
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForQuestionAnswering, RobertaConfig, RobertaForMaskedLM, RobertaForQuestionAnswering

from lengthgen.modeling import RobertaWithRecurrenceConfig, RobertaWithRecurrenceForQuestionAnswering

TINY = dict(vocab_size=40, hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
            max_position_embeddings=20, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, pad_token_id=1,
            bos_token_id=0, eos_token_id=2)


def models(**fields):
    """The recurrent QA model and RobertaForQuestionAnswering with the same encoder and span head."""
    torch.manual_seed(0)
    model = RobertaWithRecurrenceForQuestionAnswering(
        RobertaWithRecurrenceConfig(insertion_layer=1, recurrence_hidden_size=48, **TINY, **fields)).eval()
    plain = RobertaForQuestionAnswering(RobertaConfig(**TINY)).eval()
    missing, unexpected = plain.load_state_dict(model.state_dict(), strict=False)
    assert not missing and all(k.startswith(("recurrence.", "answer_type_")) for k in unexpected)
    return model, plain


def windows(batch=2, num_windows=3, length=12, seed=1):
    """Random windows `<s> ... </s>` with the last window of example 1 shorter and an all-padding window."""
    ids = torch.randint(
        3, TINY["vocab_size"], (batch, num_windows, length), generator=torch.Generator().manual_seed(seed)
    )
    ids[:, :, 0], ids[:, :, -1] = 0, 2
    mask = torch.ones_like(ids)
    if batch > 1:
        ids[1, 1, 8:], mask[1, 1, 8:] = 1, 0  # a short window
        ids[1, 1, 7] = 2
        ids[1, 2], mask[1, 2] = 1, 0  # example 1 has two windows
    return ids, mask


def test_without_recurrence_every_window_is_roberta_for_question_answering():
    model, plain = models(use_recurrence=False)
    ids, mask = windows()
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
        for w in range(3):  # example 1's third window is all padding: nothing of it is compared
            reference = plain(ids[:, w], attention_mask=mask[:, w])
            keep = mask[:, w].bool()
            torch.testing.assert_close(out.start_logits[:, w][keep], reference.start_logits[keep], rtol=0, atol=1e-5)
            torch.testing.assert_close(out.end_logits[:, w][keep], reference.end_logits[keep], rtol=0, atol=1e-5)


def test_first_window_is_roberta_and_recurrence_carries_window_one_into_window_two():
    ids, mask = windows(batch=1)
    changed = ids.clone()
    changed[0, 0, 1:-1] = (changed[0, 0, 1:-1] + 1 - 3) % (TINY["vocab_size"] - 3) + 3
    for use_recurrence in (True, False):
        model, plain = models(use_recurrence=use_recurrence)
        with torch.no_grad():
            out = model(ids, attention_mask=mask)
            torch.testing.assert_close(out.start_logits[:, 0], plain(ids[:, 0]).start_logits, rtol=0, atol=1e-5)
            difference = (out.start_logits[:, 1] - model(changed, attention_mask=mask).start_logits[:, 1]).abs().max()
        # a random tiny RoBERTa attends with 0.02-std weights, so h_prev moves the logits by ~1e-5; without
        # recurrence, window 2 does not depend on window 1 at all
        assert (difference > 1e-6) == use_recurrence and (use_recurrence or difference == 0), difference


def test_h_prev_is_the_mean_final_state_of_the_real_tokens_and_enters_the_next_window_at_the_insertion_layer():
    """By hand from the unmodified RobertaForQuestionAnswering (weights and biases of std 0.3 but the layer norms',
    so that h_prev moves the logits by far more than the tolerance): h_prev = FFN(mean of window 1's final hidden
    states over its real tokens, §5.4), the short window's padding left out; window 2 is RoBERTa's layers with
    h_prev put before its first token at layer 1's input, attended from every real position, its output dropped
    after layer 1."""
    model, plain = models()
    torch.manual_seed(3)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" not in name:
                parameter.normal_(0, 0.3)
    plain.load_state_dict(model.state_dict(), strict=False)
    ids, mask = windows()
    ids, mask = ids[:, [1, 0]], mask[:, [1, 0]]  # window 1 of example 1 is the short one
    with torch.no_grad():
        final = plain.roberta(ids[:, 0], attention_mask=mask[:, 0]).last_hidden_state
        weights = mask[:, 0, :, None].float()
        h_prev = (final * weights).sum(dim=1) / weights.sum(dim=1)
        linears = [m for m in model.recurrence.ffn if isinstance(m, torch.nn.Linear)]
        for index, linear in enumerate(linears):
            h_prev = h_prev @ linear.weight.T + linear.bias
            h_prev = torch.relu(h_prev) if index < len(linears) - 1 else h_prev

        hidden = plain.roberta.embeddings(input_ids=ids[:, 1])
        for index, layer in enumerate(plain.roberta.encoder.layer):
            keys = mask[:, 1] if index != 1 else torch.cat([torch.ones_like(mask[:, 1, :1]), mask[:, 1]], dim=1)
            if index == 1:
                hidden = torch.cat([h_prev[:, None], hidden], dim=1)
            additive = (1.0 - keys[:, None, None, :].float()) * torch.finfo(torch.float32).min
            hidden = layer(hidden, attention_mask=additive)
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            hidden = hidden[:, 1:] if index == 1 else hidden
        start, end = plain.qa_outputs(hidden).unbind(dim=-1)
        out = model(ids[:, :2], attention_mask=mask[:, :2])
        without = models(use_recurrence=False)[0]
        without.load_state_dict(model.state_dict())
        unchanged = without(ids[:, :2], attention_mask=mask[:, :2])
    torch.testing.assert_close(out.start_logits[:, 1], start, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(out.end_logits[:, 1], end, rtol=1e-4, atol=1e-4)
    assert (out.start_logits[:, 1] - unchanged.start_logits[:, 1]).abs().max() > 0.1  # h_prev matters here


def test_answer_type_classifier_reads_the_cls_states_max_pooled_over_real_windows():
    model, plain = models(use_recurrence=False)
    ids, mask = windows()
    with torch.no_grad():
        out = model(ids, attention_mask=mask)
        for row, count in ((0, 3), (1, 2)):
            cls = torch.stack([plain.roberta(ids[row:row + 1, w], attention_mask=mask[row:row + 1, w])
                               .last_hidden_state[0, 0] for w in range(count)])
            expected = model.answer_type_classifier(cls.max(dim=0).values)
            torch.testing.assert_close(out.answer_type_logits[row], expected, rtol=0, atol=1e-5)


def test_padded_windows_and_examples_give_each_example_its_own_result():
    model, _ = models()
    ids, mask = windows()
    with torch.no_grad():
        batch = model(ids, attention_mask=mask)
        alone = model(ids[1:, :2], attention_mask=mask[1:, :2])
    keep = mask[1, :2].bool()
    torch.testing.assert_close(batch.start_logits[1, :2][keep], alone.start_logits[0][keep], rtol=0, atol=1e-5)
    torch.testing.assert_close(batch.answer_type_logits[1], alone.answer_type_logits[0], rtol=0, atol=1e-5)


def test_loss_is_the_span_loss_on_the_answer_window_plus_the_answer_type_loss():
    model, _ = models()
    ids, mask = windows()
    labels = dict(answer_window=torch.tensor([2, -100]), start_positions=torch.tensor([3, 0]),
                  end_positions=torch.tensor([5, 0]), answer_types=torch.tensor([0, 1]))
    with torch.no_grad():
        out = model(ids, attention_mask=mask, **labels)
    ce = torch.nn.functional.cross_entropy
    span = (ce(out.start_logits[0, 2][None], torch.tensor([3])) + ce(out.end_logits[0, 2][None], torch.tensor([5]))) / 2
    torch.testing.assert_close(out.loss, span + ce(out.answer_type_logits, labels["answer_types"]))


def test_window_checkpointing_gives_the_same_loss_and_gradients():
    ids, mask = windows()
    labels = dict(answer_window=torch.tensor([1, 0]), start_positions=torch.tensor([3, 2]),
                  end_positions=torch.tensor([5, 4]), answer_types=torch.tensor([0, 0]))
    results = []
    for checkpointing in (False, True):
        model, _ = models()
        model.train()  # dropout is 0 in TINY
        if checkpointing:
            model.gradient_checkpointing_enable()
        loss = model(ids, attention_mask=mask, **labels).loss
        loss.backward()
        results.append((loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (loss, grads), (loss_ckpt, grads_ckpt) = results
    torch.testing.assert_close(loss_ckpt, loss)
    assert grads.keys() == grads_ckpt.keys() and any(n.startswith("recurrence.") for n in grads)
    for name in grads:
        torch.testing.assert_close(grads_ckpt[name], grads[name], rtol=1e-5, atol=1e-7)


def test_from_pretrained_roberta_keeps_the_encoder_and_loads_with_trust_remote_code(tmp_path):
    torch.manual_seed(0)
    RobertaForMaskedLM(RobertaConfig(**TINY)).save_pretrained(tmp_path / "roberta")
    encoder = RobertaForMaskedLM.from_pretrained(tmp_path / "roberta").roberta.state_dict()
    model = RobertaWithRecurrenceForQuestionAnswering.from_pretrained_roberta(str(tmp_path / "roberta"),
                                                                             insertion_layer=2).eval()
    assert model.config.insertion_layer == 2 and model.config.recurrence_hidden_size == 768
    for key, value in encoder.items():
        if not key.startswith("pooler."):
            torch.testing.assert_close(model.roberta.state_dict()[key], value, rtol=0, atol=0)

    ids, mask = windows()
    with torch.no_grad():
        expected = model(ids, attention_mask=mask).start_logits
    model.save_pretrained(tmp_path / "qa")
    config = json.loads((tmp_path / "qa" / "config.json").read_text())
    assert config["auto_map"]["AutoModelForQuestionAnswering"].startswith("modeling_roberta_recurrent.")
    assert (tmp_path / "qa" / "recurrence_module.py").exists()
    with torch.no_grad():
        reloaded = AutoModelForQuestionAnswering.from_pretrained(tmp_path / "qa").eval()
        assert torch.equal(reloaded(ids, attention_mask=mask).start_logits, expected)
    torch.save({"ids": ids, "mask": mask, "expected": expected}, tmp_path / "probe.pt")
    script = f"""
import sys
sys.path = [p for p in sys.path if p not in ("", ".")]
sys.modules["lengthgen"] = None  # lengthgen cannot be imported in this process
import torch
from transformers import AutoModelForQuestionAnswering
model = AutoModelForQuestionAnswering.from_pretrained({str(tmp_path / "qa")!r}, trust_remote_code=True).eval()
assert "lengthgen" not in type(model).__module__, type(model).__module__
probe = torch.load({str(tmp_path / "probe.pt")!r})
with torch.no_grad():
    logits = model(probe["ids"], attention_mask=probe["mask"]).start_logits
assert torch.equal(logits, probe["expected"]), float((logits - probe["expected"]).abs().max())
print("REMOTE_CODE_OK")
"""
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "REMOTE_CODE_OK" in result.stdout


@pytest.mark.parametrize(
    "fields, message",
    [(dict(insertion_layer=3), "insertion_layer"), (dict(recurrence_pooling="max"), "recurrence_pooling")],
)
def test_bad_config_raises_value_error(fields, message):
    with pytest.raises(ValueError, match=message):
        RobertaWithRecurrenceConfig(**{**TINY, **fields})


def test_attention_without_an_explicit_mask_is_refused_with_the_reason():
    config = RobertaWithRecurrenceConfig(**TINY)
    config._attn_implementation_internal = "flash_attention_2"  # h_prev's key enters through an explicit mask
    with pytest.raises(ValueError, match="runs attn_implementation sdpa or eager, not 'flash_attention_2' \\(h_prev"):
        RobertaWithRecurrenceForQuestionAnswering(config)


def test_bad_input_raises_value_error():
    model, _ = models()
    ids, mask = windows()
    with pytest.raises(ValueError, match="exceed the model's 18 positions"):
        model(torch.zeros(1, 1, 19, dtype=torch.long))
    with pytest.raises(ValueError, match="outside the vocabulary"):
        model(ids + 40)
    with pytest.raises(ValueError, match="context missing"):
        model(ids, attention_mask=torch.zeros_like(mask))
    with pytest.raises(ValueError, match="Unknown answer type"):
        model(ids, attention_mask=mask, answer_types=torch.tensor([0, 3]))
    with pytest.raises(ValueError, match="answer_window"):
        model(ids, attention_mask=mask, answer_window=torch.tensor([3, -100]), start_positions=torch.tensor([0, 0]),
              end_positions=torch.tensor([0, 0]))
    with pytest.raises(ValueError, match="shape"):
        model(ids[0])
