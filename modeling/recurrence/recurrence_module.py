"""What the GPT-2 and RoBERTa models with window-level recurrence share (Yoshida et al. 2020, §3.1 and §5.4): the
recurrence module (a pooled summary z of one window and the feed-forward network that maps it to h_prev, the extra
key and value of the next window), whole-window gradient checkpointing and the recurrence module's initialisation
(`WindowRecurrenceMixin`), and the checks of the recurrence config fields and of the inputs."""

import copy
import inspect
import os
from dataclasses import dataclass
from functools import lru_cache, partial

import torch
import torch.utils.checkpoint
from torch import nn
from torch.nn import functional as F
from transformers import initialization as init
from transformers.cache_utils import Cache
from transformers.generation import GenerationMode
from transformers.utils import ModelOutput, logging

logger = logging.get_logger(__name__)

POOLINGS = ("layer_weighted", "last_layer")


def check_recurrence_fields(insertion_layer: int, num_layers: int, layers_name: str, recurrence_hidden_size: int,
                            recurrence_num_hidden_layers: int, recurrence_pooling: str) -> None:
    """ValueError for a recurrence config field out of range; `layers_name` is the config's name for the number of
    layers (GPT-2: n_layer, RoBERTa: num_hidden_layers)."""
    if not 0 <= insertion_layer < num_layers:
        raise ValueError(f"insertion_layer must lie in [0, {layers_name}={num_layers}), got {insertion_layer}")
    if recurrence_num_hidden_layers < 0 or recurrence_hidden_size < 1:
        raise ValueError("recurrence_num_hidden_layers must be >= 0 and recurrence_hidden_size >= 1")
    if recurrence_pooling not in POOLINGS:
        raise ValueError(f"recurrence_pooling must be one of {POOLINGS}, got {recurrence_pooling!r}")


def check_attention_implementation(model: str, implementation: str | None) -> None:
    """ValueError unless the attention takes an explicit mask (h_prev's key or the memory and the window's causal mask
    go in as one): SDPA or eager, not FlashAttention or flex attention. Called before transformers' own check, whose
    refusal does not say why."""
    if implementation is not None and implementation not in ("sdpa", "eager"):
        raise ValueError(f"{model} runs attn_implementation sdpa or eager, not {implementation!r} (h_prev needs an "
                         "explicit attention mask)")


def check_overlap(window_size: int, overlap: int) -> None:
    """The one check of a window and its overlap (config, model call, FLOPs count, data windows): T >= 1 and
    0 <= o < T, so that every window has at least one new token."""
    if window_size < 1:
        raise ValueError(f"window_size must be at least 1, got {window_size}")
    if not 0 <= overlap < window_size:
        raise ValueError(f"overlap must satisfy 0 <= overlap < window_size={window_size}, got {overlap}")


def causal_mask(length: int, like: torch.Tensor, additive: bool = True, past: int = 0) -> torch.Tensor:
    """The `(1, 1, length, past + length)` causal mask of `length` queries after `past` cached keys, in the form an
    attention implementation takes: additive in `like`'s dtype (eager attention; GPT-2's needs it explicit), or
    boolean, True where attending is allowed (SDPA)."""
    allowed = torch.ones(length, past + length, dtype=torch.bool, device=like.device).tril(past)[None, None]
    if not additive:
        return allowed
    return torch.zeros(allowed.shape, dtype=like.dtype, device=like.device).masked_fill(
        ~allowed, torch.finfo(like.dtype).min)


# Copied from lengthgen.modeling.ibert.modeling_ibert._values_are_free with _values_are_free->values_are_free
def values_are_free(tensor: torch.Tensor) -> bool:
    """Whether the checks that read a tensor's values (token ids in the vocabulary, right padding, labels in range)
    run: on the CPU they cost nothing; on an accelerator each would stall it with a host-device sync, so they run only
    with LENGTHGEN_CHECK_INPUTS=1 (the errors are the same); never while torch.compile traces."""
    if torch.compiler.is_compiling():
        return False
    return tensor.device.type == "cpu" or os.environ.get("LENGTHGEN_CHECK_INPUTS", "") == "1"


