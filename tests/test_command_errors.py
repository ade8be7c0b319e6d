"""Every command answers a mistake in what the user asked for in one line (the flag, path or value named, exit
status 2, no traceback) before it loads or generates anything; any other error keeps its traceback. In-process through
each command's main, with loading made to fail loudly, plus runs as a user makes them (`lengthgen ...`,
`python examples/X.py ...`) to check their `__main__` goes through the same path."""

import importlib.util
import json
import os
import subprocess
import sys

import pytest
import transformers

import lengthgen.data.export
from lengthgen.cli import UsageError, check_positive, run_command
from lengthgen.commands import data, leaderboard, release, reproduce, train, verify

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def script(path):
    """The module of a script file (examples/, benchmarks/) without putting its folder on sys.path."""
    name = os.path.splitext(os.path.basename(path))[0]
    spec = importlib.util.spec_from_file_location(f"script_{name}", os.path.join(REPO, path))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture
def nothing_loads(monkeypatch):
    """Generating a dataset or loading a config, tokenizer or model fails the test: a mistake must be named first."""
    def loaded(*args, **kwargs):
        raise AssertionError("something was loaded before the mistake was named")

    monkeypatch.setattr(lengthgen.data.export, "build", loaded)
    for auto in (transformers.AutoConfig, transformers.AutoTokenizer, transformers.AutoModelForCausalLM,
                 transformers.AutoModelForMaskedLM, transformers.AutoModelForSequenceClassification):
        monkeypatch.setattr(auto, "from_pretrained", loaded)
    monkeypatch.setattr(transformers.PreTrainedModel, "from_pretrained", classmethod(loaded))


def error_line(capsys, main, argv, prog):
    """`main(argv)` through run_command: it must exit with status 2 and print one line and no traceback; returns it."""
    with pytest.raises(SystemExit) as stop:
        run_command(main, prog, argv)
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err and "Traceback" not in err, err
    assert err.count("\n") == 0, err  # argparse's own mistakes too: no usage block
    return err.splitlines()[-1]


def test_check_positive_names_the_first_flag_out_of_range():
    check_positive({"--seeds": 1, "--threads": None, "--learning_rate": 1e-9})  # None: not given
    with pytest.raises(UsageError, match=r"^--threads must be at least 1, got 0\.$"):
        check_positive({"--seeds": 3, "--threads": 0, "--learning_rate": -1.0})
    with pytest.raises(UsageError, match=r"^--learning_rate must be positive, got 0\.0\.$"):
        check_positive({"--seeds": 3, "--learning_rate": 0.0})


