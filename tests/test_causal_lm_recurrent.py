"""CausalLMWithRecurrence on tiny random configs of twenty-five families (no download), hybrids among them, each
against the unmodified transformers model: window 1 and, without recurrence, every window equal it (so what a family
does after its head, as Gemma's logit soft-capping, is kept); h_prev's position in a rotary family is the unmodified
model's input one position before the window; GPT-2's case equals GPT2WithRecurrence; h_prev goes only into a
softmax-attention layer, while memory tokens also suit Mamba; a hybrid's recurrent layers that carry their states
across windows equal one pass of the unmodified model with its attention confined to the windows."""

import inspect

import pytest
import torch
from transformers import (
    AutoModelForCausalLM,
    BambaConfig,
    BertConfig,
    BertModel,
    CohereConfig,
    DeepseekV3Config,
    DynamicCache,
    FalconH1Config,
    Gemma2Config,
    Gemma3nTextConfig,
    Gemma3TextConfig,
    GPT2Config,
    GPTNeoXConfig,
    GptOssConfig,
    GraniteConfig,
    GraniteMoeHybridConfig,
    JambaConfig,
    KimiLinearConfig,
    Lfm2Config,
    Lfm2MoeConfig,
    Llama4Config,
    Llama4ForConditionalGeneration,
    Llama4TextConfig,
    LlamaConfig,
    LlamaForCausalLM,
    Mamba2Config,
    MambaConfig,
    MiniMaxConfig,
    MistralConfig,
    NemotronHConfig,
    Olmo2Config,
    Phi3Config,
    Qwen2Config,
    Qwen3_5Config,
    Qwen3_5ForConditionalGeneration,
    Qwen3_5TextConfig,
    Qwen3Config,
    Qwen3MoeConfig,
    Qwen3NextConfig,
    SmolLM3Config,
)
from transformers.utils import logging as hf_logging

from lengthgen.modeling import CausalLMWithRecurrence, GPT2WithRecurrence, GPT2WithRecurrenceConfig, flops_per_token
from lengthgen.modeling.recurrence.flops import non_embedding_parameters
from lengthgen.modeling.recurrence.modeling_causal_lm_recurrent import (
    CARRIES_LAYER_STATES,
    decoder_layers,
    decoder_stack,
    softmax_attention_layers,
)
from lengthgen.modeling.recurrence.recurrence_module import cache_argument

VOCAB = 50
SMALL = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_attention_heads=4, num_key_value_heads=2,
             max_position_embeddings=64, pad_token_id=0, bos_token_id=None, eos_token_id=None)


def alternating(layers, other, attention="full_attention"):
    """A hybrid's layer kinds: attention at the odd layers (l_ins = 1 in these tests), or the one layer of one."""
    return [attention if index % 2 or layers == 1 else other for index in range(layers)]

FAMILIES = {
    "gpt2": lambda layers: GPT2Config(vocab_size=VOCAB, n_positions=64, n_embd=32, n_layer=layers, n_head=4,
                                      resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0),
    "llama": lambda layers: LlamaConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=64),
    "qwen2": lambda layers: Qwen2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=64),
    "mistral": lambda layers: MistralConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=64, sliding_window=None),
    "gpt_neox": lambda layers: GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=layers, num_attention_heads=4,
                                             max_position_embeddings=64, rotary_pct=0.5, hidden_dropout=0.0,
                                             attention_dropout=0.0),
    # the families people run today, each for what it does differently: Qwen3 (query/key norms), Gemma 2 (logit
    # soft-capping, eager attention, scaled embeddings), Gemma 3 (a rotary embedding per layer type), Phi-3 (fused
    # projections, partial rotary), OLMo 2 (norms after the sublayers), Granite (embedding, residual, attention and
    # logit multipliers), Cohere (parallel attention and MLP, logit scale)
    "qwen3": lambda layers: Qwen3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                        head_dim=8, max_position_embeddings=64),
    "gemma2": lambda layers: Gemma2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                          head_dim=8, max_position_embeddings=64, sliding_window=16,
                                          final_logit_softcapping=0.5, eos_token_id=None,
                                          attn_implementation="eager"),
    "gemma3": lambda layers: Gemma3TextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                              num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                              head_dim=8, max_position_embeddings=64, sliding_window=16,
                                              sliding_window_pattern=2, eos_token_id=None),
    "phi3": lambda layers: Phi3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
                                      original_max_position_embeddings=64, partial_rotary_factor=0.5, pad_token_id=0,
                                      eos_token_id=None, resid_pdrop=0.0, embd_pdrop=0.0),
    "olmo2": lambda layers: Olmo2Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                        num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                        max_position_embeddings=64, pad_token_id=0),
    "granite": lambda layers: GraniteConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=64, embedding_multiplier=2.0,
                                            residual_multiplier=0.5, attention_multiplier=1.0, logits_scaling=0.5),
    "cohere": lambda layers: CohereConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                          num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                          max_position_embeddings=64, logit_scale=0.5, pad_token_id=0, bos_token_id=1,
                                          eos_token_id=2),
    # and the mixture-of-experts families with attention of their own: Qwen3-MoE (routed experts), GPT-OSS (attention
    # sinks, alternating sliding and full layers, YaRN), DeepSeek-V3 (multi-head latent attention: keys and values from
    # a compressed projection, rotary on part of each head), Llama 4 (complex rotary factors, chunked-attention layers
    # and layers without positions, its base model under `model` though its prefix names `language_model`); and SmolLM3
    # (layers without positions)
    "qwen3_moe": lambda layers: Qwen3MoeConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                               num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                               head_dim=8, max_position_embeddings=64, num_experts=4,
                                               num_experts_per_tok=2, moe_intermediate_size=32),
    "gpt_oss": lambda layers: GptOssConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                           num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                           head_dim=8, max_position_embeddings=64, sliding_window=16,
                                           num_local_experts=4, num_experts_per_tok=2, eos_token_id=None,
                                           pad_token_id=None),
    "deepseek_v3": lambda layers: DeepseekV3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                                   moe_intermediate_size=32, num_hidden_layers=layers,
                                                   num_attention_heads=4, num_key_value_heads=4, n_routed_experts=4,
                                                   num_experts_per_tok=2, n_group=1, topk_group=1,
                                                   first_k_dense_replace=1, kv_lora_rank=16, q_lora_rank=16,
                                                   qk_rope_head_dim=4, qk_nope_head_dim=4, v_head_dim=8,
                                                   max_position_embeddings=64, bos_token_id=None, eos_token_id=None),
    "llama4_text": lambda layers: Llama4TextConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                                   intermediate_size_mlp=64, num_hidden_layers=layers,
                                                   num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                                                   max_position_embeddings=64, num_local_experts=2,
                                                   attention_chunk_size=16, no_rope_layer_interval=2,
                                                   pad_token_id=0, eos_token_id=None),
    "smollm3": lambda layers: SmolLM3Config(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=layers, num_attention_heads=4, num_key_value_heads=2,
                                            max_position_embeddings=64, no_rope_layer_interval=2, pad_token_id=0,
                                            bos_token_id=None, eos_token_id=None),
    # and the hybrids, whose other layers are not softmax attention (h_prev enters an attention layer; the others read
    # each window afresh): Qwen3.5 (gated DeltaNet, output-gated attention with partial multimodal rotary), LFM2-MoE
    # (short convolutions; its rotary embedding named `pos_emb`), Granite 4 (Mamba-2, attention without positions),
    # Falcon-H1 (attention and Mamba-2 side by side in every layer), Nemotron-H (Mamba-2, attention and MLP blocks as
    # separate layers), Jamba (Mamba-1, its kinds in `layers_block_type`), MiniMax (lightning attention, a module
    # named like softmax attention), Kimi Linear (delta attention, latent attention without positions)
    "qwen3_5_text": lambda layers: Qwen3_5TextConfig(**SMALL, num_hidden_layers=layers, head_dim=8,
                                                     linear_num_key_heads=2, linear_num_value_heads=4,
                                                     linear_key_head_dim=8, linear_value_head_dim=8,
                                                     layer_types=alternating(layers, "linear_attention")),
    "lfm2_moe": lambda layers: Lfm2MoeConfig(**SMALL, num_hidden_layers=layers, num_experts=2, num_experts_per_tok=1,
                                             moe_intermediate_size=32, num_dense_layers=1,
                                             layer_types=alternating(layers, "conv")),
    "granitemoehybrid": lambda layers: GraniteMoeHybridConfig(**SMALL, num_hidden_layers=layers, mamba_n_heads=4,
                                                              mamba_d_head=16, mamba_d_state=8, mamba_n_groups=1,
                                                              mamba_chunk_size=8, num_local_experts=2,
                                                              num_experts_per_tok=1,
                                                              layer_types=alternating(layers, "mamba")),
    "falcon_h1": lambda layers: FalconH1Config(**SMALL, num_hidden_layers=layers, head_dim=8, mamba_d_ssm=32,
                                               mamba_n_heads=4, mamba_d_head=8, mamba_d_state=8, mamba_n_groups=1,
                                               mamba_chunk_size=8),
    "nemotron_h": lambda layers: NemotronHConfig(**SMALL, num_hidden_layers=layers, head_dim=8, mamba_num_heads=4,
                                                 mamba_head_dim=16, ssm_state_size=8, n_groups=1, chunk_size=8,
                                                 layers_block_type=alternating(layers, "mamba", "attention")[:2]
                                                 + ["mlp"] * (layers - 2)),
    "jamba": lambda layers: JambaConfig(**SMALL, num_hidden_layers=layers, attn_layer_period=2,
                                        attn_layer_offset=int(layers > 1), expert_layer_period=2,
                                        expert_layer_offset=1, num_experts=2, num_experts_per_tok=1, mamba_d_state=8,
                                        mamba_dt_rank=4),
    "minimax": lambda layers: MiniMaxConfig(**SMALL, num_hidden_layers=layers, head_dim=8, num_local_experts=2,
                                            num_experts_per_tok=1, layer_types=alternating(layers, "linear_attention"),
                                            initializer_range=0.1),  # at 0.02 positions move its logits by 1e-5
    "kimi_linear": lambda layers: KimiLinearConfig(**{**SMALL, "num_key_value_heads": 4}, num_hidden_layers=layers,
                                                   linear_num_heads=4, linear_head_dim=8, kv_lora_rank=16,
                                                   q_lora_rank=16, qk_rope_head_dim=4, qk_nope_head_dim=4,
                                                   v_head_dim=8, num_experts=2, num_experts_per_token=1,
                                                   moe_intermediate_size=32,
                                                   layer_types=alternating(layers, "linear_attention")),
}
# no softmax attention at all, so no h_prev: memory tokens and plain windows only
WITHOUT_ATTENTION = {"mamba": lambda layers: MambaConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers,
                                                          state_size=8, pad_token_id=0)}
