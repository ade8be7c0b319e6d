"""The leaderboard's tasks: a lengthgen builder (or any dataset with input/target/difficulty columns) and its score."""

from dataclasses import dataclass, field

from lengthgen.cli import UsageError, local_path_or_hub_id
from lengthgen.data.chomsky_hierarchy import is_chomsky_hierarchy
from lengthgen.data.export import BUILDERS, GENERATED, builder_config, load_splits
from lengthgen.presets import load_table

DATA_SCALES = load_table("leaderboard")["_data_scales"]  # generating parameters per builder, per scale


def task_names() -> list[str]:
    return [f"{name}/{config.name}" for name in GENERATED for config in BUILDERS[name].BUILDER_CONFIGS]


@dataclass
class Task:
    name: str  # builder/config, or hf:PATH[:CONFIG]
    dataset: str
    config: str | None
    params: dict = field(default_factory=dict)

    @property
    def metric(self) -> str:
        """The score's accuracy: per token on the Chomsky-hierarchy tasks, generated or exported (as Delétang et al.
        score them), the whole answer elsewhere (as their papers do)."""
        return "token_accuracy" if is_chomsky_hierarchy(self.dataset) else "accuracy"

    def load(self):
        return load_splits(self.dataset, self.config, self.params)

    def defaults(self) -> dict:
        """The builder's generating parameters where `params` leaves them ({} for a dataset that is not a builder)."""
        return builder_config(self.dataset, self.config).generator_arguments() if self.dataset in BUILDERS else {}


def resolve_task(name: str, data_scale: str = "small") -> Task:
    """`builder/config` (or a builder alone: its default config) or `hf:PATH_OR_HUB_ID[:CONFIG]`."""
    if name.startswith("hf:"):
        path, _, config = name[3:].partition(":")
        local_path_or_hub_id(path, "--tasks hf:")
        return Task(name, path, config or None)
    dataset, _, config = name.partition("/")
    if dataset in GENERATED:
        configs = [c.name for c in BUILDERS[dataset].BUILDER_CONFIGS]
        config = config or BUILDERS[dataset].DEFAULT_CONFIG_NAME or configs[0]
        if config in configs:
            params = {k: tuple(v) if isinstance(v, list) else v
                      for k, v in (DATA_SCALES[data_scale] or {}).get(dataset, {}).items()}
            return Task(f"{dataset}/{config}", dataset, config, params)
    raise UsageError(
        f"Unknown task {name!r}; expected one of: {', '.join(task_names())}, or hf:PATH_OR_HUB_ID[:CONFIG]."
    )


def with_params(tasks: list[Task], params: dict, source: str = "--dataset_param") -> list[Task]:
    """Each task with the generating parameters of `params` that its builder has; a UsageError naming a parameter that
    none of the tasks' builders has, and where it was given (`source`)."""
    used = set()
    for task in tasks:
        if task.dataset in BUILDERS:
            own = builder_config(task.dataset, task.config).generator_arguments()
            mine = {key: value for key, value in params.items() if key in own}
            task.params.update(mine)
            used.update(mine)
    unused = [key for key in params if key not in used]
    if unused:
        raise UsageError(f"{source} {unused[0]}: none of the tasks' builders has this generating parameter.")
    return tasks
