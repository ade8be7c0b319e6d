"""The presets as data: `reproduction.yaml` (the papers' results: a spec per run, the papers' numbers beside it),
`study.yaml` (the recurrent-inductive-bias study) and `leaderboard.yaml` (the leaderboard's models and budget), read
through `load_presets`; `load_yaml` reads spec files the same way."""

from .loader import dump_yaml, load_presets, load_table, load_yaml

__all__ = ["dump_yaml", "load_presets", "load_table", "load_yaml"]
