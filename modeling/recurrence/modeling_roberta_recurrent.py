"""RoBERTa with window-level recurrence for extractive question answering over long contexts (Yoshida et al. 2020,
"Adding Recurrence to Pretrained Transformers", §5.4, Table 3: HotpotQA, distractor setting).

An example (a question and its context, e.g. 10 paragraphs) arrives as windows, each beginning with the question and
a separator (`<s> question </s></s> context piece </s>`, built by the data code). Window i is read by RoBERTa; for
window i + 1, the final layer of window i is mean-pooled over its real tokens and a feed-forward network maps it to
h_prev, which window i + 1 gets as one extra key and value at layer `insertion_layer`: it is placed before the
window's first token, every position attends to it (bidirectional attention), it has no position embedding and its
own output is dropped. Every window predicts span start and end logits; the [CLS] states of all windows are
max-pooled into a classifier over the answer type (span / yes / no). With `use_recurrence=False` every window is read
on its own: the disjoint baseline, the same windows.

Loss = (start loss + end loss) / 2 on the window that holds the answer (as in `RobertaForQuestionAnswering`) + the
answer-type loss. The paper names the two losses but not their weights; this is the plain sum.

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional as F
from transformers import RobertaModel, RobertaPreTrainedModel
from transformers.utils import ModelOutput

from .configuration_roberta_recurrent import RobertaWithRecurrenceConfig
from .recurrence_module import (
    RecurrenceModule,
    WindowRecurrenceMixin,
    check_attention_implementation,
    check_attention_mask,
    check_input_ids,
    values_are_free,
)


@dataclass
class RecurrentQuestionAnsweringOutput(ModelOutput):
    """
    loss: span loss on the answer's window (examples with a span answer) + answer-type loss.
    start_logits, end_logits: `(batch, num_windows, window_length)`, span scores of every window.
    answer_type_logits: `(batch, num_answer_types)`: span / yes / no, from the [CLS] states max-pooled over windows.
    """

    loss: torch.Tensor | None = None
    start_logits: torch.Tensor | None = None
    end_logits: torch.Tensor | None = None
    answer_type_logits: torch.Tensor | None = None


class RobertaWithRecurrenceForQuestionAnswering(WindowRecurrenceMixin, RobertaPreTrainedModel):
    """RoBERTa reading a question's windows in order, h_prev carried from each window to the next."""

    config_class = RobertaWithRecurrenceConfig

    def __init__(self, config: RobertaWithRecurrenceConfig):
        check_attention_implementation(type(self).__name__, config._attn_implementation)
        super().__init__(config)
        self.roberta = RobertaModel(config, add_pooling_layer=False)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self.recurrence = RecurrenceModule(config)
        self.answer_type_dropout = nn.Dropout(config.hidden_dropout_prob)
        self.answer_type_classifier = nn.Linear(config.hidden_size, config.num_answer_types)
        self.gradient_checkpointing = False
        self.post_init()

    @classmethod
    def from_pretrained_roberta(cls, name_or_path: str, **recurrence_fields):
        """Load a pretrained RoBERTa (e.g. `roberta-base`, any RoBERTa checkpoint) with its encoder weights unchanged;
        the span head, the answer-type classifier and the recurrence module are new.

        `recurrence_fields` are `RobertaWithRecurrenceConfig` fields (insertion_layer, use_recurrence, ...)."""
        from transformers import AutoConfig

        base = AutoConfig.from_pretrained(name_or_path)
        if base.model_type not in ("roberta", "roberta_recurrent"):
            raise ValueError(f"{name_or_path} is a {base.model_type!r} model, not RoBERTa")
        fields = {k: v for k, v in base.to_dict().items() if k not in ("model_type", "architectures", "auto_map")}
        config = RobertaWithRecurrenceConfig(**{**fields, **recurrence_fields})
        return cls.from_pretrained(name_or_path, config=config)

    def _check_inputs(self, input_ids, attention_mask):
        check_input_ids(input_ids, "batch_size, num_windows, window_length", self.config.vocab_size)
        positions = self.config.max_position_embeddings - self.config.pad_token_id - 1
        if input_ids.shape[2] > positions:
            raise ValueError(f"Windows of {input_ids.shape[2]} tokens exceed the model's {positions} positions.")
        check_attention_mask(attention_mask, input_ids)

    def run_window(self, window_ids: torch.Tensor, mask: torch.Tensor, h_prev: torch.Tensor | None) -> torch.Tensor:
        """RoBERTa on one window `(batch, length)` with h_prev as an extra key and value at layer l_ins; returns the
        final hidden states `(batch, length, hidden)`."""
        hidden = self.roberta.embeddings(input_ids=window_ids)
        for index, layer in enumerate(self.roberta.encoder.layer):
            layer_mask = mask
            extra = h_prev is not None and index == self.config.insertion_layer
            if extra:  # h_prev goes first; every position sees it, its own output is dropped
                hidden = torch.cat([h_prev[:, None, :].to(hidden.dtype), hidden], dim=1)
                layer_mask = F.pad(mask, (1, 0), value=1)
            hidden = layer(hidden, attention_mask=_additive_mask(layer_mask, hidden.dtype))
            hidden = hidden[0] if isinstance(hidden, tuple) else hidden
            if extra:
                hidden = hidden[:, 1:]
        return hidden

    def window_step(self, window_ids, mask, h_prev, summarize: bool):
        """One window: start and end logits, its [CLS] state and (if `summarize`) h_prev for the next window."""
        hidden = self.run_window(window_ids, mask, h_prev)
        start_logits, end_logits = self.qa_outputs(hidden).unbind(dim=-1)
        next_h_prev = self.recurrence([hidden], mask) if summarize else None
        return start_logits, end_logits, hidden[:, 0], next_h_prev

    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.LongTensor | None = None,
        answer_window: torch.LongTensor | None = None,
        start_positions: torch.LongTensor | None = None,
        end_positions: torch.LongTensor | None = None,
        answer_types: torch.LongTensor | None = None,
        return_dict: bool | None = None,
        **kwargs,
    ) -> RecurrentQuestionAnsweringOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, num_windows, window_length)`): the windows of each
            example in reading order, each `<s> question </s></s> context piece </s>`. Examples with fewer windows
            are padded with windows of padding (attention mask all 0) at the end.
        attention_mask (`torch.LongTensor` of the same shape, *optional*): 1 for tokens, 0 for padding.
        answer_window (`torch.LongTensor` of shape `(batch_size,)`, *optional*): the window holding the answer span,
            -100 for yes/no answers or a span in no window.
        start_positions, end_positions (`torch.LongTensor` of shape `(batch_size,)`, *optional*): the span's first
            and last token in that window.
        answer_types (`torch.LongTensor` of shape `(batch_size,)`, *optional*): 0 span, 1 yes, 2 no (-100 ignored).
        """
        return_dict = return_dict if return_dict is not None else self.config.return_dict
        self._check_inputs(input_ids, attention_mask)
        if attention_mask is None:
            attention_mask = (input_ids != self.config.pad_token_id).long()
        num_windows = input_ids.shape[1]
        real_windows = attention_mask.bool().any(dim=-1)  # (batch, num_windows)
        if not real_windows[:, 0].all():
            raise ValueError("Every example needs a first window with tokens: is the context missing?")
        checkpointing = self.gradient_checkpointing and self.training

        starts, ends, cls_states, h_prev = [], [], [], None
        for index in range(num_windows):
            summarize = self.config.use_recurrence and index + 1 < num_windows
            step = (input_ids[:, index], attention_mask[:, index], h_prev, summarize)
            if checkpointing:
                start, end, cls_state, next_h_prev = self._gradient_checkpointing_func(self.window_step, *step)
            else:
                start, end, cls_state, next_h_prev = self.window_step(*step)
            starts.append(start)
            ends.append(end)
            cls_states.append(cls_state)
            h_prev = next_h_prev
        start_logits, end_logits = torch.stack(starts, dim=1), torch.stack(ends, dim=1)
        lowest = torch.finfo(start_logits.dtype).min
        cls_states = torch.stack(cls_states, dim=1).masked_fill(~real_windows[..., None], lowest)
        pooled = cls_states.max(dim=1).values  # max over the example's own windows
        answer_type_logits = self.answer_type_classifier(self.answer_type_dropout(pooled))

        loss = None
        if answer_types is not None or answer_window is not None:
            loss = torch.zeros((), device=input_ids.device)
            if answer_window is not None:
                has_span = answer_window != -100
                if start_positions is None or end_positions is None:
                    raise ValueError("answer_window needs start_positions and end_positions")
                check = values_are_free(answer_window)  # no host-device sync per call on an accelerator
                if check and ((answer_window[has_span] < 0) | (answer_window[has_span] >= num_windows)).any():
                    raise ValueError(f"answer_window must be -100 or a window index in [0, {num_windows})")
                length = input_ids.shape[2]
                for name, positions in (("start_positions", start_positions), ("end_positions", end_positions)):
                    if check and ((positions[has_span] < 0) | (positions[has_span] >= length)).any():
                        raise ValueError(f"{name} must lie in [0, {length}) where answer_window is set")
                if has_span.any():
                    rows = has_span.nonzero().flatten()
                    window_start = start_logits[rows, answer_window[rows]]
                    window_end = end_logits[rows, answer_window[rows]]
                    loss = loss + (F.cross_entropy(window_start, start_positions[rows])
                                   + F.cross_entropy(window_end, end_positions[rows])) / 2
            if answer_types is not None:
                known = (answer_types == -100) | ((answer_types >= 0) & (answer_types < self.config.num_answer_types))
                if values_are_free(answer_types) and not known.all():
                    raise ValueError(f"Unknown answer type {answer_types[~known].tolist()}: the types are 0 span, "
                                     f"1 yes, 2 no (-100 ignored)")
            if answer_types is not None and (answer_types != -100).any():
                loss = loss + F.cross_entropy(answer_type_logits, answer_types, ignore_index=-100)

        output = RecurrentQuestionAnsweringOutput(loss=loss, start_logits=start_logits, end_logits=end_logits,
                                                  answer_type_logits=answer_type_logits)
        return output if return_dict else output.to_tuple()


def _additive_mask(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """`(batch, 1, 1, keys)` additive mask: 0 where a key may be attended, the dtype's minimum where not."""
    return ((1.0 - mask[:, None, None, :].to(dtype)) * torch.finfo(dtype).min).to(dtype)


__all__ = ["RecurrentQuestionAnsweringOutput", "RobertaWithRecurrenceForQuestionAnswering"]
