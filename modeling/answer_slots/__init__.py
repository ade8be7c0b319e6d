"""The answer-slots reader: any base model under one linear layer that predicts an answer token per `[MASK]` slot."""

from .configuration_answer_slots import AnswerSlotsConfig
from .modeling_answer_slots import AnswerReader, LSTMEncoder

AnswerSlotsConfig.register_for_auto_class()
AnswerReader.register_for_auto_class("AutoModelForMaskedLM")

__all__ = ["AnswerReader", "AnswerSlotsConfig", "LSTMEncoder"]
