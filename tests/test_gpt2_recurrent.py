import pytest
import torch
from transformers import AutoConfig, AutoModelForCausalLM, GPT2Config, GPT2LMHeadModel

from lengthgen.modeling import GPT2WithRecurrence, GPT2WithRecurrenceConfig, flops_per_token

TINY = dict(vocab_size=50, n_positions=16, n_embd=32, n_layer=3, n_head=4, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)


def models(window=8, overlap=3, **fields):
    """A recurrent model and the plain GPT2LMHeadModel with the same GPT-2 weights."""
    torch.manual_seed(0)
    model = GPT2WithRecurrence(GPT2WithRecurrenceConfig(window_size=window, overlap=overlap, insertion_layer=1,
                                                        **TINY, **fields)).eval()
    gpt2 = GPT2LMHeadModel(GPT2Config(**TINY)).eval()
    missing, unexpected = gpt2.load_state_dict(model.state_dict(), strict=False)
    assert not missing and all(k.startswith("recurrence.") for k in unexpected)
    return model, gpt2


def tokens(length=30, batch=2, seed=1):
    return torch.randint(0, TINY["vocab_size"], (batch, length), generator=torch.Generator().manual_seed(seed))


def expected_windows(length, window, overlap):
    """(start, owned_from) of each window by the paper's §4.2 definition: windows t_{1+ns : T+ns} with stride
    s = T - o; the first predicts all its tokens, later ones the last s."""
    stride, start, result = window - overlap, 0, []
    while True:
        result.append((start, start if start == 0 else start + overlap))
        if start + window >= length:
            return result
        start += stride


def test_first_window_is_gpt2():
    model, gpt2 = models()
    x = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits[:, :8], gpt2(x[:, :8]).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("window, overlap", [(8, 0), (8, 3), (5, 4), (16, 1)])
