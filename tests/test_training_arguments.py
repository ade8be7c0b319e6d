"""The training arguments (lengthgen.training.arguments): TensorBoard unless `--report_to none`, its logs under the
output folder even in a run that only evaluates, and the wall-clock budget in the recurrent LM training too."""

import json
import types
import warnings
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file
from test_run_clm_recurrent import write_wikitext
from transformers import GPT2Config

from lengthgen.commands.train import main as train
from lengthgen.data.tokenization import word_tokenizer
from lengthgen.training import causal_lm, pieces
from lengthgen.training.arguments import TrainingArguments

REPO = Path(__file__).resolve().parents[1]


def event_files(root: Path) -> list[Path]:
    return sorted(root.rglob("events.out.tfevents.*"))


def classify(output_dir: Path, *extra):
    """A tiny NDR on CTL: trained 2 steps, or only evaluated when `extra` names a --model_name_or_path."""
    model = [] if "--model_name_or_path" in extra else [
        "--config_name", str(REPO / "hub_configs/ndr-ctl"), "--config_overrides", "hidden_size=16,intermediate_size=32",
        "--do_train"]
    return train(
        [*model, "--dataset_name", "ctl", "--dataset_config_name", "backward", "--dataset_param", "train_size=200",
         "validation_iid_size=10", "validation_size=10", "test_size=10", "--output_dir", str(output_dir), "--do_eval",
         "--max_steps", "2", "--per_device_train_batch_size", "4", "--save_strategy", "no", "--use_cpu",
         "--disable_tqdm", "true", *extra], train_and_evaluate=False)


@pytest.mark.parametrize("do_train", [True, False])
def test_tensorboard_by_default_logs_under_the_output_dir(tmp_path, monkeypatch, do_train):
    """No --report_to: TensorBoard events under <output_dir>/runs, none in the working directory, whether the run trains
    or only evaluates (transformers alone opens ./runs for an evaluation-only run)."""
    monkeypatch.chdir(tmp_path)
    classify(tmp_path / "out", *([] if do_train else ["--model_name_or_path", str(trained(tmp_path))]))
    logs = event_files(tmp_path / "out")
    assert logs and all(path.parent.parent == tmp_path / "out" / "runs" for path in logs)
    assert not (tmp_path / "runs").exists()


def test_every_script_pins_memory_only_where_an_accelerator_takes_it(tmp_path):
    """transformers pins the data loaders' memory by default, and torch warns at every loader where no accelerator
    takes pinned memory: the classification runner's, the recurrent LM's and the QA script's arguments give loaders
    torch has nothing to say about."""
    from torch.utils.data import DataLoader

    from lengthgen.training import question_answering

    runner = TrainingArguments(output_dir=str(tmp_path))
    recurrent = causal_lm.parse_args(["--model_name_or_path", "gpt2", "--corpus", "wikitext103",
                                      "--output_dir", str(tmp_path)])[-1]
    qa = question_answering.parse_args(["--model_name_or_path", "roberta-base", "--output_dir", str(tmp_path)])[-1]
    for arguments in (runner, recurrent, qa):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            next(iter(DataLoader([torch.zeros(2)], pin_memory=arguments.dataloader_pin_memory)))
        assert not [w for w in caught if "pin_memory" in str(w.message)], type(arguments).__name__


def trained(tmp_path: Path) -> Path:
    model = tmp_path / "model"
    classify(model, "--report_to", "none")
    return model


def test_report_to_none_logs_nowhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    classify(tmp_path / "out", "--report_to", "none")
    assert (tmp_path / "out" / "model.safetensors").exists()
    assert event_files(tmp_path) == []


def test_the_recurrent_lm_script_stops_by_its_budget_and_resumes(tmp_path, monkeypatch):
    """run_clm_recurrent.py takes --max_train_seconds: a clock that advances one second per reading stops training
    after step 9 of 20 with a checkpoint; the same command without the budget resumes from it and ends with the weights
    of one uninterrupted run."""
    raw = tmp_path / "wikitext"
    word_tokenizer(list(write_wikitext(raw).values())).save_pretrained(tmp_path / "tokenizer")
    GPT2Config(n_positions=16, n_embd=16, n_layer=2, n_head=2).save_pretrained(tmp_path / "config")  # dropout 0.1

    def run(output, *extra):
        return causal_lm.train_and_evaluate(*causal_lm.parse_args([
            "--config_name", str(tmp_path / "config"), "--tokenizer_name", str(tmp_path / "tokenizer"),
            "--corpus", "wikitext103", "--train_file", str(raw / "wiki.train.raw"),
            "--validation_file", str(raw / "wiki.valid.raw"), "--window_size", "8", "--windows_per_example", "2",
            "--insertion_layer", "1", "--output_dir", str(output), "--do_train", "--max_steps", "20",
            "--per_device_train_batch_size", "2", "--save_strategy", "no", "--report_to", "none", "--seed", "0",
            *extra]))

    run(tmp_path / "whole")
    ticks = iter(range(10**6))
    monkeypatch.setattr(pieces, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    pieced = tmp_path / "pieces"
    run(pieced, "--max_train_seconds", "10")
    assert sorted(p.name for p in pieced.iterdir() if p.name.startswith("checkpoint-")) == ["checkpoint-9"]
    resumed_from = []
    train = causal_lm.DocumentPerplexityTrainer.train
    monkeypatch.setattr(causal_lm.DocumentPerplexityTrainer, "train", lambda self, resume_from_checkpoint=None,
                        **kwargs: resumed_from.append(resume_from_checkpoint) or train(self, resume_from_checkpoint))
    run(pieced)
    assert resumed_from == [str(pieced / "checkpoint-9")]
    assert json.loads((pieced / "trainer_state.json").read_text())["global_step"] == 20
    whole, resumed = load_file(tmp_path / "whole" / "model.safetensors"), load_file(pieced / "model.safetensors")
    assert whole.keys() == resumed.keys()
    for name in whole:
        torch.testing.assert_close(resumed[name], whole[name], rtol=0, atol=1e-6)


def test_a_list_flag_given_twice_keeps_the_values_of_both(tmp_path, monkeypatch):
    """`--dataset_param a=1 --dataset_param b=2` means both, in `lengthgen train` (HfArgumentParser, where argparse
    would keep the last) and in `lengthgen leaderboard`; other flags keep their places."""
    from lengthgen.commands import leaderboard
    from lengthgen.training.arguments import DataArguments, ModelArguments, parse_command_line

    _, data, training = parse_command_line(
        (ModelArguments, DataArguments, TrainingArguments),
        ["--model_type", "ndr", "--dataset_name", "ctl", "--dataset_param", "train_size=3", "--max_steps", "-1",
         "--output_dir", "out", "--dataset_param", "test_size=4", "validation_size=5", "--dataset_param=seed=6"])
    assert data.dataset_param == ["train_size=3", "test_size=4", "validation_size=5", "seed=6"]
    assert training.max_steps == -1 and training.output_dir == "out"
    seen = {}
    monkeypatch.setattr(leaderboard, "run_grid", lambda *args, **kwargs: seen.setdefault("params", args[6]) and [])
    leaderboard.main(["--models", "lstm", "--tasks", "chomsky_hierarchy/parity_check", "--output_dir",
                      str(tmp_path), "--dataset_param", "train_size=3", "--dataset_param", "test_size=4"])
    assert seen["params"] == {"train_size": 3, "test_size": 4}
