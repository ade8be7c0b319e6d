"""Distillation: the loss against its formula written out, a student trained with a teacher through
run_classification.py, and a teacher of other classes refused."""

import json
import os
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from lengthgen.training.distillation import distillation_loss

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "examples"))
import run_classification  # noqa: E402

REPO = str(Path(__file__).resolve().parents[1])
TINY = "hidden_size=16,intermediate_size=32,num_attention_heads=2,num_layers=2"
DATA = ["--dataset_name", "subject_verb_agreement", "--dataset_config_name", "attractors",
        "--dataset_param", "train_size=64", "validation_size=16", "test_size=16"]


def test_distillation_loss_is_the_formula():
    torch.manual_seed(0)
    student, teacher, labels = torch.randn(5, 3), torch.randn(5, 3), torch.tensor([0, 2, 1, 1, 0])
    for temperature, weight in ((1.0, 0.9), (2.0, 0.5), (3.0, 0.0)):
        p_teacher = torch.softmax(teacher / temperature, -1)
        log_p_student = torch.log_softmax(student / temperature, -1)
        kl = (p_teacher * (torch.log(p_teacher) - log_p_student)).sum(-1).mean()
        cross_entropy = -torch.log_softmax(student, -1)[torch.arange(5), labels].mean()
        expected = weight * temperature**2 * kl + (1 - weight) * cross_entropy
        torch.testing.assert_close(distillation_loss(student, teacher, labels, temperature, weight), expected)


def train(output_dir, *extra):
    return run_classification.main(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"), "--config_overrides", TINY, *DATA,
         "--output_dir", str(output_dir), "--do_train", "--do_eval", "--max_steps", "3",
         "--per_device_train_batch_size", "16", "--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true",
         "--report_to", "none", *extra]
    )


def test_a_student_trains_with_a_teacher_and_the_logits_are_cached(tmp_path):
    train(tmp_path / "teacher")
    cache = tmp_path / "teacher_logits.npy"
    calls = []
    original = run_classification.ClassificationTrainer.compute_loss

    def spy(self, model, inputs, *args, **kwargs):
        calls.append("teacher_logits" in inputs)
        return original(self, model, inputs, *args, **kwargs)

    run_classification.ClassificationTrainer.compute_loss = spy
    try:
        metrics = train(tmp_path / "student", "--teacher_model_name_or_path", str(tmp_path / "teacher"),
                        "--teacher_logits_cache", str(cache), "--seed", "1")
    finally:
        run_classification.ClassificationTrainer.compute_loss = original
    assert calls and all(calls[:3])  # every training batch carried the teacher's logits
    assert np.load(cache).shape == (64, 2)  # VBZ / VBP for each training sentence
    assert {"eval_test_accuracy_d3", "eval_test_ece_d4"} <= set(metrics)
    assert json.loads((tmp_path / "student" / "config.json").read_text())["id2label"] == {"0": "VBP", "1": "VBZ"}


def test_a_teacher_of_other_classes_is_refused(tmp_path):
    run_classification.main(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"), "--config_overrides", TINY,
         "--dataset_name", "ctl", "--dataset_config_name", "backward",
         "--dataset_param", "train_size=100", "validation_iid_size=10", "validation_size=10", "test_size=10",
         "--output_dir", str(tmp_path / "ctl"), "--do_train", "--max_steps", "1", "--save_strategy", "no",
         "--use_cpu", "--report_to", "none"]
    )
    with pytest.raises(ValueError, match="distillation needs the same label set"):
        train(tmp_path / "student", "--teacher_model_name_or_path", str(tmp_path / "ctl"))


def test_run_distillation_compares_teacher_distilled_and_alone(tmp_path):
    import run_distillation

    train(tmp_path / "teacher")
    results = run_distillation.main(
        ["--teacher", str(tmp_path / "teacher"), "--student_config", os.path.join(REPO, "hub_configs/ndr-ctl"),
         "--student_overrides", TINY, *DATA[:4], "--dataset_param", *DATA[5:], "--output_dir", str(tmp_path / "d"),
         "--threads", "1", "--", "--max_steps", "2", "--per_device_train_batch_size", "16", "--use_cpu",
         "--report_to", "none", "--save_strategy", "no"]
    )
    assert list(results) == ["teacher", "distilled", "alone"]
    for run in results.values():
        assert set(run["accuracy"]["test"]) == {"all", "3", "4"} and set(run["ece"]["test"]) == {"all", "3", "4"}
    saved = json.loads((tmp_path / "d" / "distillation.json").read_text())
    assert saved["weight"] == 0.9 and saved["results"] == results
    assert "| test | 3 |" in (tmp_path / "d" / "distillation.md").read_text()
    assert (tmp_path / "d" / "teacher_logits.npy").is_file()


