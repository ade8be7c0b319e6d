"""Distillation: the loss against its formula written out, a student trained with a teacher through the runner, a
teacher of other classes refused, and the comparison of teacher, distilled and lone student over seeds."""

import json
import os
from pathlib import Path

import numpy as np
import pytest
import torch

from lengthgen.cli import UsageError
from lengthgen.commands.train import main as lengthgen_train
from lengthgen.data.scoring import spread_over_seeds
from lengthgen.reproduction.study import compare_distillation, distillation_markdown
from lengthgen.training.distillation import distillation_loss
from lengthgen.training import ExperimentResult
from lengthgen.training.runner import ExperimentTrainer
from lengthgen.training.spec import ExperimentSpec

REPO = str(Path(__file__).resolve().parents[1])
TINY = "hidden_size=16,intermediate_size=32,num_attention_heads=2,num_layers=2"
DATA = ["--dataset_name", "subject_verb_agreement", "--dataset_config_name", "attractors",
        "--dataset_param", "train_size=64", "validation_size=16", "test_size=16"]
STUDENT = ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"), "--config_overrides", TINY, *DATA,
           "--max_steps", "3", "--per_device_train_batch_size", "16", "--save_strategy", "no", "--use_cpu",
           "--disable_tqdm", "true", "--report_to", "none"]


def formula(student, teacher, labels, temperature, weight):
    """Hinton et al.'s loss written out: r T^2 KL(softmax(teacher / T) || softmax(student / T)) + (1 - r) CE."""
    p_teacher = torch.softmax(teacher / temperature, -1)
    log_p_student = torch.log_softmax(student / temperature, -1)
    kl = (p_teacher * (torch.log(p_teacher) - log_p_student)).sum(-1).mean()
    cross_entropy = -torch.log_softmax(student, -1)[torch.arange(len(labels)), labels].mean()
    return weight * temperature**2 * kl + (1 - weight) * cross_entropy


def test_distillation_loss_is_the_formula():
    torch.manual_seed(0)
    student, teacher, labels = torch.randn(5, 3), torch.randn(5, 3), torch.tensor([0, 2, 1, 1, 0])
    for temperature, weight in ((1.0, 0.9), (2.0, 0.5), (3.0, 0.0)):
        expected = formula(student, teacher, labels, temperature, weight)
        torch.testing.assert_close(distillation_loss(student, teacher, labels, temperature, weight), expected)


def train(output_dir, *extra):
    return lengthgen_train([*STUDENT, "--output_dir", str(output_dir), *extra])


def test_a_student_trains_with_a_teacher_and_the_logits_are_cached(tmp_path, monkeypatch):
    train(tmp_path / "teacher")
    cache = tmp_path / "teacher_logits.npy"
    calls = []
    original = ExperimentTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        """The training loss is the formula of the student's logits (the same dropout drawn again), the batch's
        teacher logits and labels, at T = 1 and r = 0.9 (the defaults)."""
        calls.append("teacher_logits" in inputs)
        state = torch.get_rng_state()
        loss = original(self, model, inputs, *args, **kwargs)
        if "teacher_logits" in inputs and model.training:
            torch.set_rng_state(state)
            logits = model(**{k: v for k, v in inputs.items() if k not in ("teacher_logits", "labels")}).logits
            expected = formula(logits, inputs["teacher_logits"].float(), inputs["labels"], 1.0, 0.9)
            torch.testing.assert_close(loss, expected, rtol=1e-5, atol=1e-6)
            checked.append(True)
        return loss

    checked = []
    monkeypatch.setattr(ExperimentTrainer, "compute_loss", spy)
    result = train(tmp_path / "student", "--teacher_model_name_or_path", str(tmp_path / "teacher"),
                   "--teacher_logits_cache", str(cache), "--seed", "1")
    assert calls and all(calls[:3]) and len(checked) == 3  # every training batch carried the teacher's logits
    # the cache holds the teacher's own logits (VBP, VBZ) of each training sentence, in the split's order
    from transformers import AutoModelForSequenceClassification, AutoTokenizer

    from lengthgen.data.subject_verb_agreement import generate_agreement_splits

    sentences = [row["input"] for row in generate_agreement_splits(train_size=64, validation_size=16,
                                                                   test_size=16)["train"]]
    teacher = AutoModelForSequenceClassification.from_pretrained(tmp_path / "teacher").eval()
    tokenizer = AutoTokenizer.from_pretrained(tmp_path / "teacher")
    assert [teacher.config.id2label[i] for i in range(2)] == ["VBP", "VBZ"]
    with torch.no_grad():
        own = np.stack([teacher(**tokenizer(sentence, return_tensors="pt")).logits[0].numpy()
                        for sentence in sentences])
    np.testing.assert_allclose(np.load(cache), own, rtol=1e-5, atol=1e-5)
    assert {"eval_test_accuracy_d3", "eval_test_ece_d4"} <= set(result.metrics)
    assert json.loads((tmp_path / "student" / "config.json").read_text())["id2label"] == {"0": "VBP", "1": "VBZ"}
    assert result.spec["distillation"]["teacher_model_name_or_path"] == str(tmp_path / "teacher")


