"""The papers' results, one command per result (`lengthgen reproduce NAME`): the presets of presets/reproduction.yaml
run through the experiment runner, their results JSON, plot and table, the NDR's accuracy against its number of
steps, and the recurrent-bias study and distillation comparisons over seeds."""

from .presets import Preset, load_reproduction_presets

__all__ = ["Preset", "load_reproduction_presets"]
