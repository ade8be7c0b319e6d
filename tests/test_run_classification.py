"""The classification head of the experiment runner, as examples/run_classification.py and `lengthgen train` run it."""

import json
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401
from lengthgen.cli import UsageError
from lengthgen.commands.train import main as train
from lengthgen.data.export import build
from lengthgen.data.tokenization import word_tokenizer
from lengthgen.training import ExperimentResult

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY = "hidden_size=32,intermediate_size=64,num_attention_heads=2,num_layers=4"
SMALL = {
    "ctl": ("forward", dict(train_size=300, validation_iid_size=20, validation_size=30, test_size=20)),
    "simple_arithmetic": (None, dict(train_size=300, validation_size=20, test_size=20)),
    "listops": (None, dict(train_size=500, validation_size=10, test_size=10)),
}


def scored_again(folder, rows, **forward) -> dict:
    """{difficulty: (accuracy, ECE)} of the saved classifier in `folder` on `rows`, one row at a time."""
    from lengthgen.data.scoring import expected_calibration_error

    model = AutoModelForSequenceClassification.from_pretrained(folder).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder)
    outcomes = {}
    for row in rows:
        with torch.no_grad():
            probabilities = model(**tokenizer([row["input"]], return_tensors="pt"), **forward).logits[0].softmax(-1)
        right = int(probabilities.argmax()) == model.config.label2id[row["target"]]
        outcomes.setdefault(row["difficulty"], []).append((right, float(probabilities.max())))
    return {d: (sum(r for r, _ in pairs) / len(pairs),
                expected_calibration_error([c for _, c in pairs], [r for r, _ in pairs]))
            for d, pairs in outcomes.items()}


def run_classification(argv):
    """examples/run_classification.py's main, in this process."""
    return train(argv, head="classification", program="python examples/run_classification.py", train_and_evaluate=False)


@pytest.mark.parametrize(
    "name", sorted(n for n in os.listdir(os.path.join(REPO, "hub_configs")) if n.startswith(("ndr-", "transformer-")))
)
def test_ndr_hub_configs_build_and_match_the_task_vocabulary(name, tmp_path):
    folder = os.path.join(REPO, "hub_configs", name)
    config = AutoConfig.from_pretrained(folder)
    assert config.model_type == "ndr" and not hasattr(config, "training_hyperparameters")  # recipes live in presets
    assert (config.attention_type == "geometric") == name.startswith("ndr-")
    tokenizer = AutoTokenizer.from_pretrained(folder)
    dataset = name.split("-", 1)[1].replace("-", "_")
    config_name, params = SMALL[dataset]
    splits = build(dataset, config_name, cache_dir=str(tmp_path), **params)[1]
    assert tokenizer.get_vocab() == word_tokenizer(splits["train"]["input"]).get_vocab()
    assert sorted(config.label2id) == sorted(set(splits["train"]["target"]))
    model = AutoModelForSequenceClassification.from_config(config)
    assert model.ndr.layer.attention.num_heads == config.num_attention_heads


def test_end_to_end_with_more_steps_at_evaluation(tmp_path, monkeypatch):
    steps_seen = []
    original = lengthgen.modeling.NDRModel.forward

    def spy(self, *args, **kwargs):
        steps_seen.append((self.training, kwargs.get("num_steps") or self.config.num_steps or self.config.num_layers))
        return original(self, *args, **kwargs)

    monkeypatch.setattr(lengthgen.modeling.NDRModel, "forward", spy)
    result = run_classification(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"), "--config_overrides", TINY,
         "--dataset_name", "ctl", "--dataset_config_name", "backward",
         "--dataset_param", "train_size=300", "validation_iid_size=20", "validation_size=30", "test_size=20",
         "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--max_steps", "3", "--num_steps", "6",
         "--per_device_train_batch_size", "32", "--learning_rate", "2e-3", "--save_strategy", "no", "--use_cpu",
         "--disable_tqdm", "true"]
    )
    assert ({s for training, s in steps_seen if training} == {4}
            and {s for training, s in steps_seen if not training} == {6})
    metrics = result.metrics
    for d in (6, 7, 8):
        assert metrics[f"eval_validation_accuracy_d{d}"] == result.scores["validation"][str(d)]["accuracy"]
    assert {"eval_test_accuracy_d9", "eval_test_accuracy_d10", "eval_validation_iid_accuracy"} <= set(metrics)
    assert {"eval_test_ece", "eval_test_ece_d9", "eval_test_ece_d10", "eval_validation_ece_d6"} <= set(metrics)
    # the test split's accuracy and calibration per depth, measured again from the saved model at 6 steps
    rows = build("ctl", "backward", cache_dir=str(tmp_path / "cache"), train_size=300, validation_iid_size=20,
                 validation_size=30, test_size=20)[1]["test"]
    for d, (accuracy, ece) in scored_again(tmp_path, rows, num_steps=6).items():
        assert metrics[f"eval_test_accuracy_d{d}"] == pytest.approx(accuracy)
        assert metrics[f"eval_test_ece_d{d}"] == pytest.approx(ece, abs=1e-5)
    assert (result.scores["test"]["all"]["examples"] == 20
            and set(result.scores) == {"validation_iid", "validation", "test"})
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["num_steps"] is None and saved["num_layers"] == 4 and saved["id2label"]["0"] == "000"
    assert "training_hyperparameters" not in saved  # how it was trained is in its results file, not in its config
    record = ExperimentResult.load(str(tmp_path))
    assert record.scores == result.scores and record.training["steps"] == 3
    assert record.spec["training"]["learning_rate"] == 2e-3 and record.spec["model"]["num_steps"] == 6
    assert record.command.startswith("python examples/run_classification.py --config_name")
    assert "| validation | 6 |" in (tmp_path / "README.md").read_text()
    model = AutoModelForSequenceClassification.from_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    batch = tokenizer(["c b a 101"], return_tensors="pt")
    assert model(**batch).logits.shape == (1, 8)
    with pytest.raises(UsageError, match="not among the model's classes"):
        run_classification(
            ["--model_name_or_path", str(tmp_path), "--dataset_name", "simple_arithmetic",
             "--dataset_param", "train_size=50", "validation_size=5", "test_size=5",
             "--output_dir", str(tmp_path / "x"), "--do_eval", "--use_cpu"]
        )