def test_cached_teacher_logits_are_read_back_only_for_the_same_teacher_inputs_and_classes(tmp_path, monkeypatch):
    """The cache answers the call that wrote it without loading the teacher; other inputs of the same number, or the
    classes in another order, are computed again (and the cache rewritten), never read off another call's rows."""
    from lengthgen.training import distillation

    train(tmp_path / "teacher")
    cache = str(tmp_path / "logits.npy")
    teacher = str(tmp_path / "teacher")
    sentences = ["the key to the cabinets is", "the keys to the cabinet are"]
    first = distillation.teacher_logits(teacher, sentences, ["VBP", "VBZ"], cache)
    loads = []
    original = distillation.AutoModelForSequenceClassification.from_pretrained
    monkeypatch.setattr(distillation.AutoModelForSequenceClassification, "from_pretrained",
                        lambda *a, **k: loads.append(a) or original(*a, **k))
    np.testing.assert_array_equal(distillation.teacher_logits(teacher, sentences, ["VBP", "VBZ"], cache), first)
    assert not loads
    other = distillation.teacher_logits(teacher, sentences[::-1], ["VBP", "VBZ"], cache)
    np.testing.assert_allclose(other, first[::-1], rtol=1e-5, atol=1e-6)
    swapped = distillation.teacher_logits(teacher, sentences[::-1], ["VBZ", "VBP"], cache)
    np.testing.assert_allclose(swapped, other[:, ::-1], rtol=1e-5, atol=1e-6)
    assert len(loads) == 2


def test_a_teacher_of_other_classes_is_refused(tmp_path):
    lengthgen_train(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"), "--config_overrides", TINY,
         "--dataset_name", "ctl", "--dataset_config_name", "backward",
         "--dataset_param", "train_size=100", "validation_iid_size=10", "validation_size=10", "test_size=10",
         "--output_dir", str(tmp_path / "ctl"), "--max_steps", "1", "--save_strategy", "no",
         "--use_cpu", "--report_to", "none", "--do_eval", "false"]
    )
    with pytest.raises(UsageError, match="distillation needs the same label set"):
        train(tmp_path / "student", "--teacher_model_name_or_path", str(tmp_path / "ctl"))


