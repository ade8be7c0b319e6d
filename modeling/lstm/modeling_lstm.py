"""PyTorch LSTM classifier: the recurrent model of the recurrent-inductive-bias study (Abnar, Dehghani and Zuidema,
"Transferring Inductive Biases through Knowledge Distillation", 2020), as a `PreTrainedModel` with the interface of
the library's other classifiers.

Token embeddings -> an `num_layers` LSTM read left to right -> the state at the last real token -> a linear
classifier. Right padding never reaches a real position (the LSTM reads left to right and stops being read there).

This file imports only torch, transformers and its own folder, so checkpoints load with `trust_remote_code=True`.
"""

import os

import torch
from torch import nn
from torch.nn import functional as F
from transformers import PreTrainedModel
from transformers import initialization as init
from transformers.modeling_outputs import SequenceClassifierOutput
from transformers.utils import can_return_tuple

from .configuration_lstm import LSTMClassifierConfig


# Copied from lengthgen.modeling.ibert.modeling_ibert._values_are_free
def _values_are_free(tensor: torch.Tensor) -> bool:
    """Whether the checks that read a tensor's values (token ids in the vocabulary, right padding, labels in range)
    run: on the CPU they cost nothing; on an accelerator each would stall it with a host-device sync, so they run only
    with LENGTHGEN_CHECK_INPUTS=1 (the errors are the same); never while torch.compile traces."""
    if torch.compiler.is_compiling():
        return False
    return tensor.device.type == "cpu" or os.environ.get("LENGTHGEN_CHECK_INPUTS", "") == "1"


# Copied from lengthgen.modeling.ibert.modeling_ibert._check_attention_mask
def _check_attention_mask(attention_mask: torch.Tensor, shape: tuple[int, int]) -> torch.Tensor:
    """Check that `attention_mask` has the inputs' `shape` and (where `_values_are_free`) is right padding with a real
    token in every row. Returns the lengths, real tokens per row; raises ValueError naming the problem."""
    if tuple(attention_mask.shape) != shape:
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected {shape}.")
    lengths = attention_mask.long().sum(-1)
    if not _values_are_free(attention_mask):
        return lengths
    right_padded = torch.arange(shape[1], device=attention_mask.device)[None, :] < lengths[:, None]
    if not torch.equal(attention_mask.bool(), right_padded):
        raise ValueError("attention_mask must be 1 on a prefix of each row and 0 after it (right padding).")
    if int(lengths.min()) == 0:
        raise ValueError("Empty sequence: a row of attention_mask has no real token.")
    return lengths


# Copied from lengthgen.modeling.ndr.modeling_ndr._classification_loss
def _classification_loss(logits: torch.Tensor, labels: torch.Tensor, problem_type: str | None) -> torch.Tensor:
    """The loss of a sequence classifier's `logits` `(batch, num_labels)` by the config's `problem_type`, as
    transformers' classifiers (BertForSequenceClassification) take it, which choose it when it is None: "regression"
    for one label, "single_label_classification" for integer labels, else "multi_label_classification". Mean squared
    error against float targets `(batch,)` (`(batch, num_labels)` for several), cross-entropy against class ids
    `(batch,)` (a row labelled -100 left out, as torch's cross-entropy does), binary cross-entropy with logits against
    `(batch, num_labels)` targets. Raises ValueError for labels of another shape, float class ids, or (where
    `_values_are_free`) a class outside `[0, num_labels)` but -100."""
    batch_size, num_labels = logits.shape
    if problem_type is None:
        if num_labels == 1:
            problem_type = "regression"
        elif labels.dtype in (torch.long, torch.int):
            problem_type = "single_label_classification"
        else:
            problem_type = "multi_label_classification"
    one_per_row = problem_type == "single_label_classification" or (problem_type == "regression" and num_labels == 1)
    expected = (batch_size,) if one_per_row else (batch_size, num_labels)
    if tuple(labels.shape) != expected:
        raise ValueError(f"labels have shape {tuple(labels.shape)}, expected {expected} for {problem_type}.")
    if problem_type == "regression":
        return F.mse_loss(logits.squeeze(-1) if num_labels == 1 else logits, labels.to(logits.dtype))
    if problem_type == "multi_label_classification":
        return F.binary_cross_entropy_with_logits(logits, labels.to(logits.dtype))
    if labels.is_floating_point() or labels.dtype == torch.bool:
        raise ValueError(f"labels of single_label_classification are class ids (integers), got dtype {labels.dtype}.")
    if _values_are_free(labels) and (((labels < 0) & (labels != -100)).any() or int(labels.max()) >= num_labels):
        raise ValueError(f"Class labels must lie in [0, {num_labels}) (or be -100, left out of the loss).")
    return F.cross_entropy(logits, labels.long())


