"""Reading a preset table: one YAML mapping of name -> fields, where `extends: OTHER` starts from OTHER's fields."""

from importlib import resources

import yaml


def load_table(kind: str) -> dict:
    """`kind`.yaml as it is: the presets, and the shared fields they draw on (names starting with "_")."""
    return yaml.safe_load(resources.files("lengthgen.presets").joinpath(f"{kind}.yaml").read_text())


def load_presets(kind: str) -> dict[str, dict]:
    """The presets of `kind` ("reproduction" or "leaderboard"), in file order, each with its `extends` resolved."""
    presets = {name: fields for name, fields in load_table(kind).items() if not name.startswith("_")}

    def resolved(name: str, seen: tuple = ()) -> dict:
        if name in seen or name not in presets:
            raise ValueError(f"{kind}.yaml: preset {seen[-1]!r} extends {name!r}, which is "
                             + ("itself, in a cycle." if name in seen else "not in the table."))
        fields = dict(presets[name])
        parent = fields.pop("extends", None)
        return {**resolved(parent, (*seen, name)), **fields} if parent else fields

    return {name: resolved(name) for name in presets}
