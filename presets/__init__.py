"""The presets as data: `reproduction.yaml` (benchmarks/reproduce.py's recipes, the papers' numbers beside them),
`study.yaml` (the recurrent-inductive-bias study's models) and
`leaderboard.yaml` (lengthgen-leaderboard's models), read through `load_presets`."""

from .loader import flags, load_presets, load_table

__all__ = ["flags", "load_presets", "load_table"]
