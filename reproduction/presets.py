"""The reproduction presets (presets/reproduction.yaml) as typed records: a spec and what the results JSON says
of it."""

import os
from dataclasses import dataclass

from lengthgen.cli import UsageError
from lengthgen.presets import load_presets
from lengthgen.training.spec import SECTIONS, ExperimentSpec

# the checkout the presets were installed from (the presets name its hub_configs/ folders)
REPOSITORY = os.path.dirname(os.path.dirname(os.path.abspath(load_presets.__code__.co_filename)))


@dataclass
class Preset:
    """One reproduction run: the spec's sections, the paper's numbers and the target."""

    name: str
    reference: str  # the paper's table or figure
    paper: dict  # the paper's accuracy: {split: {difficulty or "all": accuracy}}
    target: tuple | None  # (split, difficulty or "all", accuracy to reach); None for a baseline
    differences: str  # what differs from the paper, and why
    spec: dict  # {"model": {...}, "data": {...}, "training": {...}}
    baseline: str | None = None  # the preset trained beside it with the same budget
    deeper: dict | None = None  # generating parameters of a test split deeper than the task's (NDR only)
    paper_scale: bool = False  # the paper's model and recipe: on a GPU where there is one
    cpu_precision: str = "auto"  # on a CPU: auto = bf16 where the CPU has native bf16; or fp32

    def sections(self) -> dict:
        """The spec's sections; its `hub_configs/` folders are the repository's, wherever the command runs from."""
        sections = {name: dict(values) for name, values in self.spec.items()}
        config = sections.get("model", {}).get("config_name")
        if config and not os.path.exists(config) and os.path.isdir(os.path.join(REPOSITORY, config)):
            sections["model"]["config_name"] = os.path.join(REPOSITORY, config)
        return sections

    def experiment(self, output_dir: str | None = None) -> ExperimentSpec:
        """The preset's spec, writing to `output_dir`."""
        sections = self.sections()
        if output_dir:
            sections.setdefault("training", {})["output_dir"] = output_dir
        return ExperimentSpec.from_dict(sections, source=f"presets/reproduction.yaml: {self.name}")


def load_reproduction_presets() -> dict[str, Preset]:
    """presets/reproduction.yaml as Presets, in file order."""
    presets = {}
    for name, fields in load_presets("reproduction").items():
        fields = dict(fields)
        spec = {section: fields.pop(section) for section in SECTIONS if section in fields}
        if fields.get("target"):
            fields["target"] = tuple(fields["target"])
        if fields.get("deeper"):
            fields["deeper"] = {k: tuple(v) if isinstance(v, list) else v for k, v in fields["deeper"].items()}
        try:
            presets[name] = Preset(name=name, spec=spec, **fields)
        except TypeError as error:
            raise UsageError(f"presets/reproduction.yaml: {name}: {error}") from None
    return presets
