"""The answer-slots reader: built as its modules are on their own, saved and read back as a transformers model, and a
`lengthgen train --head answer_slots` run evaluated again from its output folder."""

import json
import os

import pytest
import torch
from torch import nn
from transformers import AutoConfig, AutoModel, AutoModelForMaskedLM

from lengthgen.commands import train
from lengthgen.modeling import AnswerReader, AnswerSlotsConfig, StackRNNConfig
from lengthgen.training.models import model_type_of

LLAMA = dict(hidden_size=16, intermediate_size=32, num_attention_heads=2, num_key_value_heads=2, num_hidden_layers=2)


def test_reader_is_its_base_model_and_a_linear_layer_as_each_is_built_alone():
    """Same seed: the reader's weights are those of `AutoModel.from_config` followed by an `nn.Linear` built alone (the
    base's own initialisation, PyTorch's for the layer), and the random stream after it is the same."""
    base_config = AutoConfig.for_model("llama", vocab_size=11, **LLAMA)
    torch.manual_seed(3)
    base, head = AutoModel.from_config(base_config), nn.Linear(16, 11)
    after_alone = torch.rand(3)
    torch.manual_seed(3)
    reader = AnswerReader(AnswerSlotsConfig(base_config=base_config))
    assert torch.equal(torch.rand(3), after_alone)
    expected = {**{f"base.{k}": v for k, v in base.state_dict().items()},
                **{f"head.{k}": v for k, v in head.state_dict().items()}}
    assert reader.state_dict().keys() == expected.keys()
    assert all(torch.equal(reader.state_dict()[k], v) for k, v in expected.items())
    ids = torch.tensor([[1, 5, 7, 2]])
    logits = head(base(input_ids=ids).last_hidden_state)
    assert torch.equal(reader(ids).logits, logits)
    # the loss at the labelled positions alone, and transformers' tuple output
    labels = torch.tensor([[-100, -100, 4, 9]])
    loss, tuple_logits = reader(ids, labels=labels, return_dict=False)
    assert torch.equal(tuple_logits, logits)
    torch.testing.assert_close(loss, nn.functional.cross_entropy(logits[0, 2:], labels[0, 2:]))


@pytest.mark.parametrize("base_config", [None, AutoConfig.for_model("llama", vocab_size=9, **LLAMA),
                                         StackRNNConfig(vocab_size=9, hidden_size=16, stack_cell_size=4)],
                         ids=["lstm", "llama", "stack_rnn"])
def test_reader_saved_and_read_back_gives_the_same_logits(tmp_path, base_config):
    torch.manual_seed(0)
    reader = AnswerReader(AnswerSlotsConfig(base_config=base_config, vocab_size=9, hidden_size=16)).eval()
    reader.save_pretrained(tmp_path)
    ids = torch.tensor([[1, 4, 3, 8, 8, 2]])
    for loaded in (AnswerReader.from_pretrained(tmp_path), AutoModelForMaskedLM.from_pretrained(tmp_path)):
        assert type(loaded) is AnswerReader
        # (equal up to float rounding: a read-back Stack-RNN alone differs from itself by 1e-7, as tensors loaded
        # from safetensors can take other kernels)
        torch.testing.assert_close(loaded.eval()(ids).logits, reader(ids).logits, rtol=0, atol=1e-6)
        assert model_type_of(loaded) == (base_config.model_type if base_config is not None else "lstm")


def test_a_base_of_lengthgen_travels_with_the_reader_but_not_through_push_to_hub(tmp_path):
    """A Stack-RNN base's modules are saved beside the reader's, named in base_config's auto_map (the release test
    loads such a folder without lengthgen); `save_pretrained(push_to_hub=True)` would upload only files it wrote itself,
    so it is refused before anything is written; a base whose model type is installed nowhere is named."""
    reader = AnswerReader(AnswerSlotsConfig(base_config=StackRNNConfig(vocab_size=9, hidden_size=8)))
    with pytest.raises(ValueError, match="saved, then uploaded as a folder"):
        reader.save_pretrained(tmp_path / "pushed", push_to_hub=True)
    assert not (tmp_path / "pushed").exists()
    reader.save_pretrained(tmp_path / "saved")
    assert {"configuration_stack_rnn.py", "modeling_stack_rnn.py"} <= set(os.listdir(tmp_path / "saved"))
    with pytest.raises(ValueError, match="model type 'nosuch' is not installed here"):
        AnswerSlotsConfig(base_config={"model_type": "nosuch", "vocab_size": 9, "hidden_size": 8})


