"""Reading YAML: the preset tables of this package and spec files (lengthgen.training.spec).

Plain YAML with one change to PyYAML's reading: a number in exponent form without a decimal point (`1e-3`, `5e-4`)
is a float, as in YAML 1.2 and JSON, not a string. A preset that shares fields with another says so with YAML's own
anchors and merge keys (`&name`, `<<: *name`), so every table is plain data."""

import re
from importlib import resources

import yaml


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"""^(?:[-+]?(?:[0-9][0-9_]*)\.[0-9_]*(?:[eE][-+]?[0-9]+)?
                   |[-+]?(?:[0-9][0-9_]*)(?:[eE][-+]?[0-9]+)
                   |\.[0-9_]+(?:[eE][-+][0-9]+)?
                   |[-+]?\.(?:inf|Inf|INF)
                   |\.(?:nan|NaN|NAN))$""", re.X),
    list("-+0123456789."),
)


class _Dumper(yaml.SafeDumper):
    pass


_Dumper.add_representer(list, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", value,
                                                                              flow_style=True))
_Dumper.add_representer(tuple, lambda dumper, value: dumper.represent_sequence("tag:yaml.org,2002:seq", list(value),
                                                                               flow_style=True))


def dump_yaml(data) -> str:
    """`data` as YAML that `load_yaml` reads back: mappings in blocks, lists on one line, keys in their order."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, width=120, default_flow_style=False)


def load_yaml(text: str):
    """`text` read as YAML, `1e-3` as a float."""
    return yaml.load(text, Loader=_Loader)


def load_table(kind: str) -> dict:
    """presets/`kind`.yaml as it is: the presets, and the shared fields they draw on (names starting with "_")."""
    return load_yaml(resources.files("lengthgen.presets").joinpath(f"{kind}.yaml").read_text())


def load_presets(kind: str) -> dict[str, dict]:
    """The presets of presets/`kind`.yaml ("reproduction", "leaderboard", "study"), in file order, without the shared
    fields (names starting with "_")."""
    return {name: fields for name, fields in load_table(kind).items() if not name.startswith("_")}