@pytest.mark.parametrize(
    "arguments, message",
    [
        (["--teacher", "./no/such/teacher"], "no/such/teacher"),
        (["--teacher", ".", "--student_config", "no/such/config"], "no such folder: no/such/config"),
        (["--teacher", ".", "--student_config", ".", "--", "--seed", "3"], "--seed is set by this script"),
        (["--teacher", ".", "--student_config", ".", "--seeds", "0"], "--seeds must be at least 1"),
        (["--teacher", ".", "--student_config", ".", "--threads", "0"], "--threads must be at least 1, got 0"),
    ],
)
def test_run_distillation_mistakes_are_one_line(arguments, message, tmp_path):
    import subprocess

    defaults = ["--dataset_name", "ctl", "--output_dir", str(tmp_path)]
    if "--student_config" not in arguments:
        defaults += ["--student_config", "."]
    result = subprocess.run([sys.executable, os.path.join(REPO, "examples", "run_distillation.py"), *defaults,
                             *arguments], capture_output=True, text=True, cwd=REPO)
    assert result.returncode == 2 and message in result.stderr and "Traceback" not in result.stderr


def test_seed_summary_is_the_mean_and_spread_of_every_number():
    import run_distillation

    def run(acc, ece):
        return {"accuracy": {"test": {"all": acc, "3": acc}}, "ece": {"test": {"all": ece, "3": ece}}}

    per_seed = [{"teacher": run(1.0, 0.0), "alone": run(0.6, 0.3)}, {"teacher": run(1.0, 0.0), "alone": run(0.8, 0.1)}]
    summary = run_distillation.seed_summary(per_seed)
    alone = summary["alone"]["accuracy"]["test"]["all"]
    # sample standard deviation of 0.6 and 0.8: sqrt(((-0.1)^2 + 0.1^2) / (2 - 1)) = sqrt(0.02)
    assert alone["values"] == [0.6, 0.8] and abs(alone["mean"] - 0.7) < 1e-12 and abs(alone["std"] - 0.02**0.5) < 1e-12
    assert summary["teacher"]["ece"]["test"]["3"]["std"] == 0.0
    assert "| test | all | 1.000 +- 0.000 | 0.000 +- 0.000 | 0.700 +- 0.141 | 0.200 +- 0.141 |" in \
        run_distillation.summary_markdown(summary)


def test_run_distillation_seeds_keeps_finished_seeds_and_summarizes(tmp_path):
    """A seed whose distillation.json exists is not run again (no process starts here: every seed is finished)."""
    import run_distillation

    train(tmp_path / "teacher")
    for seed, acc in ((0, 0.5), (1, 0.7)):
        (tmp_path / "d" / f"seed{seed}").mkdir(parents=True)
        table = {"accuracy": {"test": {"all": acc}}, "ece": {"test": {"all": 1 - acc}}}
        results = {"teacher": table, "distilled": table, "alone": table}
        (tmp_path / "d" / f"seed{seed}" / "distillation.json").write_text(json.dumps({"results": results}))
    summary = run_distillation.main(
        ["--teacher", str(tmp_path / "teacher"), "--student_config", os.path.join(REPO, "hub_configs/ndr-ctl"),
         *DATA[:4], "--output_dir", str(tmp_path / "d"), "--seeds", "2", "--threads", "1"]
    )
    assert abs(summary["distilled"]["accuracy"]["test"]["all"]["mean"] - 0.6) < 1e-12
    saved = json.loads((tmp_path / "d" / "distillation_seeds.json").read_text())
    assert saved["seeds"] == 2 and saved["summary"] == summary
    assert saved["hardware"]["threads"] == 1  # the runs' threads, recorded beside the figures
    assert not (tmp_path / "d" / "seed0" / "teacher").exists()
