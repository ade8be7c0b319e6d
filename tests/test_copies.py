"""utils/check_copies.py: the code copied between the model folders (marked `# Copied from lengthgen...`) equals its
source, a copy or a source edited alone is caught and `--fix` rewrites the copies, and a marker naming nothing fails.
The tool runs as a script, on the repository and on scratch copies of its code."""

import os
import shutil
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SOURCE = "lengthgen.modeling.ibert.modeling_ibert._values_are_free"
# the copies of SOURCE, one per model folder (the recurrence module's under another name)
COPIES = [
    "modeling/lstm/modeling_lstm.py",
    "modeling/ndr/modeling_ndr.py",
    "modeling/recurrence/recurrence_module.py",
    "modeling/universal_transformer/modeling_universal_transformer.py",
]
ENV_CHECK = 'os.environ.get("LENGTHGEN_CHECK_INPUTS", "") == "1"'


def check_copies(root, *args):
    return subprocess.run([sys.executable, "utils/check_copies.py", "--root", str(root), *args], cwd=root,
                          capture_output=True, text=True, timeout=60)


def read(root, path):
    with open(os.path.join(root, path)) as file:
        return file.read()


def write(root, path, text):
    with open(os.path.join(root, path), "w") as file:
        file.write(text)


@pytest.fixture
def tree(tmp_path):
    """A scratch copy of what the check reads: modeling/'s code, the tool, and each checkpoint folder's code files as
    the library has them (no weights, tokenizers or cards)."""
    def not_code(folder, names):
        keep = lambda name: name.endswith(".py") or os.path.isdir(os.path.join(folder, name))  # noqa: E731
        return [name for name in names if name == "__pycache__" or not keep(name)]

    shutil.copytree(os.path.join(REPO, "modeling"), tmp_path / "modeling", ignore=not_code)
    (tmp_path / "utils").mkdir()
    shutil.copy(os.path.join(REPO, "utils", "check_copies.py"), tmp_path / "utils")
    library = {name: os.path.join(folder, name)
               for folder, _, names in os.walk(tmp_path / "modeling") for name in names}
    for folder in os.listdir(os.path.join(REPO, "checkpoints")):
        shipped = [n for n in os.listdir(os.path.join(REPO, "checkpoints", folder)) if n.endswith(".py")]
        (tmp_path / "checkpoints" / folder).mkdir(parents=True)
        for name in shipped:
            shutil.copy(library[name], tmp_path / "checkpoints" / folder / name)
    return tmp_path


def test_every_copy_in_the_repository_matches_its_source():
    result = check_copies(REPO)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "marked copies" in result.stdout


def test_every_copy_of_values_are_free_is_marked():
    for path in COPIES:
        assert f"# Copied from {SOURCE}" in read(REPO, path), path


def test_an_edited_copy_fails_and_fix_restores_it(tree):
    path = "modeling/ndr/modeling_ndr.py"
    original = read(tree, path)
    write(tree, path, original.replace(ENV_CHECK, ENV_CHECK.replace('"1"', '"yes"'), 1))

    result = check_copies(tree)
    assert result.returncode == 1
    drifted = [line for line in result.stdout.splitlines() if line.startswith(f"{path}:")]
    assert len(drifted) == 1 and SOURCE in drifted[0], result.stdout
    assert "+    return tensor.device.type == \"cpu\" or " + ENV_CHECK.replace('"1"', '"yes"') in result.stdout
    assert "checkpoints/ndr-ctl-forward/modeling_ndr.py: differs" in result.stdout  # what trust_remote_code runs

    fixed = check_copies(tree, "--fix")
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert read(tree, path) == original
    assert read(tree, "checkpoints/ndr-ctl-forward/modeling_ndr.py") == original
    assert check_copies(tree).returncode == 0


def test_an_edited_source_fails_every_copy_and_fix_carries_the_change(tree):
    source = "modeling/ibert/modeling_ibert.py"
    changed = ENV_CHECK.replace('"1"', '"true"')
    write(tree, source, read(tree, source).replace(ENV_CHECK, changed, 1))

    result = check_copies(tree)
    assert result.returncode == 1
    for path in COPIES:
        assert any(line.startswith(f"{path}:") and SOURCE in line for line in result.stdout.splitlines()), path

    assert check_copies(tree, "--fix").returncode == 0  # 0: the check after the rewrite passed
    for path in COPIES:
        assert changed in read(tree, path) and ENV_CHECK not in read(tree, path), path
    # the recurrence module's copy is named values_are_free: the marker's `with` replacement is applied
    assert "\ndef values_are_free(tensor" in read(tree, "modeling/recurrence/recurrence_module.py")
    assert "def _values_are_free" not in read(tree, "modeling/recurrence/recurrence_module.py")
    assert read(tree, "checkpoints/ibert-nsp-add/modeling_ibert.py") == read(tree, source)


def test_an_edited_checkpoint_file_fails_and_fix_copies_the_library_again(tree):
    shipped = "checkpoints/ibert-nsp-copy/modeling_ibert.py"
    write(tree, shipped, read(tree, shipped) + "\n# edited\n")
    result = check_copies(tree)
    assert result.returncode == 1 and f"{shipped}: differs" in result.stdout
    assert check_copies(tree, "--fix").returncode == 0
    assert read(tree, shipped) == read(tree, "modeling/ibert/modeling_ibert.py")


def test_a_marker_naming_no_source_fails(tree):
    path = "modeling/universal_transformer/modeling_universal_transformer.py"
    targets = {"_causal": "lengthgen.modeling.ibert.modeling_ibert._no_such_function",
               "timing_signal": "lengthgen.modeling.no_such_folder.modeling_x.timing_signal"}
    text = read(tree, path)
    for name, target in targets.items():
        text = text.replace(f"\ndef {name}(", f"\n# Copied from {target}\ndef {name}(", 1)
    write(tree, path, text)
    for args in ((), ("--fix",)):  # --fix cannot make a source: still status 1
        result = check_copies(tree, *args)
        assert result.returncode == 1
        for target in targets.values():
            assert any(line.startswith(f"{path}:") and target in line and "does not exist" in line
                       for line in result.stdout.splitlines()), result.stdout
