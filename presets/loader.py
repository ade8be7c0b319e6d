"""Reading a preset table: one YAML mapping of name -> fields, where `extends: OTHER` starts from OTHER's fields and
`training_changes: "--flag value ..."` changes those flags of the inherited `training` command line (adding the ones it
does not have), so that a preset that differs from its parent in one training argument says only that one."""

import shlex
from importlib import resources

import yaml


def load_table(kind: str) -> dict:
    """`kind`.yaml as it is: the presets, and the shared fields they draw on (names starting with "_")."""
    return yaml.safe_load(resources.files("lengthgen.presets").joinpath(f"{kind}.yaml").read_text())


def flags(command_line: str) -> dict[str, list[str]]:
    """`--a 1 --b --c x y` as {"--a": ["1"], "--b": [], "--c": ["x", "y"]}, in order."""
    parsed = {}
    for token in shlex.split(command_line):
        if token.startswith("--"):
            parsed[token] = values = []
        elif not parsed:
            raise ValueError(f"{command_line!r}: {token!r} comes before any --flag.")
        else:
            values.append(token)
    return parsed


def changed_training(training: str, changes: str) -> str:
    """`training` with each flag of `changes` given its new values, or added at the end."""
    merged = {**flags(training), **flags(changes)}
    return shlex.join(token for flag, values in merged.items() for token in (flag, *values))


def load_presets(kind: str) -> dict[str, dict]:
    """The presets of `kind` ("reproduction", "leaderboard" or "study"), in file order, `extends` and `training_changes`
    resolved."""
    presets = {name: fields for name, fields in load_table(kind).items() if not name.startswith("_")}

    def resolved(name: str, seen: tuple = ()) -> dict:
        if name in seen or name not in presets:
            raise ValueError(f"{kind}.yaml: preset {seen[-1]!r} extends {name!r}, which is "
                             + ("itself, in a cycle." if name in seen else "not in the table."))
        fields = dict(presets[name])
        parent = fields.pop("extends", None)
        changes = fields.pop("training_changes", None)
        if parent:
            fields = {**resolved(parent, (*seen, name)), **fields}
        if changes:
            if "training" not in fields:
                raise ValueError(f"{kind}.yaml: preset {name!r} has training_changes but no training to change.")
            try:
                fields["training"] = changed_training(fields["training"], changes)
            except ValueError as error:
                raise ValueError(f"{kind}.yaml: preset {name!r}: {error}") from None
        return fields

    return {name: resolved(name) for name in presets}
