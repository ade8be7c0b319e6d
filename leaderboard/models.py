"""The leaderboard's models: presets of one budget, any transformers config, the LSTM, under one answer-reading head."""

import torch
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput

from lengthgen.cli import local_path_or_hub_id
from lengthgen.presets import load_presets, load_table

# the one budget of presets/leaderboard.yaml, which a bare transformers model type also gets
_TABLE = load_table("leaderboard")
BUDGET = {**_TABLE["_budget"], **_TABLE["_layers"]}
WIDTH, HEADS, LAYERS = BUDGET["hidden_size"], BUDGET["num_attention_heads"], BUDGET["num_hidden_layers"]


class LSTMEncoder(nn.Module):
    """The recurrent baseline: token embeddings and a one-layer left-to-right LSTM (Delétang et al.'s strongest)."""

    def __init__(self, vocab_size: int, hidden_size: int = WIDTH):
        super().__init__()
        self.hidden_size = hidden_size
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.lstm = nn.LSTM(hidden_size, hidden_size, batch_first=True)

    def forward(self, input_ids, attention_mask=None):
        # right padding: the states of the real positions never see a pad token
        return (self.lstm(self.embeddings(input_ids))[0],)


class AnswerReader(nn.Module):
    """A base model and a linear layer from its last hidden states to the vocabulary; the loss is taken at the
    labelled positions (the answer slots) only."""

    def __init__(self, base: nn.Module, hidden_size: int, vocab_size: int):
        super().__init__()
        self.base = base
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden = self.base(input_ids=input_ids, attention_mask=attention_mask)[0]
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)


PRESETS = load_presets("leaderboard")  # presets/leaderboard.yaml
MODELS = {name: preset["description"] for name, preset in PRESETS.items()}


def model_names_help() -> str:
    return ", ".join(MODELS) + ", hf:PATH_OR_HUB_ID (a transformers config), or a transformers model type (e.g. gpt2)"


def resolve_model_config(name: str):
    """The config of model `name` (None for the LSTM); ValueError listing the valid names for an unknown one."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import lengthgen.modeling  # noqa: F401  (registers lengthgen's model types)

    if name in PRESETS:
        fields = dict(PRESETS[name].get("config") or {})
        return AutoConfig.for_model(fields.pop("model_type"), **fields) if fields else None  # the LSTM: no config
    if name.startswith("hf:"):
        return AutoConfig.from_pretrained(local_path_or_hub_id(name[3:], "--models hf:"))
    if name in CONFIG_MAPPING:
        config = AutoConfig.for_model(name)
        for key, value in BUDGET.items():
            if hasattr(config, key):
                setattr(config, key, value)
        return config
    raise ValueError(f"Unknown model {name!r}; expected one of: {model_names_help()}.")


def build_model(name: str, vocab_size: int, pad_token_id: int, seed: int) -> AnswerReader:
    from transformers import AutoModel

    torch.manual_seed(seed)
    config = resolve_model_config(name)
    if config is None:
        base, hidden_size = LSTMEncoder(vocab_size), WIDTH
    else:
        if not hasattr(config, "vocab_size"):
            raise ValueError(f"Model {name!r} ({config.model_type}) has no token vocabulary; it cannot take text tasks.")
        config.vocab_size, config.pad_token_id = vocab_size, pad_token_id
        base, hidden_size = AutoModel.from_config(config), config.hidden_size
    return AnswerReader(base, hidden_size, vocab_size)


def position_limit(model: nn.Module) -> int | None:
    """Longest input a model's learned absolute position table holds (None: no such table)."""
    limits = [
        module.num_embeddings
        for module_name, module in model.named_modules()
        if isinstance(module, nn.Embedding) and ("position" in module_name.split(".")[-1] or module_name.endswith("wpe"))
    ]
    return min(limits) if limits else None