def test_lengthgen_train(capsys, tmp_path, nothing_loads):
    base = ["--output_dir", str(tmp_path / "out"), "--dataset_name", "ctl"]
    line = error_line(capsys, train.main, [*base, "--config_name", "hub_configs/nosuch"], "lengthgen train")
    assert line == ("lengthgen train: error: --config_name: no such file or directory: hub_configs/nosuch "
                    "(--debug shows the traceback)")
    line = error_line(capsys, train.main, [*base, "--model_name_or_path", "./missing-model"], "lengthgen train")
    assert "--model_name_or_path: no such file or directory: ./missing-model" in line
    assert "Give one of --model_name_or_path" in error_line(capsys, train.main, base, "lengthgen train")
    model = ["--model_type", "ndr"]
    line = error_line(capsys, train.main, [*base, *model, "--dataset_param", "train_size=abc"], "lengthgen train")
    assert "train_size of ctl takes an integer" in line
    line = error_line(capsys, train.main, [*base, *model, "--dataset_param", "nosuch=1"], "lengthgen train")
    assert "no generating parameter 'nosuch'" in line and "train_size" in line
    line = error_line(capsys, train.main, [*base, *model, "--dataset_config_name", "up"], "lengthgen train")
    assert "Unknown config 'up' of ctl" in line and "backward" in line
    assert "--num_steps must be at least 1, got 0" in error_line(
        capsys, train.main, [*base, *model, "--num_steps", "0"], "lengthgen train")
    assert "--head must be one of classification, masked_lm, answer_slots" in error_line(
        capsys, train.main, [*base, *model, "--head", "sideways"], "lengthgen train")
    assert "--output_dir is required" in error_line(capsys, train.main, base[2:] + model, "lengthgen train")
    assert "no such spec file: nosuch.yaml" in error_line(capsys, train.main, ["nosuch.yaml"], "lengthgen train")
    assert "Unknown preset 'ndr-sideways'" in error_line(capsys, train.main, ["ndr-sideways"], "lengthgen train")
    spec = tmp_path / "spec.yaml"
    spec.write_text("model: {model_type: ndr}\ndata: {dataset_name: ctl}\ntraining: {learning_rat: 1}\n")
    line = error_line(capsys, train.main, [str(spec)], "lengthgen train")
    assert f"{spec}: training has no field 'learning_rat' (did you mean 'learning_rate'?)" in line
    spec.write_text("model: {model_type: ndr}\ndata: {dataset_name: ctl}\ntrainin: {max_steps: 5}\n")
    line = error_line(capsys, train.main, [str(spec)], "lengthgen train")
    assert f"{spec}: unknown section 'trainin' (did you mean 'training'?)" in line  # not dropped
    spec.write_text("_budget: &budget {max_steps: 5}\nmodel: {model_type: ndr}\ndata: {dataset_name: ctl}\n"
                    "training: {<<: *budget}\n")  # a top-level holder of YAML anchors is left alone
    train.main([str(spec), "--print_spec"])
    assert "max_steps: 5" in capsys.readouterr().out
    line = error_line(capsys, train.main, [*base[:2], *model, "--dataset_name", "chomsky_hierarch"], "lengthgen train")
    assert "'chomsky_hierarch' is not a lengthgen builder (did you mean 'chomsky_hierarchy'?)" in line
    line = error_line(capsys, train.main, [*base, *model, "--do_train", "false"], "lengthgen train")
    assert "Nothing to evaluate: without training (--do_train, training.do_train in a spec, not given or false)" in line
    line = error_line(capsys, train.main, [*base, *model, "--do_predict"], "lengthgen train")
    assert "--do_predict: --do_eval scores every split but train, the test split included" in line
    line = error_line(capsys, train.main, [*base, *model, "--masked_lm_loss", "all"], "lengthgen train")
    assert "--masked_lm_loss all is a masked LM's loss; this run's head is classification" in line
    line = error_line(capsys, train.main, [*base, *model, "--lr_decay_per_epoch", "0.97", "--lr_scheduler_type",
                                           "constant"], "lengthgen train")
    assert "--lr_decay_per_epoch is its own schedule, with AdamW: it takes no --lr_scheduler_type constant" in line
    # training arguments out of range, an output folder that is a file
    assert "--per_device_train_batch_size must be at least 1, got 0" in error_line(
        capsys, train.main, [*base, *model, "--per_device_train_batch_size", "0"], "lengthgen train")
    assert "--learning_rate must not be negative, got -0.001" in error_line(
        capsys, train.main, [*base, *model, "--learning_rate", "-1e-3"], "lengthgen train")  # a value, not a flag
    assert "--max_steps must be at least 1 (or -1: train --num_train_epochs), got 0" in error_line(
        capsys, train.main, [*base, *model, "--max_steps", "0"], "lengthgen train")
    assert "--num_train_epochs must be positive, got 0.0" in error_line(
        capsys, train.main, [*base, *model, "--num_train_epochs", "0"], "lengthgen train")
    (tmp_path / "a-file").write_text("mine")
    assert f"--output_dir {tmp_path / 'a-file'} is a file, not a folder" in error_line(
        capsys, train.main, [*base[2:], *model, "--output_dir", str(tmp_path / "a-file")], "lengthgen train")
    # argparse's mistakes in one line, an unknown flag with the nearest known one
    assert ("lengthgen train: error: unrecognized arguments: --max_stepz 1 (did you mean --max_steps?); --help lists "
            "the flags.") in error_line(capsys, train.main, [*base, *model, "--max_stepz", "1"], "lengthgen train")
    assert "argument --max_steps/--max-steps: invalid int value: 'many'" in error_line(
        capsys, train.main, [*base, *model, "--max_steps", "many"], "lengthgen train")
    # transformers' own check
    assert "bf16" in error_line(capsys, train.main, [*base, *model, "--bf16"], "lengthgen train")
    assert not (tmp_path / "out").exists()