def test_compare_distillation_runs_teacher_distilled_and_alone_and_resumes(tmp_path, monkeypatch):
    train(tmp_path / "teacher")
    spec = ExperimentSpec.from_args([*STUDENT, "--teacher_model_name_or_path", str(tmp_path / "teacher"),
                                     "--output_dir", str(tmp_path / "d"), "--max_steps", "2"])
    record = compare_distillation(spec, [0, 1], str(tmp_path / "d"))
    summary = record["summary"]
    assert list(summary) == ["teacher", "distilled", "alone"]
    for name, run in summary.items():
        assert run["seeds"] == 2
        assert set(run["accuracy"]["test"]) == {"3", "4", "all"} and set(run["ece"]["test"]) == {"3", "4", "all"}
        # each number is the mean and spread of the runs' own results, seed by seed
        # (the teacher, evaluated as it is, once: the same numbers stand for both seeds)
        results = [ExperimentResult.load(str(tmp_path / "d" / f"seed{0 if name == 'teacher' else seed}" / name))
                   for seed in (0, 1)]
        for metric in ("accuracy", "ece"):
            for difficulty in ("3", "4", "all"):
                values = [r.scores["test"][difficulty][metric] for r in results]
                entry = run[metric]["test"][difficulty]
                assert entry["values"] == values and entry["mean"] == pytest.approx(sum(values) / 2)
    # the distilled student and the lone one differ only in the teacher: their runs' specs say so
    distilled = json.loads((tmp_path / "d" / "seed1" / "distilled" / "lengthgen_results.json").read_text())["spec"]
    alone = json.loads((tmp_path / "d" / "seed1" / "alone" / "lengthgen_results.json").read_text())["spec"]
    assert distilled["training"] == alone["training"] and distilled["training"]["seed"] == 1
    assert "distillation" in distilled and "distillation" not in alone
    saved = json.loads((tmp_path / "d" / "distillation.json").read_text())
    assert saved["weight"] == 0.9 and saved["summary"] == summary and saved["seeds"] == [0, 1]
    assert "| test | 3 |" in (tmp_path / "d" / "distillation.md").read_text()
    assert (tmp_path / "d" / "teacher_logits.npy").is_file()
    # given again, the finished students are read back, not trained again
    monkeypatch.setattr(ExperimentTrainer, "train", lambda *a, **k: pytest.fail("a finished run trained again"))
    assert compare_distillation(spec, [0, 1], str(tmp_path / "d"))["summary"] == summary


def test_the_summary_is_the_mean_and_spread_of_every_number():
    spread = spread_over_seeds([{"all": 0.6, "3": 0.6}, {"all": 0.8, "3": 0.8}])
    # sample standard deviation of 0.6 and 0.8: sqrt(((-0.1)^2 + 0.1^2) / (2 - 1)) = sqrt(0.02)
    assert spread["all"]["values"] == [0.6, 0.8] and spread["all"]["mean"] == pytest.approx(0.7)
    assert spread["all"]["std"] == pytest.approx(0.02**0.5) and list(spread) == ["3", "all"]
    run = {"seeds": 2, "accuracy": {"test": spread}, "ece": {"test": spread_over_seeds([{"all": 0.2}, {"all": 0.2}])}}
    assert "| test | all | 0.700 +- 0.141 | 0.200 +- 0.000 |" in distillation_markdown({"alone": run})


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--teacher_model_name_or_path", "./no/such/teacher"], "no/such/teacher"),
        (["--teacher_model_name_or_path", ".", "--config_name", "no/such/config"],
         "no such file or directory: no/such/config"),
        (["--teacher_model_name_or_path", ".", "--seeds", "0"], "--seeds must be at least 1"),
        (["--config_name", "."], "--teacher_model_name_or_path is required"),
        (["--teacher_model_name_or_path", ".", "--max_train_seconds", "60"],
         "--max_train_seconds: each run of the comparison trains to its end"),
    ],
)
def test_run_distillation_mistakes_are_one_line(arguments, message, tmp_path, capsys, monkeypatch):
    """In this process, through the script's own main (loaded from its file); tests/test_command_errors.py runs it as
    a user does."""
    import importlib.util

    from lengthgen.cli import run_command

    spec = importlib.util.spec_from_file_location(
        "run_distillation", os.path.join(REPO, "examples", "run_distillation.py")
    )
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    monkeypatch.chdir(REPO)
    defaults = ["--dataset_name", "ctl", "--output_dir", str(tmp_path)]
    if "--config_name" not in arguments:
        defaults += ["--config_name", "."]
    with pytest.raises(SystemExit) as stop:
        run_command(script.main, "run_distillation.py", [*defaults, *arguments])
    err = capsys.readouterr().err
    assert stop.value.code == 2 and message in err and "Traceback" not in err
