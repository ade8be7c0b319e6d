"""The leaderboard's models: presets/leaderboard.yaml's, any transformers config (`hf:PATH_OR_HUB_ID`), or a bare
model type with the presets' size, each as the model section of a cell's spec (read by the answer-slots head)."""

from lengthgen.cli import UsageError, local_path_or_hub_id
from lengthgen.presets import load_presets, load_table

PRESETS = load_presets("leaderboard")
MODELS = {name: preset["description"] for name, preset in PRESETS.items()}
_TABLE = load_table("leaderboard")
SIZE = {**_TABLE["_size"], **_TABLE["_layers"]}  # what a bare transformers model type gets


def model_names_help() -> str:
    return ", ".join(MODELS) + ", hf:PATH_OR_HUB_ID (a transformers config), or a transformers model type (e.g. gpt2)"


def model_section(name: str) -> dict:
    """The model section of a cell's spec for model `name`; a UsageError listing the valid names for an unknown one."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import lengthgen.modeling  # noqa: F401  (registers lengthgen's model types)

    if name in PRESETS:
        return {"head": "answer_slots", **PRESETS[name]["model"]}
    if name.startswith("hf:"):
        return {"head": "answer_slots", "config_name": local_path_or_hub_id(name[3:], "--models hf:")}
    if name in CONFIG_MAPPING:  # the presets' size, in the fields this model type has
        default = AutoConfig.for_model(name)
        return {"head": "answer_slots", "model_type": name,
                "config_overrides": {key: value for key, value in SIZE.items() if hasattr(default, key)}}
    raise UsageError(f"Unknown model {name!r}; expected one of: {model_names_help()}.")
