"""Configuration of the answer-slots reader."""

import contextlib
import contextvars

from transformers import AutoConfig, PretrainedConfig
from transformers.dynamic_module_utils import get_class_from_dynamic_module
from transformers.models.auto.configuration_auto import CONFIG_MAPPING

_READ_FROM = contextvars.ContextVar("answer_slots_read_from", default=None)  # the folder a config is read from


class AnswerSlotsConfig(PretrainedConfig):
    r"""
    The answer-slots reader (`AnswerReader`): a base model and one linear layer from its last hidden states to the
    task's vocabulary, which predicts an answer token at each `[MASK]` slot after the input.

    Args:
        base_config (`PretrainedConfig` or `dict`, *optional*): the base model's config (any `AutoModel`, lengthgen's
            own included); None for the one-layer left-to-right LSTM baseline (`LSTMEncoder`). A base whose code is
            not transformers' is saved with its `auto_map` and its modules beside the reader's, and read back from
            them where its code is not installed.
        vocab_size (`int`, defaults to 8): the task's tokens, read and predicted; with a `base_config`, its own.
        hidden_size (`int`, defaults to 64): the LSTM's width; with a `base_config`, its own.
    """

    model_type = "answer_slots"
    sub_configs = {"base_config": AutoConfig}

    def __init__(self, base_config=None, vocab_size: int = 8, hidden_size: int = 64, **kwargs):
        if isinstance(base_config, dict):
            if "model_type" not in base_config:
                raise ValueError("base_config needs the base model's model_type (e.g. 'llama').")
            base_config = _base_config(dict(base_config))
        if base_config is not None:
            vocab_size, hidden_size = base_config.vocab_size, base_config.hidden_size
        self.base_config = base_config
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        super().__init__(**kwargs)

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, **kwargs):
        with _reading_from(str(pretrained_model_name_or_path)):
            return super().from_pretrained(pretrained_model_name_or_path, **kwargs)


@contextlib.contextmanager
def _reading_from(source: str):
    token = _READ_FROM.set(source)
    try:
        yield
    finally:
        _READ_FROM.reset(token)


def _base_config(fields: dict) -> PretrainedConfig:
    """The base's config from its saved fields: its registered class, or, where its code is not installed, the class
    its `auto_map` names in the folder being read (the reader's folder carries the base's modules)."""
    model_type = fields.pop("model_type")
    if model_type in CONFIG_MAPPING:
        return CONFIG_MAPPING[model_type](**fields)
    source = _READ_FROM.get()
    if source is None or "AutoConfig" not in fields.get("auto_map", {}):
        raise ValueError(f"base_config: model type {model_type!r} is not installed here, and no folder with its code "
                         "is being read (install the package that defines it).")
    config = get_class_from_dynamic_module(fields["auto_map"]["AutoConfig"], source)(**fields)
    config._name_or_path = source  # where `AutoModel.from_config` finds the base's modeling code
    return config


__all__ = ["AnswerSlotsConfig"]
