"""The layering of docs/design.md, checked on the source: which package may import which, no sys.path edits (in the
tests either), no script importing a script, no package starting a script of this repository as a process, no code in
a package's __init__.py beyond imports, __all__ and registration."""

import ast
import os

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# package -> the lengthgen packages it may import (docs/design.md); each may import itself
ALLOWED = {
    "cli": set(),
    "presets": set(),
    "modeling": set(),
    "plots": set(),
    "data": {"cli"},
    "training": {"modeling", "data", "presets", "cli"},
    "release": {"data", "training", "presets", "cli"},
    "leaderboard": {"modeling", "data", "training", "presets", "plots", "cli"},
    "reproduction": {"modeling", "data", "training", "presets", "plots", "cli"},
    "commands": {"modeling", "data", "training", "presets", "plots", "release", "leaderboard", "reproduction", "cli"},
}
SCRIPT_FOLDERS = ("examples", "benchmarks")


def python_files(folder):
    for root, _, files in os.walk(os.path.join(REPO, folder)):
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.join(root, name)


def imports(path):
    """(module, level) of every import statement in the file."""
    tree = ast.parse(open(path).read(), path)
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            yield from ((alias.name, 0) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            yield node.module or "", node.level


def test_the_packages_are_the_ones_the_layering_names():
    with open(os.path.join(REPO, "pyproject.toml")) as f:
        declared = {line.split('"')[1].split(".")[1] for line in f.read().split("package-dir = {")[1].split("}")[0]
                    .split(",")}
    assert declared == set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_imports_only_the_packages_below_it(package):
    wrong = []
    for path in python_files(package):
        for module, level in imports(path):
            if level > 1:
                wrong.append(
                    f"{os.path.relpath(path, REPO)}: relative import out of its package ({'.' * level}{module})"
                )
            elif module.startswith("lengthgen."):
                used = module.split(".")[1]
                if used != package and used not in ALLOWED[package]:
                    wrong.append(f"{os.path.relpath(path, REPO)} imports lengthgen.{used}")
    assert not wrong, "\n".join(wrong)


def test_no_sys_path_edits_and_no_script_imports_a_script():
    scripts = {os.path.splitext(os.path.basename(p))[0] for folder in SCRIPT_FOLDERS for p in python_files(folder)}
    wrong = []
    for folder in (*ALLOWED, *SCRIPT_FOLDERS):
        for path in python_files(folder):
            if "sys.path" in open(path).read():
                wrong.append(f"{os.path.relpath(path, REPO)} edits sys.path")
            wrong += [f"{os.path.relpath(path, REPO)} imports the script {module}"
                      for module, level in imports(path) if level == 0 and module.split(".")[0] in scripts]
    assert not wrong, "\n".join(wrong)


def test_no_test_puts_a_folder_on_sys_path():
    """Tests import the library, and load a script from its file when they must (importlib), never via sys.path."""
    wrong = [os.path.relpath(path, REPO) for path in python_files("tests")
             if any(f"sys.path.{verb}(" in open(path).read() for verb in ("insert", "append"))]
    assert not wrong, wrong


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_a_package_runs_no_script_of_this_repository_as_a_process(package):
    """A package calls the library, not a script in a child process: `subprocess` only runs system programs (the
    King James Bible reader of lengthgen.data.kjv)."""
    users = [os.path.relpath(path, REPO) for path in python_files(package)
             if any(module == "subprocess" for module, _ in imports(path))]
    assert users == (["data/kjv.py"] if package == "data" else [])


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_init_holds_only_imports_all_and_registration(package):
    tree = ast.parse(open(os.path.join(REPO, package, "__init__.py")).read())
    for node in tree.body:
        docstring = isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        exported = (
            isinstance(node, ast.Assign) and [t.id for t in node.targets if isinstance(t, ast.Name)] == ["__all__"]
        )
        # registration with the Auto classes: a loop of register calls (lengthgen.modeling only)
        registration = package == "modeling" and isinstance(node, ast.For) and "register" in ast.dump(node)
        assert isinstance(node, (ast.Import, ast.ImportFrom)) or docstring or exported or registration, (
            f"{package}/__init__.py line {node.lineno}: {ast.unparse(node).splitlines()[0]}"
        )
