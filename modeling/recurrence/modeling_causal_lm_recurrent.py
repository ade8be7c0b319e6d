"""Any causal language model with window-level recurrence (Yoshida, Ettinger and Gimpel 2020, §3), or with memory
tokens (the Recurrent Memory Transformer of Bulatov, Kuratov and Burtsev 2022, the baseline a user would pick instead).

`CausalLMWithRecurrence` wraps an unmodified transformers causal LM of any family that has a list of decoder layers
and the attention interface (Llama 3 and 4, Qwen2/3, Mistral, Gemma 2/3, Phi-3, GPT-OSS, DeepSeek-V3, GPT-2, ...;
hybrids such as Qwen3.5, LFM2, Granite 4 or Falcon-H1 with h_prev at one of their softmax-attention layers) and
reads its input in windows of T tokens with stride T - o, as `GPT2WithRecurrence` does for GPT-2: window 1 is the
unmodified model; every decoder layer's output of window i is pooled over the positions window i + 1 does not repeat
(Eq. 1), a small feed-forward network maps the pooled z_i to h_prev, and h_prev enters window i + 1 at layer l_ins as
one extra key and value. The model's own forward runs every window (its embeddings, masks, rotary embeddings,
attention implementation and final norm); at layer l_ins two hooks put h_prev before the window's first position and
take its output away again, so no family's attention is copied.

Where h_prev sits in position. The paper adds it to GPT-2, whose positions are learned embeddings added to the input:
a vector inserted at layer l_ins has no position at all. In a rotary family every key is rotated by its position, and
"no rotation" means position 0, the same place as the window's first token. Here h_prev is rotated as position -1:
it stands for the text that ends just before the window, so a query at position i sees it at distance i + 1, where
the previous window's last token would be in one long sequence (tested against the unmodified model fed h_prev as an
input one position before the window). A window with h_prev then spans T + 1 positions, which must fit the model's.

Memory tokens (`num_memory_tokens` = m > 0, instead of h_prev): the input of window i is [read memory (m vectors),
the window's token embeddings, write memory (m learned embeddings)]; causal attention lets every token read the
memory and the write positions read the whole window; the last hidden states at the write positions are window
i + 1's read memory, window 1 reads the learned embeddings. The memory tokens take ordinary positions (0..m-1 and
after the window), as in the RMT's decoder code.

Carried layer states (`carry_layer_states`, not in the paper): in a hybrid or a Mamba-2 model the recurrent layers
(gated DeltaNet, Mamba-2, short convolutions) can go on from where the previous window left them, as they would in
one pass over the document, while the softmax-attention layers still read each window afresh. Each window gets a
fresh transformers cache whose recurrent layers start from the previous window's final states (the attention layers'
keys and values are dropped with it, so memory stays one window's); the states are assigned rather than copied into
the cache in place, so gradients flow through them from window to window.

Streaming, generation, padding and gradient checkpointing are `RecurrentCausalLMMixin`'s (shared with GPT-2): a call
carries `recurrent_state` to the next, `generate` continues across windows with the unfinished window's key-value
cache in that state (a new token runs through the model alone; layer l_ins's cache holds h_prev's key and value
besides the window's, and each attention layer gets the mask over the keys its own cache holds, see `run_window`),
documents are right-padded, and gradient checkpointing keeps only each window's inputs.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import inspect
from types import MethodType

import torch
from torch import nn
from torch.nn import functional as F
from transformers import AutoConfig, AutoModelForCausalLM, DynamicCache, GenerationMixin, PreTrainedModel
from transformers import initialization as init
from transformers.cache_utils import LinearAttentionCacheLayerMixin

from .configuration_causal_lm_recurrent import CausalLMWithRecurrenceConfig, check_window_positions
from .recurrence_module import (
    RecurrenceModule,
    RecurrentCausalLMMixin,
    cache_argument,
    causal_mask,
    check_attention_implementation,
    forward_signature,
)

# layer types (transformers' `layer_types` names, and the older "attention") whose self-attention is softmax
SOFTMAX_ATTENTION = ("full_attention", "sliding_attention", "chunked_attention", "hybrid", "attention")
# layer types that see only part of the window, and the config field that bounds them (a window must fit inside)
LIMITED_ATTENTION = (("sliding_attention", "sliding_window"), ("chunked_attention", "attention_chunk_size"))
# families whose recurrent layers go on from a cached state over a many-token input (tested: one pass over the
# document with attention limited to the windows), and why some others cannot
CARRIES_LAYER_STATES = ("qwen3_5_text", "qwen3_next", "lfm2", "lfm2_moe", "granitemoehybrid", "bamba", "falcon_h1",
                        "nemotron_h", "kimi_linear", "mamba2")
MAMBA_1 = "its Mamba-1 scan restarts from zero in every many-token call in transformers"
CANNOT_CARRY = {"mamba": MAMBA_1, "falcon_mamba": MAMBA_1, "jamba": MAMBA_1,
                "minimax": "its lightning attention keeps its state in a cache of its own"}


def decoder_stack(model: PreTrainedModel) -> nn.Module:
    """A causal LM's stack of embeddings, decoder layers and final norm: its base model (Llama's `model`, GPT-2's
    `transformer`); Llama 4's text LM names the multimodal checkpoint's `language_model` as its base model prefix, so
    its `base_model` is itself and the stack is its `model`."""
    base = model.base_model
    return getattr(model, "model", base) if base is model else base


def decoder_layers(model: PreTrainedModel) -> nn.ModuleList:
    """The list of decoder layers of a causal LM's base model (Llama's `model.layers`, GPT-2's `transformer.h`), or a
    ValueError naming the family."""
    base, count = decoder_stack(model), model.config.num_hidden_layers
    lists = [m for m in base.children() if isinstance(m, nn.ModuleList) and len(m) == count]
    if len(lists) != 1:
        raise ValueError(f"CausalLMWithRecurrence cannot wrap a {model.config.model_type!r} model: its base model "
                         f"has no single list of {count} decoder layers")
    return lists[0]


def layer_kinds(config) -> list[str] | None:
    """Each decoder layer's kind as a hybrid family names it in `config.layer_types` (or Jamba's and Nemotron-H's
    older `layers_block_type`): Qwen3.5's and Qwen3-Next's gated DeltaNet, MiniMax's lightning attention and Mamba
    layers are "linear_attention", LFM2's short convolutions "conv", Nemotron-H's "mlp" blocks; Falcon-H1's "hybrid"
    layers run attention and a Mamba mixer side by side. None where the config does not say."""
    kinds = getattr(config, "layer_types", None) or getattr(config, "layers_block_type", None)
    return list(kinds) if kinds is not None and len(kinds) == config.num_hidden_layers else None


def softmax_attention_layers(model: PreTrainedModel) -> list[int]:
    """The decoder layers with softmax self-attention, which can take h_prev as one more key and value: by their kinds
    (a module's name does not tell: MiniMax's linear attention is a `MiniMaxLightningAttention`), or, where the config
    names none (GPT-2, Mamba), by their modules."""
    kinds = layer_kinds(model.config)
    if kinds is not None:
        return [index for index, kind in enumerate(kinds) if kind in SOFTMAX_ATTENTION]
    return [index for index, layer in enumerate(decoder_layers(model))
            if any(type(m).__name__.endswith("Attention") for m in layer.modules())]


def check_insertion_layer(model: PreTrainedModel, insertion_layer: int):
    """A ValueError naming the problem unless layer l_ins has softmax self-attention."""
    usable = softmax_attention_layers(model)
    if not usable:
        raise ValueError(f"CausalLMWithRecurrence cannot wrap a {model.config.model_type!r} model: none of its decoder "
                         "layers has softmax self-attention to take h_prev as a key and value")
    if insertion_layer not in usable:
        kinds = layer_kinds(model.config)
        kind = f"a {kinds[insertion_layer]!r} layer" if kinds else "a layer without self-attention"
        raise ValueError(f"insertion_layer={insertion_layer} is {kind} of this {model.config.model_type!r} model; "
                         f"h_prev enters a softmax self-attention layer: one of {', '.join(map(str, usable))}")


def check_carries_layer_states(model: PreTrainedModel):
    """A ValueError naming the problem unless `model`'s recurrent layers can carry their states across windows."""
    model_type = model.config.model_type
    if model_type not in CARRIES_LAYER_STATES:
        reason = CANNOT_CARRY.get(model_type, "it has no recurrent layers (its attention reads each window afresh)")
        raise ValueError(f"carry_layer_states cannot carry a {model_type!r} model's layer states: {reason}; the "
                         f"families it can: {', '.join(CARRIES_LAYER_STATES)}")