def test_without_recurrence_every_window_is_gpt2_and_every_token_is_predicted_once(window, overlap):
    model, gpt2 = models(window, overlap, use_recurrence=False)
    x = tokens(37)
    with torch.no_grad():
        logits = model(x).logits
        assert logits.shape[1] == 37
        for start, owned in expected_windows(37, window, overlap):
            end = min(start + window, 37)
            reference = gpt2(x[:, start:end]).logits[:, owned - start:]
            torch.testing.assert_close(logits[:, owned:end], reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize("window, overlap", [(8, 0), (8, 3), (5, 4)])
def test_loss_counts_every_token_once(window, overlap):
    model, _ = models(window, overlap)
    x = tokens(37)
    with torch.no_grad():
        out = model(x, labels=x)
    assert out.num_predicted_tokens == 2 * 36
    direct = torch.nn.functional.cross_entropy(out.logits[:, :-1].reshape(-1, 50), x[:, 1:].reshape(-1))
    torch.testing.assert_close(out.loss, direct)


@pytest.mark.parametrize("overlap", [0, 5])
def test_overlap_argument_reads_as_a_model_configured_with_it(overlap):
    """Evaluating at another overlap (Tables 1-2's baseline curve) leaves the config alone and gives what a model
    configured with that overlap gives, including h_prev pooled over the new stride."""
    model, _ = models(8, 3)
    configured, _ = models(8, overlap)
    x = tokens(37)
    with torch.no_grad():
        called, reference = model(x, labels=x, overlap=overlap), configured(x, labels=x)
    assert model.config.overlap == 3
    torch.testing.assert_close(called.logits, reference.logits, rtol=0, atol=0)
    torch.testing.assert_close(called.loss, reference.loss, rtol=0, atol=0)
    with pytest.raises(ValueError, match="overlap must satisfy 0 <= overlap < window_size=8, got 8"):
        model(x, overlap=8)


@pytest.mark.parametrize("chunks, use_cache", [([30], False), ([5, 1, 11, 13], False), ([8, 8, 8, 6], False),
                                               ([3] * 10, False), ([5, 1, 11, 13], True), ([1] * 30, True)])
def test_streaming_in_chunks_equals_one_call(chunks, use_cache):
    """With `use_cache`, each call runs only its new tokens on the key-value cache of the unfinished window."""
    model, _ = models()
    x = tokens()
    with torch.no_grad():
        whole = model(x, labels=x)
        state, logits, loss_sum, count, at = None, [], 0.0, 0, 0
        for size in chunks:
            out = model(x[:, at:at + size], labels=x[:, at:at + size], recurrent_state=state, use_cache=use_cache)
            assert (out.recurrent_state.cache is not None) == (use_cache and at + size not in (8, 13, 18, 23, 28))
            state, at = out.recurrent_state, at + size
            logits.append(out.logits)
            loss_sum, count = loss_sum + out.loss * out.num_predicted_tokens, count + out.num_predicted_tokens
    torch.testing.assert_close(torch.cat(logits, dim=1), whole.logits, rtol=0, atol=1e-5)
    assert count == whole.num_predicted_tokens
    torch.testing.assert_close(loss_sum / count, whole.loss)


@pytest.mark.parametrize("window, overlap", [(8, 0), (8, 3)])
def test_right_padded_batch_equals_each_document_alone(window, overlap):
    """Documents of 30 and 13 tokens in one right-padded batch: the short one's logits and summed loss are those of
    the document alone, the padding's labels are ignored even where labels hold real ids."""
    model, _ = models(window, overlap)
    x = tokens(30)
    mask = torch.ones_like(x)
    mask[1, 13:] = 0
    with torch.no_grad():
        batch = model(x, attention_mask=mask, labels=x)
        alone = [model(x[:1], labels=x[:1]), model(x[1:, :13], labels=x[1:, :13])]
    torch.testing.assert_close(batch.logits[1:, :13], alone[1].logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(batch.logits[:1], alone[0].logits, rtol=0, atol=1e-5)
    assert batch.num_predicted_tokens == 29 + 12
    summed = sum(out.loss * out.num_predicted_tokens for out in alone)
    torch.testing.assert_close(batch.loss * batch.num_predicted_tokens, summed)


def test_recurrence_carries_earlier_windows_into_later_ones():
    """Changing only the first window's tokens changes the third window's logits through h_prev, and only then."""
    x = tokens(24)
    changed = x.clone()
    changed[:, :8] = (changed[:, :8] + 1) % TINY["vocab_size"]
    for use_recurrence in (True, False):
        model, _ = models(8, 0, use_recurrence=use_recurrence)
        with torch.no_grad():
            difference = (model(x).logits[:, 16:] - model(changed).logits[:, 16:]).abs().max().item()
        assert (difference > 1e-4) == use_recurrence, (use_recurrence, difference)


def test_h_prev_is_eq_1_over_unmodified_gpt2_and_enters_the_next_window_at_the_insertion_layer():
    """By hand from the unmodified GPT-2 (T = 8, o = 3, s = 5, l_ins = 1): z is the mean over window 1's first s
    positions of every block's output (before ln_f), weighted by softmax(alpha) (Eq. 1, with unequal alpha and non-zero
    biases); h_prev = FFN(z), ReLU between its layers. Window 2 (tokens 5-12, positions 0-7) is GPT-2's blocks with
    h_prev put before its first token at block 1's input (no position embedding, visible from every position, its
    output dropped after block 1, so the other blocks never see it); its last s tokens are the model's logits for
    tokens 8-12."""
    model, gpt2 = models(8, 3)
    with torch.no_grad():
        model.recurrence.layer_logits.copy_(torch.tensor([0.7, -1.2, 0.4]))
        for linear in model.recurrence.ffn:
            if isinstance(linear, torch.nn.Linear):
                linear.bias.normal_(0, 0.5)
    x = tokens(13)
    blocks = gpt2.transformer.h
    outputs = []
    hooks = [block.register_forward_hook(lambda m, i, o: outputs.append(o[0] if isinstance(o, tuple) else o))
             for block in blocks]
    with torch.no_grad():
        gpt2(x[:, :8])
    for hook in hooks:
        hook.remove()
    weights = torch.softmax(torch.tensor([0.7, -1.2, 0.4]), dim=0)
    z = sum(w * h[:, :5].mean(dim=1) for w, h in zip(weights, outputs))
    linears = [m for m in model.recurrence.ffn if isinstance(m, torch.nn.Linear)]
    h_prev = z
    for index, linear in enumerate(linears):
        h_prev = h_prev @ linear.weight.T + linear.bias
        h_prev = torch.relu(h_prev) if index < len(linears) - 1 else h_prev

    with torch.no_grad():
        first = model(x[:, :8])
        assert first.recurrent_state.window_index == 1
        torch.testing.assert_close(first.recurrent_state.h_prev, h_prev, rtol=0, atol=1e-5)

        hidden = gpt2.transformer.wte(x[:, 5:13]) + gpt2.transformer.wpe(torch.arange(8))
        for index, block in enumerate(blocks):
            if index == 1:
                hidden = torch.cat([h_prev[:, None], hidden], dim=1)
            n = hidden.shape[1]
            mask = torch.full((n, n), torch.finfo(hidden.dtype).min).triu(1)[None, None]
            hidden = block(hidden, attention_mask=mask)
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            if index == 1:  # one extra key and value at block 1 only: its output is dropped there
                hidden = hidden[:, 1:]
        expected = gpt2.lm_head(gpt2.transformer.ln_f(hidden))[:, 3:]
        torch.testing.assert_close(model(x).logits[:, 8:13], expected, rtol=0, atol=1e-5)


@pytest.mark.parametrize("window, overlap", [(8, 0), (8, 3)])
def test_window_checkpointing_gives_the_same_loss_and_gradients(window, overlap):
    model, _ = models(window, overlap)
    model.train()  # dropout is 0 in TINY, so training mode is deterministic
    x = tokens(37)

    def loss_and_grads():
        model.zero_grad()
        loss = model(x, labels=x).loss
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    plain_loss, plain = loss_and_grads()
    model.gradient_checkpointing_enable()
    assert model.gradient_checkpointing and not any(
        getattr(b, "gradient_checkpointing", False) for b in model.transformer.h
    )
    loss, grads = loss_and_grads()
    torch.testing.assert_close(loss, plain_loss)
    assert grads.keys() == plain.keys() and any(n.startswith("recurrence.ffn") for n in grads)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, plain[name], rtol=1e-5, atol=1e-7)


@pytest.mark.parametrize("overlap", [0, 3])
def test_generate_continues_across_windows(overlap):
    """Greedy `generate` (one token per step with the recurrent state and the window's key-value cache) equals
    re-reading the whole sequence each step, far past the first window, and generating without the cache; inside the
    first window it equals GPT-2's own greedy generation. A batch of two prompts."""
    model, gpt2 = models(8, overlap)
    x = tokens(6)
    generated = model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=0)
    expected = x
    with torch.no_grad():
        for _ in range(20):
            expected = torch.cat([expected, model(expected).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generated, expected)
    assert torch.equal(model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=0, use_cache=False), expected)
    short = model.generate(x[:, :3], max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert torch.equal(short, gpt2.generate(x[:, :3], max_new_tokens=5, do_sample=False, pad_token_id=0))
    padded = torch.ones_like(x[:, :3])
    padded[0, 0] = 0
    with pytest.raises(ValueError, match="without padding"):
        model.generate(x[:, :3], attention_mask=padded, max_new_tokens=2, do_sample=False, pad_token_id=0)


def test_flops_per_token_reproduces_tables_1_and_2():
    table = {0: 1.75e8, 5: 1.78e8, 10: 1.81e8, 30: 1.94e8, 50: 2.10e8, 75: 2.33e8, 100: 2.62e8, 150: 3.50e8,
             200: 5.25e8}
    for overlap, paper in table.items():
        assert abs(flops_per_token(GPT2Config(), 300, overlap) / paper - 1) <= 0.03, overlap


def test_from_pretrained_gpt2_keeps_the_weights_and_auto_classes(tmp_path):
    _, gpt2 = models()
    gpt2.save_pretrained(tmp_path / "gpt2")
    model = GPT2WithRecurrence.from_pretrained_gpt2(str(tmp_path / "gpt2"), window_size=8, overlap=2)
    assert not any(module.training for module in model.modules())  # as transformers' from_pretrained returns it
    assert model.config.window_size == 8 and model.config.n_embd == 32
    x = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits[:, :8], gpt2(x[:, :8]).logits, rtol=0, atol=1e-5)
    model.save_pretrained(tmp_path / "recurrent")
    assert AutoConfig.from_pretrained(tmp_path / "recurrent").model_type == "gpt2_recurrent"
    reloaded = AutoModelForCausalLM.from_pretrained(tmp_path / "recurrent").eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(x).logits, model(x).logits)
    # another model's folder, which GPT2LMHeadModel would load as a random GPT-2, and a recurrent one: refused
    from transformers import LlamaConfig, LlamaForCausalLM

    LlamaForCausalLM(LlamaConfig(vocab_size=50, hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                                 num_attention_heads=4)).save_pretrained(tmp_path / "llama")
    with pytest.raises(ValueError, match="is a 'llama' model, not GPT-2"):
        GPT2WithRecurrence.from_pretrained_gpt2(str(tmp_path / "llama"))
    with pytest.raises(ValueError, match="is a GPT2WithRecurrence already: load it with from_pretrained"):
        GPT2WithRecurrence.from_pretrained_gpt2(str(tmp_path / "recurrent"))


