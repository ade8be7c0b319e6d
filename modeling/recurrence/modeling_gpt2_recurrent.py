"""GPT-2 with window-level recurrence (Yoshida, Ettinger and Gimpel, "Adding Recurrence to Pretrained Transformers",
2020, §3-4).

A pretrained GPT-2 reads a long input in windows of T tokens with stride T - o (o = overlap). Window 1 runs GPT-2
unchanged. The hidden states of every layer of window i are mean-pooled with softmax-normalised learned layer
weights (Eq. 1) into z_i, over the positions that window i + 1 does not repeat; a small feed-forward network maps z_i
to h_prev,i, which enters window i + 1 at layer l_ins as one extra key and value: it is placed before the window's
first token, so every position sees it through the causal mask, it has no position embedding, and its own output is
dropped (T inputs, T outputs). Every token's logits come from exactly one window: the first window predicts all its
tokens, later windows only those the previous window did not hold (overlapped tokens are context only).

`recurrent_state` carries h_prev and the tokens of the unfinished window from one call to the next, so a document fed
in chunks gives the logits and losses of one call (streaming inference); with `use_cache` (as in `generate`) it also
carries the window's key-value cache, so that a new token runs through the blocks alone.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import torch
from torch import nn
from transformers import DynamicCache, GenerationMixin, GPT2Model, GPT2PreTrainedModel

from .configuration_gpt2_recurrent import GPT2WithRecurrenceConfig
from .recurrence_module import (
    RecurrenceModule,
    RecurrentCausalLMMixin,
    cache_argument,
    causal_mask,
    check_attention_implementation,
)


class GPT2WithRecurrence(RecurrentCausalLMMixin, GPT2PreTrainedModel, GenerationMixin):
    """GPT-2 language model reading any number of tokens in windows, with h_prev carried between windows."""

    config_class = GPT2WithRecurrenceConfig
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    accepts_loss_kwargs = False  # `loss` is the mean over this call's tokens; Trainer scales it for accumulation

    def __init__(self, config: GPT2WithRecurrenceConfig):
        check_attention_implementation(type(self).__name__, config._attn_implementation)
        super().__init__(config)
        self.transformer = GPT2Model(config)
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        self.recurrence = RecurrenceModule(config)
        self.gradient_checkpointing = False
        self.post_init()

    @classmethod
    def from_pretrained_gpt2(cls, name_or_path: str, **recurrence_fields) -> "GPT2WithRecurrence":
        """Load a pretrained GPT-2 (`GPT2LMHeadModel` checkpoint) unchanged and initialise the recurrence module.

        `recurrence_fields` are `GPT2WithRecurrenceConfig` fields (window_size, overlap, insertion_layer, ...)."""
        from transformers import AutoConfig, GPT2LMHeadModel

        model_type = AutoConfig.from_pretrained(name_or_path).model_type
        if model_type == "gpt2_recurrent":
            raise ValueError(f"{name_or_path} is a GPT2WithRecurrence already: load it with from_pretrained.")
        if model_type != "gpt2":  # GPT2LMHeadModel would load any other model's folder as a random GPT-2
            raise ValueError(f"{name_or_path} is a {model_type!r} model, not GPT-2 (CausalLMWithRecurrence wraps other "
                             "causal LMs).")
        gpt2 = GPT2LMHeadModel.from_pretrained(name_or_path)
        config = GPT2WithRecurrenceConfig(**{**gpt2.config.to_dict(), **recurrence_fields})
        model = cls(config)
        missing, unexpected = model.load_state_dict(gpt2.state_dict(), strict=False)
        missing = [k for k in missing if not k.startswith("recurrence.") and k != "lm_head.weight"]
        if missing or unexpected:
            raise ValueError(f"{name_or_path} is not a GPT-2 checkpoint: missing {missing}, unexpected {unexpected}")
        model.tie_weights()
        return model.eval()

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def window_cache(self, layer_states: None = None) -> DynamicCache:
        """An empty key-value cache for one window."""
        return DynamicCache(config=self.config)

    def run_window(self, window_embeds: torch.Tensor, h_prev: torch.Tensor | None, stride: int, summarize: bool,
                   layer_states: None = None, cache: DynamicCache | None = None, past: int = 0):
        """GPT-2 on one window (at most T tokens, positions 0..t-1), with h_prev as an extra key and value at layer
        l_ins. Returns the final hidden states `(batch, t, n_embd)`, if `summarize` the next window's h_prev from
        every block's output (Eq. 1's h^(l)) over the window's first `stride` tokens (those the next window does not
        repeat), and None: GPT-2 has no recurrent layers whose states would carry (`layer_states`).

        With a `cache` (`window_cache`), the blocks keep their keys and values in it; if it already holds the window's
        first `past` tokens, `window_embeds` are the tokens after them (positions past..past+t-1). Block l_ins's cache
        then also holds h_prev's key and value, one entry more than the others: each block gets the causal mask over
        the keys its own cache holds."""
        t = window_embeds.shape[1]
        positions = torch.arange(past, past + t, device=window_embeds.device)
        hidden = self.transformer.drop(window_embeds + self.transformer.wpe(positions))
        caching = {} if cache is None else {cache_argument(self.transformer.h[0]): cache, "use_cache": True}
        hidden_states = []
        for index, block in enumerate(self.transformer.h):
            extra = h_prev is not None and index == self.config.insertion_layer
            if extra and not past:  # h_prev goes first: visible from every position, its own output dropped below
                hidden = torch.cat([h_prev[:, None, :].to(hidden.dtype), hidden], dim=1)
            cached = past + 1 if extra and past else past  # keys already in this block's cache
            hidden = block(hidden, attention_mask=causal_mask(hidden.shape[1], hidden, past=cached), **caching)
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            if extra and not past:
                hidden = hidden[:, 1:]
            hidden_states.append(hidden)
        next_h_prev = self.recurrence([state[:, :stride] for state in hidden_states]) if summarize else None
        return self.transformer.ln_f(hidden), next_h_prev, None


__all__ = ["GPT2WithRecurrence"]
