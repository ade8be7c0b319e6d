from .configuration_gpt2_recurrent import GPT2WithRecurrenceConfig
from .modeling_gpt2_recurrent import GPT2WithRecurrence, RecurrentCausalLMOutput, RecurrentState

GPT2WithRecurrenceConfig.register_for_auto_class()
GPT2WithRecurrence.register_for_auto_class("AutoModelForCausalLM")

__all__ = ["GPT2WithRecurrence", "GPT2WithRecurrenceConfig", "RecurrentCausalLMOutput", "RecurrentState"]