def check_input_ids(input_ids: torch.Tensor | None, axes: str, vocab_size: int) -> None:
    """ValueError unless `input_ids` has the named `axes` (e.g. "batch_size, sequence_length"), none of them empty,
    and every id in the vocabulary (that last where `values_are_free`)."""
    if input_ids is None or input_ids.dim() != len(axes.split(",")):
        shape = None if input_ids is None else tuple(input_ids.shape)
        raise ValueError(f"input_ids must have shape ({axes}), got {shape}")
    if 0 in input_ids.shape:
        raise ValueError(f"Empty input: input_ids has shape {tuple(input_ids.shape)}")
    if input_ids.is_floating_point() or input_ids.dtype == torch.bool:
        raise ValueError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}")
    if not values_are_free(input_ids):
        return
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(f"Token id {bad} is outside the vocabulary [0, {vocab_size}).")


def check_attention_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> None:
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected {tuple(input_ids.shape)}")


class WindowRecurrenceMixin:
    """For a `PreTrainedModel` with a `recurrence` module that reads its input window by window: gradient
    checkpointing of whole windows (§3.2) instead of the backbone's layers, and the recurrence module's
    initialisation after the backbone's. Put it before the `PreTrainedModel` base."""

    def _set_gradient_checkpointing(self, enable: bool = True, gradient_checkpointing_func=None, **kwargs):
        """Checkpoint whole windows: only each window's inputs, h_prev and its small outputs stay in memory; the
        window is recomputed in the backward pass. Always non-reentrant, which handles the first window (no input
        needs a gradient) and h_prev. The backbone's own layers are left alone."""
        self.gradient_checkpointing = enable
        self._gradient_checkpointing_func = partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)

    @torch.no_grad()
    def _init_weights(self, module):
        """The backbone's initialisation, then `RecurrenceModule.initialize` for the recurrence module's parameters."""
        super()._init_weights(module)
        self.recurrence.initialize(module)


@dataclass
class RecurrentState(ModelOutput):
    """
    What a call leaves for the next one.

    window_index: index of the window that the next tokens extend (0 = the first window, which has no h_prev).
    h_prev: what carries into that window: h_prev `(batch, hidden)` (or the read memory `(batch, m, hidden)` of a model
        with memory tokens), None for window 0 of an h_prev model or without recurrence.
    window_tokens: `(batch, t)` the tokens that window already holds (t < window_size), overlap included.
    last_logits: `(batch, vocab)` logits at the last token so far: they predict the next call's first token.
    layer_states: with `carry_layer_states`, the recurrent layers' states at the start of that window, by layer index
        (a tuple of (convolution state, recurrent state) pairs, one per state the layer keeps); None otherwise.
    cache: with `use_cache`, the key-value cache of `window_tokens` (with h_prev or the read memory), so that the next
        call runs only its new tokens; None otherwise. A call never changes the cache of the state it is given, so a
        state can be continued more than once.
    ended: `(batch,)` bool, the documents that ended in padding (a right-padded `attention_mask`): what follows them
        must be padding too; None when none has.
    """

    window_index: int = 0
    h_prev: torch.Tensor | None = None
    window_tokens: torch.Tensor | None = None
    last_logits: torch.Tensor | None = None
    layer_states: dict | None = None
    cache: Cache | None = None
    ended: torch.Tensor | None = None

    def repeat_interleave(self, repeats: int) -> "RecurrentState":
        """The state with each document `repeats` times in a row, as `generate` repeats the prompts for
        `num_return_sequences`; this state is left as it was."""
        def rows(x):
            return x.repeat_interleave(repeats, dim=0) if isinstance(x, torch.Tensor) else x

        cache = layer_states = None
        if self.cache is not None:  # every cache layer reorders its batch for beam search: all of its states
            cache = continued(self.cache)
            index = torch.arange(self.window_tokens.shape[0]).repeat_interleave(repeats)
            cache.reorder_cache(index)
            linear = getattr(cache, "linear_cache", [])  # MiniMax's lightning attention keeps its states beside them
            for i, state in enumerate(linear):
                if isinstance(state, torch.Tensor):
                    linear[i] = state.index_select(0, index.to(state.device))
        if self.layer_states is not None:
            layer_states = {index: tuple(tuple(map(rows, pair)) for pair in states)
                            for index, states in self.layer_states.items()}
        return RecurrentState(window_index=self.window_index, h_prev=rows(self.h_prev),
                              window_tokens=rows(self.window_tokens), last_logits=rows(self.last_logits),
                              layer_states=layer_states, cache=cache, ended=rows(self.ended))


