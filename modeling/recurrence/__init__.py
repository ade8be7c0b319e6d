from .configuration_causal_lm_recurrent import CausalLMWithRecurrenceConfig
from .configuration_gpt2_recurrent import GPT2WithRecurrenceConfig
from .configuration_roberta_recurrent import RobertaWithRecurrenceConfig
from .modeling_causal_lm_recurrent import CausalLMWithRecurrence
from .modeling_gpt2_recurrent import GPT2WithRecurrence
from .modeling_roberta_recurrent import RecurrentQuestionAnsweringOutput, RobertaWithRecurrenceForQuestionAnswering
from .recurrence_module import RecurrentCausalLMOutput, RecurrentState, check_overlap

CausalLMWithRecurrenceConfig.register_for_auto_class()
CausalLMWithRecurrence.register_for_auto_class("AutoModelForCausalLM")
GPT2WithRecurrenceConfig.register_for_auto_class()
GPT2WithRecurrence.register_for_auto_class("AutoModelForCausalLM")
RobertaWithRecurrenceConfig.register_for_auto_class()
RobertaWithRecurrenceForQuestionAnswering.register_for_auto_class("AutoModelForQuestionAnswering")

__all__ = [
    "CausalLMWithRecurrence",
    "CausalLMWithRecurrenceConfig",
    "GPT2WithRecurrence",
    "GPT2WithRecurrenceConfig",
    "RecurrentCausalLMOutput",
    "RecurrentQuestionAnsweringOutput",
    "RecurrentState",
    "RobertaWithRecurrenceConfig",
    "RobertaWithRecurrenceForQuestionAnswering",
    "check_overlap",
]
