import os
import re


def test_readme_quick_start_runs(repo_root, tmp_path, monkeypatch):
    """The README's first Python block runs as written (from a folder holding hub_configs/)."""
    readme = (repo_root / "README.md").read_text()
    block = re.search(r"## Quick start\n\n```python\n(.*?)```", readme, re.S).group(1)
    os.symlink(repo_root / "hub_configs", tmp_path / "hub_configs")
    monkeypatch.chdir(tmp_path)
    namespace = {}
    exec(compile(block, "README.md", "exec"), namespace)
    assert namespace["logits"].shape[:2] == namespace["batch"]["input_ids"].shape
    assert (tmp_path / "my-ibert" / "modeling_ibert.py").is_file()


def test_ci_runs_the_readme_test_command(repo_root):
    readme = (repo_root / "README.md").read_text()
    command = re.search(r"<!-- test-command -->\n```bash\n(.*?)\n```", readme, re.S).group(1)
    assert "pytest" in command and "torch==2.13.0" in command
    assert "<!-- test-command -->" in (repo_root / ".ci" / "run").read_text()
