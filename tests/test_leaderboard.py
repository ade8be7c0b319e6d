import csv
import json
import os
import statistics

import pytest
import torch

import lengthgen.leaderboard as leaderboard
from lengthgen.cli import UsageError
from lengthgen.commands.leaderboard import main
from lengthgen.data.scoring import scores_by_difficulty
from lengthgen.leaderboard.models import SIZE
from lengthgen.training.arguments import ModelArguments
from lengthgen.training.models import answer_layout, answer_slots_tokenizer, load_answer_reader

# Tiny Chomsky-hierarchy data: train lengths 1-4, test 5-8.
TINY = dict(train_lengths=(1, 4), test_lengths=(5, 8), train_size=400, test_size=64)
FAST = {"max_steps": 120, "per_device_train_batch_size": 32, "learning_rate": 5e-3}


def build_model(name, vocab_size=12):
    """The leaderboard's model `name` for a vocabulary of `vocab_size` word tokens (special tokens included)."""
    from datasets import Dataset

    words = [str(i) for i in range(vocab_size - 6)]  # the tokenizer adds its 5 special tokens and <unk>
    tokenizer = answer_slots_tokenizer({"train": Dataset.from_dict({"input": [" ".join(words)], "target": ["0"]})})
    assert len(tokenizer) == vocab_size
    torch.manual_seed(0)
    return load_answer_reader(ModelArguments(**leaderboard.model_section(name)), tokenizer)


def test_answer_layout_by_hand():
    # a one-token answer: the input, a separator, one slot
    assert answer_layout("1 0 1", "0") == (["1", "0", "1", "[SEP]", "[MASK]"], [None, None, None, None, "0"])
    # a sequence answer: one slot per answer token
    tokens, answers = answer_layout("0 1 1", "1 1 0")
    assert tokens == ["0", "1", "1", "[SEP]", "[MASK]", "[MASK]", "[MASK]"]
    assert answers == [None] * 4 + ["1", "1", "0"]
    # an input with its own slots (NSP): read there, the target restores the whole sequence
    assert answer_layout("1 _ 1 _ [MASK]", "1 _ 1 _ 2") == (["1", "_", "1", "_", "[MASK]"], [None] * 4 + ["2"])
    with pytest.raises(ValueError, match="target of 2"):
        answer_layout("1 [MASK] 3", "1 2")


def test_scores_by_difficulty_by_hand():
    labels = [[-100, 5, 6, -100], [-100, 5, 6, -100], [-100, 7, -100, -100]]
    predicted = [[9, 5, 6, 9], [9, 5, 0, 9], [9, 1, 9, 9]]
    result = scores_by_difficulty(predicted, labels, [3, 3, 4])
    assert result[3] == {"accuracy": 0.5, "token_accuracy": 0.75, "examples": 2}  # (1 + 0) / 2, (1 + .5) / 2
    assert result[4] == {"accuracy": 0.0, "token_accuracy": 0.0, "examples": 1}
    assert result["all"] == {"accuracy": 1 / 3, "token_accuracy": 0.5, "examples": 3}
    # with the top-label probabilities: difficulty 3 has answer tokens at 0.9, 0.8, 0.7 (right) and 0.6 (wrong), each
    # alone in its bin: ECE = (0.1 + 0.2 + 0.3 + 0.6) / 4; difficulty 4 one wrong token at 0.55
    confidences = [[0, 0.9, 0.8, 0], [0, 0.7, 0.6, 0], [0, 0.55, 0, 0]]
    result = scores_by_difficulty(predicted, labels, [3, 3, 4], confidences)
    assert result[3]["ece"] == pytest.approx(0.3) and result[4]["ece"] == pytest.approx(0.55)
    # a classifier's answer: one id per example
    assert scores_by_difficulty([1, 2, 3], [1, 2, 0], [5, 5, 6])[5]["accuracy"] == 1.0