@pytest.mark.parametrize(
    "fields, message",
    [
        (dict(window_size=8, overlap=8), "overlap"),
        (dict(window_size=17), "n_positions"),
        (dict(window_size=8, insertion_layer=3), "insertion_layer"),
    ],
)
def test_bad_config_raises_value_error(fields, message):
    with pytest.raises(ValueError, match=message):
        GPT2WithRecurrenceConfig(**{**TINY, **fields})


@pytest.mark.parametrize("implementation", ["flash_attention_2", "flex_attention"])
def test_attention_without_an_explicit_mask_is_refused_with_the_reason(implementation):
    """h_prev's key enters through an explicit mask: FlashAttention and flex attention are refused by lengthgen, with
    why, before transformers' own refusal (which GPT-2's support for them would not even give)."""
    config = GPT2WithRecurrenceConfig(**TINY, window_size=8)
    config._attn_implementation_internal = implementation  # as from_pretrained(..., attn_implementation=...) sets it
    with pytest.raises(ValueError, match=f"GPT2WithRecurrence runs attn_implementation sdpa or eager, not "
                                         f"'{implementation}' \\(h_prev needs an explicit attention mask\\)"):
        GPT2WithRecurrence(config)


@pytest.mark.parametrize(
    "ids, message",
    [
        (torch.tensor([[1, 50]]), "outside the vocabulary"),
        (torch.zeros(1, 0, dtype=torch.long), "Empty"),
        (torch.zeros(3, dtype=torch.long), "shape"),
        (torch.ones(1, 3), "must be integer token ids, got dtype torch.float32"),
    ],
)
def test_bad_input_raises_value_error(ids, message):
    model, _ = models()
    with pytest.raises(ValueError, match=message):
        model(ids)


def test_left_padding_and_a_state_from_another_batch_raise_value_error():
    model, _ = models()
    x = tokens(12)
    with pytest.raises(ValueError, match="pad documents on the right"):
        model(x, attention_mask=torch.tensor([[0] * 2 + [1] * 10, [1] * 12]))
    with pytest.raises(ValueError, match="attention_mask has shape"):
        model(x, attention_mask=torch.ones(2, 11, dtype=torch.long))
    state = model(x).recurrent_state
    with pytest.raises(ValueError, match="recurrent_state holds 2 sequences"):
        model(x[:1], recurrent_state=state)
    # beam search would reorder the sequences without their state; prompt lookup cannot rewind one
    with pytest.raises(ValueError, match="(?i)only supports .*beam_search"):
        model.generate(x, num_beams=2, max_new_tokens=2, do_sample=False, pad_token_id=0)
    with pytest.raises(ValueError, match="(?i)only supports .*assisted_generation"):
        model.generate(x, prompt_lookup_num_tokens=3, max_new_tokens=2, do_sample=False, pad_token_id=0)