def test_lengthgen_train_names_mistakes_found_while_loading(capsys, tmp_path, monkeypatch):
    """A near-miss config field (which a config would keep unread), a config folder that is not here (read as a Hub
    id, offline), an exported folder's config that does not exist: each one line."""
    # one line: no progress bars of the tiny datasets' generation
    monkeypatch.setattr(importlib.import_module("datasets.utils.tqdm"), "are_progress_bars_disabled", lambda: True)
    out = ["--output_dir", str(tmp_path / "out")]
    ctl = ["--dataset_name", "chomsky_hierarchy", "--dataset_param", "train_size=20", "test_size=4",
           "train_lengths=[1,4]", "test_lengths=[5,6]"]
    line = error_line(capsys, train.main, [*out, *ctl, "--model_type", "ndr", "--config_overrides", "hiden_size=16"],
                      "lengthgen train")
    assert "--config_overrides: ndr has no config field 'hiden_size' (did you mean 'hidden_size'?)" in line
    # a head the model has not, a folder that is not a model's
    line = error_line(capsys, train.main, [*out, *ctl, "--model_type", "ndr", "--head", "masked_lm"],
                      "lengthgen train")
    assert "--head masked_lm: ndr has no masked-LM model; give the head it has" in line
    (tmp_path / "not-a-model").mkdir()
    (tmp_path / "not-a-model" / "config.json").write_text('{"model_type": "nosuch"}')
    line = error_line(capsys, train.main, [*out, *ctl, "--model_name_or_path", str(tmp_path / "not-a-model")],
                      "lengthgen train")
    assert f"--model_name_or_path {tmp_path / 'not-a-model'}: not a model folder" in line
    # one of lengthgen's own models reads no field its config lacks: one far from any is refused too; a value of
    # another kind than the field's is named, but an integer for a number field is one
    line = error_line(capsys, train.main, [*out, *ctl, "--model_type", "ndr", "--config_overrides", "depth=3"],
                      "lengthgen train")
    assert "--config_overrides: ndr has no config field 'depth'." in line
    line = error_line(capsys, train.main, [*out, *ctl, "--model_type", "ndr", "--config_overrides", "hidden_size=abc"],
                      "lengthgen train")
    assert "--config_overrides: hidden_size of ndr takes an integer (now 128), got 'abc'" in line
    # a value the config refuses when it is built, for a config read from a folder and for a model type's
    for source in (["--config_name", f"{REPO}/hub_configs/ibert-nsp"], ["--model_type", "inductive_bert"]):
        line = error_line(capsys, train.main, [*out, *ctl, *source, "--config_overrides", "hidden_size=66"],
                          "lengthgen train")
        assert "hidden_size (66) must be a multiple of num_attention_heads (12)" in line, line
    # a config of transformers, whose validators' errors arrive wrapped in huggingface_hub's StrictDataclassError
    (tmp_path / "llama").mkdir()
    transformers.LlamaConfig(hidden_size=32, num_attention_heads=4).save_pretrained(tmp_path / "llama")
    for source in (["--model_type", "llama"], ["--config_name", str(tmp_path / "llama")]):
        line = error_line(capsys, train.main, [*out, *ctl, *source, "--config_overrides",
                                               "hidden_size=30,num_attention_heads=4"], "lengthgen train")
        assert "The hidden size (30) is not a multiple of the number of attention heads (4)" in line, line
    monkeypatch.chdir(tmp_path)  # hub_configs/ is not here: the name reads as a Hub id, which offline cannot load
    line = error_line(capsys, train.main, [*out, *ctl, "--config_name", "hub_configs/ndr-ctl"], "lengthgen train")
    assert "--config_name hub_configs/ndr-ctl: not a folder here, and not read from the Hub" in line
    from lengthgen.data.export import export

    folder = export("chomsky_hierarchy", str(tmp_path / "data"), ["parity_check"], train_size=20, test_size=4,
                    test_lengths=(41, 42))
    line = error_line(capsys, train.main, [*out, "--model_type", "ndr", "--dataset_name", folder,
                                           "--dataset_config_name", "parity_chek"], "lengthgen train")
    assert "BuilderConfig 'parity_chek' not found. Available: ['parity_check']" in line


