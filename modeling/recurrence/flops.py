"""Forward FLOPs per predicted token of a causal LM run in windows (Tables 1-2's FLOPs/token column)."""

import torch
from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING

from .modeling_causal_lm_recurrent import decoder_layers, softmax_attention_layers
from .recurrence_module import check_overlap

GPT2_TYPES = ("gpt2", "gpt2_recurrent")  # counted by formula, as the paper counts them


def meta_model(config):
    """The causal LM of a family's config (a `causal_lm_recurrent` config's `decoder_config`) on the meta device: its
    shapes without memory. Built by its class, not `from_config`, which under DeepSpeed ZeRO-3 would partition the
    parameters over the processes (and fail to initialise them on the meta device)."""
    decoder = config.decoder_config_object() if config.model_type == "causal_lm_recurrent" else config
    with torch.device("meta"):
        return MODEL_FOR_CAUSAL_LM_MAPPING[type(decoder)](decoder)


def non_embedding_parameters(config) -> float:
    """Weight matrices of the decoder layers that a token passes through (norms and biases left out): GPT-2's
    n_layer x (4 d^2 + 2 d d_ff) by formula (the paper's count); any other family counted on its model built on the
    meta device, so grouped-query attention and gated feed-forward layers count as they are, and a mixture of experts
    counts the `num_experts_per_tok` experts a token is routed to, not all of them."""
    if config.model_type in GPT2_TYPES:
        d = config.n_embd
        d_ff = getattr(config, "n_inner", None) or 4 * d
        return config.n_layer * (4 * d * d + 2 * d * d_ff)
    return routed_weights(meta_model(config))


def routed_weights(model) -> float:
    """`non_embedding_parameters` of a model already built (on the meta device)."""
    routed_to = getattr(model.config, "num_experts_per_tok", None)
    total = 0.0
    for module in decoder_layers(model).modules():
        experts = routed_to and type(module).__name__.endswith("Experts")  # weights stacked (num_experts, ...)
        for weight in module.parameters(recurse=False):
            if weight.dim() >= 2:  # no norms, biases
                total += weight.numel() * (routed_to / weight.shape[0] if experts else 1)
    return total


def flops_per_token(config, window: int, overlap: int = 0, num_memory_tokens: int = 0) -> float:
    """Forward FLOPs per predicted token when a causal LM reads text in windows of `window` tokens that repeat
    `overlap` tokens of the previous window (and, with memory tokens, add `num_memory_tokens` read and as many written
    positions to each window).

    Counted as Kaplan et al. (2020) count a decoder's forward pass, which reproduces the paper's column: per position,
    2 FLOPs per non-embedding weight (of the experts a token is routed to, in a mixture of experts) plus 2 n_attn P d
    for the attention scores and values over a P-position context, n_attn the softmax-attention layers (all but a
    hybrid's others); embeddings, the LM head, norms and biases are left out. A window of P = T + 2m positions costs P
    times that and predicts T - overlap new tokens. The h_prev recurrence (one extra key at one layer and a few 200-wide
    layers once per window) adds well under 0.1% and is left out, as in the paper, where recurrent and plain models
    share the column.

    Args:
        config: a GPT-2, `gpt2_recurrent` or `causal_lm_recurrent` config, or any causal LM family's config.
        window: T, tokens per window (paper: 300).
        overlap: tokens repeated from the previous window, 0 <= overlap < window.
        num_memory_tokens: m, memory tokens read before and written after each window (0: none).
    """
    check_overlap(window, overlap)
    positions = window + 2 * num_memory_tokens
    if config.model_type in GPT2_TYPES:
        weights, scoring = non_embedding_parameters(config), config.n_layer
    else:  # one model built for both counts; a hybrid's other layers score no positions
        model = meta_model(config)
        weights, scoring = routed_weights(model), len(softmax_attention_layers(model))
    per_position = 2 * weights + 2 * scoring * positions * config.hidden_size
    return per_position * positions / (window - overlap)


__all__ = ["flops_per_token", "non_embedding_parameters"]
