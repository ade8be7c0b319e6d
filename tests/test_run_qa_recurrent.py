"""The HotpotQA training of examples/run_qa_recurrent.py (lengthgen.training.question_answering) end to end on a small
fixture with a tiny RoBERTa."""

import json
from pathlib import Path

import pytest
from test_hotpotqa import fixture_tokenizer, write_fixture
from transformers import AutoModelForQuestionAnswering, RobertaConfig

from lengthgen.cli import UsageError
from lengthgen.training import question_answering


def run_qa_recurrent(argv) -> dict:
    """examples/run_qa_recurrent.py's work, in this process: the metrics."""
    return question_answering.train_and_evaluate(*question_answering.parse_args(argv))


def tiny_setup(tmp_path, count):
    _, path = write_fixture(tmp_path, count=count)
    fixture_tokenizer(path, tmp_path / "tokenizer")
    RobertaConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=4, intermediate_size=64,
                  max_position_embeddings=66, hidden_dropout_prob=0.0,
                  attention_probs_dropout_prob=0.0).save_pretrained(tmp_path / "config")
    return path


def arguments(tmp_path, path, *extra):
    return ["--config_name", str(tmp_path / "config"), "--tokenizer_name", str(tmp_path / "tokenizer"),
            "--train_file", str(path), "--validation_file", str(path), "--window_size", "64", "--doc_stride", "16",
            "--insertion_layer", "1", "--recurrence_hidden_size", "32", "--output_dir", str(tmp_path / "out"),
            "--do_train", "--do_eval", "--per_device_train_batch_size", "4", "--per_device_eval_batch_size", "3",
            "--report_to", "none", "--seed", "0", "--save_strategy", "no", *extra]


def test_recurrent_model_overfits_a_handful_of_questions(tmp_path, monkeypatch):
    """Four questions (two spans, yes, no), several windows each: trained on them, it answers all four exactly."""
    monkeypatch.chdir(tmp_path)
    path = tiny_setup(tmp_path, count=4)
    metrics = run_qa_recurrent(arguments(tmp_path, path, "--learning_rate", "3e-3", "--max_steps", "150",
                                              "--warmup_steps", "10", "--lr_scheduler_type", "constant_with_warmup"))
    assert metrics["eval_f1"] == pytest.approx(100.0) and metrics["eval_exact_match"] == pytest.approx(100.0)
    assert metrics["eval_f1_yes"] == metrics["eval_f1_no"] == metrics["eval_f1_span"] == pytest.approx(100.0)
    assert any(key.startswith("eval_f1_windows_") for key in metrics)
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert predictions == {"q0": "Gustave Eiffel", "q1": "yes", "q2": "no", "q3": "Lake Geneva"}
    model = AutoModelForQuestionAnswering.from_pretrained(tmp_path / "out")
    assert model.config.model_type == "roberta_recurrent" and model.config.use_recurrence


def test_disjoint_baseline_runs_with_window_checkpointing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = tiny_setup(tmp_path, count=6)
    metrics = run_qa_recurrent(arguments(tmp_path, path, "--use_recurrence", "False", "--max_steps", "2",
                                              "--gradient_checkpointing"))
    assert metrics["eval_samples"] == 6
    # the F1 and exact match are the answer metric's on the written predictions against the questions' answers
    import evaluate
    from test_hotpotqa import HOTPOTQA_ANSWER

    answers = {row["_id"]: row["answer"] for row in json.loads(Path(path).read_text())}
    predictions = json.loads((tmp_path / "out" / "predictions.json").read_text())
    assert sorted(predictions) == sorted(answers)
    again = evaluate.load(HOTPOTQA_ANSWER).compute(predictions=[predictions[q] for q in answers],
                                                   references=list(answers.values()))
    assert metrics["eval_f1"] == pytest.approx(again["f1"]) and metrics["eval_exact_match"] == pytest.approx(
        again["exact_match"])
    # buckets by the number of windows partition the questions: their F1s average to the overall one
    buckets = [k.rsplit("_", 1)[1] for k in metrics if k.startswith("eval_f1_windows_")]
    counts = [metrics[f"eval_samples_windows_{n}"] for n in buckets]
    assert sum(counts) == 6
    weighted = sum(metrics[f"eval_f1_windows_{n}"] * c for n, c in zip(buckets, counts)) / 6
    assert weighted == pytest.approx(metrics["eval_f1"])
    assert not AutoModelForQuestionAnswering.from_pretrained(tmp_path / "out").config.use_recurrence


def test_hub_config_holds_the_papers_settings_and_applies_to_a_roberta_checkpoint(tmp_path):
    import torch
    from transformers import AutoConfig, RobertaForMaskedLM

    folder = Path(__file__).resolve().parents[1] / "hub_configs" / "roberta-recurrent-hotpotqa"
    config = AutoConfig.from_pretrained(folder)
    assert (config.model_type, config.insertion_layer, config.recurrence_hidden_size, config.recurrence_pooling,
            config.num_hidden_layers, config.hidden_size, config.max_position_embeddings) == \
        ("roberta_recurrent", 1, 768, "last_layer", 12, 768, 514)  # §5.4's "second layer", counted from 0
    assert not hasattr(config, "training_hyperparameters")  # the recipe is the script's defaults, not the config's
    _, data, training = question_answering.parse_args(["--output_dir", str(tmp_path / "x")])
    assert (training.learning_rate, training.num_train_epochs, data.window_size, data.doc_stride) == (2e-5, 4, 512, 128)
    torch.manual_seed(0)
    roberta = RobertaForMaskedLM(RobertaConfig(hidden_size=32, num_hidden_layers=3, num_attention_heads=4,
                                               intermediate_size=64, max_position_embeddings=66, vocab_size=50))
    roberta.save_pretrained(tmp_path / "roberta")
    arguments = question_answering.RecurrentQAArguments(model_name_or_path=str(tmp_path / "roberta"),
                                                        config_name=str(folder), use_recurrence=False)
    model = question_answering.load_model(arguments, tokenizer=None)
    assert (model.config.insertion_layer, model.config.recurrence_hidden_size, model.config.use_recurrence,
            model.config.hidden_size) == (1, 768, False, 32)
    for key, value in roberta.roberta.state_dict().items():
        if not key.startswith("pooler."):
            torch.testing.assert_close(model.roberta.state_dict()[key], value, rtol=0, atol=0)


def test_the_baseline_in_the_recurrent_runs_folder_is_refused_not_resumed(tmp_path):
    """--use_recurrence False in the folder of a recurrent run with checkpoints: one line naming what differs, and
    the recurrent run's model kept."""
    path = tiny_setup(tmp_path, count=4)
    command = arguments(tmp_path, path, "--max_steps", "2", "--save_strategy", "steps", "--save_steps", "1")
    run_qa_recurrent(command)
    output = Path(command[command.index("--output_dir") + 1])
    weights = (output / "model.safetensors").read_bytes()
    with pytest.raises(UsageError, match=r"another model or data.*use_recurrence True \(asked: False\)"):
        run_qa_recurrent([*command, "--use_recurrence", "False"])
    assert (output / "model.safetensors").read_bytes() == weights