def test_lengthgen_reproduce(capsys, tmp_path, nothing_loads):
    main = reproduce.main
    assert "--threads must be at least 1, got 0" in error_line(capsys, main, ["ndr-ctl-backward", "--threads", "0"],
                                                                "lengthgen reproduce")
    assert "--unpack_from: no such directory" in error_line(
        capsys, main, ["ndr-ctl-backward", "--unpack_from", str(tmp_path / "none")], "lengthgen reproduce")
    assert "--max_train_seconds must be positive" in error_line(
        capsys, main, ["ndr-ctl-backward", "--max_train_seconds", "-1"], "lengthgen reproduce")
    (tmp_path / "empty").mkdir()
    assert "holds no packed checkpoint (checkpoint-N.tar.partNN); the first piece of a run goes without" in error_line(
        capsys, main, ["ndr-ctl-backward", "--unpack_from", str(tmp_path / "empty")], "lengthgen reproduce")
    assert "--results_dir: no such directory" in error_line(
        capsys, main, ["--table", "--results_dir", str(tmp_path / "none")], "lengthgen reproduce")
    line = error_line(capsys, main, ["ndr-ctl-sideways"], "lengthgen reproduce")
    assert "Unknown preset 'ndr-ctl-sideways'" in line and "ndr-ctl-backward" in line
    assert "--pack_to packs the run's last checkpoint, and ibert-nsp-copy-small saves none (save_strategy no)" in \
        error_line(capsys, main, ["ibert-nsp-copy-small", "--pack_to", str(tmp_path / "pieces")], "lengthgen reproduce")


def test_lengthgen_leaderboard(capsys, tmp_path, nothing_loads):
    main = leaderboard.main
    base = ["--models", "lstm", "--tasks", "chomsky_hierarchy/parity_check", "--output_dir", str(tmp_path)]
    assert "--max_steps must be at least 1, got -1" in error_line(capsys, main, [*base, "--max_steps", "-1"],
                                                                  "lengthgen leaderboard")
    assert "--seeds must be at least 1" in error_line(capsys, main, [*base, "--seeds", "0"], "lengthgen leaderboard")
    assert "--learning_rates must be positive, got -0.001" in error_line(
        capsys, main, [*base, "--learning_rates", "1e-3", "-1e-3"], "lengthgen leaderboard")
    line = error_line(capsys, main, ["--models", "transformer-xl-9000", *base[2:]], "lengthgen leaderboard")
    assert "Unknown model 'transformer-xl-9000'" in line and "ibert, ndr, bert" in line
    line = error_line(capsys, main, [*base[:2], "--tasks", "ctl/sideways", *base[4:]], "lengthgen leaderboard")
    assert "Unknown task 'ctl/sideways'" in line
    assert "--dataset_param nope" in error_line(
        capsys, main, [*base, "--dataset_param", "nope=1"], "lengthgen leaderboard")
    line = error_line(capsys, main, ["--models", f"hf:{tmp_path}/missing", *base[2:]], "lengthgen leaderboard")
    assert "no such file or directory" in line and "missing" in line
    line = error_line(capsys, main, ["--leaderboard_only", "--output_dir", str(tmp_path)], "lengthgen leaderboard")
    assert f"No cell results in {tmp_path / 'cells'}" in line
    assert not os.path.exists(tmp_path / "cells")
    (tmp_path / "a-file").write_text("mine")
    line = error_line(capsys, main, [*base[:4], "--output_dir", str(tmp_path / "a-file")], "lengthgen leaderboard")
    assert f"{tmp_path / 'a-file'} is a file, not a folder" in line