def _assign_conv_state(layer, conv_states, state_idx=0, conv_kernel_size=None, **kwargs):
    """A cache layer's `update_conv_state` that assigns the new state instead of copying it in place: returns the
    previous state's last `kernel` columns (zeros at the start) followed by the new input, and keeps that sequence's
    last `kernel` columns."""
    kernel = conv_kernel_size or layer.conv_kernel_size[state_idx] or conv_states.shape[-1]
    previous = layer.conv_states[state_idx] if layer.has_previous_state[state_idx] else None
    full = conv_states if previous is None else torch.cat([previous.to(conv_states.dtype), conv_states], dim=-1)
    if full.shape[-1] < kernel:
        full = F.pad(full, (kernel - full.shape[-1], 0))
    layer.conv_kernel_size[state_idx] = kernel
    layer.conv_states[state_idx] = full[..., -kernel:]
    layer.is_conv_states_initialized[state_idx] = layer.has_previous_state[state_idx] = True
    return full


def _assign_recurrent_state(layer, recurrent_states, state_idx=0, **kwargs):
    layer.recurrent_states[state_idx] = recurrent_states
    layer.is_recurrent_states_initialized[state_idx] = layer.has_previous_state[state_idx] = True
    return recurrent_states


def carrying_cache(config, layer_states: dict | None) -> DynamicCache:
    """A fresh cache for one window whose recurrent layers start from copies of `layer_states` (from zero if None).
    transformers' cache layers copy each new state into their tensors in place, which autograd cannot go back through
    once the next window has read them; here the states are assigned. The copies: a one-token call takes the layers'
    decoding step, which updates the states it is given in place, and `layer_states` (the state at a window's start,
    read again each time an unfinished window is run again) must not change."""
    cache = DynamicCache(config=config)
    for index, layer in enumerate(cache.layers):
        if not isinstance(layer, LinearAttentionCacheLayerMixin):
            continue
        layer.update_conv_state = MethodType(_assign_conv_state, layer)
        layer.update_recurrent_state = MethodType(_assign_recurrent_state, layer)
        for state_idx, (conv, recurrent) in enumerate((layer_states or {}).get(index, ())):
            if conv is not None:
                layer.conv_states[state_idx], layer.conv_kernel_size[state_idx] = conv.clone(), conv.shape[-1]
                layer.is_conv_states_initialized[state_idx] = layer.has_previous_state[state_idx] = True
            if recurrent is not None:
                _assign_recurrent_state(layer, recurrent.clone(), state_idx)
    return cache


