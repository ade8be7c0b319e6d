"""Stack-RNN (Joulin and Mikolov 2015) in the form of Delétang et al. (2023): a recurrent controller with a
differentiable stack."""

from .configuration_stack_rnn import StackRNNConfig
from .modeling_stack_rnn import (
    StackRNNForSequenceClassification,
    StackRNNModel,
    StackRNNModelOutput,
    StackRNNPreTrainedModel,
    update_stack,
)

StackRNNConfig.register_for_auto_class()
StackRNNModel.register_for_auto_class("AutoModel")
StackRNNForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = [
    "StackRNNConfig",
    "StackRNNForSequenceClassification",
    "StackRNNModel",
    "StackRNNModelOutput",
    "StackRNNPreTrainedModel",
    "update_stack",
]