def test_lengthgen_data(capsys, tmp_path):
    main = data.main
    export = ["export", "nsp_inductive", "--output_dir", str(tmp_path)]
    line = error_line(capsys, main, [*export, "--dataset_param", "train_size=abc"], "lengthgen data")
    assert "train_size" in line and "integer" in line and "'abc'" in line
    line = error_line(capsys, main, [*export, "--dataset_param", "nosuchparam=1"], "lengthgen data")
    assert "'nosuchparam'" in line and "train_size, validation_size" in line
    line = error_line(capsys, main, [*export, "--dataset_config_name", "sideways"], "lengthgen data")
    assert "'sideways'" in line and "add, copy, reverse" in line
    assert "at least 1, got 0" in error_line(capsys, main, [*export, "--dataset_param", "train_size=0"],
                                             "lengthgen data")
    assert "list of 2 integers" in error_line(capsys, main, [*export, "--dataset_param", "train_difficulties=[3]"],
                                              "lengthgen data")
    line = error_line(capsys, main, [*export, "--push_to_hub", "my repo"], "lengthgen data")
    assert "--push_to_hub 'my repo' is not a Hub repo id" in line
    line = error_line(capsys, main, ["export", "--all", "--output_dir", str(tmp_path), "--push_to_hub", "my org"],
                      "lengthgen data")
    assert "--push_to_hub 'my org' is not a Hub namespace" in line and "'my org/x'" not in line
    line = error_line(capsys, main, ["export", "--all", "--output_dir", str(tmp_path), "--push_to_hub", "you/x"],
                      "lengthgen data")
    assert "--push_to_hub 'you/x' is not a Hub namespace: a user or organisation name, without '/'" in line
    line = error_line(capsys, main, [*export, "--dataset_parm", "train_size=8"], "lengthgen data")
    assert "unrecognized arguments: --dataset_parm train_size=8 (did you mean --dataset_param?)" in line  # export's
    (tmp_path / "a-file").write_text("mine")
    line = error_line(capsys, main, ["export", "nsp_inductive", "--output_dir", str(tmp_path / "a-file" / "out")],
                      "lengthgen data")
    assert f"--output_dir: {tmp_path / 'a-file' / 'out'}: {tmp_path / 'a-file'} is a file, not a folder" in line
    assert os.listdir(tmp_path) == ["a-file"]  # nothing generated


def test_lengthgen_release_and_verify(capsys, tmp_path):
    main = release.main
    assert "is not a directory" in error_line(capsys, main, [str(tmp_path / "nosuch"), "--repo_id", "me/x"],
                                              "lengthgen release")
    assert "ORG/NAME" in error_line(capsys, main, [os.path.join(REPO, "checkpoints", "ibert-nsp-copy"),
                                                   "--repo_id", "noslash", "--push"], "lengthgen release")
    line = error_line(capsys, main, [os.path.join(REPO, "checkpoints", "ibert-nsp-copy"), "--repo_id", "me/x"],
                      "lengthgen release")
    assert "already a release folder" in line and "--push" in line
    assert "holds no trained model" in error_line(
        capsys, main, [str(tmp_path), "--repo_id", "me/x"], "lengthgen release")
    # a card and a config without weights (a config folder) is not a release to upload as it is
    assert "hub_configs/ndr-ctl holds no trained model: model.safetensors missing" in error_line(
        capsys, main, [os.path.join(REPO, "hub_configs", "ndr-ctl"), "--repo_id", "me/x"], "lengthgen release")
    assert "holds no model card" in error_line(capsys, verify.main, [str(tmp_path)], "lengthgen verify")
    assert f"{tmp_path / 'nosuch'}: no such folder" in error_line(capsys, verify.main, [str(tmp_path / "nosuch")],
                                                                  "lengthgen verify")
    (tmp_path / "trained").mkdir()  # a card without results, as a training run's own README would be
    (tmp_path / "trained" / "README.md").write_text("---\nlicense: mit\n---\n# a model\n")
    assert "states no results (a card of `lengthgen release` does)" in error_line(
        capsys, verify.main, [str(tmp_path / "trained")], "lengthgen verify")
    assert "--rows: no such file" in error_line(
        capsys, verify.main, [os.path.join(REPO, "checkpoints", "ibert-nsp-copy"), "--rows", "no.jsonl"],
        "lengthgen verify")
    assert "has no results on split 'sideways'" in error_line(
        capsys, verify.main, [os.path.join(REPO, "checkpoints", "ibert-nsp-copy"), "--split", "sideways"],
        "lengthgen verify")
    assert "--repo_id 'me/my model' is not a Hub repo id" in error_line(
        capsys, main, [str(tmp_path), "--repo_id", "me/my model"], "lengthgen release")