@dataclass
class RecurrentCausalLMOutput(ModelOutput):
    """
    loss: mean next-token cross-entropy over the tokens predicted in this call (with a `recurrent_state`, the first
        token is predicted from the previous call's last logits).
    num_predicted_tokens: how many tokens `loss` averages over.
    logits: `(batch, length, vocab)`, one row per input token, each from the window that owns the token.
    recurrent_state: pass it to the next call to continue the document.
    """

    loss: torch.Tensor | None = None
    num_predicted_tokens: int | None = None
    logits: torch.Tensor | None = None
    recurrent_state: RecurrentState | None = None


def summed_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    """Summed cross-entropy of `targets` (-100 ignored), predicted by the first `targets.shape[1]` positions of
    `logits`. Slices only where there are fewer labels than logits: a slice's backward zero-fills a gradient as large
    as the logits."""
    predicted = logits if targets.shape[1] == logits.shape[1] else logits[:, : targets.shape[1]]
    return F.cross_entropy(predicted.reshape(-1, predicted.shape[-1]).float(), targets.reshape(-1), ignore_index=-100,
                           reduction="sum")


@lru_cache(maxsize=None)
def forward_signature(module_class: type) -> inspect.Signature:
    """The signature of a module class's `forward`, looked up once (hooks bind each call's arguments to it)."""
    return inspect.signature(module_class.forward)


def cache_argument(module: nn.Module) -> str:
    """The name under which `module`'s forward takes a key-value cache: transformers renamed past_key_values (and the
    Mamba families' cache_params) to cache in 5.24."""
    parameters = forward_signature(type(module)).parameters
    return next((name for name in ("cache", "cache_params") if name in parameters), "past_key_values")


def continued(cache: Cache) -> Cache:
    """A copy of `cache` that a call can extend while `cache` stays as it was: the attention layers' keys and values,
    which a cache layer only ever replaces by longer tensors, are shared; the rest (the recurrent layers' states, which
    their one-token steps update in place) is copied."""
    shared = {id(tensor): tensor for layer in cache.layers
              for tensor in (getattr(layer, "keys", None), getattr(layer, "values", None)) if tensor is not None}
    return copy.deepcopy(cache, shared)


