"""The leaderboard's tasks: a lengthgen builder (or any dataset with input/target/difficulty columns) and its score."""

from dataclasses import dataclass, field

from lengthgen.cli import local_path_or_hub_id
from lengthgen.data.export import BUILDERS, load_splits

# Generating parameters of `--data-scale small`: a CPU leaderboard in hours (train <= 20, test 21-100 for the
# Chomsky-hierarchy tasks; fewer rows elsewhere; the splits' difficulties as in the papers).
SMALL_SCALE = {
    "chomsky_hierarchy": dict(train_lengths=(1, 20), test_lengths=(21, 100), train_size=20_000, test_size=1_600),
    "ctl": dict(validation_iid_size=500, validation_size=500, test_size=500),
    "listops": dict(train_size=20_000, validation_size=500, test_size=500),
    "simple_arithmetic": dict(train_size=20_000, validation_size=500, test_size=500),
    "nsp_inductive": dict(validation_size=512),
}
LEADERBOARD_BUILDERS = [name for name in BUILDERS if name != "ptb_inductive"]  # PTB needs a corpus download


def task_names() -> list[str]:
    return [f"{name}/{config.name}" for name in LEADERBOARD_BUILDERS for config in BUILDERS[name].BUILDER_CONFIGS]


@dataclass
class Task:
    name: str  # builder/config, or hf:PATH[:CONFIG]
    dataset: str
    config: str | None
    params: dict = field(default_factory=dict)

    @property
    def metric(self) -> str:
        return "token_accuracy" if self.dataset == "chomsky_hierarchy" else "sequence_accuracy"

    def load(self):
        return load_splits(self.dataset, self.config, self.params)


def resolve_task(name: str, data_scale: str = "small") -> Task:
    """`builder/config` (or a builder alone: its default config) or `hf:PATH_OR_HUB_ID[:CONFIG]`."""
    if name.startswith("hf:"):
        path, _, config = name[3:].partition(":")
        local_path_or_hub_id(path, "--tasks hf:")
        return Task(name, path, config or None)
    dataset, _, config = name.partition("/")
    if dataset in LEADERBOARD_BUILDERS:
        configs = [c.name for c in BUILDERS[dataset].BUILDER_CONFIGS]
        config = config or BUILDERS[dataset].DEFAULT_CONFIG_NAME or configs[0]
        if config in configs:
            params = SMALL_SCALE.get(dataset, {}) if data_scale == "small" else {}
            return Task(f"{dataset}/{config}", dataset, config, dict(params))
    raise ValueError(f"Unknown task {name!r}; expected one of: {', '.join(task_names())}, or hf:PATH_OR_HUB_ID[:CONFIG].")