def test_on_a_chomsky_hierarchy_class_task(tmp_path):
    """The Chomsky-hierarchy tasks with a one-token answer train and evaluate per input length as they are."""
    result = run_classification(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"), "--config_overrides", TINY,
         "--dataset_name", "chomsky_hierarchy", "--dataset_config_name", "modular_arithmetic",
         "--dataset_param", "train_size=256", "test_size=30", "train_lengths=[1,9]", "test_lengths=[10,16]",
         "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--max_steps", "2",
         "--per_device_train_batch_size", "32", "--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true"]
    )
    assert list(result.scores["test"]) == ["11", "13", "15", "all"]  # expressions have odd lengths
    rows = build("chomsky_hierarchy", "modular_arithmetic", cache_dir=str(tmp_path / "cache"), train_size=256,
                 test_size=30, train_lengths=[1, 9], test_lengths=[10, 16])[1]["test"]
    for d, (accuracy, _) in scored_again(tmp_path, rows).items():  # per length, from the saved model
        assert result.scores["test"][str(d)]["accuracy"] == pytest.approx(accuracy)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert sorted(saved["id2label"].values()) == ["0", "1", "2", "3", "4"]  # the residues mod 5


def test_a_spec_file_as_the_example_script_runs_it(tmp_path):
    """`python examples/run_classification.py spec.yaml` (a process, as a user runs it) trains what the file says."""
    spec = tmp_path / "spec.yaml"
    spec.write_text(f"""
model:
  config_name: {os.path.join(REPO, "hub_configs/ndr-ctl")}
  config_overrides: {{hidden_size: 16, intermediate_size: 32, num_layers: 2}}
data:
  dataset_name: ctl
  dataset_config_name: backward
  dataset_param: {{train_size: 100, validation_iid_size: 10, validation_size: 10, test_size: 10}}
training:
  output_dir: {tmp_path / "out"}
  do_train: true
  do_eval: true
  max_steps: 2
  per_device_train_batch_size: 16
  use_cpu: true
  report_to: none
  save_strategy: "no"
  learning_rate: 1e-3
""")
    done = subprocess.run([sys.executable, os.path.join(REPO, "examples", "run_classification.py"), str(spec)],
                          capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert done.returncode == 0, done.stderr[-3000:]
    record = ExperimentResult.load(str(tmp_path / "out"))
    assert record.training["steps"] == 2 and record.head == "classification"
    assert (record.spec["training"]["learning_rate"] == 1e-3
            and set(record.scores) == {"validation_iid", "validation", "test"})


def test_plot_ndr_writes_attention_and_gate_pictures(tmp_path):
    config = AutoConfig.from_pretrained(os.path.join(REPO, "hub_configs/ndr-ctl"))
    config.update_from_string(TINY)
    model = AutoModelForSequenceClassification.from_config(config)
    model.save_pretrained(tmp_path / "model")
    AutoTokenizer.from_pretrained(os.path.join(REPO, "hub_configs/ndr-ctl")).save_pretrained(tmp_path / "model")
    output = str(tmp_path / "steps.png")
    command = [sys.executable, os.path.join(REPO, "examples", "plot_ndr.py"), "--model_name_or_path",
               str(tmp_path / "model"), "--text", "101 d a b", "--output", output, "--num_steps", "5"]
    done = subprocess.run(command, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    for path in (output, str(tmp_path / "steps_gates.png")):
        assert open(path, "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_encode_classification_by_hand():
    """Two hand-written rows: each input's word ids in the tokenizer's order, each target's index among the labels."""
    from datasets import Dataset

    from lengthgen.training.models import encode_classification

    rows = Dataset.from_dict({"input": ["a b", "b"], "target": ["7", "3"], "difficulty": [2, 1]})
    tokenizer = word_tokenizer(rows["input"])
    vocab = tokenizer.get_vocab()
    encoded = encode_classification(rows, tokenizer, ["3", "7"], keep_columns=("difficulty",))
    cls, sep = tokenizer.cls_token_id, tokenizer.sep_token_id
    assert encoded["input_ids"] == [[cls, vocab["a"], vocab["b"], sep], [cls, vocab["b"], sep]]
    assert encoded["labels"] == [1, 0] and encoded["difficulty"] == [2, 1]
    assert "target" not in encoded.column_names
    assert "difficulty" not in encode_classification(rows, tokenizer, ["3", "7"]).column_names
    with pytest.raises(UsageError, match=r"Targets \['7'\] are not among the model's classes \['3'\]"):
        encode_classification(rows, tokenizer, ["3"])