class LSTMPreTrainedModel(PreTrainedModel):
    config_class = LSTMClassifierConfig
    base_model_prefix = "lstm"

    @torch.no_grad()
    def _init_weights(self, module):
        """Embeddings and the classifier ~ N(0, initializer_range), zero bias; the LSTM keeps PyTorch's
        U(-1/sqrt(d), 1/sqrt(d)), re-drawn here so that `from_config` with a seed is reproducible."""
        if isinstance(module, nn.Embedding):
            init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
        elif isinstance(module, nn.Linear):
            init.normal_(module.weight, mean=0.0, std=self.config.initializer_range)
            init.zeros_(module.bias)
        elif isinstance(module, nn.LSTM):
            bound = self.config.hidden_size**-0.5
            for parameter in module.parameters():
                init.uniform_(parameter, -bound, bound)


class LSTMForSequenceClassification(LSTMPreTrainedModel):
    """An LSTM classifying from its state at the last real token (with `bidirectional`, that and the right-to-left
    direction's state after the first token)."""

    accepts_loss_kwargs = False

    def __init__(self, config: LSTMClassifierConfig):
        super().__init__(config)
        self.num_labels = config.num_labels
        self.embeddings = nn.Embedding(config.vocab_size, config.hidden_size, padding_idx=config.pad_token_id)
        self.lstm = nn.LSTM(config.hidden_size, config.hidden_size, num_layers=config.num_layers, batch_first=True,
                            dropout=config.hidden_dropout_prob if config.num_layers > 1 else 0.0,
                            bidirectional=config.bidirectional)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)
        self.classifier = nn.Linear(config.hidden_size * (2 if config.bidirectional else 1), config.num_labels)
        self.post_init()

    def get_input_embeddings(self):
        return self.embeddings

    def set_input_embeddings(self, value):
        self.embeddings = value

    @can_return_tuple
    def forward(
        self,
        input_ids: torch.LongTensor | None = None,
        attention_mask: torch.Tensor | None = None,
        labels: torch.LongTensor | None = None,
        output_hidden_states: bool | None = None,
        **kwargs,
    ) -> SequenceClassifierOutput | tuple:
        r"""
        input_ids (`torch.LongTensor` of shape `(batch_size, sequence_length)`): token ids, right-padded.
        attention_mask (`torch.Tensor` of the same shape, *optional*): 1 for real tokens, 0 for padding.
        labels (`torch.Tensor`, *optional*): class ids `(batch_size,)` in `[0, num_labels)`; float targets
            `(batch_size,)` when `num_labels == 1` (regression) or `(batch_size, num_labels)` for
            `problem_type="multi_label_classification"`, as transformers' classifiers take them.
        output_hidden_states (`bool`, *optional*): return the embeddings and the last layer's states.
        """
        unknown = sorted(set(kwargs) - {"num_items_in_batch", "token_type_ids"})
        if unknown:
            raise TypeError(f"LSTMForSequenceClassification.forward() got unexpected keyword argument(s) "
                            f"{', '.join(unknown)}.")
        if input_ids is None or input_ids.dim() != 2 or 0 in input_ids.shape:
            shape = None if input_ids is None else tuple(input_ids.shape)
            raise ValueError(f"input_ids must have shape (batch_size, sequence_length), none empty; got {shape}.")
        if input_ids.is_floating_point() or input_ids.dtype == torch.bool:
            raise ValueError(f"input_ids must be integer token ids, got dtype {input_ids.dtype}.")
        if _values_are_free(input_ids) and (int(input_ids.min()) < 0 or int(input_ids.max()) >= self.config.vocab_size):
            raise ValueError(f"Token ids must lie in [0, {self.config.vocab_size}).")
        embeddings = self.embeddings(input_ids)
        rows = torch.arange(input_ids.shape[0], device=input_ids.device)
        last = (_check_attention_mask(attention_mask, tuple(input_ids.shape)) - 1 if attention_mask is not None
                else torch.full_like(rows, input_ids.shape[1] - 1))
        if self.config.bidirectional:  # packed, so that the right-to-left direction starts at each row's last token
            packed = nn.utils.rnn.pack_padded_sequence(self.dropout(embeddings), (last + 1).cpu(), batch_first=True,
                                                       enforce_sorted=False)
            packed_states, (final, _) = self.lstm(packed)
            states = nn.utils.rnn.pad_packed_sequence(packed_states, batch_first=True,
                                                      total_length=input_ids.shape[1])[0]
            summary = torch.cat([final[-2], final[-1]], dim=-1)  # the last layer: left to right, right to left
        else:
            states = self.lstm(self.dropout(embeddings))[0]
            summary = states[rows, last]
        logits = self.classifier(self.dropout(summary))
        loss = _classification_loss(logits, labels, self.config.problem_type) if labels is not None else None
        output_hidden_states = (output_hidden_states if output_hidden_states is not None
                                else self.config.output_hidden_states)
        return SequenceClassifierOutput(loss=loss, logits=logits,
                                        hidden_states=(embeddings, states) if output_hidden_states else None)


__all__ = ["LSTMForSequenceClassification", "LSTMPreTrainedModel"]
