"""Every command-line entry point answers a mistake in one line: the argument, path or value named, exit status 2,
no traceback (`--debug` brings it back). In-process through each command's own main, plus one run per script as a
user runs it (`python examples/X.py ...`) to check its `__main__` goes through the same path."""

import importlib.util
import os
import subprocess
import sys

import pytest

from lengthgen.cli import run_command

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script(path):
    """The module of a script file (examples/, benchmarks/) without putting its folder on sys.path."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"script_{name}", os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def error_line(capsys, main, argv, prog=None):
    """Run `main(argv)` (through run_command when `prog` is given): it must exit with status 2 and print no traceback;
    returns the last stderr line (argparse's own errors follow a usage line; ours are the only line)."""
    with pytest.raises(SystemExit) as stop:
        run_command(main, prog, argv) if prog else main(argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err and "Traceback" not in err, err
    return err.splitlines()[-1]


def test_check_positive_names_the_first_flag_out_of_range():
    from lengthgen.cli import UsageError, check_positive

    check_positive({"--seeds": 1, "--threads": None, "--learning-rate": 1e-9})  # None: not given
    with pytest.raises(UsageError, match=r"^--threads must be at least 1, got 0\.$"):
        check_positive({"--seeds": 3, "--threads": 0, "--learning-rate": -1.0})
    with pytest.raises(UsageError, match=r"^--learning-rate must be positive, got 0\.0\.$"):
        check_positive({"--seeds": 3, "--learning-rate": 0.0})
    with pytest.raises(UsageError, match=r"^--num-steps must be at least 1, got -2\.$"):
        check_positive({"--num-steps": -2})


def test_lengthgen_data(capsys, tmp_path):
    from lengthgen.data.export import main

    export = ["export", "nsp_inductive", "--output-dir", str(tmp_path)]
    line = error_line(capsys, main, [*export, "--param", "train_size=abc"])
    assert "train_size" in line and "integer" in line and "'abc'" in line
    line = error_line(capsys, main, [*export, "--param", "nosuchparam=1"])
    assert "'nosuchparam'" in line and "train_size, validation_size" in line
    line = error_line(capsys, main, [*export, "--config", "sideways"])
    assert "'sideways'" in line and "add, copy, reverse" in line
    assert "at least 0" in error_line(capsys, main, [*export, "--param", "train_size=-5"])
    assert "list of 2 integers" in error_line(capsys, main, [*export, "--param", "train_difficulties=[3]"])
    assert not os.listdir(tmp_path)  # nothing generated


def test_lengthgen_leaderboard(capsys, tmp_path):
    from lengthgen.leaderboard import main

    base = ["--models", "lstm", "--tasks", "chomsky_hierarchy/parity_check", "--output-dir", str(tmp_path)]
    assert "--max-steps must be at least 1, got -1" in error_line(capsys, main, [*base, "--max-steps", "-1"])
    assert "--seeds must be at least 1" in error_line(capsys, main, [*base, "--seeds", "0"])
    line = error_line(capsys, main, ["--models", "transformer-xl-9000", *base[2:]])
    assert "Unknown model 'transformer-xl-9000'" in line and "ibert, ndr, bert" in line
    line = error_line(capsys, main, [*base[:2], "--tasks", "ctl/sideways", *base[4:]])
    assert "Unknown task 'ctl/sideways'" in line
    assert "BUILDER.KEY=VALUE" in error_line(capsys, main, [*base, "--param", "nope.x=1"])
    line = error_line(capsys, main, ["--models", f"hf:{tmp_path}/missing", *base[2:]])
    assert "no such file or directory" in line and "missing" in line
    assert not os.path.exists(tmp_path / "cells")


def test_lengthgen_release(capsys, tmp_path):
    from lengthgen.release import main

    assert "is not a directory" in error_line(capsys, main, [str(tmp_path / "nosuch"), "--repo-id", "me/x"])
    assert "ORG/NAME" in error_line(capsys, main, [os.path.join(REPO, "checkpoints", "ibert-nsp-copy"),
                                                   "--repo-id", "noslash", "--push"])
    line = error_line(capsys, main, [os.path.join(REPO, "checkpoints", "ibert-nsp-copy"), "--repo-id", "me/x"])
    assert "already a release folder" in line and "--push" in line
    assert "holds no trained model" in error_line(capsys, main, [str(tmp_path), "--repo-id", "me/x"])


def test_run_mlm(capsys, tmp_path):
    main = script("examples/run_mlm.py").main
    base = ["--output_dir", str(tmp_path / "out"), "--do_train", "--dataset_name", "nsp_inductive"]
    line = error_line(capsys, main, [*base, "--config_name", "hub_configs/nosuch"], "run_mlm.py")
    assert line == "run_mlm.py: error: --config_name: no such file or directory: hub_configs/nosuch (--debug shows the traceback)"
    line = error_line(capsys, main, [*base, "--config_name", "hub_configs/ibert-nsp", "--dataset_param", "nosuch=1"],
                      "run_mlm.py")
    assert "no generating parameter 'nosuch'" in line
    line = error_line(capsys, main, [*base, "--config_name", "hub_configs/ibert-nsp", "--dataset_config_name", "sideways"],
                      "run_mlm.py")
    assert "Unknown config 'sideways' of nsp_inductive" in line


def test_run_classification(capsys, tmp_path):
    main = script("examples/run_classification.py").main
    base = ["--output_dir", str(tmp_path / "out"), "--do_train", "--dataset_name", "ctl"]
    line = error_line(capsys, main, [*base, "--model_name_or_path", "./missing-model"], "run_classification.py")
    assert "--model_name_or_path: no such file or directory: ./missing-model" in line
    line = error_line(capsys, main, [*base, "--config_name", "hub_configs/ndr-ctl", "--dataset_param", "train_size=abc"],
                      "run_classification.py")
    assert "train_size of ctl takes an integer" in line
    line = error_line(capsys, main, [*base, "--config_name", "hub_configs/ndr-ctl", "--dataset_config_name", "up"],
                      "run_classification.py")
    assert "Unknown config 'up' of ctl" in line and "backward" in line


def test_run_clm_recurrent(capsys, tmp_path):
    main = script("examples/run_clm_recurrent.py").main
    base = ["--output_dir", str(tmp_path / "out"), "--do_eval"]
    line = error_line(capsys, main, [*base, "--corpus", "enwik8"], "run_clm_recurrent.py")
    assert "--corpus must be one of pg19, wikitext103, kjv, got 'enwik8'" in line
    line = error_line(capsys, main, [*base, "--corpus", "pg19", "--validation_file", str(tmp_path / "no.txt")],
                      "run_clm_recurrent.py")
    assert "--validation_file: no such file or directory" in line
    line = error_line(capsys, main, [*base, "--corpus", "pg19", "--model_name_or_path", "./no-gpt2"],
                      "run_clm_recurrent.py")
    assert "--model_name_or_path: no such file or directory: ./no-gpt2" in line


def test_run_qa_recurrent(capsys, tmp_path):
    main = script("examples/run_qa_recurrent.py").main
    base = ["--output_dir", str(tmp_path / "out"), "--do_eval"]
    assert "--doc_stride must be in [0, --window_size 64)" in error_line(
        capsys, main, [*base, "--window_size", "64", "--doc_stride", "64"], "run_qa_recurrent.py")
    assert "--validation_file: no such file or directory" in error_line(
        capsys, main, [*base, "--validation_file", str(tmp_path / "dev.json")], "run_qa_recurrent.py")
    assert "--max_answer_length must be at least 1" in error_line(
        capsys, main, [*base, "--max_answer_length", "0"], "run_qa_recurrent.py")


def test_main_job(capsys, tmp_path):
    main = script("examples/nsp_length_generalization.py").main
    out = ["--output-dir", str(tmp_path)]
    assert "--train-digits takes MIN MAX with 1 <= MIN <= MAX, got 6 2" in error_line(
        capsys, main, [*out, "--train-digits", "6", "2"], "nsp_length_generalization.py")
    assert "above the training range (MIN > 6" in error_line(
        capsys, main, [*out, "--validation-digits", "3", "9"], "nsp_length_generalization.py")
    assert "--train-size must be at least 1, got 0" in error_line(
        capsys, main, [*out, "--train-size", "0"], "nsp_length_generalization.py")
    assert "invalid choice: 'sideways'" in error_line(capsys, main, [*out, "--task", "sideways"],
                                                      "nsp_length_generalization.py")
    assert not os.listdir(tmp_path)


def test_plot_ndr(capsys, tmp_path):
    main = script("examples/plot_ndr.py").main
    model = os.path.join(REPO, "checkpoints", "ndr-ctl-backward")
    line = error_line(capsys, main, ["--model_name_or_path", str(tmp_path / "missing"), "--text", "1"], "plot_ndr.py")
    assert "--model_name_or_path: no such file or directory" in line and "Repo id" not in line
    assert "--num_steps must be at least 1" in error_line(
        capsys, main, ["--model_name_or_path", model, "--text", "101 a", "--num_steps", "0"], "plot_ndr.py")
    assert "--text is empty" in error_line(capsys, main, ["--model_name_or_path", model, "--text", " "], "plot_ndr.py")


def test_reproduce(capsys, tmp_path):
    main = script("benchmarks/reproduce.py").main
    assert "--threads must be at least 1, got 0" in error_line(capsys, main, ["ndr-ctl-backward", "--threads", "0"],
                                                                "reproduce.py")
    assert "--unpack-from: no such directory" in error_line(
        capsys, main, ["ndr-ctl-backward", "--unpack-from", str(tmp_path / "none")], "reproduce.py")
    assert "--max-train-seconds must be positive" in error_line(
        capsys, main, ["ndr-ctl-backward", "--max-train-seconds", "-1"], "reproduce.py")
    line = error_line(capsys, main, ["ndr-ctl-sideways"], "reproduce.py")
    assert "unknown preset(s) ['ndr-ctl-sideways']" in line and "ndr-ctl-backward" in line


@pytest.mark.parametrize("command", [
    ["examples/run_mlm.py", "--output_dir", "x", "--config_name", "hub_configs/nosuch"],
    ["examples/run_classification.py", "--output_dir", "x", "--model_name_or_path", "./missing-model"],
    ["examples/run_clm_recurrent.py", "--output_dir", "x", "--corpus", "enwik8"],
    ["examples/run_qa_recurrent.py", "--output_dir", "x", "--max_answer_length", "0"],
    ["examples/nsp_length_generalization.py", "--train-digits", "6", "2"],
    ["examples/plot_ndr.py", "--model_name_or_path", "./missing-model", "--text", "1"],
    ["benchmarks/reproduce.py", "ndr-ctl-backward", "--threads", "0"],
])
def test_a_script_run_as_a_user_runs_it_answers_in_one_line(command, tmp_path):
    result = subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    assert result.stderr.startswith(os.path.basename(command[0]) + ": error: ")


def test_debug_brings_the_traceback_back():
    command = [sys.executable, "examples/plot_ndr.py", "--model_name_or_path", "./missing-model", "--text", "1"]
    assert "Traceback" in subprocess.run([*command, "--debug"], cwd=REPO, capture_output=True, text=True).stderr
    env = {**os.environ, "LENGTHGEN_DEBUG": "1"}
    assert "Traceback" in subprocess.run(command, cwd=REPO, capture_output=True, text=True, env=env).stderr