def test_answer_slots_run_is_evaluated_again_from_its_output_folder(tmp_path):
    """A trained answer-slots run writes a loadable model and its card; `--model_name_or_path` on that folder (the head
    read from its config, its own tokenizer) scores the test split exactly as the run did."""
    data = ["--dataset_name", "chomsky_hierarchy", "--dataset_config_name", "reverse_string", "--dataset_param",
            "train_lengths=[1,6]", "test_lengths=[7,9]", "train_size=200", "test_size=30"]
    run, again = str(tmp_path / "run"), str(tmp_path / "again")
    train.main(["--model_type", "llama", "--head", "answer_slots", "--config_overrides",
                ",".join(f"{k}={v}" for k, v in LLAMA.items()), *data, "--output_dir", run, "--max_steps", "30",
                "--report_to", "none"])
    assert "## lengthgen" in open(os.path.join(run, "README.md")).read()
    train.main(["--model_name_or_path", run, *data, "--do_train", "false", "--output_dir", again,
                "--report_to", "none"])
    first, second = (json.load(open(os.path.join(folder, "lengthgen_results.json"))) for folder in (run, again))
    assert second["head"] == "answer_slots" and second["model_type"] == "llama"
    assert second["scores"]["test"] == first["scores"]["test"] and 0 < first["scores"]["test"]["all"]["token_accuracy"]


def test_scores_per_length_pair_each_answer_with_its_row_when_batches_are_grouped_by_length(tmp_path):
    """With `--train_sampling_strategy group_by_length` (the leaderboard's), transformers' Trainer would also shuffle
    the evaluation batches; the scores per length must still be those of each row's own answer: here computed by
    the model one row at a time."""
    from transformers import AutoTokenizer

    from lengthgen.data.answer_slots import answer_slot_ids
    from lengthgen.data.export import load_splits, parse_params
    from lengthgen.data.scoring import scores_by_difficulty

    params = ["train_lengths=[1,6]", "test_lengths=[7,14]", "train_size=200", "test_size=96"]
    data = ["--dataset_name", "chomsky_hierarchy", "--dataset_config_name", "reverse_string",
            "--dataset_param", *params]
    run, again = str(tmp_path / "run"), str(tmp_path / "again")
    train.main(["--model_type", "lstm", "--config_overrides", "hidden_size=16", *data, "--output_dir", run,
                "--max_steps", "40", "--learning_rate", "1e-2", "--report_to", "none"])
    train.main(["--model_name_or_path", run, *data, "--do_train", "false", "--output_dir", again,
                "--train_sampling_strategy", "group_by_length", "--per_device_eval_batch_size", "8",
                "--report_to", "none"])
    scores = json.load(open(os.path.join(again, "lengthgen_results.json")))["scores"]["test"]
    model, tokenizer = AnswerReader.from_pretrained(run).eval(), AutoTokenizer.from_pretrained(run)
    rows = load_splits("chomsky_hierarchy", "reverse_string", parse_params(params))["test"]
    predicted, labels = [], []
    with torch.no_grad():
        for row in rows:
            ids, row_labels = answer_slot_ids(tokenizer, row["input"], row["target"])
            predicted.append(model(torch.tensor([ids])).logits[0].argmax(-1).tolist())
            labels.append(row_labels)
    alone = scores_by_difficulty(predicted, labels, rows["difficulty"])
    per_length = {key: value["token_accuracy"] for key, value in scores.items()}
    assert per_length == pytest.approx({str(key): value["token_accuracy"] for key, value in alone.items()}, abs=1e-6)
    assert len(set(round(v, 3) for v in per_length.values())) > 3  # lengths that differ, so a shuffle would show


def test_a_reader_evaluated_on_another_alphabet_is_refused(tmp_path):
    """A reader trained on binary strings, evaluated on a task with other tokens: its tokenizer would read them as
    unknown; the run stops naming them."""
    from datasets import Dataset

    from lengthgen.cli import UsageError
    from lengthgen.training.arguments import ModelArguments
    from lengthgen.training.models import answer_slots_tokenizer

    answer_slots_tokenizer({"train": Dataset.from_dict({"input": ["0 1 1"], "target": ["0"]})}).save_pretrained(
        tmp_path)
    other = {"test": Dataset.from_dict({"input": ["0 + 1"], "target": ["1 END"]})}
    with pytest.raises(UsageError, match="was trained on another alphabet: its tokenizer does not know \\+, END"):
        answer_slots_tokenizer(other, ModelArguments(model_name_or_path=str(tmp_path), head="answer_slots"))


def test_a_folder_of_another_model_is_refused_by_the_answer_slots_head(tmp_path):
    from lengthgen.cli import UsageError
    from lengthgen.training.arguments import ModelArguments
    from lengthgen.training.models import load_answer_reader

    AutoModel.from_config(AutoConfig.for_model("llama", vocab_size=9, **LLAMA)).save_pretrained(tmp_path / "llama")
    with pytest.raises(UsageError, match="holds a llama model, not one trained with the answer_slots head"):
        load_answer_reader(ModelArguments(model_name_or_path=str(tmp_path / "llama"), head="answer_slots"), None)