# the families whose recurrent layers carry their states across windows (`carry_layer_states`): the hybrids above
# that can, their siblings Qwen3-Next, LFM2 and Bamba, and Mamba-2 (no attention at all)
CARRYING = {
    **{family: make for family, make in FAMILIES.items() if family in CARRIES_LAYER_STATES},
    "qwen3_next": lambda layers: Qwen3NextConfig(**SMALL, num_hidden_layers=layers, head_dim=8, linear_num_key_heads=2,
                                                 linear_num_value_heads=4, linear_key_head_dim=8,
                                                 linear_value_head_dim=8, num_experts=2, num_experts_per_tok=1,
                                                 moe_intermediate_size=32, shared_expert_intermediate_size=32,
                                                 layer_types=alternating(layers, "linear_attention")),
    "lfm2": lambda layers: Lfm2Config(**SMALL, num_hidden_layers=layers, layer_types=alternating(layers, "conv")),
    "bamba": lambda layers: BambaConfig(**SMALL, num_hidden_layers=layers, mamba_n_heads=4, mamba_d_head=16,
                                        mamba_d_state=8, mamba_n_groups=1, mamba_chunk_size=8,
                                        attn_layer_indices=[1]),
    "mamba2": lambda layers: Mamba2Config(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=layers, num_heads=4,
                                          head_dim=16, state_size=8, n_groups=1, chunk_size=8, pad_token_id=0),
}


def models(family, window=8, overlap=3, layers=3, insertion_layer=1, **fields):
    """The wrapper and the unmodified causal LM it wraps (the same module, so the same weights)."""
    torch.manual_seed(0)
    decoder = AutoModelForCausalLM.from_config({**FAMILIES, **WITHOUT_ATTENTION, **CARRYING}[family](layers)).eval()
    model = CausalLMWithRecurrence.wrap(decoder, window_size=window, overlap=overlap, insertion_layer=insertion_layer,
                                        recurrence_hidden_size=16, **fields).eval()
    return model, decoder


def tokens(length=30, batch=2, seed=1):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def window_starts(length, window, overlap):
    """(start, owned_from) of every window (§4.2): stride T - o; the first owns all its tokens, the others their last
    T - o."""
    stride, start, result = window - overlap, 0, []
    while True:
        result.append((start, start if start == 0 else start + overlap))
        if start + window >= length:
            return result
        start += stride


