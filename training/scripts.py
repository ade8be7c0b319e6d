"""An example script (`examples/run_*.py`) run as its own process, as a user runs it, and the metrics it wrote.

The main job, the reproduction command and the benchmarks drive the example scripts this way instead of importing
them: a script stays a script, and what they print (Trainer's dictionaries, the metrics) goes to a log file while
the progress bar (stderr) stays on the terminal.
"""

import json
import os
import subprocess
import sys


def run_script(script: str, argv: list[str], log_path: str, threads: int | None = None, verbose: bool = False) -> dict:
    """Run `python script *argv` with its stdout appended to `log_path` (on the terminal with `verbose`) and return
    the `all_results.json` it wrote in its `--output_dir`. `threads` sets the child's OMP_NUM_THREADS (two runs side
    by side on two cores: 1 each). A failed run raises ChildProcessError (an OSError: the commands report it in one
    line) naming the log."""
    env = dict(os.environ)
    if threads:
        env["OMP_NUM_THREADS"] = str(threads)
    env.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    os.makedirs(os.path.dirname(os.path.abspath(log_path)), exist_ok=True)
    with open(log_path, "a") as log:
        log.write(f"$ python {script} {' '.join(argv)}\n")
        log.flush()
        returncode = subprocess.run([sys.executable, script, *argv], stdout=None if verbose else log, env=env).returncode
    if returncode != 0:
        raise ChildProcessError(f"{script} failed with exit status {returncode}"
                           + ("." if verbose else f"; its output is in {log_path}."))
    output_dir = argv[argv.index("--output_dir") + 1]
    with open(os.path.join(output_dir, "all_results.json")) as f:
        return json.load(f)


def upload_output_dir(repo_id: str, output_dir: str, script: str):
    """Upload an example script's output folder as it stands at the end of training (the model, its code, the
    tokenizer and the card the script wrote; Trainer.push_to_hub would write its own card over it), without the
    checkpoints."""
    from huggingface_hub import HfApi

    HfApi().upload_folder(repo_id=repo_id, folder_path=output_dir, commit_message=f"lengthgen {script}: end of training",
                          ignore_patterns=["_*", "checkpoint-*"])
