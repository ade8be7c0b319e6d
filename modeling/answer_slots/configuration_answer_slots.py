"""Configuration of the answer-slots reader."""

from transformers import AutoConfig, PretrainedConfig


class AnswerSlotsConfig(PretrainedConfig):
    r"""
    The answer-slots reader (`AnswerReader`): a base model and one linear layer from its last hidden states to the
    task's vocabulary, which predicts an answer token at each `[MASK]` slot after the input.

    Args:
        base_config (`PretrainedConfig` or `dict`, *optional*): the base model's config (any `AutoModel`, lengthgen's
            own included); None for the one-layer left-to-right LSTM baseline (`LSTMEncoder`).
        vocab_size (`int`, defaults to 8): the task's tokens, read and predicted; with a `base_config`, its own.
        hidden_size (`int`, defaults to 64): the LSTM's width; with a `base_config`, its own.
    """

    model_type = "answer_slots"
    sub_configs = {"base_config": AutoConfig}

    def __init__(self, base_config=None, vocab_size: int = 8, hidden_size: int = 64, **kwargs):
        if isinstance(base_config, dict):
            if "model_type" not in base_config:
                raise ValueError("base_config needs the base model's model_type (e.g. 'llama').")
            base_config = AutoConfig.for_model(**base_config)
        if base_config is not None:
            vocab_size, hidden_size = base_config.vocab_size, base_config.hidden_size
        self.base_config = base_config
        self.vocab_size = vocab_size
        self.hidden_size = hidden_size
        super().__init__(**kwargs)


__all__ = ["AnswerSlotsConfig"]
