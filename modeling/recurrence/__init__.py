from .configuration_gpt2_recurrent import GPT2WithRecurrenceConfig, check_overlap
from .configuration_roberta_recurrent import RobertaWithRecurrenceConfig
from .modeling_gpt2_recurrent import GPT2WithRecurrence, RecurrentCausalLMOutput, RecurrentState
from .modeling_roberta_recurrent import RecurrentQuestionAnsweringOutput, RobertaWithRecurrenceForQuestionAnswering

GPT2WithRecurrenceConfig.register_for_auto_class()
GPT2WithRecurrence.register_for_auto_class("AutoModelForCausalLM")
RobertaWithRecurrenceConfig.register_for_auto_class()
RobertaWithRecurrenceForQuestionAnswering.register_for_auto_class("AutoModelForQuestionAnswering")

__all__ = [
    "GPT2WithRecurrence",
    "GPT2WithRecurrenceConfig",
    "RecurrentCausalLMOutput",
    "RecurrentQuestionAnsweringOutput",
    "RecurrentState",
    "RobertaWithRecurrenceConfig",
    "RobertaWithRecurrenceForQuestionAnswering",
    "check_overlap",
]