@pytest.mark.parametrize("family", FAMILIES)
def test_first_window_is_the_unmodified_model(family):
    model, decoder = models(family)
    x = tokens()
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits[:, :8], decoder(x[:, :8]).logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", [*FAMILIES, *WITHOUT_ATTENTION])
@pytest.mark.parametrize("grad", [False, True], ids=["per-window", "once-per-call"])
def test_without_recurrence_every_window_is_the_unmodified_model(family, grad):
    """Both ways of running the embedding and the LM head: inside each window's step (no gradient, or window
    checkpointing) and once over the call's windows (with gradients)."""
    model, decoder = models(family, use_recurrence=False)
    x = tokens(37)
    with torch.set_grad_enabled(grad):
        logits = model(x).logits.detach()
    with torch.no_grad():
        for start, owned in window_starts(37, 8, 3):
            end = min(start + 8, 37)
            reference = decoder(x[:, start:end]).logits[:, owned - start:]
            torch.testing.assert_close(logits[:, owned:end], reference, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", FAMILIES)
def test_h_prev_changes_later_windows_only_through_the_earlier_ones(family):
    """Changing the first window's tokens changes the third window's logits with the recurrence, not without."""
    x = tokens(24)
    changed = x.clone()
    changed[:, :8] = (changed[:, :8] + 1) % VOCAB
    for use_recurrence in (True, False):
        model, _ = models(family, overlap=0, use_recurrence=use_recurrence)
        with torch.no_grad():
            difference = (model(x).logits[:, 16:] - model(changed).logits[:, 16:]).abs().max().item()
        assert (difference > 1e-4) == use_recurrence, (family, use_recurrence, difference)


@pytest.mark.parametrize("family", ["llama", "gemma2", "qwen3_5_text", "jamba"])
def test_h_prev_is_eq_1_over_the_unmodified_models_layers(family):
    """h_prev by hand (T = 8, o = 3, s = 5): every decoder layer's output of the unmodified model on window 1 (before
    its final norm; a hybrid's linear-attention and Mamba layers too), averaged over the first s positions, weighted
    by softmax(alpha) (unequal here), through the FFN (non-zero biases here)."""
    model, decoder = models(family)
    layers = decoder.model.layers if hasattr(decoder.model, "layers") else decoder.model.language_model.layers
    alpha = torch.linspace(-1.0, 1.0, len(layers)) ** 3
    with torch.no_grad():
        model.recurrence.layer_logits.copy_(alpha)
        for linear in model.recurrence.ffn:
            if isinstance(linear, torch.nn.Linear):
                linear.bias.normal_(0, 0.5)
    x = tokens(8)
    outputs = []
    hooks = [layer.register_forward_hook(lambda m, i, o: outputs.append(o[0] if isinstance(o, tuple) else o))
             for layer in layers]
    with torch.no_grad():
        decoder(x)
    for hook in hooks:
        hook.remove()
    assert len(outputs) == len(layers)
    z = sum(w * h[:, :5].mean(dim=1) for w, h in zip(torch.softmax(alpha, dim=0), outputs))
    linears = [m for m in model.recurrence.ffn if isinstance(m, torch.nn.Linear)]
    for index, linear in enumerate(linears):
        z = z @ linear.weight.T + linear.bias
        z = torch.relu(z) if index < len(linears) - 1 else z
    with torch.no_grad():
        state = model(x).recurrent_state
    assert state.window_index == 1
    torch.testing.assert_close(state.h_prev, z, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "gpt2"])
def test_h_prev_is_an_input_one_position_before_the_window(family):
    """With one layer and l_ins = 0, window 2 with h_prev equals the unmodified model fed [h_prev, the window's token
    embeddings] at positions 0..T (RoPE sees only differences: h_prev at -1, the tokens at 0..T-1); in a family without
    positions (Granite 4, Jamba, Nemotron-H, Kimi Linear) at any position."""
    model, decoder = models(family, overlap=0, layers=1, insertion_layer=0)
    x = tokens(16)
    with torch.no_grad():
        h_prev = model(x[:, :8]).recurrent_state.h_prev
        logits = model(x).logits[:, 8:]
        # Granite multiplies its input embeddings inside the model; h_prev enters layer 0 after that
        h_prev_as_input = h_prev / getattr(decoder.config, "embedding_multiplier", 1.0)
        inputs = torch.cat([h_prev_as_input[:, None], decoder.get_input_embeddings()(x[:, 8:])], dim=1)
        reference = decoder(inputs_embeds=inputs, position_ids=torch.arange(9)[None]).logits[:, 1:]
        at_position_zero = decoder(
            inputs_embeds=inputs, position_ids=torch.tensor([[0] + list(range(8))])
        ).logits[:, 1:]
    torch.testing.assert_close(logits, reference, rtol=1e-4, atol=1e-5)
    # the position is tested: in a rotary family 0 would give another answer
    assert ((logits - at_position_zero).abs().max() > 1e-4) == (model.rotary_embedding is not None)


@pytest.mark.parametrize("insertion_layer", [0, 1])
def test_h_prev_is_rotated_with_its_layers_rotary_embedding(insertion_layer):
    """Gemma 3 rotates sliding-window and full-attention layers with different frequency bases: h_prev at layer l_ins
    is rotated at -1 with the embedding of l_ins's own layer type."""
    config = Gemma3TextConfig(**{**FAMILIES["gemma3"](2).to_dict(),
                                 "layer_types": ["sliding_attention", "full_attention"]})
    torch.manual_seed(0)
    decoder = AutoModelForCausalLM.from_config(config).eval()
    model = CausalLMWithRecurrence.wrap(decoder, window_size=8, overlap=0, insertion_layer=insertion_layer,
                                        recurrence_hidden_size=16).eval()
    rotary, calls = decoder.base_model.rotary_emb, []  # each call's arguments by name, however they were passed
    handle = rotary.register_forward_pre_hook(
        lambda module, args, kwargs: calls.append(inspect.signature(module.forward).bind(*args, **kwargs).arguments),
        with_kwargs=True)
    with torch.no_grad():
        model(tokens(16))
    handle.remove()
    at_minus_one = [call["layer_type"] for call in calls if call["position_ids"].flatten().tolist() == [-1]]
    assert at_minus_one == [config.layer_types[insertion_layer]]  # once, in the second window


