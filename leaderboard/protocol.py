"""Named protocols of the leaderboard (`lengthgen leaderboard --protocol NAME`), as presets/leaderboard.yaml states
them: the models of its board, the tasks, their data, the training budget, the runs of each (model, task) pair
(every seed at every learning rate), and the score at which a run counts as generalizing.

A protocol fills what the command line leaves out; a flag given on the command line wins (`--tasks`, `--seeds`,
`--learning_rates`, `--max_steps`, ...)."""

from dataclasses import dataclass, field

from lengthgen.cli import UsageError
from lengthgen.presets import load_table


@dataclass(frozen=True)
class Protocol:
    name: str
    description: str
    tasks: list[str]
    models: list[str] = field(default_factory=list)  # the protocol's board: the models run when --models is not given
    data_scale: str = "small"
    dataset_param: dict = field(default_factory=dict)  # generating parameters over the data scale's
    task_params: dict = field(default_factory=dict)  # {task: generating parameters of that task alone}
    training: dict = field(default_factory=dict)  # over the budget of every cell (`_training`)
    learning_rates: list[float] | None = None  # None: the budget's one rate
    seeds: int = 1
    generalizes: float | None = None  # a run whose score reaches this generalizes
    published: list[str] = field(default_factory=list)  # sources of presets/published.yaml measured the same way

    def __post_init__(self):
        if other := [task for task in self.task_params if task not in self.tasks]:
            raise ValueError(f"Protocol {self.name!r}: task_params names {other[0]!r}, not one of its tasks.")


PROTOCOLS = {
    name: Protocol(name=name, **fields) for name, fields in load_table("leaderboard").get("_protocols", {}).items()
}


def protocol(name: str) -> Protocol:
    if name not in PROTOCOLS:
        raise UsageError(f"Unknown protocol {name!r}; expected one of: {', '.join(PROTOCOLS)}.")
    return PROTOCOLS[name]


def parse_shard(text: str) -> tuple[int, int]:
    """`I/N` -> (I, N), 1 <= I <= N; a UsageError naming the flag otherwise."""
    index, slash, count = text.partition("/")
    if not (slash and index.isdigit() and count.isdigit() and 1 <= int(index) <= int(count)):
        raise UsageError(f"--shard must be I/N with 1 <= I <= N (e.g. 2/8), got {text!r}.")
    return int(index), int(count)


__all__ = ["PROTOCOLS", "Protocol", "parse_shard", "protocol"]
