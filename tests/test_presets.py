"""The preset tables' `extends` and `training_changes` (presets/loader.py)."""

import pytest

from lengthgen.presets import load_presets
from lengthgen.presets import loader


def with_table(monkeypatch, table: dict):
    monkeypatch.setattr(loader, "load_table", lambda kind: table)


def test_training_changes_replace_a_flags_values_in_place_and_add_new_flags_at_the_end():
    assert loader.changed_training("--a 1 --b --c x y", "--c z --d 4") == "--a 1 --b --c z --d 4"


def test_training_changes_apply_at_every_level_of_extends(monkeypatch):
    """A grandchild keeps its parent's change and adds its own; fields other than training are inherited as before."""
    with_table(monkeypatch, {
        "_shared": "ignored",
        "base": {"training": "--lr 1e-3 --steps 100", "width": 64},
        "longer": {"extends": "base", "training_changes": "--steps 200 --binned"},
        "faster": {"extends": "longer", "training_changes": "--lr 3e-3", "width": 128},
    })
    presets = load_presets("any")
    assert list(presets) == ["base", "longer", "faster"]
    assert presets["longer"] == {"training": "--lr 1e-3 --steps 200 --binned", "width": 64}
    assert presets["faster"] == {"training": "--lr 3e-3 --steps 200 --binned", "width": 128}


def test_a_preset_that_sets_training_replaces_its_parents_whole_command_line(monkeypatch):
    with_table(monkeypatch, {"base": {"training": "--lr 1e-3 --warmup 10"},
                             "paper": {"extends": "base", "training": "--lr 3e-5"}})
    assert load_presets("any")["paper"]["training"] == "--lr 3e-5"


@pytest.mark.parametrize("table, message", [
    ({"a": {"training_changes": "--steps 5"}}, "preset 'a' has training_changes but no training"),
    ({"a": {"training": "100 --steps"}}, "'100' comes before any --flag"),
    ({"a": {"extends": "b"}}, "preset 'a' extends 'b', which is not in the table"),
])
def test_a_table_that_cannot_be_read_says_which_preset_and_why(monkeypatch, table, message):
    with_table(monkeypatch, table)
    table.setdefault("z", {"extends": "a", "training_changes": "--x 1"})  # reading "a" through a child, as a run does
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        load_presets("any")


def test_the_8_step_ctl_preset_is_its_parent_with_num_steps_14_added():
    """The real table: what `training_changes` says is all that differs from the parent's arguments."""
    presets = load_presets("reproduction")
    parent, child = presets["ndr-ctl-backward-128"]["training"], presets["ndr-ctl-backward-128-8steps"]["training"]
    assert loader.flags(child) == {**loader.flags(parent), "--num_steps": ["14"]}