@pytest.mark.parametrize("content, message", [
    ("", "holds no rows"),
    ('{"input": "1 2 [MASK]"}\n', "line 1 of {} is not an object with the strings input and target"),
    ('\n{"input": "1", "target": "1"}\n{"input": "1", \n', "line 3 of {} is not JSON"),
    ('["1", "1"]\n', "line 1 of {} is not an object"),
    ('{"input": "1 , 2 , [MASK]", "target": "1 , 2 , 3 4"}\n',  # the answer longer than its masks
     "row 1 has an input of 7 tokens and a target of 8: a masked LM's target is its input with the masks filled in"),
])
def test_lengthgen_verify_names_rows_it_cannot_score(capsys, tmp_path, content, message):
    rows = tmp_path / "rows.jsonl"
    rows.write_text(content)
    line = error_line(capsys, verify.main, [os.path.join(REPO, "checkpoints", "ibert-nsp-add"), "--rows", str(rows),
                                            "--split", "validation"], "lengthgen verify")
    assert message.format(rows) in line, line



def test_lengthgen_verify_names_a_folder_whose_card_it_does_not_confirm(capsys, tmp_path):
    """Rows whose targets are another class than the right one: the shipped NDR (test accuracy 1.0 on its card)
    scores 0 on them, and the command names the folder and both numbers."""
    folder = os.path.join(REPO, "checkpoints", "ndr-ctl-backward")
    from huggingface_hub import ModelCard

    from lengthgen.data.export import load_splits, parse_params

    data = ModelCard.load(os.path.join(folder, "README.md")).data
    rows = load_splits(
        "ctl", "backward", parse_params(data.to_dict().get("dataset_params", []))
    )["test"].select(range(4))
    labels = sorted(set(json.load(open(os.path.join(folder, "config.json")))["label2id"]))
    wrong = [{"input": r["input"], "target": labels[(labels.index(r["target"]) + 1) % len(labels)]} for r in rows]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in wrong))
    capsys.readouterr()  # the progress bars of generating the rows above, when the dataset was not cached yet
    line = error_line(capsys, verify.main, [folder, "--rows", str(tmp_path / "rows.jsonl"), "--split", "test"],
                      "lengthgen verify")
    assert "not the card's accuracy" in line and f"{folder} (measured 0.0000 on test, the card states 1.0000)" in line
    (tmp_path / "other.jsonl").write_text(json.dumps({"input": "1 0 1", "target": "odd"}) + "\n")  # another task's
    line = error_line(capsys, verify.main, [folder, "--rows", str(tmp_path / "other.jsonl"), "--split", "test"],
                      "lengthgen verify")
    assert "rows with targets ['odd'] that are not among the model's classes" in line


