"""The answer-slots reader: any base model under one linear layer that predicts the answer's tokens at the `[MASK]`
slots after the input. No task-specific head: how the leaderboard compares architectures."""

import os

from torch import nn
from transformers import AutoModel, PreTrainedModel
from transformers.dynamic_module_utils import custom_object_save
from transformers.modeling_outputs import MaskedLMOutput
from transformers.utils import can_return_tuple

from .configuration_answer_slots import AnswerSlotsConfig


class LSTMEncoder(nn.Module):
    """The recurrent baseline of the answer-slots reader: token embeddings and a one-layer left-to-right LSTM."""

    def __init__(self, vocab_size: int, hidden_size: int):
        super().__init__()
        self.hidden_size = hidden_size
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.lstm = nn.LSTM(hidden_size, hidden_size, batch_first=True)

    def forward(self, input_ids, attention_mask=None):
        # right padding: the states of the real positions never see a pad token
        return (self.lstm(self.embeddings(input_ids))[0],)


class AnswerReader(PreTrainedModel):
    """A base model and a linear layer from its last hidden states to the vocabulary; the loss is taken at the
    labelled positions (the answer slots) only. (Delétang et al.'s recurrent models put a ReLU before their output
    layer; this reader reads every base the same way, without one.) `save_pretrained` writes the base's config inside
    this one's, and `AnswerReader.from_pretrained(folder)` (or `AutoModelForMaskedLM`, once lengthgen is imported)
    reads it back.

    The weights keep their modules' own initialisation: the base model's (its `post_init`), PyTorch's for the LSTM and
    the linear layer."""

    config_class = AnswerSlotsConfig
    base_model_prefix = "base"

    def __init__(self, config: AnswerSlotsConfig, trust_remote_code: bool = False):
        super().__init__(config)  # (before the base: it sets the sub-config's attention implementation the base reads)
        if config.base_config is None:
            self.base = LSTMEncoder(config.vocab_size, config.hidden_size)
        else:  # `trust_remote_code`: a base whose code comes with its config; read back from the reader's own folder
            # (trusted to load this reader) where the base's code is not installed
            from_folder = type(config.base_config).__module__.startswith("transformers_modules")
            self.base = AutoModel.from_config(config.base_config, trust_remote_code=trust_remote_code or from_folder)
        self.head = nn.Linear(config.hidden_size, config.vocab_size)
        self.post_init()

    def save_pretrained(self, save_directory, *args, **kwargs):
        """transformers' `save_pretrained`; a base whose code is not transformers' (lengthgen's own models) is saved
        with its modules beside the reader's and its `auto_map` in `base_config`, so that the folder loads with
        transformers alone (`trust_remote_code=True`)."""
        base_config = self.config.base_config
        if base_config is not None and not type(self.base).__module__.startswith("transformers."):
            if kwargs.get("push_to_hub"):
                raise ValueError("A reader over a base whose code travels with it is saved, then uploaded as a folder "
                                 "(lengthgen release --push, or huggingface_hub's upload_folder).")
            os.makedirs(save_directory, exist_ok=True)
            auto_map = {}
            for part in (base_config, self.base):  # their modules and relative imports, and their auto_map entries
                entry = {}
                custom_object_save(part, save_directory, config=entry)
                auto_map.update(entry.get("auto_map", {}))
            base_config.auto_map = auto_map
        super().save_pretrained(save_directory, *args, **kwargs)

    def _init_weights(self, module):
        """Nothing: the base model initialised its own modules; the LSTM and the head keep PyTorch's initialisation."""

    @can_return_tuple
    def forward(self, input_ids, attention_mask=None, labels=None, position_ids=None) -> MaskedLMOutput | tuple:
        """The logits over the vocabulary at every position, and with `labels` the cross-entropy at the labelled
        positions (-100 elsewhere); `return_dict=False` (or the config's `return_dict`) gives the tuple (loss, logits),
        as transformers' models do."""
        positions = {} if position_ids is None else {"position_ids": position_ids}
        hidden = self.base(input_ids=input_ids, attention_mask=attention_mask, **positions)[0]
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)


__all__ = ["AnswerReader", "LSTMEncoder"]
