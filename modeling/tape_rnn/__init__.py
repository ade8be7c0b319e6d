"""Tape-RNN (Delétang et al. 2023): a recurrent controller with a differentiable tape."""

from .configuration_tape_rnn import TapeRNNConfig
from .modeling_tape_rnn import (
    TapeRNNForSequenceClassification,
    TapeRNNModel,
    TapeRNNModelOutput,
    TapeRNNPreTrainedModel,
    jump_lengths,
    tape_indices,
    update_tape,
)

TapeRNNConfig.register_for_auto_class()
TapeRNNModel.register_for_auto_class("AutoModel")
TapeRNNForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "TapeRNNConfig",
    "TapeRNNForSequenceClassification",
    "TapeRNNModel",
    "TapeRNNModelOutput",
    "TapeRNNPreTrainedModel",
    "jump_lengths",
    "tape_indices",
    "update_tape",
]