def test_run_clm_recurrent(capsys, tmp_path, nothing_loads):
    from lengthgen.training.causal_lm import parse_args, train_and_evaluate

    def main(argv):
        return train_and_evaluate(*parse_args(argv))

    base = ["--output_dir", str(tmp_path / "out"), "--do_eval"]
    line = error_line(capsys, main, [*base, "--corpus", "enwik8"], "run_clm_recurrent.py")
    assert "--corpus must be one of pg19, wikitext103, kjv, got 'enwik8'" in line
    line = error_line(capsys, main, [*base, "--corpus", "pg19", "--validation_file", str(tmp_path / "no.txt")],
                      "run_clm_recurrent.py")
    assert "--validation_file: no such file or directory" in line
    line = error_line(capsys, main, [*base, "--corpus", "pg19", "--model_name_or_path", "./no-gpt2"],
                      "run_clm_recurrent.py")
    assert "--model_name_or_path: no such file or directory: ./no-gpt2" in line
    # the window is checked before the model is loaded: the network is not asked about `gpt2`
    line = error_line(capsys, main, [*base, "--corpus", "pg19", "--model_name_or_path", "gpt2", "--window_size", "0"],
                      "run_clm_recurrent.py")
    assert line == "run_clm_recurrent.py: error: --window_size must be at least 1, got 0. (--debug shows the traceback)"
    assert "--window_size, --overlap: overlap must satisfy 0 <= overlap < window_size=8, got 8." in error_line(
        capsys, main,
        [*base, "--corpus", "pg19", "--model_name_or_path", "gpt2", "--window_size", "8", "--overlap", "8"],
        "run_clm_recurrent.py")
    assert "--recurrence_num_hidden_layers must be at least 0, got -1" in error_line(
        capsys, main, [*base, "--corpus", "pg19", "--model_name_or_path", "gpt2", "--recurrence_num_hidden_layers",
                       "-1"], "run_clm_recurrent.py")
    for flag in ("--windows_per_example", "--eval_chunk_windows", "--eval_every_tokens"):
        assert f"{flag} must be at least 1, got 0" in error_line(
            capsys, main, [*base, "--corpus", "pg19", "--model_name_or_path", "gpt2", flag, "0"],
            "run_clm_recurrent.py")
    assert "A model trained from --config_name needs --tokenizer_name" in error_line(
        capsys, main, [*base, "--corpus", "pg19", "--config_name", "hub_configs/gpt2-recurrent-pg19"],
        "run_clm_recurrent.py")
    assert "--streaming reads the corpus without knowing its length: give --max_steps" in error_line(
        capsys, main, [*base, "--corpus", "pg19", "--model_name_or_path", "gpt2", "--do_train", "--streaming"],
        "run_clm_recurrent.py")


def test_run_qa_recurrent(capsys, tmp_path, nothing_loads):
    from lengthgen.training.question_answering import parse_args, train_and_evaluate

    def main(argv):
        return train_and_evaluate(*parse_args(argv))

    base = ["--output_dir", str(tmp_path / "out"), "--do_eval"]
    assert "--doc_stride must be in [0, --window_size 64)" in error_line(
        capsys, main, [*base, "--window_size", "64", "--doc_stride", "64"], "run_qa_recurrent.py")
    assert "--validation_file: no such file or directory" in error_line(
        capsys, main, [*base, "--validation_file", str(tmp_path / "dev.json")], "run_qa_recurrent.py")
    assert "--max_answer_length must be at least 1" in error_line(
        capsys, main, [*base, "--max_answer_length", "0"], "run_qa_recurrent.py")
    assert "--do_predict: HotpotQA's test set has no answers to score" in error_line(
        capsys, main, [*base, "--do_predict"], "run_qa_recurrent.py")


def test_quick_start_example(capsys, tmp_path, nothing_loads):
    main = script("examples/nsp_length_generalization.py").main
    out = ["--output_dir", str(tmp_path)]
    assert "--train_digits takes MIN MAX with 1 <= MIN <= MAX, got 6 2" in error_line(
        capsys, main, [*out, "--train_digits", "6", "2"], "nsp_length_generalization.py")
    assert "above the training range (MIN > 6" in error_line(
        capsys, main, [*out, "--validation_digits", "3", "9"], "nsp_length_generalization.py")
    assert "--train_size must be at least 1, got 0" in error_line(
        capsys, main, [*out, "--train_size", "0"], "nsp_length_generalization.py")
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
    assert "--head must be in [0, 1), got 7" in error_line(
        capsys, main, ["--model_name_or_path", model, "--text", "101 a", "--head", "7"], "plot_ndr.py")
    ibert = os.path.join(REPO, "checkpoints", "ibert-nsp-copy")
    assert "holds a model of type inductive_bert: the pictures are of a Neural Data Router's" in error_line(
        capsys, main, ["--model_name_or_path", ibert, "--text", "1 2"], "plot_ndr.py")
    assert f"--output {tmp_path}/nodir/x.png: no folder {tmp_path}/nodir to write it in" in error_line(
        capsys, main, ["--model_name_or_path", model, "--text", "101 a", "--output", f"{tmp_path}/nodir/x.png"],
        "plot_ndr.py")


