"""An experiment as data: the spec that `lengthgen train`, the reproduction presets, the leaderboard's cells, the
recurrent-bias study and distillation all hand to one runner (lengthgen.training.runner).

A spec has four sections, each an `HfArgumentParser` dataclass of lengthgen.training.arguments, so a field has one
name on the command line, in a spec file and in the code:

```yaml
model:
  config_name: hub_configs/ndr-ctl
  config_overrides: {hidden_size: 64, num_layers: 14}
data:
  dataset_name: ctl
  dataset_config_name: backward
  dataset_param: {train_size: 20000}
training:
  max_steps: 2000
  learning_rate: 1e-3
  per_device_train_batch_size: 256
distillation: {}
```

A section lists only what differs from its defaults. `ExperimentSpec.from_args` reads a command line over a spec (the
command line wins; `dataset_param` and `config_overrides` given there are merged into the spec's).
"""

import argparse
import dataclasses
import difflib
import enum
from dataclasses import dataclass, field

from lengthgen.cli import UsageError
from lengthgen.data.export import parse_params
from lengthgen.presets import dump_yaml, load_yaml

from .arguments import (
    ArgumentParser,
    DataArguments,
    DistillationArguments,
    ModelArguments,
    TrainingArguments,
)

SECTIONS = {"model": ModelArguments, "data": DataArguments, "training": TrainingArguments,
            "distillation": DistillationArguments}
# set by the runner or the command, never a recipe's: left out of a spec's record
NOT_RECIPE = ("output_dir", "max_train_seconds")


def parser(prog: str | None = None) -> ArgumentParser:
    """The argument parser of every section's fields (one-line errors); `prog` names the command in its usage and
    errors."""
    return ArgumentParser(tuple(SECTIONS.values()), prog=prog)


def check_names(sections: dict, source: str) -> None:
    """UsageError naming `source` and the first unknown section or field of `sections` (with the nearest valid name);
    a top-level key starting with `_` (a holder of YAML anchors) is left alone."""
    unknown = {name for name in sections if not name.startswith("_")} - set(SECTIONS)
    if unknown:
        name = sorted(unknown)[0]
        near = difflib.get_close_matches(name, list(SECTIONS), n=1)
        raise UsageError(f"{source}: unknown section {name!r}" + (f" (did you mean {near[0]!r}?)" if near else "")
                         + f"; a spec has {', '.join(SECTIONS)}.")
    for name, kind in SECTIONS.items():
        names = [f.name for f in dataclasses.fields(kind) if f.init]
        for key in sections.get(name) or {}:
            if key not in names:
                near = difflib.get_close_matches(key, names, n=1)
                raise UsageError(f"{source}: {name} has no field {key!r}"
                                 + (f" (did you mean {near[0]!r}?)" if near else "") + ".")


@dataclass
class ExperimentSpec:
    model: ModelArguments
    data: DataArguments
    training: TrainingArguments
    distillation: DistillationArguments = field(default_factory=DistillationArguments)
    # the fields given, by section: what the spec says (the rest are defaults)
    given: dict = field(default_factory=dict, repr=False, compare=False)

    @classmethod
    def from_dict(cls, sections: dict, source: str = "the spec") -> "ExperimentSpec":
        """A spec from {section: {field: value}}; an unknown section or field is a UsageError naming it (and the
        nearest valid name) and `source`."""
        check_names(sections, source)
        built = {}
        for name, kind in SECTIONS.items():
            try:
                built[name] = kind(**dict(sections.get(name) or {}))
            except UsageError:
                raise
            except (TypeError, ValueError) as error:  # a field missing, or transformers' checks of TrainingArguments
                raise UsageError(f"{source}: {name}: {error}") from None
        return cls(**built, given={name: dict(sections.get(name) or {}) for name in SECTIONS})

    @classmethod
    def from_yaml(cls, text: str, source: str = "the spec") -> "ExperimentSpec":
        sections = load_yaml(text)
        if not isinstance(sections, dict):
            raise UsageError(f"{source}: a spec is a mapping of sections ({', '.join(SECTIONS)}).")
        return cls.from_dict(sections, source)

    @classmethod
    def from_args(cls, argv: list[str], base: dict | None = None, prog: str | None = None,
                  source: str = "the spec") -> "ExperimentSpec":
        """A command line of section fields (`--max_steps 100 --dataset_name ctl ...`), over the sections of `base`
        when given (a spec file or preset read as a dict, named `source` in its errors): the command line wins, and
        its `dataset_param` and `config_overrides` are merged into the spec's."""
        base = {name: dict(values or {}) for name, values in (base or {}).items()}
        check_names(base, source)
        # the flags given: argparse leaves an attribute the namespace already has alone, so a marker shows the rest
        argparser, unset = parser(prog), object()
        dests = [action.dest for action in argparser._actions if action.dest != "help"]
        namespace, rest = argparser.parse_known_args(argv, namespace=argparse.Namespace(**{d: unset for d in dests}))
        if rest:
            argparser.error(f"unrecognized arguments: {' '.join(rest)}")
        owner = {f.name: name for name, kind in SECTIONS.items() for f in dataclasses.fields(kind) if f.init}
        sections = {name: dict(base.get(name, {})) for name in SECTIONS}
        for key, value in vars(namespace).items():
            if value is unset:
                continue
            name, previous = owner[key], sections[owner[key]].get(key)
            if key == "dataset_param" and isinstance(previous, dict):
                value = {**previous, **parse_params(value)}
            elif key == "config_overrides" and isinstance(previous, dict):
                value = {**previous, **ModelArguments(model_type="bert", config_overrides=value).overrides}
            sections[name][key] = value.value if isinstance(value, enum.Enum) else value
        return cls.from_dict(sections, source="the command line")

    def to_dict(self) -> dict:
        """{section: {field: value}} of the fields given (what a spec file holds), without the fields a command sets
        for one run (`output_dir`, `max_train_seconds`)."""
        sections = {}
        for name in SECTIONS:
            values = {k: v for k, v in self.given.get(name, {}).items() if k not in NOT_RECIPE}
            if name == "data" and values.get("dataset_param"):
                values["dataset_param"] = {k: list(v) if isinstance(v, tuple) else v
                                           for k, v in self.data.params.items()}
            if name == "model" and values.get("config_overrides"):
                values["config_overrides"] = self.model.overrides
            if values or name != "distillation":
                sections[name] = values
        return sections

    def to_yaml(self) -> str:
        return dump_yaml(self.to_dict())

    def replace(self, **sections: dict) -> "ExperimentSpec":
        """A copy with fields changed: `spec.replace(training={"max_steps": 100}, data={...})`."""
        values = {name: {**self.given.get(name, {}), **sections.get(name, {})} for name in SECTIONS}
        return ExperimentSpec.from_dict(values)


__all__ = ["ExperimentSpec", "SECTIONS", "parser"]