def test_gpt2_case_equals_gpt2_with_recurrence():
    """GPT-2 wrapped equals the GPT-2-only model with the same weights (h_prev without a position), over windows."""
    model, _ = models("gpt2", overlap=3)
    gpt2 = GPT2WithRecurrence(GPT2WithRecurrenceConfig(**FAMILIES["gpt2"](3).to_dict(), window_size=8, overlap=3,
                                                       insertion_layer=1, recurrence_hidden_size=16)).eval()
    state = {k.removeprefix("decoder."): v for k, v in model.state_dict().items()}
    gpt2.load_state_dict(state)
    x = tokens(37)
    with torch.no_grad():
        torch.testing.assert_close(model(x, labels=x).logits, gpt2(x, labels=x).logits, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("use_cache", [False, True], ids=["", "cached"])
@pytest.mark.parametrize("family", FAMILIES)
def test_streaming_in_chunks_equals_one_call(family, use_cache):
    """With `use_cache`, each call runs only its new tokens on the key-value cache of the unfinished window (h_prev's
    key and value at l_ins, one entry more than the other layers hold)."""
    model, _ = models(family)
    x = tokens(30)
    with torch.no_grad():
        whole = model(x, labels=x)
        state, logits, loss_sum, count, at = None, [], 0.0, 0, 0
        for size in (7, 1, 12, 10):
            out = model(x[:, at:at + size], labels=x[:, at:at + size], recurrent_state=state, use_cache=use_cache)
            state, at = out.recurrent_state, at + size
            logits.append(out.logits)
            loss_sum, count = loss_sum + out.loss * out.num_predicted_tokens, count + out.num_predicted_tokens
    torch.testing.assert_close(torch.cat(logits, dim=1), whole.logits, rtol=0, atol=1e-5)
    assert count == whole.num_predicted_tokens == 2 * 29
    torch.testing.assert_close(loss_sum / count, whole.loss)


@pytest.mark.parametrize("family", FAMILIES)
def test_generate_continues_across_windows(family):
    """Greedy `generate` (with the window's key-value cache) equals re-reading the whole sequence each step, far past
    the first window, and generating without the cache; inside the first window it equals the unmodified model's own
    greedy generation. A batch of two prompts."""
    model, decoder = models(family)
    x = tokens(6)
    generated = model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=0)
    expected = x
    with torch.no_grad():
        for _ in range(20):
            expected = torch.cat([expected, model(expected).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generated, expected)
    assert torch.equal(model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=0, use_cache=False), expected)
    short = model.generate(x[:, :3], max_new_tokens=5, do_sample=False, pad_token_id=0)
    assert torch.equal(short, decoder.generate(x[:, :3], max_new_tokens=5, do_sample=False, pad_token_id=0))


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")
@pytest.mark.parametrize("family, enable", [(family, "gradient_checkpointing_enable") for family in FAMILIES] + [
    pytest.param("llama", "activation_checkpointing_enable", marks=pytest.mark.skipif(
        not hasattr(CausalLMWithRecurrence, "activation_checkpointing_enable"),
        reason="transformers 5.23 renamed gradient_checkpointing_enable"))])
