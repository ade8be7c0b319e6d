import os
import re

from lengthgen.data.ctl import ctl_tables


def quick_start_blocks(repo_root) -> list[str]:
    readme = (repo_root / "README.md").read_text()
    section = readme.split("## Quick start\n", 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return re.findall(r"```python\n(.*?)```", section, re.S)


def test_readme_quick_start_solves_problems_past_the_training_range(repo_root, monkeypatch):
    """The first block runs as written from the repository root, with the shipped checkpoints, and gets right a
    14-digit reversal (trained on 2-12) and an 8-application CTL problem (trained on 1-5)."""
    monkeypatch.chdir(repo_root)
    namespace = {}
    exec(compile(quick_start_blocks(repo_root)[0], "README.md", "exec"), namespace)
    assert namespace["restored"] == namespace["number"][::-1]
    tables, symbol = ctl_tables(8, 9, seed=0), 0b101  # the builder's tables; backward: the last function first
    for function in reversed("b a d c e f g h".split()):
        symbol = tables["abcdefghi".index(function)][symbol]
    assert namespace["answer"] == format(symbol, "03b")


def test_readme_model_from_a_config_runs(repo_root, tmp_path, monkeypatch):
    """The second block runs as written (from a folder holding hub_configs/)."""
    os.symlink(repo_root / "hub_configs", tmp_path / "hub_configs")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(quick_start_blocks(repo_root)[1], "README.md", "exec"), namespace)
    assert namespace["logits"].shape[:2] == namespace["batch"]["input_ids"].shape
    assert (tmp_path / "my-ibert" / "modeling_ibert.py").is_file()


def test_ci_runs_the_readme_test_command(repo_root):
    readme = (repo_root / "README.md").read_text()
    command = re.search(r"<!-- test-command -->\n```bash\n(.*?)\n```", readme, re.S).group(1)
    assert "pytest" in command and "torch==2.13.0" in command
    assert "<!-- test-command -->" in (repo_root / ".ci" / "run").read_text()


def test_readme_links_within_the_page_reach_a_heading(repo_root):
    """Every `(#anchor)` link of README.md (its contents list among them) names a heading, anchored as GitHub anchors
    them: lower case, punctuation other than - and _ dropped, spaces turned into hyphens; every heading is listed."""
    readme = (repo_root / "README.md").read_text()
    headings = re.findall(r"^##+ (.*)$", readme, re.M)
    anchors = {re.sub(r"[^\w\- ]", "", title.lower()).replace(" ", "-") for title in headings}
    links = re.findall(r"\]\(#([^)]*)\)", readme)
    assert set(links) <= anchors, set(links) - anchors
    assert anchors <= set(links)  # the contents list names every section
