"""GPT-2 with window-level recurrence (Yoshida, Ettinger and Gimpel, "Adding Recurrence to Pretrained Transformers", 2020, §3-4).

A pretrained GPT-2 reads a long input in windows of T tokens with stride T - o (o = overlap). Window 1 runs GPT-2
unchanged. The hidden states of every layer of window i are mean-pooled with softmax-normalised learned layer
weights (Eq. 1) into z_i, over the positions that window i + 1 does not repeat; a small feed-forward network maps z_i
to h_prev,i, which enters window i + 1 at layer l_ins as one extra key and value: it is placed before the window's
first token, so every position sees it through the causal mask, it has no position embedding, and its own output is
dropped (T inputs, T outputs). Every token's logits come from exactly one window: the first window predicts all its
tokens, later windows only those the previous window did not hold (overlapped tokens are context only).

`recurrent_state` carries h_prev and the tokens of the unfinished window from one call to the next, so a document fed
in chunks gives the logits and losses of one call (streaming inference).

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import GenerationMixin, GPT2Model, GPT2PreTrainedModel
from transformers.utils import ModelOutput

from .configuration_gpt2_recurrent import GPT2WithRecurrenceConfig, check_overlap
from .recurrence_module import (
    RecurrenceModule,
    WindowRecurrenceMixin,
    check_attention_mask,
    check_input_ids,
    values_are_free,
)


@dataclass
class RecurrentState(ModelOutput):
    """
    What a call leaves for the next one.

    window_index: index of the window that the next tokens extend (0 = the first window, which has no h_prev).
    h_prev: `(batch, n_embd)` summary entering that window, or None for window 0 or without recurrence.
    window_tokens: `(batch, t)` the tokens that window already holds (t < window_size), overlap included.
    last_logits: `(batch, vocab)` logits at the last token so far: they predict the next call's first token.
    """

    window_index: int = 0
    h_prev: torch.Tensor | None = None
    window_tokens: torch.Tensor | None = None
    last_logits: torch.Tensor | None = None


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


class GPT2WithRecurrence(WindowRecurrenceMixin, GPT2PreTrainedModel, GenerationMixin):
    """GPT-2 language model reading any number of tokens in windows, with h_prev carried between windows."""

    config_class = GPT2WithRecurrenceConfig
    _tied_weights_keys = {"lm_head.weight": "transformer.wte.weight"}
    accepts_loss_kwargs = False  # `loss` is the mean over this call's tokens; Trainer scales it for accumulation

    def __init__(self, config: GPT2WithRecurrenceConfig):
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
        from transformers import GPT2LMHeadModel

        gpt2 = GPT2LMHeadModel.from_pretrained(name_or_path)
        config = GPT2WithRecurrenceConfig(**{**gpt2.config.to_dict(), **recurrence_fields})
        model = cls(config)
        missing, unexpected = model.load_state_dict(gpt2.state_dict(), strict=False)
        missing = [k for k in missing if not k.startswith("recurrence.") and k != "lm_head.weight"]
        if missing or unexpected:
            raise ValueError(f"{name_or_path} is not a GPT-2 checkpoint: missing {missing}, unexpected {unexpected}")
        model.tie_weights()
        return model

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, new_embeddings):
        self.lm_head = new_embeddings

    def _check_inputs(self, input_ids: torch.Tensor, recurrent_state: RecurrentState | None):
        check_input_ids(input_ids, "batch_size, sequence_length", self.config.vocab_size)
        if recurrent_state is not None and recurrent_state.window_tokens is not None:
            if recurrent_state.window_tokens.shape[0] != input_ids.shape[0]:
                raise ValueError(
                    f"recurrent_state holds {recurrent_state.window_tokens.shape[0]} sequences, input_ids "
                    f"{input_ids.shape[0]}"
                )

    def run_window(self, window_ids: torch.Tensor, h_prev: torch.Tensor | None):
        """GPT-2 on one window (at most T tokens, positions 0..t-1), with h_prev as an extra key and value at layer
        l_ins. Returns the final hidden states `(batch, t, n_embd)` and every block's output (Eq. 1's h^(l))."""
        t = window_ids.shape[1]
        positions = torch.arange(t, device=window_ids.device)
        hidden = self.transformer.drop(self.transformer.wte(window_ids) + self.transformer.wpe(positions))
        layer_states = []
        for index, block in enumerate(self.transformer.h):
            extra = h_prev is not None and index == self.config.insertion_layer
            if extra:  # h_prev goes first: visible from every position, its own output dropped below
                hidden = torch.cat([h_prev[:, None, :].to(hidden.dtype), hidden], dim=1)
            hidden = block(hidden, attention_mask=_causal_mask(hidden.shape[1], hidden))
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            if extra:
                hidden = hidden[:, 1:]
            layer_states.append(hidden)
        return self.transformer.ln_f(hidden), layer_states

    def prepare_inputs_for_generation(self, input_ids, recurrent_state=None, attention_mask=None, **kwargs):
        """`generate` feeds the whole prompt once, then one new token per step with the recurrent state, which holds
        the unfinished window (so each step costs at most one window, and generation runs across windows). Prompts
        must be unpadded: a padded prompt would be continued after its padding."""
        if recurrent_state is None and attention_mask is not None and not bool(attention_mask.bool().all()):
            raise ValueError("generate takes prompts without padding (generate each prompt on its own): a padded "
                             "prompt would be continued after its padding.")
        if recurrent_state is not None:
            input_ids = input_ids[:, -1:]
        return {"input_ids": input_ids, "recurrent_state": recurrent_state}

    def _update_model_kwargs_for_generation(self, outputs, model_kwargs, *args, **kwargs):
        model_kwargs["recurrent_state"] = outputs.recurrent_state
        return model_kwargs

    def window_step(self, window_ids, h_prev, owned_from: int, targets, summarize: bool, stride: int,
                    all_logits: bool = True):
        """One window: logits of the tokens it owns (window-local positions >= owned_from; only the last one's unless
        `all_logits`), the summed loss of `targets` (the labels those logits predict, possibly fewer), and h_prev for
        the next window, pooled over the window's first `stride` tokens (those the next window does not repeat)."""
        hidden, layer_states = self.run_window(window_ids, h_prev)
        logits = self.lm_head(hidden[:, owned_from:])
        loss_sum = None
        if targets is not None:
            predicted = logits[:, : targets.shape[1]]
            loss_sum = F.cross_entropy(predicted.reshape(-1, predicted.shape[-1]).float(), targets.reshape(-1),
                                       ignore_index=-100, reduction="sum")
        next_h_prev = self.recurrence([s[:, :stride] for s in layer_states]) if summarize else None
        return (logits if all_logits else logits[:, -1:].clone()), loss_sum, next_h_prev

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        labels: torch.LongTensor | None = None,
        recurrent_state: RecurrentState | None = None,
        overlap: int | None = None,
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

        With gradient checkpointing on in training (§3.2), each window is recomputed in the backward pass and only its
        inputs, h_prev and its loss are kept, so memory does not grow with the number of windows beyond those; the
        per-token logits are then not returned (`logits` holds only the last position's).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._check_inputs(input_ids, recurrent_state)
        if labels is not None and tuple(labels.shape) != tuple(input_ids.shape):
            raise ValueError(f"labels have shape {tuple(labels.shape)}, expected {tuple(input_ids.shape)}")
        check_attention_mask(attention_mask, input_ids)
        if attention_mask is not None:
            mask = attention_mask.bool()
            if values_are_free(mask) and (mask[:, 1:] & ~mask[:, :-1]).any():
                raise ValueError("attention_mask must be 1s then 0s in every row: pad documents on the right.")
            if labels is not None:
                labels = labels.masked_fill(~mask, -100)
        state = recurrent_state or RecurrentState()
        window = self.config.window_size
        overlap = self.config.overlap if overlap is None else overlap
        check_overlap(window, overlap)
        stride = window - overlap
        held = state.window_tokens if state.window_tokens is not None else input_ids[:, :0]
        tokens = torch.cat([held, input_ids], dim=1)  # from the start of the current window on
        new_from = held.shape[1]  # positions before this were output by an earlier call
        window_index, h_prev = state.window_index, state.h_prev
        checkpointing = self.gradient_checkpointing and self.training

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

        pieces, start = [], 0
        while True:
            end = min(start + window, tokens.shape[1])
            owned_from = max(overlap if window_index > 0 else 0, new_from - start)  # window-local
            summarize = end - start == window and self.config.use_recurrence
            targets = shifted[:, start + owned_from:end] if labels is not None else None
            if owned_from < end - start or summarize:
                step = (tokens[:, start:end], h_prev, owned_from, targets, summarize, stride, not checkpointing)
                if checkpointing:  # keep only the window's inputs and its small outputs; recompute the rest
                    logits, window_loss, next_h_prev = self._gradient_checkpointing_func(self.window_step, *step)
                else:
                    logits, window_loss, next_h_prev = self.window_step(*step)
                if owned_from < end - start:
                    pieces.append(logits)
                    if window_loss is not None:
                        loss_sum = loss_sum + window_loss
            if end - start < window:  # an unfinished window: the next call extends it
                break
            # a full window: its summary h_prev stands for everything before the next window's first new token
            h_prev = next_h_prev if self.config.use_recurrence else None
            window_index += 1
            start += stride
            if start + overlap >= tokens.shape[1]:  # the next window has no new token yet
                break
        logits = torch.cat(pieces, dim=1)
        next_state = RecurrentState(
            window_index=window_index, h_prev=h_prev, window_tokens=tokens[:, start:], last_logits=logits[:, -1]
        )
        loss = loss_sum / max(count, 1) if labels is not None else None
        output = RecurrentCausalLMOutput(loss=loss, num_predicted_tokens=count, logits=logits,
                                         recurrent_state=next_state)
        return output if return_dict else output.to_tuple()


def _causal_mask(length: int, like: torch.Tensor) -> torch.Tensor:
    """Additive `(1, 1, length, length)` causal mask in `like`'s dtype (GPT-2's eager attention needs it explicit)."""
    blocked = torch.ones(length, length, dtype=torch.bool, device=like.device).triu(1)
    return torch.zeros(length, length, dtype=like.dtype, device=like.device).masked_fill(
        blocked, torch.finfo(like.dtype).min
    )[None, None]


__all__ = ["GPT2WithRecurrence", "RecurrentState", "RecurrentCausalLMOutput"]