def test_window_checkpointing_gives_the_same_gradients(family, enable):
    model, _ = models(family)
    model.train()  # no dropout in these configs
    x = tokens(37)

    def loss_and_grads():
        model.zero_grad()
        loss = model(x, labels=x).loss
        loss.backward()
        return loss.detach(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    plain_loss, plain = loss_and_grads()
    getattr(model, enable)()
    # whole windows, the backbone's own layers left alone
    assert not [name for name, module in model.named_modules() if name and getattr(module, "gradient_checkpointing", 0)]
    checkpointed = []
    checkpoint = model._gradient_checkpointing_func
    model._gradient_checkpointing_func = lambda step, *args: checkpointed.append(step) or checkpoint(step, *args)
    loss, grads = loss_and_grads()
    assert checkpointed == [model.window_step] * 7  # 37 tokens in windows of 8 overlapping by 3
    torch.testing.assert_close(loss, plain_loss)
    assert grads.keys() == plain.keys() and any(n.startswith("recurrence.ffn") for n in grads)
    for name, grad in grads.items():
        torch.testing.assert_close(grad, plain[name], rtol=1e-5, atol=1e-6)


@pytest.mark.filterwarnings("ignore:`gradient_checkpointing_enable` is deprecated:FutureWarning")
def test_generate_in_training_mode_with_window_checkpointing_says_it_runs_without_the_cache(caplog):
    """generate's cache is off under window checkpointing in training mode (a checkpointed window keeps none): the
    outputs are the cached ones of eval mode (no dropout in these configs), and one warning says why it is slow and
    what to do; in eval mode nothing is said."""
    model, _ = models("llama")
    x = tokens(6)
    model.gradient_checkpointing_enable()
    model.train()
    hf_logging.warning_once.cache_clear()  # said once per process: not already said by another test
    caplog.clear()
    with caplog.at_level("WARNING"):
        trained = model.generate(x, max_new_tokens=12, do_sample=False, pad_token_id=0)
        model.eval()
        evaluated = model.generate(x, max_new_tokens=12, do_sample=False, pad_token_id=0)
    warned = [r.getMessage() for r in caplog.records if "use_cache=True is incompatible" in r.getMessage()]
    assert len(warned) == 1 and "model.eval()" in warned[0]
    assert torch.equal(trained, evaluated)


@pytest.mark.parametrize("family", FAMILIES)
def test_right_padded_batch_gives_each_document_its_own_result(family):
    model, _ = models(family)
    x = tokens(30)
    mask = torch.ones_like(x)
    mask[1, 13:] = 0
    with torch.no_grad():
        batch = model(x, attention_mask=mask, labels=x)
        alone = [model(x[:1], labels=x[:1]), model(x[1:, :13], labels=x[1:, :13])]
    torch.testing.assert_close(batch.logits[1:, :13], alone[1].logits, rtol=0, atol=1e-5)
    torch.testing.assert_close(batch.logits[:1], alone[0].logits, rtol=0, atol=1e-5)
    summed = sum(out.loss * out.num_predicted_tokens for out in alone)
    torch.testing.assert_close(batch.loss * batch.num_predicted_tokens, summed)


@pytest.mark.parametrize("family", ["llama", "qwen3_5_text", "mamba"])
def test_memory_tokens_are_read_before_and_written_after_each_window(family):
    """Window 2's logits equal the unmodified model on [the memory window 1 wrote, window 2's tokens]; window 1 wrote
    the last hidden states of the unmodified model on [memory embeddings, window 1, memory embeddings]. A hybrid's
    DeltaNet layers and Mamba's read the memory as they read tokens."""
    model, decoder = models(family, overlap=0, num_memory_tokens=2)
    x = tokens(16)
    embed = decoder.get_input_embeddings()
    with torch.no_grad():
        memory = model.memory[None].expand(2, -1, -1)
        first = decoder.base_model(inputs_embeds=torch.cat([memory, embed(x[:, :8]), memory], dim=1)).last_hidden_state
        written = first[:, -2:]
        second = decoder(inputs_embeds=torch.cat([written, embed(x[:, 8:])], dim=1)).logits[:, 2:]
        logits = model(x).logits
        torch.testing.assert_close(model(x[:, :8]).recurrent_state.h_prev, written, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[:, 8:], second, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(logits[:, :8],
                               decoder(inputs_embeds=torch.cat([memory, embed(x[:, :8])], 1)).logits[:, 2:],
                               rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("family, fields", [("qwen2", {}), ("qwen2", {"num_memory_tokens": 2}),
                                            ("qwen2", {"use_recurrence": False}),
                                            ("qwen3_5_text", {"overlap": 0, "carry_layer_states": True})])
def test_save_and_load_through_the_auto_class(tmp_path, family, fields):
    model, _ = models(family, **fields)
    x = tokens()
    model.save_pretrained(tmp_path)
    loaded = AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    assert type(loaded) is CausalLMWithRecurrence
    with torch.no_grad():
        torch.testing.assert_close(loaded(x).logits, model(x).logits, rtol=0, atol=0)


def test_from_pretrained_wraps_a_plain_checkpoint_and_keeps_its_weights(tmp_path):
    torch.manual_seed(0)
    llama = LlamaForCausalLM(FAMILIES["llama"](3)).eval()
    llama.save_pretrained(tmp_path / "llama")
    model = CausalLMWithRecurrence.from_pretrained(tmp_path / "llama", window_size=8, insertion_layer=2)
    assert not any(module.training for module in model.modules())  # as transformers' from_pretrained returns it
    assert not CausalLMWithRecurrence.wrap(llama.train(), window_size=8).training
    assert model.config.window_size == 8 and model.config.insertion_layer == 2
    x = tokens(8)
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, llama(x).logits, rtol=0, atol=0)


def multimodal_llama4():
    """A tiny image-and-text Llama 4, and its text logits (its own forward needs an image: the text LM's)."""
    vision = dict(hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=4, image_size=28,
                  patch_size=14, vision_output_dim=32, projector_input_dim=32, projector_output_dim=32)
    model = Llama4ForConditionalGeneration(Llama4Config(text_config=FAMILIES["llama4_text"](3).to_dict(),
                                                        vision_config=vision))
    return model, lambda x: model.language_model(x).logits


def multimodal_qwen3_5():
    """A tiny image-and-text Qwen3.5, and its logits on text."""
    vision = dict(depth=1, hidden_size=32, intermediate_size=64, num_heads=4, out_hidden_size=32, patch_size=14,
                  spatial_merge_size=2, temporal_patch_size=2)
    model = Qwen3_5ForConditionalGeneration(Qwen3_5Config(text_config=FAMILIES["qwen3_5_text"](3).to_dict(),
                                                          vision_config=vision))
    return model, lambda x: model(input_ids=x).logits


@pytest.mark.parametrize("build", [multimodal_llama4, multimodal_qwen3_5], ids=["llama4", "qwen3_5"])
def test_from_pretrained_wraps_a_multimodal_checkpoint_as_its_text_model(tmp_path, build):
    """Llama 4 and Qwen3.5 are published as image-and-text checkpoints; AutoModelForCausalLM loads their text LM (its
    weights under `language_model.`), and that is what gets wrapped, with the checkpoint's weights."""
    torch.manual_seed(0)
    multimodal, text_logits = build()
    multimodal.eval().save_pretrained(tmp_path / "multimodal")
    model = CausalLMWithRecurrence.from_pretrained(tmp_path / "multimodal", window_size=8, insertion_layer=1).eval()
    x = tokens(8)
    with torch.no_grad():
        torch.testing.assert_close(model(x).logits, text_logits(x), rtol=0, atol=0)


@pytest.mark.parametrize("family, fields, message", [
    ("llama", {"window_size": 64}, "occupies 65 positions, more than the model's 64"),
    ("gpt2", {"window_size": 65}, "occupies 65 positions, more than the model's 64"),
    ("llama", {"window_size": 40, "num_memory_tokens": 16}, "occupies 72 positions"),
    ("llama", {"window_size": 8, "overlap": 8}, "overlap must satisfy 0 <= overlap < window_size=8"),
    ("llama", {"insertion_layer": 3}, "insertion_layer must lie in"),
    ("llama4_text", {"window_size": 16}, "window_size=16 must be below the model's attention_chunk_size=16"),
])
def test_bad_windows_raise_one_line_errors(family, fields, message):
    decoder = AutoModelForCausalLM.from_config(FAMILIES[family](3))
    with pytest.raises(ValueError, match=message):
        CausalLMWithRecurrence.wrap(decoder, **{"window_size": 8, **fields})


def test_models_it_cannot_take_are_named():
    with pytest.raises(ValueError, match="needs a causal LM with a language-model head, got a BertModel"):
        CausalLMWithRecurrence.wrap(BertModel(BertConfig(vocab_size=VOCAB, hidden_size=32, num_hidden_layers=2,
                                                         num_attention_heads=4, intermediate_size=64)))
    mistral = AutoModelForCausalLM.from_config(
        MistralConfig(**{**FAMILIES["mistral"](2).to_dict(), "sliding_window": 8})
    )
    with pytest.raises(ValueError, match="window_size=8 must be below the model's sliding_window=8"):
        CausalLMWithRecurrence.wrap(mistral, window_size=8, insertion_layer=1)
    # memory tokens: the last written slot must see the first read one, 2 + T + 2 positions back
    CausalLMWithRecurrence.wrap(mistral, window_size=4, num_memory_tokens=2)
    with pytest.raises(ValueError, match="window_size=5 with 2 memory tokens read before it and 2 written after it "
                                         "spans 9 positions, more than the model's sliding_window=8"):
        CausalLMWithRecurrence.wrap(mistral, window_size=5, num_memory_tokens=2)
    for implementation in ("flash_attention_2", "flex_attention"):  # lengthgen's reason, not a generic refusal
        llama = AutoModelForCausalLM.from_config(FAMILIES["llama"](2))
        llama.config._attn_implementation_internal = implementation  # as a model loaded with it on a GPU has it
        with pytest.raises(ValueError, match=f"runs attn_implementation sdpa or eager, not '{implementation}' "
                                             "\\(h_prev needs an explicit attention mask\\)"):
            CausalLMWithRecurrence.wrap(llama, window_size=8)
    mamba = AutoModelForCausalLM.from_config(WITHOUT_ATTENTION["mamba"](2))
    with pytest.raises(ValueError, match="cannot wrap a 'mamba' model: none of its decoder layers has softmax"):
        CausalLMWithRecurrence.wrap(mamba, window_size=8, insertion_layer=1)
    kimi = AutoModelForCausalLM.from_config(KimiLinearConfig(**{**FAMILIES["kimi_linear"](2).to_dict(),
                                                                "layer_types": ["linear_attention"] * 2}))
    with pytest.raises(ValueError, match="cannot wrap a 'kimi_linear' model: none of its decoder layers has softmax"):
        CausalLMWithRecurrence.wrap(kimi, window_size=8, insertion_layer=1)
    gemma3n = AutoModelForCausalLM.from_config(Gemma3nTextConfig(
        **SMALL, num_hidden_layers=2, head_dim=8, sliding_window=16, laurel_rank=4, altup_num_inputs=2,
        hidden_size_per_layer_input=8, vocab_size_per_layer_input=VOCAB, num_kv_shared_layers=0,
        activation_sparsity_pattern=[0.0] * 2, layer_types=["sliding_attention", "full_attention"]))
    with pytest.raises(ValueError, match="'gemma3n_text' model: its layers also read embeddings of the token ids"):
        CausalLMWithRecurrence.wrap(gemma3n, window_size=8, insertion_layer=1)


@pytest.mark.parametrize("family, insertion_layer, kind, usable", [
    ("minimax", 0, "'linear_attention'", "1, 3"),  # lightning attention: a module named like softmax attention
    ("lfm2_moe", 2, "'conv'", "1, 3"),
    ("nemotron_h", 2, "'mlp'", "1"),
])
def test_h_prev_is_refused_at_a_layer_without_softmax_attention(family, insertion_layer, kind, usable):
    decoder = AutoModelForCausalLM.from_config(FAMILIES[family](4))
    with pytest.raises(ValueError, match=f"insertion_layer={insertion_layer} is a {kind} layer of this '{family}' "
                                         f"model; h_prev enters a softmax self-attention layer: one of {usable}$"):
        CausalLMWithRecurrence.wrap(decoder, window_size=8, insertion_layer=insertion_layer)
    memory = CausalLMWithRecurrence.wrap(decoder, window_size=8, insertion_layer=insertion_layer, num_memory_tokens=2)
    assert memory.recurrence is None  # memory tokens are inputs, not keys at l_ins: any layer kinds will do


def test_flops_count_the_routed_experts_and_the_attention_layers_only():
    """FLOPs per token (Kaplan et al.'s count, as for GPT-2's Tables 1-2) by hand for a mixture of experts, where a
    token passes through 2 of 4 experts, and the attention term of a hybrid, where half the layers are linear."""
    per_layer = (32 * 32 + 2 * 32 * 16 + 32 * 32  # q, k and v of 2 key-value heads, o
                 + 4 * 32  # the router
                 + 2 * (2 * 32 * 32 + 32 * 32))  # 2 routed experts: gate and up, down (moe_intermediate_size 32)
    config = FAMILIES["qwen3_moe"](2)
    assert flops_per_token(config, 8) == 2 * 2 * per_layer + 2 * 2 * 8 * 32
    assert flops_per_token(config, 8, overlap=4) == (2 * 2 * per_layer + 2 * 2 * 8 * 32) * 8 / 4
    for family in ("minimax", "qwen3_5_text"):  # linear, full, linear, full
        hybrid = FAMILIES[family](4)
        all_attention = type(hybrid)(**{**hybrid.to_dict(), "layer_types": ["full_attention"] * 4})
        difference = flops_per_token(all_attention, 8) - flops_per_token(hybrid, 8)
        parameters = non_embedding_parameters(all_attention) - non_embedding_parameters(hybrid)
        assert difference == 2 * parameters + 2 * 2 * 8 * 32  # two layers fewer scoring 8 positions


def test_generate_reads_at_the_overlap_it_is_given():
    """`overlap=` in `generate` reaches every step, as in a forward call: greedy tokens of a model configured with
    overlap 3, generated at overlap 0, are those of re-reading the text at overlap 0 (which differ from overlap 3's)."""
    model, _ = models("llama", overlap=3)
    model.generation_config.eos_token_id = None  # 20 tokens whatever they are
    x = tokens(6)
    expected = {0: x, 3: x}
    with torch.no_grad():
        for overlap in expected:
            for _ in range(20):
                step = model(expected[overlap], overlap=overlap).logits[:, -1].argmax(-1, keepdim=True)
                expected[overlap] = torch.cat([expected[overlap], step], dim=1)
    assert not torch.equal(expected[0], expected[3])
    for use_cache in (True, False):
        generated = model.generate(x, overlap=0, use_cache=use_cache, max_new_tokens=20, do_sample=False,
                                   pad_token_id=0)
        assert torch.equal(generated, expected[0])


def test_a_prompt_holding_the_pad_token_without_attention_mask_is_refused_with_the_reason():
    """transformers reads the pad token in a prompt given without an attention mask as padding; `generate` refuses
    padded prompts, and says so in terms of the pad token and the remedy. With an attention mask of ones the same
    prompt is text."""
    model, _ = models("llama")
    x = tokens(6)
    x[1, 2] = 0
    with pytest.raises(ValueError, match="these hold the pad token \\(pad_token_id=0\\), which generate reads as "
                                         "padding when no attention_mask is passed: pass attention_mask=torch"):
        model.generate(x, max_new_tokens=2, do_sample=False, pad_token_id=0)
    assert model.generate(x, attention_mask=torch.ones_like(x), max_new_tokens=2, do_sample=False,
                          pad_token_id=0).shape == (2, 8)


def test_a_key_value_cache_passed_in_and_left_padded_prompts_are_refused():
    """The window's cache lives in `recurrent_state`; a prompt padded on the left would be continued after its
    padding."""
    model, _ = models("llama")
    x = tokens(6)
    message = "keeps its key-value cache in recurrent_state \\(use_cache=True\\) and cannot take a DynamicCache"
    with pytest.raises(ValueError, match=message + " \\(past_key_values\\)$"):
        model(x, past_key_values=DynamicCache())
    with pytest.raises(ValueError, match="model_kwargs` are not used by the model: \\['cache'\\]"):  # generate's check
        model.generate(x, cache=DynamicCache(), max_new_tokens=2, do_sample=False, pad_token_id=0)
    left_padded = torch.ones_like(x)
    left_padded[1, :2] = 0
    with pytest.raises(ValueError, match="generate takes prompts without padding .* continued after its padding.$"):
        model.generate(x, attention_mask=left_padded, max_new_tokens=2, do_sample=False, pad_token_id=0)


def test_what_would_lose_the_recurrent_state_is_refused():
    """Beam search would reorder the sequences without their recurrent state, and a document that ended in padding
    would be continued after it: both are refused in one line, as are the hidden states generate cannot return. What
    follows an ended document may be padding, as in a chunked read of a right-padded batch."""
    model, _ = models("llama")
    x = tokens(6)
    greedy = {"max_new_tokens": 2, "do_sample": False, "pad_token_id": 0}
    with pytest.raises(ValueError, match="(?i)only supports .*beam_search"):
        model.generate(x, num_beams=2, **greedy)
    with pytest.raises(ValueError, match=r"returns no hidden states or attentions \(output_hidden_states\)"):
        model.generate(x, output_hidden_states=True, return_dict_in_generate=True, **greedy)
    mask = torch.ones(2, 10, dtype=torch.long)
    mask[1, 7:] = 0
    with torch.no_grad():
        state = model(tokens(10), attention_mask=mask, use_cache=True).recurrent_state
        ended = r"recurrent_state holds documents that ended in padding \(rows \[1\]\)"
        with pytest.raises(ValueError, match=ended):
            model.generate(tokens(3), recurrent_state=state, **greedy)
        with pytest.raises(ValueError, match=ended):
            model(tokens(3), attention_mask=torch.ones(2, 3, dtype=torch.long), recurrent_state=state)
        after = torch.tensor([[1, 1, 1], [0, 0, 0]])
        assert model(tokens(3), attention_mask=after, recurrent_state=state).recurrent_state.ended.tolist() == [False,
                                                                                                               True]


@pytest.mark.parametrize("family", [*FAMILIES, *WITHOUT_ATTENTION, *CARRYING])
def test_the_window_cache_goes_to_the_argument_the_model_takes(family):
    """A cache passed under a name the model does not take would vanish into its `**kwargs` (the model would run with
    a cache of its own and drop it): the Mamba families took theirs as `cache_params` before transformers 5.24."""
    stack = decoder_stack(AutoModelForCausalLM.from_config({**FAMILIES, **WITHOUT_ATTENTION, **CARRYING}[family](2)))
    assert cache_argument(stack) in inspect.signature(type(stack).forward).parameters


def test_generate_runs_one_token_per_step_on_the_cache():
    """With the cache a step runs one token through the model; a window that fills up runs whole once (for h_prev),
    and the next window starts with its overlap and its first new token. Without the cache each step runs the
    unfinished window again."""
    model, decoder = models("llama")  # windows of 8, overlap 3
    lengths = []
    hook = decoder_layers(decoder)[0].register_forward_pre_hook(
        lambda layer, args, kwargs: lengths.append((args[0] if args else kwargs["hidden_states"]).shape[1]),
        with_kwargs=True)
    try:
        for use_cache in (True, False):
            lengths.clear()
            model.generate(tokens(6), max_new_tokens=9, do_sample=False, pad_token_id=0, use_cache=use_cache)
            assert lengths == ([6, 1, 8, 4, 1, 1, 1, 8, 4] if use_cache else [6, 7, 8, 4, 5, 6, 7, 8, 4])
    finally:
        hook.remove()


@pytest.mark.parametrize("family, fields", [
    ("llama", {"num_memory_tokens": 2}), ("qwen3_5_text", {"num_memory_tokens": 2}),
    ("mamba", {"num_memory_tokens": 2}), ("mamba", {"use_recurrence": False}), ("llama", {"use_recurrence": False}),
    ("jamba", {"use_recurrence": False}), ("minimax", {"overlap": 0}),
])
def test_cached_generate_and_streaming_with_memory_tokens_and_plain_windows(family, fields):
    """Memory tokens (the read memory heads the window's cache) and plain windows: cached `generate` equals it without
    the cache, and cached chunks equal one call. In Mamba-1, Jamba and MiniMax a call of several tokens cannot go on
    from a cached state: such a call runs its window afresh."""
    model, _ = models(family, **fields)
    x = tokens(6)
    generated = model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=0)
    assert torch.equal(generated, model.generate(x, max_new_tokens=20, do_sample=False, pad_token_id=0,
                                                 use_cache=False))
    with torch.no_grad():
        whole = model(generated).logits
        state, logits, at = None, [], 0
        for size in (5, 1, 1, 9, 10):
            out = model(generated[:, at:at + size], recurrent_state=state, use_cache=True)
            state, at = out.recurrent_state, at + size
            logits.append(out.logits)
    torch.testing.assert_close(torch.cat(logits, dim=1), whole, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family, fields", [("llama", {}), ("qwen3_5_text", {"carry_layer_states": True}),
                                            ("llama", {"num_memory_tokens": 2}), ("minimax", {})])