@pytest.mark.parametrize("name", list(leaderboard.MODELS))
def test_presets_share_the_budget_and_causal_ones_do_not_look_ahead(name):
    model = build_model(name).eval()
    config = getattr(model.base, "config", None)
    if config is not None:
        assert config.hidden_size == SIZE["hidden_size"] and config.num_attention_heads == SIZE["num_attention_heads"]
        shared = config.model_type in ("ndr", "universal_transformer")  # one layer, num_layers steps
        layers = config.num_layers if shared else config.num_hidden_layers
        assert layers == {"ndr": 12, "universal_transformer": 4, "sequential_universal_transformer": 4}.get(
            name, SIZE["num_hidden_layers"])  # the NDR: 12 steps of its one layer
    ids = torch.randint(5, 12, (2, 9))
    changed = ids.clone()
    changed[:, 6:] = torch.randint(5, 12, (2, 3))
    with torch.no_grad():
        before = model(input_ids=ids, attention_mask=torch.ones_like(ids)).logits
        after = model(input_ids=changed, attention_mask=torch.ones_like(ids)).logits
    assert before.shape == (2, 9, 12)
    looks_ahead = not torch.allclose(before[:, :6], after[:, :6], atol=1e-6)
    assert looks_ahead == (name not in ("rope", "alibi", "lstm", "sequential_universal_transformer"))


def read_csv(path):
    with open(path) as f:
        return list(csv.DictReader(f))


def test_a_cell_trains_evaluates_and_a_rerun_skips_it(tmp_path, monkeypatch):
    out = str(tmp_path / "leaderboard")
    records = leaderboard.run_grid(["lstm"], ["chomsky_hierarchy/parity_check"], 1, out, FAST, params=TINY)
    (cell,) = records
    assert cell["status"] == "ok" and cell["train_steps"] == FAST["max_steps"]
    first, last = cell["train_loss_first_last"]
    assert last < first
    from lengthgen.leaderboard.tables import fit

    assert fit(cell) >= 0.75  # parity of 1-4 bits learnt well above chance (0.5)
    assert cell["train_difficulties"] == [1, 4] and cell["score_difficulties"] == [5, 6, 7, 8]
    assert set(cell["accuracy"]) == {"train", "test"}
    assert [int(d) for d in cell["accuracy"]["test"]] == [5, 6, 7, 8]
    assert all(v["examples"] == 16 for v in cell["accuracy"]["test"].values())
    # the score is the mean of the per-length accuracies (token accuracy for a Chomsky task)
    per_length = [v["token_accuracy"] for v in cell["accuracy"]["test"].values()]
    assert cell["metric"] == "token_accuracy" and cell["score"] == pytest.approx(statistics.fmean(per_length))
    (row,) = read_csv(os.path.join(out, "leaderboard.csv"))
    assert float(row["score_median_seed"]) == pytest.approx(statistics.fmean(per_length), abs=5e-4)
    by_length = [r for r in read_csv(os.path.join(out, "accuracy_by_length.csv")) if r["split"] == "test"]
    assert [float(r["token_accuracy"]) for r in by_length] == pytest.approx(per_length, abs=5e-5)
    assert os.path.exists(os.path.join(out, "plots", "chomsky_hierarchy-parity_check.png"))
    board = open(os.path.join(out, "leaderboard.md")).read()
    assert "| lstm |" in board
    # the page states the scale it was run at: the budget and the generating parameters
    assert f"max_steps {FAST['max_steps']}" in board and "per_device_train_batch_size 32" in board
    assert f"train_lengths={list(TINY['train_lengths'])}" in board

    path = os.path.join(out, "cells", "lstm__chomsky_hierarchy-parity_check__seed0.json")
    written = open(path).read()

    def must_not_run(*args, **kwargs):
        raise AssertionError("a finished cell ran again")

    monkeypatch.setattr(leaderboard.cell, "run_cell", must_not_run)
    assert leaderboard.run_grid(["lstm"], ["chomsky_hierarchy/parity_check"], 1, out, FAST, params=TINY) == records
    assert open(path).read() == written


def test_a_failing_cell_is_recorded_and_the_others_go_on(tmp_path, monkeypatch):
    out = str(tmp_path / "leaderboard")
    real_run_cell = leaderboard.run_cell
    calls = []

    def run_cell(model_name, *args, **kwargs):
        calls.append(model_name)
        if model_name == "bert":
            raise RuntimeError("out of patience")
        return real_run_cell(model_name, *args, **kwargs)

    monkeypatch.setattr(leaderboard.cell, "run_cell", run_cell)
    budget = {"max_steps": 5, "per_device_train_batch_size": 8}
    records = leaderboard.run_grid(["bert", "lstm"], ["chomsky_hierarchy/even_pairs"], 1, out, budget, params=TINY)
    status = {r["model"]: r["status"] for r in records}
    assert status == {"bert": "failed", "lstm": "ok"}
    failed = json.load(open(os.path.join(out, "cells", "bert__chomsky_hierarchy-even_pairs__seed0.json")))
    assert failed["error"] == "RuntimeError: out of patience"
    assert "RuntimeError: out of patience" in open(os.path.join(out, "leaderboard.md")).read()
    # a re-run tries the failed cell again and skips the finished one
    calls.clear()
    leaderboard.run_grid(["bert", "lstm"], ["chomsky_hierarchy/even_pairs"], 1, out, budget, params=TINY)
    assert calls == ["bert"]