class RecurrentCausalLMMixin(WindowRecurrenceMixin):
    """A causal LM that reads any number of tokens in windows (§3.1): the loss accounting over windows, the state that
    carries a document from one call to the next, and `generate` across windows. The model provides
    `run_window(window_embeds, h_prev, stride, summarize, layer_states, cache, past) -> (final hidden states, next
    h_prev or None, next layer_states or None)` (from the window's token embeddings; with a `cache` holding the
    window's first `past` tokens, from the embeddings of the tokens after them), `window_cache(layer_states)` (an empty
    cache for one window) and `get_output_embeddings()`. Put it before the `PreTrainedModel` base."""

    cache_takes_many_tokens = True  # whether a call of several tokens can extend a window's cache
    _is_stateful = True  # the state is `recurrent_state` (with the window's key-value cache in it)
    # beam search would reorder the sequences without their recurrent state
    _supported_generation_modes = (GenerationMode.GREEDY_SEARCH.value, GenerationMode.SAMPLE.value)

    def _check_inputs(self, input_ids: torch.Tensor, recurrent_state: "RecurrentState | None"):
        check_input_ids(input_ids, "batch_size, sequence_length", self.config.vocab_size)
        if recurrent_state is not None and recurrent_state.window_tokens is not None:
            if recurrent_state.window_tokens.shape[0] != input_ids.shape[0]:
                raise ValueError(
                    f"recurrent_state holds {recurrent_state.window_tokens.shape[0]} sequences, input_ids "
                    f"{input_ids.shape[0]}"
                )

    def _refuse_cache(self, kwargs: dict):
        for name in ("cache", "past_key_values"):
            if kwargs.get(name) is not None:
                raise ValueError(f"{type(self).__name__} keeps its key-value cache in recurrent_state (use_cache=True) "
                                 f"and cannot take a {type(kwargs[name]).__name__} ({name})")

    @classmethod
    def _supports_default_dynamic_cache(cls) -> bool:
        """`generate` makes no cache of its own: the window's cache travels in `recurrent_state`."""
        return False

    def _prepare_attention_mask_for_generation(self, inputs_tensor, generation_config, model_kwargs):
        """transformers reads the pad token in prompts given without an attention mask as padding, which this model's
        `generate` refuses: say where that reading came from."""
        mask = super()._prepare_attention_mask_for_generation(inputs_tensor, generation_config, model_kwargs)
        if not bool(mask.bool().all()):
            raise ValueError(
                f"generate takes prompts without padding, and these hold the pad token "
                f"(pad_token_id={generation_config.pad_token_id}), which generate reads as padding when no "
                f"attention_mask is passed: pass attention_mask=torch.ones_like(input_ids) if it is text."
            )
        return mask

    def _expand_inputs_for_generation(self, expand_size: int = 1, *args, **kwargs):
        """transformers repeats the prompts for `num_return_sequences`; a `recurrent_state` is repeated with them."""
        input_ids, model_kwargs = super()._expand_inputs_for_generation(expand_size, *args, **kwargs)
        if expand_size > 1 and model_kwargs.get("recurrent_state") is not None:
            model_kwargs["recurrent_state"] = model_kwargs["recurrent_state"].repeat_interleave(expand_size)
        return input_ids, model_kwargs

    def prepare_inputs_for_generation(self, input_ids, recurrent_state=None, attention_mask=None, use_cache=None,
                                      overlap=None, is_first_iteration=False, **kwargs):
        """`generate` feeds the prompt once (continuing the documents of a `recurrent_state` passed to it, which then
        holds the text before the prompt), then one new token per step with the recurrent state. With the cache (the
        default) a step costs one token through the model, and a window boundary one window; with `use_cache=False`
        each step runs the unfinished window again. Prompts must be unpadded: a padded prompt would be continued after
        its padding. Greedy search and sampling only (`_supported_generation_modes`): beam search would reorder the
        sequences without their recurrent state."""
        if is_first_iteration:
            if attention_mask is not None and not bool(attention_mask.bool().all()):
                raise ValueError("generate takes prompts without padding (generate each prompt on its own): a padded "
                                 "prompt would be continued after its padding.")
            if asked := [name for name in ("output_hidden_states", "output_attentions") if kwargs.get(name)]:
                raise ValueError(f"{type(self).__name__}.generate returns no hidden states or attentions "
                                 f"({' and '.join(asked)}): the windows' own are not kept.")
        else:
            input_ids = input_ids[:, -1:]
        return {"input_ids": input_ids, "recurrent_state": recurrent_state, "use_cache": use_cache, "overlap": overlap}

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, *args, **kwargs):
        model_kwargs["recurrent_state"] = outputs.recurrent_state
        return model_kwargs

    def lm_logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The language-model head on final hidden states (a family that transforms its logits after the head
        overrides this)."""
        return self.get_output_embeddings()(hidden)

    def window_step(self, window_ids, window_embeds, h_prev, layer_states, owned_from: int, targets, summarize: bool,
                    stride: int, all_logits: bool = True, head: bool = True, cache: Cache | None = None,
                    past: int = 0):
        """One window: logits of the tokens it owns (window-local positions >= owned_from; only the last one's unless
        `all_logits`), the summed loss of `targets` (the labels those logits predict, possibly fewer), and h_prev for
        the next window, pooled over the window's first `stride` tokens (those the next window does not repeat), and
        the recurrent layers' states for it (`carry_layer_states`). `window_embeds`: the window's token embeddings if
        already looked up, else None. Without `head`, the final hidden states of the tokens it owns instead of logits,
        and no loss. With a `cache` that holds the window's first `past` tokens, `window_ids` are the tokens after them
        (and `owned_from` counts from there); the cache is extended with them."""
        if window_embeds is None:
            window_embeds = self.get_input_embeddings()(window_ids)
        hidden, next_h_prev, next_layer_states = self.run_window(window_embeds, h_prev, stride, summarize, layer_states,
                                                                 cache, past)
        if not head:
            return hidden[:, owned_from:], None, next_h_prev, next_layer_states
        logits = self.lm_logits(hidden[:, owned_from:])
        loss_sum = None
        if targets is not None:
            loss_sum = summed_loss(logits, targets)
        return (logits if all_logits else logits[:, -1:].clone()), loss_sum, next_h_prev, next_layer_states

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None,
        recurrent_state: RecurrentState | None = None,
        overlap: int | None = None,
        use_cache: bool | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> RecurrentCausalLMOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): any length; read in windows.
        attention_mask (`torch.LongTensor` of the same shape, *optional*): 1 for tokens, 0 for padding, which must be on
            the right (documents of different lengths in one batch). Padding never reaches a real token: attention is
            causal and a window that holds padding is followed only by padding. Its labels are ignored.
        labels (`torch.LongTensor`, *optional*): usually `input_ids`; label t is predicted from position t - 1 (the
            shift is done here), -100 is ignored. With a `recurrent_state`, label 0 is predicted from the previous
            call's last logits, so chunked calls count every token once, like one call.
        recurrent_state (`RecurrentState`, *optional*): the previous call's, to continue the same documents.
        overlap (`int`, *optional*): read with this overlap instead of `config.overlap` (the baseline of Tables 1-2
            evaluated at several overlaps; a recurrent model is meant to be read at the overlap it was trained with,
            §4.2). Pass the same value in every call of one document.
        use_cache (`bool`, *optional*, defaults to False; `generate` turns it on): keep the key-value cache of the
            unfinished window in the returned `recurrent_state`, so that the next call runs only its new tokens
            through the model instead of the whole unfinished window again. A window that fills up still runs whole
            once, for its summary h_prev. Off, with a warning, under window gradient checkpointing in training mode.

        With gradient checkpointing on in training (§3.2), each window is recomputed in the backward pass and only its
        inputs, h_prev and its loss are kept, so memory does not grow with the number of windows beyond those. In
        training mode with `labels`, and with gradient checkpointing, the per-token logits are not returned (`logits`
        holds only the last position's): training needs the loss, and each window's logits are freed once its loss
        is taken instead of all of them being kept and copied into one tensor.
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._refuse_cache(kwargs)
        self._check_inputs(input_ids, recurrent_state)
        if labels is not None and tuple(labels.shape) != tuple(input_ids.shape):
            raise ValueError(f"labels have shape {tuple(labels.shape)}, expected {tuple(input_ids.shape)}")
        check_attention_mask(attention_mask, input_ids)
        state = recurrent_state or RecurrentState()
        ended = state.ended
        if attention_mask is not None:
            mask = attention_mask.bool()
            if values_are_free(mask) and (mask[:, 1:] & ~mask[:, :-1]).any():
                raise ValueError("attention_mask must be 1s then 0s in every row: pad documents on the right.")
            if labels is not None:
                labels = labels.masked_fill(~mask, -100)
        if ended is not None and values_are_free(ended) and ended.any() \
                and (attention_mask is None or mask[ended].any()):
            raise ValueError(
                f"recurrent_state holds documents that ended in padding (rows {ended.nonzero().flatten().tolist()}): "
                "what follows them must be padding (attention_mask 0). Continue a document on its own to read or "
                "generate more of it."
            )
        if attention_mask is not None:
            ended = ~mask[:, -1] if ended is None else ended | ~mask[:, -1]
        window = self.config.window_size
        overlap = self.config.overlap if overlap is None else overlap
        check_overlap(window, overlap)
        stride = window - overlap
        held = state.window_tokens if state.window_tokens is not None else input_ids[:, :0]
        tokens = torch.cat([held, input_ids], dim=1)  # from the start of the current window on
        new_from = held.shape[1]  # positions before this were output by an earlier call
        window_index, h_prev, layer_states = state.window_index, state.h_prev, state.layer_states
        carries = self.config.use_recurrence or getattr(self.config, "carry_layer_states", False)
        checkpointing = self.gradient_checkpointing and self.training
        if use_cache and checkpointing:  # a checkpointed window is run again in backward: it keeps no cache
            logger.warning_once("use_cache=True is incompatible with window gradient checkpointing in training mode: "
                                "running without the cache, each new token through its whole unfinished window "
                                "(call model.eval() before generate).")
        use_cache = bool(use_cache) and not checkpointing
        # training on labels needs the loss only: each window's logits are freed once its loss is taken
        keep_logits = not checkpointing and not (self.training and labels is not None)
        # Without window checkpointing every window's activations are kept until backward anyway, so the embedding
        # and the LM head run once per call, over all windows, as they do over a batch of windows in the plain
        # model: one (vocabulary x hidden) weight gradient each, where running them per window makes one per window
        # for autograd to sum, which slows training down markedly. With checkpointing, and without gradients
        # (evaluation, generate: nothing to sum, and the loss's temporaries stay one window large), both run inside
        # each window's step.
        once_per_call = torch.is_grad_enabled() and not checkpointing
        embedded = self.get_input_embeddings()(tokens) if once_per_call else None

        # labels by position in `tokens`; the logits at position p predict the label at p + 1
        loss_sum, count = None, None
        if labels is not None:
            shifted = F.pad(labels, (new_from, 1), value=-100)[:, 1:]  # shifted[:, p] = label of p + 1
            count = int((labels[:, 1:] != -100).sum())
            loss_sum = torch.zeros((), device=input_ids.device)
            if state.last_logits is not None:
                count += int((labels[:, :1] != -100).sum())
                loss_sum = loss_sum + F.cross_entropy(state.last_logits.float(), labels[:, 0], ignore_index=-100,
                                                      reduction="sum")

        pieces, target_pieces, start, cache = [], [], 0, None
        while True:
            end = min(start + window, tokens.shape[1])
            owned_from = max(overlap if window_index > 0 else 0, new_from - start)  # window-local
            finished = end - start == window
            summarize = finished and carries
            targets = shifted[:, start + owned_from:end] if labels is not None else None
            cache = None
            if owned_from < end - start or summarize:
                # the tokens already in the state's cache are not run again; a window to summarize runs whole once
                continues = state.cache is not None and (input_ids.shape[1] == 1 or self.cache_takes_many_tokens)
                past = new_from if start == 0 and use_cache and continues and not summarize else 0
                if past:
                    cache = continued(state.cache)
                elif use_cache and not finished:
                    cache = self.window_cache(layer_states)
                window_embeds = embedded[:, start + past:end] if once_per_call else None
                step = (tokens[:, start + past:end], window_embeds, h_prev, layer_states, owned_from - past, targets,
                        summarize, stride, keep_logits, not once_per_call, cache, past)
                if checkpointing:  # keep only the window's inputs and its small outputs; recompute the rest
                    logits, window_loss, next_h_prev, next_layer_states = self._gradient_checkpointing_func(
                        self.window_step, *step)
                else:
                    logits, window_loss, next_h_prev, next_layer_states = self.window_step(*step)
                if owned_from < end - start:
                    pieces.append(logits)  # the final hidden states when once_per_call
                    target_pieces.append(targets)
                    if window_loss is not None:
                        loss_sum = loss_sum + window_loss
            if not finished:  # an unfinished window: the next call extends it
                break
            # a full window: its summary h_prev (and the recurrent layers' states at its end) stands for everything
            # before the next window's first new token
            h_prev = next_h_prev if self.config.use_recurrence else None
            layer_states = next_layer_states
            window_index += 1
            start += stride
            cache = None
            if start + overlap >= tokens.shape[1]:  # the next window has no new token yet
                break
        logits = torch.cat(pieces, dim=1)
        if once_per_call:  # pieces held the final hidden states
            logits = self.lm_logits(logits)
            if labels is not None:
                loss_sum = loss_sum + summed_loss(logits, torch.cat(target_pieces, dim=1))
        if not keep_logits:
            logits = logits[:, -1:]
        next_state = RecurrentState(
            window_index=window_index, h_prev=h_prev, window_tokens=tokens[:, start:], last_logits=logits[:, -1],
            layer_states=layer_states, cache=cache, ended=ended,
        )
        loss = loss_sum / max(count, 1) if labels is not None else None
        output = RecurrentCausalLMOutput(loss=loss, num_predicted_tokens=count, logits=logits,
                                         recurrent_state=next_state)
        return output if return_dict else output.to_tuple()


class RecurrenceModule(nn.Module):
    """z -> h_prev.

    `recurrence_pooling`: "layer_weighted" is Eq. 1 (the hidden states of every layer, weighted by softmax-normalised
    learned weights w_l, averaged over positions; the GPT-2 experiments); "last_layer" averages the final layer only
    (the RoBERTa experiment of §5.4). The network has `recurrence_num_hidden_layers` ReLU layers of
    `recurrence_hidden_size` (GPT-2: 3 x 200; RoBERTa: 2 x 768)."""

    def __init__(self, config):
        super().__init__()
        self.pooling = config.recurrence_pooling
        if self.pooling == "layer_weighted":
            self.layer_logits = nn.Parameter(torch.zeros(config.num_hidden_layers))  # alpha_l
        layers, width = [], config.hidden_size
        for _ in range(config.recurrence_num_hidden_layers):
            layers += [nn.Linear(width, config.recurrence_hidden_size), nn.ReLU()]
            width = config.recurrence_hidden_size
        layers.append(nn.Linear(width, config.hidden_size))
        self.ffn = nn.Sequential(*layers)

    def pool(self, hidden_states: list[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """z: `(batch, hidden)`, the mean over the positions (those where `mask` is 1, if given) of the pooled
        layers."""
        if self.pooling == "last_layer":
            hidden_states = hidden_states[-1:]
        if mask is None:
            means = [s.mean(dim=1) for s in hidden_states]
        else:
            weights = mask.to(hidden_states[0].dtype)[..., None]
            means = [(s * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1) for s in hidden_states]
        if self.pooling == "last_layer":
            return means[0]
        layer_weights = torch.softmax(self.layer_logits, dim=0)
        return torch.einsum("l,lbk->bk", layer_weights.to(means[0].dtype), torch.stack(means, dim=0))

    def forward(self, hidden_states: list[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.ffn(self.pool(hidden_states, mask))

    @torch.no_grad()
    def initialize(self, module: nn.Module):
        """Initialise `module` if it is this module or one of its layers (call it from the model's `_init_weights`,
        which transformers applies module by module): Xavier-uniform weights (ReLU gain in the hidden layers), zero
        biases, equal layer weights, so h_prev varies with its window from the start (with a pretrained model's std
        0.02 in every layer it would be nearly constant). The paper does not specify the initialisation. Through
        `transformers.initialization`, so weights loaded from a checkpoint are left alone."""
        if module is self and self.pooling == "layer_weighted":
            init.zeros_(self.layer_logits)
        linears = [m for m in self.ffn if isinstance(m, nn.Linear)]
        for index, linear in enumerate(linears):
            if module is linear:
                init.xavier_uniform_(linear.weight, gain=1.0 if index == len(linears) - 1 else 2**0.5)
                init.zeros_(linear.bias)


__all__ = [
    "POOLINGS",
    "RecurrentCausalLMMixin",
    "RecurrentCausalLMOutput",
    "RecurrentState",
    "RecurrenceModule",
    "WindowRecurrenceMixin",
    "causal_mask",
    "check_attention_mask",
    "check_input_ids",
    "check_overlap",
    "check_recurrence_fields",
]