def test_generate_continues_the_documents_of_a_recurrent_state(family, fields):
    """`generate(next_ids, recurrent_state=state)` continues the text `state` read (here a prompt read in two calls,
    then one token that does not fill the window: the state's cache is read, also where a call of several tokens
    runs its window afresh, as MiniMax's does) as `generate` on the whole text does, each document's state repeated
    with its prompt for `num_return_sequences`; the state can be continued again (a call leaves the cache it was
    given as it was)."""
    model, _ = models(family, **fields)
    x = tokens(10)
    greedy = dict(max_new_tokens=12, do_sample=False, pad_token_id=0)
    whole = model.generate(x, attention_mask=torch.ones_like(x), **greedy)  # token 0 is not padding here
    with torch.no_grad():
        state = model(x[:, :4], use_cache=True).recurrent_state
        state = model(x[:, 4:9], recurrent_state=state, use_cache=True).recurrent_state
    # num_return_sequences repeats each document's state with its prompt (sampling from the top token only: greedy)
    repeated = model.generate(x[:, 9:], attention_mask=torch.ones_like(x[:, 9:]), recurrent_state=state,
                              **{**greedy, "do_sample": True, "top_k": 1, "num_return_sequences": 2})
    assert torch.equal(repeated, whole[:, 9:].repeat_interleave(2, dim=0))
    for _ in range(2):
        continued = model.generate(x[:, 9:], attention_mask=torch.ones_like(x[:, 9:]), recurrent_state=state,
                                   **greedy)
        assert torch.equal(continued, whole[:, 9:])