def test_unknown_model_or_task_lists_the_valid_ones(tmp_path, capsys):
    with pytest.raises(UsageError) as error:
        main(["--models", "transformer-xl-9000", "--tasks", "ctl/backward", "--output_dir", str(tmp_path)])
    assert "Unknown model 'transformer-xl-9000'" in str(error.value) and all(name in str(error.value) for name in leaderboard.MODELS)
    with pytest.raises(UsageError) as error:
        main(["--models", "lstm", "--tasks", "ctl/sideways", "--output_dir", str(tmp_path)])
    assert "Unknown task 'ctl/sideways'" in str(error.value) and "ctl/backward" in str(error.value)
    assert "chomsky_hierarchy/odds_first" in str(error.value)
    with pytest.raises(UsageError, match="--dataset_param nope: none of the tasks' builders has"):
        main(["--models", "lstm", "--tasks", "ctl", "--output_dir", str(tmp_path), "--dataset_param", "nope=1"])
    assert not os.path.exists(tmp_path / "cells")


def test_a_task_too_long_for_a_model_fails_before_any_training(tmp_path, monkeypatch, capsys):
    import transformers

    def no_training(*args, **kwargs):
        raise AssertionError("trained before checking")

    monkeypatch.setattr(transformers.Trainer, "train", no_training)
    params = ["--dataset_param", "train_lengths=[1,4]", "train_size=400", "test_lengths=[600,601]", "test_size=4"]
    with pytest.raises(UsageError) as raised:
        main(["--models", "lstm", "bert", "--tasks", "chomsky_hierarchy/parity_check", "--output_dir", str(tmp_path), *params])
    error = str(raised.value)
    # 601 input tokens + separator + one slot + [CLS] and [SEP]
    assert "Model 'bert' cannot take task 'chomsky_hierarchy/parity_check'" in error
    assert "holds 512 positions" in error and "605 tokens" in error
    assert os.listdir(tmp_path / "cells") == []


def test_any_transformers_config_by_path_or_model_type(tmp_path):
    from transformers import GPT2Config

    GPT2Config(n_embd=16, n_layer=1, n_head=2, n_positions=8).save_pretrained(tmp_path / "tiny-gpt2")
    name = f"hf:{tmp_path / 'tiny-gpt2'}"
    config = build_model(name).base.config
    assert (config.n_embd, config.n_positions) == (16, 8)
    typed = build_model("gpt2").base.config  # a bare model type gets the presets' size
    assert (typed.n_embd, typed.n_layer, typed.n_head) == (SIZE["hidden_size"], SIZE["num_hidden_layers"],
                                                           SIZE["num_attention_heads"])
    task = leaderboard.resolve_task("chomsky_hierarchy/parity_check")
    task.params.update(TINY)
    prepared = leaderboard.prepare_task(task)
    assert prepared.longest == 8 + 4  # length 8, separator, slot, [CLS], [SEP]
    with pytest.raises(UsageError, match="position table holds 8 positions"):
        leaderboard.check_model_takes_task(name, prepared)
    records = leaderboard.run_grid(["gpt2"], ["chomsky_hierarchy/parity_check"], 1, str(tmp_path / "out"),
                                   {"max_steps": 3, "per_device_train_batch_size": 8}, params=TINY)
    assert records[0]["status"] == "ok" and records[0]["model"] == "gpt2"


def test_any_dataset_with_the_columns_by_path(tmp_path):
    from lengthgen.data.export import export

    folder = export("chomsky_hierarchy", str(tmp_path / "data"), ["even_pairs"], **TINY)
    task = leaderboard.resolve_task(f"hf:{folder}:even_pairs")
    assert (task.dataset, task.config, task.params) == (folder, "even_pairs", {})
    records = leaderboard.run_grid(["lstm"], [f"hf:{folder}:even_pairs"], 1, str(tmp_path / "out"), {"max_steps": 3})
    assert records[0]["status"] == "ok" and records[0]["score_difficulties"] == [5, 6, 7, 8]
    assert records[0]["metric"] == "accuracy"  # only lengthgen's Chomsky builder is scored per token
