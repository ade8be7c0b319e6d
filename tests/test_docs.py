"""The documentation site builds offline with `mkdocs build --strict` (no broken link, no API object that cannot be
found, no page missing from the nav), and it has what the README promises: a guide per model, per task family and
per tool, an API reference page per package, and the results pages in the nav. The README stays short."""

import pathlib
import subprocess
import sys

import pytest

REPO_ROOT = pathlib.Path(__file__).resolve().parents[1]

MODEL_PAGES = ["models/ibert.md", "models/ndr.md", "models/universal-transformer.md", "models/lstm.md",
               "models/memory-rnn.md", "models/recurrence.md", "models/position-transformer.md"]
TASK_PAGES = ["tasks/index.md", "tasks/ibert-tasks.md", "tasks/ndr-tasks.md", "tasks/chomsky-hierarchy.md",
              "tasks/subject-verb-agreement.md", "tasks/long-documents.md"]
TOOL_PAGES = ["tools/training.md", "tools/many-gpus.md", "tools/reproduction.md", "tools/leaderboard.md",
              "tools/release.md", "tools/space-app.md", "tools/benchmarks.md"]
# one API page per package, and an object each page must have rendered from the docstrings
API_PAGES = {
    "api/modeling.md": ["IBertConfig", "NDRConfig", "UniversalTransformerConfig", "LSTMClassifierConfig",
                        "GPT2WithRecurrence", "CausalLMWithRecurrence", "RobertaWithRecurrenceForQuestionAnswering"],
    "api/data.md": ["NSPInductive", "scores_by_difficulty", "export"],
    "api/training.md": ["ExperimentSpec", "run_experiment", "ExperimentResult"],
    "api/reproduction.md": ["reproduce"],
    "api/leaderboard.md": ["run_grid"],
    "api/release.md": ["verify"],
    "api/plots.md": ["plot_accuracy"],
    "api/presets.md": ["load_presets"],
    "api/cli.md": ["UsageError"],
}


def nav_pages(nav) -> list[str]:
    """The page paths of a nav, flattened."""
    pages = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        if isinstance(value, list):
            pages += nav_pages(value)
        else:
            pages.append(value)
    return pages


def built_page(site: pathlib.Path, page: str) -> pathlib.Path:
    """The HTML file MkDocs writes for docs page `page` (directory URLs: a/b.md -> a/b/index.html)."""
    stem = page[: -len(".md")]
    return site / ("index.html" if stem == "index" else stem.removesuffix("/index") + "/index.html")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings is not installed: pip install -e '.[docs]'")
    pytest.importorskip("material", reason="mkdocs-material is not installed: pip install -e '.[docs]'")
    site = tmp_path_factory.mktemp("docs") / "site"
    build = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(site)], cwd=REPO_ROOT,
                           capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, f"mkdocs build --strict failed:\n{build.stdout}\n{build.stderr}"
    return site


@pytest.fixture(scope="module")
def nav():
    pytest.importorskip("mkdocs", reason="mkdocs is not installed: pip install -e '.[docs]'")
    from mkdocs.config import load_config

    return nav_pages(load_config(str(REPO_ROOT / "mkdocs.yml")).nav)


@pytest.mark.parametrize(
    "page", MODEL_PAGES + TASK_PAGES + TOOL_PAGES + ["index.md", "getting-started.md", "design.md"]
)
def test_every_guide_is_in_the_nav_and_built(site, nav, page):
    assert page in nav, f"{page} is not in mkdocs.yml's nav"
    assert built_page(site, page).is_file(), f"{page} was not built"


@pytest.mark.parametrize("page", sorted(API_PAGES))
def test_every_package_has_an_api_page_rendered_from_its_docstrings(site, nav, page):
    assert page in nav, f"{page} is not in mkdocs.yml's nav"
    html = built_page(site, page).read_text()
    assert "doc doc-object" in html, f"{page} rendered no API object"
    for name in API_PAGES[page]:
        assert f"{name}</code>" in html or f">{name}<" in html, f"{page} does not document {name}"


def test_the_results_and_reports_pages_are_in_the_nav(nav):
    assert "results/index.md" in nav
    assert "reports/index.md" in nav


def test_the_readme_starts_and_the_site_goes_deep():
    readme = (REPO_ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 250, "README.md is longer than 250 lines: move the depth to docs/"
    assert 'mkdocs serve' in readme


def test_shell_commands_in_docstrings_keep_their_line_continuations():
    """A command written over several lines in a docstring (`--help` prints the module's) ends its lines with a
    backslash; in a string that is not raw, a lone backslash before the newline would join the lines instead."""
    import ast
    import io
    import tokenize

    joined = []
    for path in sorted(REPO_ROOT.glob("**/*.py")):
        if {"site", ".git", "build"} & set(path.relative_to(REPO_ROOT).parts):
            continue
        for token in tokenize.generate_tokens(io.StringIO(path.read_text()).readline):
            if token.type != tokenize.STRING or "\\\n" not in token.string:
                continue
            if "f" not in token.string[:token.string.index(token.string[-1])].lower():  # f-strings: not literals
                if ast.literal_eval(token.string).count("\\\n") < token.string.count("\\\n"):
                    joined.append(f"{path.relative_to(REPO_ROOT)}:{token.start[0]}")
    assert not joined, f"write \\\\ at the end of a continued command line in: {', '.join(joined)}"