def one_pass_with_attention_in_blocks(decoder, x, blocks):
    """The unmodified model over the whole of `x` in one pass, its softmax-attention layers confined to consecutive
    blocks of the given lengths (a block-diagonal causal mask, positions restarting at 0 in each block), its other
    layers reading everything."""
    length = x.shape[1]
    block = torch.repeat_interleave(torch.arange(len(blocks)), torch.tensor(blocks))[:length]
    allowed = (block[:, None] == block[None, :]) & torch.ones(length, length, dtype=torch.bool).tril()
    mask = allowed if decoder.config._attn_implementation == "sdpa" else \
        torch.zeros(length, length).masked_fill(~allowed, torch.finfo(torch.float32).min)
    first = torch.searchsorted(block, block, side="left")  # each position's block start

    def confine(layer, args, kwargs):
        return args, {**kwargs, "attention_mask": mask[None, None]}

    layers = decoder_layers(decoder)
    hooks = [layers[index].register_forward_pre_hook(confine, with_kwargs=True)
             for index in softmax_attention_layers(decoder)]
    try:
        return decoder(x, position_ids=(torch.arange(length) - first)[None]).logits
    finally:
        for hook in hooks:
            hook.remove()


def one_pass_with_attention_in_windows(decoder, x, window):
    """What `carry_layer_states` should compute without h_prev or overlap: one pass, attention in disjoint windows."""
    return one_pass_with_attention_in_blocks(decoder, x, [window] * -(-x.shape[1] // window))


@pytest.mark.parametrize("family", CARRYING)
def test_carried_layer_states_read_the_document_as_one_pass(family):
    """Without h_prev, the wrapper with `carry_layer_states` equals one pass of the unmodified model whose attention
    layers see only their window; without carrying, it does not (each window's recurrent layers start from zero)."""
    x = tokens(24)
    model, decoder = models(family, overlap=0, use_recurrence=False, carry_layer_states=True)
    afresh, _ = models(family, overlap=0, use_recurrence=False)
    with torch.no_grad():
        reference = one_pass_with_attention_in_windows(decoder, x, 8)
        torch.testing.assert_close(model(x).logits, reference, rtol=0, atol=2e-6)
        assert (afresh(x).logits - reference).abs().max() > 1e-5
        if not softmax_attention_layers(decoder):  # Mamba-2: windows with carried states are the whole document
            torch.testing.assert_close(model(x).logits, decoder(x).logits, rtol=0, atol=2e-6)


@pytest.mark.parametrize("family", CARRYING)
def test_carried_layer_states_with_an_overlap_pass_on_the_state_after_the_stride(family):
    """With overlap o (stride s = T - o) and no h_prev, each window's tokens enter the recurrent layers once: window w
    starts from the states after windows 0..w-1's first s tokens. So its logits are those of one pass of the
    unmodified model over the document up to its end, attention confined to blocks s, ..., s (w of them), then T (the
    window itself)."""
    window, overlap, x = 8, 3, tokens(27)
    model, decoder = models(family, window=window, overlap=overlap, use_recurrence=False, carry_layer_states=True)
    with torch.no_grad():
        logits = model(x).logits
        afresh = models(family, window=window, overlap=overlap, use_recurrence=False)[0](x).logits
        for index, (start, owned_from) in enumerate(window_starts(x.shape[1], window, overlap)):
            end = min(start + window, x.shape[1])
            reference = one_pass_with_attention_in_blocks(decoder, x[:, :end], [window - overlap] * index + [window])
            torch.testing.assert_close(logits[:, owned_from:end], reference[:, owned_from:end], rtol=0, atol=2e-6)
        assert (afresh - logits).abs().max() > 1e-5


@pytest.mark.parametrize("overlap", [0, 3])
@pytest.mark.parametrize("family", CARRYING)
def test_carried_layer_states_read_one_token_at_a_time_as_in_one_call(family, overlap):
    """Token by token (as `generate` reads): without the cache each call runs the unfinished window again from the
    states at its start; a window's first token takes the layers' one-token decoding step, which updates the states it
    is given in place: the states kept for the window's start must not change (they did: 0.03 off on Qwen3.5). With
    the cache each call takes that one-token step on the window's cache, whose recurrent layers started from the
    carried states."""
    model, _ = models(family, overlap=overlap, use_recurrence=False, carry_layer_states=True)
    x = tokens(20)
    with torch.no_grad():
        whole = model(x).logits
        for use_cache in (False, True):
            state, logits = None, []
            for at in range(x.shape[1]):
                out = model(x[:, at:at + 1], recurrent_state=state, use_cache=use_cache)
                state = out.recurrent_state
                logits.append(out.logits)
            torch.testing.assert_close(torch.cat(logits, dim=1), whole, rtol=0, atol=1e-5)


@pytest.mark.parametrize("family", ["qwen3_5_text", "falcon_h1", "lfm2"])
def test_a_window_split_at_its_stride_equals_one_call(family):
    """With h_prev, carried states and an overlap, a window to summarize runs as two calls on one cache (its first
    stride tokens, then the rest): the same hidden states as the window in one call, and the same h_prev and states
    for the next window as a call on the first stride tokens alone. Four layers: attention at l_ins and above it."""
    model, decoder = models(family, overlap=3, layers=4, carry_layer_states=True)
    assert len(softmax_attention_layers(decoder)) >= 2
    embeds = model.get_input_embeddings()(tokens(16))
    with torch.no_grad():
        _, h_prev, states = model.run_window(embeds[:, :8], None, 5, True)  # a first window: h_prev and states
        window = embeds[:, 5:13]
        hidden, next_h_prev, next_states = model.run_window(window, h_prev, 5, True, states)
        one_call, _, _ = model.run_window(window, h_prev, 5, False, states)
        _, stride_h_prev, stride_states = model.run_window(window[:, :5], h_prev, 5, True, states)
    torch.testing.assert_close(hidden, one_call, rtol=0, atol=1e-6)
    torch.testing.assert_close(next_h_prev, stride_h_prev, rtol=0, atol=1e-6)
    assert next_states.keys() == stride_states.keys() and next_states
    for index in next_states:
        for mine, theirs in zip(next_states[index], stride_states[index]):
            torch.testing.assert_close(mine, theirs, rtol=0, atol=1e-6)


@pytest.mark.parametrize("family, overlap", [("qwen3_5_text", 0), ("falcon_h1", 0), ("lfm2_moe", 0),
                                             ("qwen3_5_text", 3)])
def test_carried_layer_states_stream_generate_and_train_as_one_call(family, overlap):
    """With h_prev and carried states: chunked calls and `generate` (with and without the cache) equal one call;
    gradients with window checkpointing equal those without, and reach the first window's tokens through the carried
    states alone."""
    model, _ = models(family, overlap=overlap, layers=4, carry_layer_states=True)
    x = tokens(30)
    with torch.no_grad():
        whole = model(x).logits
        state, logits, at = None, [], 0
        for size in (7, 1, 1, 11, 10):  # the third call: a window's first token alone
            out = model(x[:, at:at + size], recurrent_state=state)
            state, at = out.recurrent_state, at + size
            logits.append(out.logits)
    torch.testing.assert_close(torch.cat(logits, dim=1), whole, rtol=0, atol=1e-5)
    generated = model.generate(x[:, :6], max_new_tokens=14, do_sample=False, pad_token_id=0)
    expected = x[:, :6]
    with torch.no_grad():
        for _ in range(14):
            expected = torch.cat([expected, model(expected).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(generated, expected)
    uncached = model.generate(x[:, :6], max_new_tokens=14, do_sample=False, pad_token_id=0, use_cache=False)
    assert torch.equal(uncached, expected)

    model.train()
    grads = []
    for checkpointing in (False, True):
        if checkpointing:
            model.gradient_checkpointing_enable()
        model.zero_grad()
        model(x, labels=x).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None})
    assert grads[0].keys() == grads[1].keys()
    for name, grad in grads[1].items():
        torch.testing.assert_close(grad, grads[0][name], rtol=1e-5, atol=1e-6)

    three_windows = x[:, :24]
    third_only = three_windows.masked_fill(torch.arange(24) < 17, -100)  # labels predicted in window 3 only
    for carry in (True, False):
        plain, _ = models(family, overlap=overlap, use_recurrence=False, carry_layer_states=carry)
        embeds = plain.get_input_embeddings()(three_windows).detach().requires_grad_()
        hook = plain.get_input_embeddings().register_forward_hook(lambda module, args, output: embeds)
        plain(three_windows, labels=third_only).loss.backward()
        hook.remove()
        # only the carried states connect the third window's loss to the first window's tokens
        assert (embeds.grad[:, :8].abs().max() > 0) == carry and embeds.grad[:, 16:].abs().max() > 0


@pytest.mark.parametrize("family, fields, message", [
    ("mamba", {}, "cannot carry a 'mamba' model's layer states: its Mamba-1 scan restarts from zero"),
    ("jamba", {}, "cannot carry a 'jamba' model's layer states: its Mamba-1 scan restarts"),
    ("minimax", {}, "cannot carry a 'minimax' model's layer states: its lightning attention keeps its state in a "
                    "cache of its own"),
    ("llama", {}, "cannot carry a 'llama' model's layer states: it has no recurrent layers"),
    ("qwen3_5_text", {"num_memory_tokens": 2}, "carry_layer_states carries h_prev or nothing beside the layers' "
                                               "states, not memory tokens, got num_memory_tokens=2"),
])
def test_carrying_layer_states_is_refused_where_it_would_be_wrong(family, fields, message):
    decoder = AutoModelForCausalLM.from_config({**FAMILIES, **WITHOUT_ATTENTION}[family](2))
    with pytest.raises(ValueError, match=message):
        CausalLMWithRecurrence.wrap(decoder, window_size=8, insertion_layer=1, use_recurrence=family != "mamba",
                                    carry_layer_states=True, **fields)