def cached_layer_states(cache: DynamicCache) -> dict:
    """The recurrent layers' states a window left in `cache`: {layer index: ((conv, recurrent), ...)}."""
    return {index: tuple((layer.conv_states[i], layer.recurrent_states[i]) for i in range(layer.number_of_states))
            for index, layer in enumerate(cache.layers) if isinstance(layer, LinearAttentionCacheLayerMixin)}


def prepend(extra, embeddings):
    """h_prev's rotary position embeddings (batch 1, one position) before the window's: (cos, sin) as most families
    give them, or Llama 4's one complex tensor."""
    if isinstance(embeddings, torch.Tensor):
        return torch.cat([extra.expand(embeddings.shape[0], 1, *extra.shape[2:]).to(embeddings.dtype), embeddings], 1)
    return tuple(prepend(e, p) for e, p in zip(extra, embeddings))


class CausalLMWithRecurrence(RecurrentCausalLMMixin, PreTrainedModel, GenerationMixin):
    """A causal LM of any family reading any number of tokens in windows, with h_prev (or memory tokens) carried
    between windows. `decoder` is the unmodified model."""

    config_class = CausalLMWithRecurrenceConfig
    base_model_prefix = "decoder"
    supports_gradient_checkpointing = True
    _supports_sdpa = True
    accepts_loss_kwargs = False  # `loss` is the mean over this call's tokens; Trainer scales it for accumulation

    def __init__(self, config: CausalLMWithRecurrenceConfig, decoder: PreTrainedModel | None = None):
        check_attention_implementation(type(self).__name__, config._attn_implementation)  # before transformers'
        super().__init__(config)
        self.decoder = (
            decoder if decoder is not None else AutoModelForCausalLM.from_config(config.decoder_config_object())
        )
        if "per_layer_inputs" in inspect.signature(decoder_stack(self.decoder).forward).parameters:
            raise ValueError(f"CausalLMWithRecurrence cannot wrap a {self.decoder.config.model_type!r} model: its "
                             "layers also read embeddings of the token ids themselves (per_layer_inputs), which a "
                             "window given as embeddings does not carry")
        if config.use_recurrence and not config.num_memory_tokens:
            check_insertion_layer(self.decoder, config.insertion_layer)
        if config.carry_layer_states:
            check_carries_layer_states(self.decoder)
        check_attention_implementation(type(self).__name__, self.decoder.config._attn_implementation)
        sliding = getattr(self.decoder.config, "sliding_window", None)  # Mistral has no layer_types: every layer
        layer_types = getattr(self.decoder.config, "layer_types", None) or ["sliding_attention"] * bool(sliding)
        memory = config.num_memory_tokens
        for layer_type, field in LIMITED_ATTENTION:
            limit = getattr(self.decoder.config, field, None)
            if not limit or layer_type not in layer_types:
                continue
            if memory and config.window_size + 2 * memory > limit:
                raise ValueError(f"window_size={config.window_size} with {memory} memory tokens read before it and "
                                 f"{memory} written after it spans {config.window_size + 2 * memory} positions, more "
                                 f"than the model's {field}={limit} (a window is read with full causal attention)")
            if config.window_size >= limit:
                raise ValueError(f"window_size={config.window_size} must be below the model's {field}={limit} "
                                 "(a window is read with full causal attention)")
        h_prev_rotated = self.rotary_embedding is not None and config.use_recurrence and not config.num_memory_tokens
        check_window_positions(self.decoder.config, config.window_size, config.num_memory_tokens, h_prev_rotated)
        self.recurrence = RecurrenceModule(config) if config.use_recurrence and not config.num_memory_tokens else None
        self.memory = nn.Parameter(torch.empty(config.num_memory_tokens, config.hidden_size)) \
            if config.num_memory_tokens else None
        self.gradient_checkpointing = False
        self.post_init()

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *model_args, **kwargs):
        """A `causal_lm_recurrent` checkpoint, or any causal LM checkpoint (local folder or Hub id) wrapped with a new
        recurrence: `CausalLMWithRecurrence.from_pretrained("Qwen/Qwen2-0.5B", window_size=512, insertion_layer=2)`.
        The recurrence fields are `CausalLMWithRecurrenceConfig`'s; other keyword arguments go to the model's own
        `from_pretrained` (dtype, revision, ...)."""
        fields = {k: kwargs.pop(k) for k in list(kwargs) if k in RECURRENCE_FIELDS}
        loading = {k: kwargs[k] for k in ("revision", "trust_remote_code", "token", "cache_dir", "local_files_only")
                   if k in kwargs}
        config = kwargs.get("config") or AutoConfig.from_pretrained(pretrained_model_name_or_path, **loading)
        if getattr(config, "model_type", None) == cls.config_class.model_type:
            return super().from_pretrained(pretrained_model_name_or_path, *model_args, **fields, **kwargs)
        decoder = AutoModelForCausalLM.from_pretrained(pretrained_model_name_or_path, *model_args, **kwargs)
        return cls.wrap(decoder, **fields)

    @classmethod
    def wrap(cls, decoder: PreTrainedModel, **recurrence_fields) -> "CausalLMWithRecurrence":
        """Wrap a loaded causal LM (its weights kept as they are) with a newly initialised recurrence, in evaluation
        mode as `from_pretrained` returns a model (`model.train()` before training)."""
        if not isinstance(decoder, GenerationMixin) or decoder.get_output_embeddings() is None:
            raise ValueError(f"CausalLMWithRecurrence needs a causal LM with a language-model head, got a "
                             f"{type(decoder).__name__}")
        config = CausalLMWithRecurrenceConfig(decoder_config=decoder.config, **recurrence_fields)
        config._attn_implementation = decoder.config._attn_implementation
        model = cls(config, decoder=decoder)
        model.generation_config = decoder.generation_config
        return model.to(device=decoder.device, dtype=decoder.dtype).eval()

    @property
    def cache_takes_many_tokens(self) -> bool:
        """Whether a call of several tokens can extend a window's cache: not in the families whose recurrent layers
        do not go on from a cached state over a many-token input (`CANNOT_CARRY`: Mamba-1, MiniMax). There such a
        call runs its window afresh; one token (a `generate` step) still extends the cache."""
        return self.decoder.config.model_type not in CANNOT_CARRY

    @property
    def rotary_embedding(self) -> nn.Module | None:
        """The wrapped model's rotary embedding (None for a family with absolute positions, like GPT-2, or none, like
        Jamba): its `rotary_emb`, or the one rotary module under another name (LFM2-MoE's `pos_emb`)."""
        stack = decoder_stack(self.decoder)
        rotary = [m for m in stack.children() if type(m).__name__.endswith("RotaryEmbedding")]
        return getattr(stack, "rotary_emb", rotary[0] if len(rotary) == 1 else None)

    @property
    def rotary_layer_type(self) -> dict:
        """`{"layer_type": ...}` of layer l_ins for families whose rotary embedding differs between full and sliding
        attention layers (Gemma 3: one frequency base each), else `{}`."""
        if "layer_type" not in inspect.signature(self.rotary_embedding.forward).parameters:
            return {}
        return {"layer_type": self.decoder.config.layer_types[self.config.insertion_layer]}

    def get_input_embeddings(self):
        return self.decoder.get_input_embeddings()

    def set_input_embeddings(self, value):
        self.decoder.set_input_embeddings(value)

    def get_output_embeddings(self):
        return self.decoder.get_output_embeddings()

    def set_output_embeddings(self, new_embeddings):
        self.decoder.set_output_embeddings(new_embeddings)

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The wrapped model's head, with what its family does to the logits after it: Gemma 2 / 3's
        `final_logit_softcapping` (c tanh(logits / c)), Cohere's `logit_scale`, Granite's `logits_scaling`."""
        config = self.decoder.config
        logits = self.get_output_embeddings()(hidden)
        if getattr(config, "logit_scale", None) is not None:
            logits = logits * config.logit_scale
        if getattr(config, "logits_scaling", None) is not None:
            logits = logits / config.logits_scaling
        if getattr(config, "final_logit_softcapping", None) is not None:
            logits = torch.tanh(logits / config.final_logit_softcapping) * config.final_logit_softcapping
        return logits

    @torch.no_grad()
    def _init_weights(self, module):
        """The recurrence's parameters (the wrapped model initialises its own, and weights loaded from a checkpoint are
        left alone): `RecurrenceModule.initialize`, and memory embeddings drawn like the model's token embeddings."""
        if self.recurrence is not None:
            self.recurrence.initialize(module)
        if module is self and self.memory is not None:
            init.normal_(self.memory, std=getattr(self.decoder.config, "initializer_range", 0.02))

    def window_cache(self, layer_states: dict | None = None) -> DynamicCache:
        """An empty cache for one window: the wrapped model's own `DynamicCache` (MiniMax's lightning attention keeps
        its state in a cache class of its own), whose recurrent layers start from `layer_states` with
        `carry_layer_states`."""
        if self.config.carry_layer_states:
            return carrying_cache(self.decoder.config, layer_states)
        if self.decoder.config.model_type == "minimax":
            from transformers.models.minimax.modeling_minimax import MiniMaxCache

            return MiniMaxCache()
        return DynamicCache(config=self.decoder.config)

    def run_window(self, window_embeds: torch.Tensor, h_prev: torch.Tensor | None, stride: int, summarize: bool,
                   layer_states: dict | None = None, cache: DynamicCache | None = None, past: int = 0):
        """The wrapped model on one window's token embeddings (at most T tokens, positions 0..t-1) with h_prev at
        layer l_ins (or the read memory before the tokens), its recurrent layers starting from `layer_states` with
        `carry_layer_states`. Returns the final hidden states `(batch, t, hidden)` and, if `summarize`, what the next
        window receives: h_prev pooled over the window's first `stride` tokens (or the written memory), and the
        recurrent layers' states after those tokens (with `carry_layer_states`, else None).

        With a `cache` (`window_cache`), the window's keys and values are kept in it; if it already holds the window's
        first `past` tokens, `window_embeds` are the tokens after them (positions past..past+t-1), which attend to the
        cached ones. Layer l_ins's cache then holds one entry more than the others, h_prev's key and value (rotated
        at -1): rather than give every layer a masked placeholder for it, each softmax-attention layer gets its own
        causal mask over the keys its cache holds (l_ins: past + 1, the others: past), in place of the one the stack
        builds from a single layer's cache length; the stack's positions and rotary embeddings for the new tokens are
        its own.

        With `carry_layer_states` and an overlap, a window to summarize runs in two calls on one cache: its first
        `stride` tokens (after which the layers' states are the next window's), then the rest, which attend to the
        first part's cached keys and values; the hidden states are those of one call."""
        if self.memory is not None:
            return *self._run_window_with_memory(window_embeds, h_prev, summarize, cache, past), None
        t = window_embeds.shape[1]
        outputs, hooks, masks = [], [], {}
        insert = h_prev is not None
        done = past  # tokens of the window already in the cache (an earlier call's, or a split window's first part)
        additive = self.decoder.config._attn_implementation != "sdpa"

        def bound(layer, args, kwargs) -> dict:
            call = forward_signature(type(layer)).bind(layer, *args, **kwargs).arguments
            call.pop("self")
            call.update(call.pop("kwargs", {}))
            return call

        def after_cached(call, cached):  # a call on a cache that holds the window's first tokens
            hidden = call["hidden_states"]
            if (hidden.shape[1], cached) not in masks:  # made once, shared by the layers whose caches hold as many
                masks[hidden.shape[1], cached] = causal_mask(hidden.shape[1], hidden, additive=additive, past=cached)
            call["attention_mask"] = masks[hidden.shape[1], cached]
            return (), call

        def cached_mask(layer, args, kwargs):  # the other attention layers: the stack's mask may count h_prev's
            # key in l_ins's cache, which they do not have
            return after_cached(bound(layer, args, kwargs), done) if done else None

        def before(layer, args, kwargs):  # layer l_ins: h_prev first, its mask column and its rotation at -1
            call = bound(layer, args, kwargs)
            if done:  # h_prev's key and value are in the cache: only its mask column
                return after_cached(call, done + 1)
            hidden = call["hidden_states"]
            call["hidden_states"] = torch.cat([h_prev[:, None, :].to(hidden.dtype), hidden], dim=1)
            # h_prev first, seen by every position
            call["attention_mask"] = causal_mask(hidden.shape[1] + 1, hidden, additive=additive)
            rotary, given = self.rotary_embedding, call.get("position_embeddings")
            if (rotary is None) != (given is None):
                problem = ("take position_embeddings but no single rotary embedding was found" if rotary is None
                           else "do not take position_embeddings")
                raise ValueError(f"CausalLMWithRecurrence cannot wrap a {self.decoder.config.model_type!r} "
                                 f"model: its layers {problem}")
            if rotary is not None:
                at = torch.full((1, 1), -1, dtype=torch.long, device=hidden.device)
                if hasattr(rotary, "mrope_section"):  # Qwen3.5's multimodal rotary: a row per axis (5.17 needs them)
                    at = at.expand(len(rotary.mrope_section), 1, 1)
                call["position_embeddings"] = prepend(rotary(hidden, position_ids=at, **self.rotary_layer_type), given)
            return (), call

        def after(index):  # the window's first call: h_prev's own output dropped, the layers' kept for the summary
            def hook(layer, args, kwargs, output):
                if done:
                    return output
                hidden = output[0] if isinstance(output, tuple) else output
                if insert and index == self.config.insertion_layer:  # h_prev's own output is dropped
                    hidden = hidden[:, 1:]
                    output = (hidden, *output[1:]) if isinstance(output, tuple) else hidden
                outputs.append(hidden)
                return output
            return hook

        layers = decoder_layers(self.decoder)
        if cache is None and self.config.carry_layer_states:
            cache = self.window_cache(layer_states)
        split = self.config.carry_layer_states and summarize and stride < t
        next_layer_states = None
        try:
            if insert:
                hooks.append(layers[self.config.insertion_layer].register_forward_pre_hook(before, with_kwargs=True))
            if insert and (split or past):
                hooks += [layers[index].register_forward_pre_hook(cached_mask, with_kwargs=True)
                          for index in softmax_attention_layers(self.decoder) if index != self.config.insertion_layer]
            if (insert and not past) or (summarize and self.recurrence is not None):
                hooks += [layer.register_forward_hook(after(index), with_kwargs=True)
                          for index, layer in enumerate(layers)]
            parts = []
            for part in ((slice(0, stride), slice(stride, t)) if split else (slice(0, t),)):
                positions = torch.arange(past + part.start, past + part.stop, device=window_embeds.device)[None]
                parts.append(self._stack(window_embeds[:, part], positions, cache))
                if summarize and self.config.carry_layer_states and part.start == 0:
                    next_layer_states = cached_layer_states(cache)  # after the first `stride` tokens
                done = past + part.stop
        finally:
            for hook in hooks:
                hook.remove()
        next_h_prev = None
        if summarize and self.recurrence is not None:
            next_h_prev = self.recurrence([state[:, :stride] for state in outputs])
        return torch.cat(parts, dim=1) if split else parts[0], next_h_prev, next_layer_states

    def _stack(self, inputs_embeds: torch.Tensor, position_ids: torch.Tensor, cache: DynamicCache | None):
        """The wrapped model's stack (embeddings to final norm) on `inputs_embeds`, extending `cache` if given."""
        stack = decoder_stack(self.decoder)
        caching = {"use_cache": False} if cache is None else {"use_cache": True, cache_argument(stack): cache}
        return stack(inputs_embeds=inputs_embeds, position_ids=position_ids, **caching).last_hidden_state

    def _run_window_with_memory(self, tokens: torch.Tensor, read: torch.Tensor | None, summarize: bool,
                                cache: DynamicCache | None = None, past: int = 0):
        """[read memory, tokens, write memory] through the unmodified model (the write positions only if the window
        is full: no token sees them). Returns the tokens' final hidden states and the written memory. With a `cache`
        that holds the read memory and the window's first `past` tokens, `tokens` are the ones after them."""
        batch, t = tokens.shape[:2]
        m = self.config.num_memory_tokens
        if past:
            positions = torch.arange(m + past, m + past + t, device=tokens.device)[None]
            return self._stack(tokens, positions, cache), None
        memory = self.memory.to(tokens.dtype)[None].expand(batch, m, -1)
        read = memory if read is None else read.to(tokens.dtype)
        pieces = [read, tokens] + [memory] * summarize
        inputs = torch.cat(pieces, dim=1)
        positions = torch.arange(inputs.shape[1], device=tokens.device)[None]
        hidden = self._stack(inputs, positions, cache)
        return hidden[:, m:m + t], (hidden[:, m + t:] if summarize else None)


RECURRENCE_FIELDS = tuple(p for p in inspect.signature(CausalLMWithRecurrenceConfig.__init__).parameters
                          if p not in ("self", "decoder_config", "kwargs"))

__all__ = ["CausalLMWithRecurrence"]