@pytest.mark.parametrize("command", [  # the lengthgen command and an example script (the others end as this one does)
    ["-m", "lengthgen.commands.main", "train", "--output_dir", "x", "--config_name", "hub_configs/nosuch",
     "--dataset_name", "ctl"],
    ["examples/run_clm_recurrent.py", "--output_dir", "x", "--corpus", "pg19", "--model_name_or_path", "gpt2",
     "--window_size", "0"],
])
def test_a_command_run_as_a_user_runs_it_answers_in_one_line(command, tmp_path):
    result = subprocess.run([sys.executable, *command], cwd=REPO, capture_output=True, text=True,
                            env={**os.environ, "HF_HUB_OFFLINE": "1"})
    assert result.returncode == 2 and result.stderr.strip().count("\n") == 0, result.stderr
    prog = f"lengthgen {command[2]}" if command[0] == "-m" else os.path.basename(command[0])
    assert result.stderr.startswith(prog + ": error: ")


def test_an_error_deep_in_training_keeps_its_traceback(monkeypatch, tmp_path, capsys):
    """A ValueError raised inside the Trainer's step is not a usage mistake: `lengthgen train` lets it through as it
    is (the interpreter prints its traceback), down to the frame that raised it, and prints no one-line answer."""
    def step(*args, **kwargs):
        raise ValueError("something deep went wrong")

    monkeypatch.setattr(transformers.Trainer, "training_step", step)
    with pytest.raises(ValueError, match="something deep went wrong") as raised:
        run_command(train.main, "lengthgen train", [
            "--config_name", f"{REPO}/hub_configs/ndr-ctl", "--config_overrides",
            "hidden_size=16,intermediate_size=32,num_layers=1", "--dataset_name", "ctl", "--dataset_param",
            "train_size=100", "validation_iid_size=5", "validation_size=5", "test_size=5",
            "--output_dir", str(tmp_path), "--max_steps", "1", "--use_cpu", "--report_to", "none"])
    assert type(raised.value) is ValueError and raised.traceback[-1].name == "step"
    assert "error:" not in capsys.readouterr().err


def test_debug_brings_the_traceback_back(monkeypatch, tmp_path):
    """With --debug (removed before the command sees its flags) or LENGTHGEN_DEBUG=1, a usage mistake propagates as
    the UsageError it is, so the interpreter prints its traceback."""
    main = script("examples/plot_ndr.py").main
    argv = ["--model_name_or_path", str(tmp_path / "missing-model"), "--text", "1"]
    with pytest.raises(UsageError, match="no such file or directory"):
        run_command(main, "plot_ndr.py", [*argv, "--debug"])
    monkeypatch.setenv("LENGTHGEN_DEBUG", "1")
    with pytest.raises(UsageError, match="no such file or directory"):
        run_command(main, "plot_ndr.py", argv)


def test_output_piped_into_a_reader_that_stops_early_is_no_error():
    """`lengthgen reproduce --list | head -1`: the reader closes the pipe before the command has written; the command
    ends quietly with status 0, no BrokenPipeError traceback."""
    command = subprocess.Popen([sys.executable, "-m", "lengthgen.commands.main", "reproduce", "--list"],
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    command.stdout.close()  # before the command's imports are done: its first write finds no reader
    _, err = command.communicate(timeout=300)
    assert command.returncode == 0 and b"Traceback" not in err and b"BrokenPipe" not in err, err
