"""lengthgen.training.scripts: an example script run as a process, and the end-of-training upload the scripts share."""

import json
import os

import pytest
from huggingface_hub import HfApi

from lengthgen.training.scripts import run_script, upload_output_dir


def test_upload_sends_the_folder_without_checkpoints(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, **kw: calls.append(kw))
    upload_output_dir("me/ndr", str(tmp_path), "run_classification.py")
    assert calls == [{"repo_id": "me/ndr", "folder_path": str(tmp_path), "ignore_patterns": ["_*", "checkpoint-*"],
                      "commit_message": "lengthgen run_classification.py: end of training"}]


def test_run_script_returns_what_the_script_wrote_and_logs_its_output(tmp_path):
    script = tmp_path / "script.py"
    script.write_text("import json, os, sys\n"
                      "out = sys.argv[sys.argv.index('--output_dir') + 1]\n"
                      "print('trainer says hello')\n"
                      "print(os.environ['OMP_NUM_THREADS'], file=sys.stderr)\n"
                      "json.dump({'eval_accuracy': 0.5}, open(os.path.join(out, 'all_results.json'), 'w'))\n")
    log = tmp_path / "run.log"
    assert run_script(str(script), ["--output_dir", str(tmp_path)], str(log), threads=1) == {"eval_accuracy": 0.5}
    assert "trainer says hello" in log.read_text()
    script.write_text("import sys; sys.exit(3)\n")
    with pytest.raises(ChildProcessError, match=f"exit status 3; its output is in {log}"):
        run_script(str(script), ["--output_dir", str(tmp_path)], str(log))
    assert json.loads((tmp_path / "all_results.json").read_text()) == {"eval_accuracy": 0.5}
    assert os.path.getsize(log) > 0
