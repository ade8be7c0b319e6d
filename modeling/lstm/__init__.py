"""The LSTM classifier of the recurrent-inductive-bias study (Abnar, Dehghani and Zuidema, 2020)."""

from .configuration_lstm import LSTMClassifierConfig
from .modeling_lstm import LSTMForSequenceClassification, LSTMPreTrainedModel

LSTMClassifierConfig.register_for_auto_class()
LSTMForSequenceClassification.register_for_auto_class("AutoModelForSequenceClassification")

__all__ = ["LSTMClassifierConfig", "LSTMForSequenceClassification", "LSTMPreTrainedModel"]
