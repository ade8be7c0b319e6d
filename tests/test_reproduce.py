"""benchmarks/reproduce.py on tiny presets: results JSON and plot, resumption, the num_steps table."""

import dataclasses
import json
import os
import shutil
import sys

import pytest
import torch

from lengthgen.training.pieces import unpack_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "benchmarks"))
import reproduce  # noqa: E402

TINY_CTL = ["train_size=300", "validation_iid_size=20", "validation_size=30", "test_size=20"]


@pytest.fixture
def tiny_presets(monkeypatch):
    """The CTL NDR preset and its transformer baseline, tiny and a few steps long."""
    presets = {}
    for name in ("ndr-ctl-backward", "transformer-ctl-backward"):
        preset = reproduce.PRESETS[name]
        training = list(preset.training)
        for flag, value in (("--max_steps", "6"), ("--eval_steps", "3"), ("--save_steps", "3"),
                            ("--per_device_train_batch_size", "32")):
            training[training.index(flag) + 1] = value
        presets[name] = dataclasses.replace(
            preset, training=training + ["--disable_tqdm", "true"], dataset_params=TINY_CTL,
            overrides=preset.overrides + ",hidden_size=16,intermediate_size=32,num_layers=2",
            deeper={"test_depths": (11, 12), "test_size": 40} if preset.deeper else None,
        )
    monkeypatch.setattr(reproduce, "PRESETS", presets)
    return presets


def test_reproduce_writes_results_and_plot_and_resumes(tiny_presets, tmp_path, capsys):
    results_dir, output_root = tmp_path / "results", tmp_path / "runs"
    baseline = reproduce.reproduce("transformer-ctl-backward", str(output_root), "fp32", str(results_dir))
    result = reproduce.reproduce("ndr-ctl-backward", str(output_root), "fp32", str(results_dir))
    assert (results_dir / "ndr-ctl-backward.png").stat().st_size > 0
    saved = json.loads((results_dir / "ndr-ctl-backward.json").read_text())
    assert saved["training"]["steps"] == 6 and saved["train_range"] == [1, 5]
    assert saved["model_config"]["num_layers"] == 2 and saved["model_config"]["attention_type"] == "geometric"
    assert saved["hardware"]["threads"] >= 1 and saved["precision"] == "fp32"
    # per-depth accuracy is the example script's evaluation, split by split
    metrics = json.loads((output_root / "ndr-ctl-backward" / "all_results.json").read_text())
    assert saved["accuracy"]["test"]["all"] == metrics["eval_test_accuracy"]
    assert {d: saved["accuracy"]["validation"][str(d)] for d in (6, 7, 8)} == {
        d: metrics[f"eval_validation_accuracy_d{d}"] for d in (6, 7, 8)}
    # the baseline's numbers beside this run's, the target judged
    assert saved["baseline"]["accuracy"] == baseline["accuracy"]
    # and the baseline, finished first, now carries this run beside it
    first = json.loads((results_dir / "transformer-ctl-backward.json").read_text())
    assert first["baseline"] == {"name": "ndr-ctl-backward", "accuracy": saved["accuracy"]}
    assert saved["target"]["reached"] == saved["accuracy"]["test"]["all"]
    assert saved["target"]["met"] == (saved["accuracy"]["test"]["all"] >= 0.95)
    assert baseline["target"] is None  # a baseline has no target to meet
    assert [p["step"] for p in saved["learning_curve"] if "eval_accuracy" in p] == [3, 6]

    # the same command again, from the command line: nothing retrained, the same model evaluated again, its results
    # written to --results-dir (docs/results/ untouched)
    run_dir = output_root / "ndr-ctl-backward"
    published = os.path.join(REPO, "docs", "results", "ndr-ctl-backward.json")
    published_before = os.stat(published).st_mtime_ns
    reproduce.main(["ndr-ctl-backward", "--precision", "fp32", "--output-root", str(output_root),
                    "--results-dir", str(results_dir), "--pack-to", str(tmp_path / "piece")])
    again = json.loads((results_dir / "ndr-ctl-backward.json").read_text())
    assert again["training"]["steps"] == 6 and again["accuracy"] == result["accuracy"]
    assert os.stat(published).st_mtime_ns == published_before
    assert len(json.loads((run_dir / "reproduce_wall_seconds.json").read_text())) == 1
    record = json.loads((run_dir / "lengthgen_run.json").read_text())
    assert record["reproduce_command"] == "python benchmarks/reproduce.py ndr-ctl-backward"
    assert "--do_train" in record["command"] and "--config_overrides" in record["command"]  # the training command
    # the piece carries the run record: unpacked on another machine, the run's folder knows how it was trained
    unpack_checkpoint(str(tmp_path / "piece"), str(tmp_path / "elsewhere-run"))
    assert json.loads((tmp_path / "elsewhere-run" / "lengthgen_run.json").read_text()) == record

    # interrupted after the checkpoint at step 3: the same command trains steps 4-6 only
    shutil.rmtree(run_dir / "checkpoint-6")
    os.remove(run_dir / "trainer_state.json")
    resumed = reproduce.reproduce("ndr-ctl-backward", str(output_root), "fp32", str(results_dir))
    assert resumed["training"]["steps"] == 6
    assert [p["step"] for p in resumed["learning_curve"] if "loss" in p] == [p["step"] for p in saved["learning_curve"] if "loss" in p]
    assert len(json.loads((run_dir / "reproduce_wall_seconds.json").read_text())) == 2
    assert not (run_dir / reproduce.PIECE_FILE).exists()  # a session that returned leaves no start behind

    table = reproduce.results_table(str(results_dir))
    assert "| ndr-ctl-backward | thesis Table 5.1 | test  |" in table and "1.00" in table
    capsys.readouterr()
    reproduce.main(["--table", "--results-dir", str(results_dir)])
    assert capsys.readouterr().out.strip() == table.strip()

    steps = reproduce.num_steps_table("ndr-ctl-backward", str(output_root), str(results_dir), steps=(2, 4))
    assert set(steps) == {"validation", "test", "deeper"} and set(steps["deeper"]) == {"2", "4"}
    assert set(steps["deeper"]["4"]) == {"all", "11", "12"} and set(steps["test"]["2"]) == {"all", "9", "10"}
    # the trained number of steps on the test split is the run's own evaluation of it
    assert steps["test"]["2"]["all"] == pytest.approx(saved["accuracy"]["test"]["all"], abs=1e-6)
    stored = json.loads((results_dir / "ndr-ctl-backward.json").read_text())["num_steps_table"]
    assert stored["accuracy"] == steps and stored["trained_steps"] == 2
    # evaluating the same checkpoint again keeps its num_steps table
    reproduce.reproduce("ndr-ctl-backward", str(output_root), "fp32", str(results_dir))
    assert json.loads((results_dir / "ndr-ctl-backward.json").read_text())["num_steps_table"] == stored

    # the last checkpoint instead (a piece's end): with checkpoint-6 gone, checkpoint-3, whose validation accuracy at
    # the trained 2 steps the Trainer logged at step 3
    shutil.rmtree(run_dir / "checkpoint-6")
    last = reproduce.num_steps_table("ndr-ctl-backward", str(output_root), str(results_dir), steps=(2,),
                                     last_checkpoint=True)
    logged = next(p for p in saved["learning_curve"] if p["step"] == 3 and "eval_accuracy" in p)
    assert last["validation"]["2"]["all"] == pytest.approx(logged["eval_accuracy"], abs=1e-6)
    assert json.loads((results_dir / "ndr-ctl-backward.json").read_text())["num_steps_table"]["model"] == "checkpoint-3"
    # a results folder without the run's JSON: refused before the minutes of evaluation, naming the file
    with pytest.raises(reproduce.UsageError, match="no results JSON .*elsewhere.ndr-ctl-backward.json"):
        reproduce.num_steps_table("ndr-ctl-backward", str(output_root), str(tmp_path / "elsewhere"),
                                  last_checkpoint=True)
    for folder in run_dir.glob("checkpoint-*"):
        shutil.rmtree(folder)
    with pytest.raises(reproduce.UsageError, match="no checkpoint in"):
        reproduce.num_steps_table("ndr-ctl-backward", str(output_root), str(results_dir), last_checkpoint=True)


def test_a_killed_session_counts_until_its_last_checkpoint(tmp_path):
    """A session stopped by a kill wrote no wall time; the next one counts it from its recorded start to its last
    checkpoint's save (the steps after that were lost), once."""
    (tmp_path / reproduce.WALL_FILE).write_text("[100.0]")
    (tmp_path / reproduce.PIECE_FILE).write_text(json.dumps({"started": 1_000_000.0}))
    for step, saved in ((3, 1_000_020.0), (6, 1_000_045.0)):
        (tmp_path / f"checkpoint-{step}").mkdir()
        (tmp_path / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
        os.utime(tmp_path / f"checkpoint-{step}" / "trainer_state.json", (saved, saved))
    assert reproduce.training_wall_seconds(str(tmp_path)) == [100.0, 45.0]
    assert not (tmp_path / reproduce.PIECE_FILE).exists()
    assert reproduce.training_wall_seconds(str(tmp_path)) == [100.0, 45.0]
    # killed before its first checkpoint of its own: nothing to count
    (tmp_path / reproduce.PIECE_FILE).write_text(json.dumps({"started": 2_000_000.0}))
    assert reproduce.training_wall_seconds(str(tmp_path)) == [100.0, 45.0]
    assert json.loads((tmp_path / reproduce.WALL_FILE).read_text()) == [100.0, 45.0]


def test_evaluating_the_last_checkpoint_does_not_train():
    with pytest.raises(reproduce.UsageError, match="evaluates without training"):
        reproduce.parse_args(["ndr-ctl-backward", "--num-steps-table", "last-checkpoint", "--max-train-seconds", "60"])


def test_unknown_preset_lists_the_valid_ones(capsys):
    with pytest.raises(SystemExit):
        reproduce.parse_args(["ndr-ctl-sideways"])
    assert "ndr-ctl-backward" in capsys.readouterr().err


def test_paper_scale_presets_are_the_hub_configs_cards_commands():
    """The -paper presets train the hub_configs/ model as it is with the arguments its card gives, without --use_cpu
    (the GPU when there is one), batches binned by length; a budget reaches the script as --max_train_seconds."""
    card = open(os.path.join(REPO, "hub_configs", "ndr-listops", "README.md")).read()
    args = reproduce.script_arguments("ndr-listops-paper", reproduce.PRESETS["ndr-listops-paper"], "out", "bf16",
                                      max_train_seconds=480)
    last = {flag: args[len(args) - 1 - args[::-1].index(flag) + 1] for flag in args if flag.startswith("--")}
    assert last["--config_name"].endswith(os.path.join("hub_configs", "ndr-listops")) and last["--config_overrides"] == ""
    for flag in ("--learning_rate", "--weight_decay", "--per_device_train_batch_size", "--max_steps", "--max_grad_norm",
                 "--num_steps"):  # the value the script gets last is the card's
        assert float(last[flag]) == float(card.split(flag)[1].split()[0]), flag
    assert "--train_sampling_strategy" in args and "--bf16" in args
    assert ("--use_cpu" in args) != torch.cuda.is_available()  # the GPU when there is one, else the CPU
    assert args[args.index("--max_train_seconds") + 1] == "480"
    trained = reproduce.script_arguments("ndr-listops-paper", reproduce.PRESETS["ndr-listops-paper"], "out", "bf16",
                                         trained=True, max_train_seconds=480)
    assert "--bf16" not in trained and "--max_train_seconds" not in trained  # evaluated again in fp32, no budget
    assert reproduce.PRESETS["ndr-listops-paper"].cpu_precision == "auto"
    assert reproduce.PRESETS["ndr-listops"].cpu_precision == "fp32"  # measured slower in bf16 at 64 wide


def test_every_presets_training_arguments_parse_as_the_scripts_parse_them():
    """Every flag of every preset is one the example script's TrainingArguments (or its own few) know: a flag that
    transformers renamed fails here, not after a GPU machine was started."""
    from transformers import HfArgumentParser

    from lengthgen.training.arguments import TrainingArguments

    script_flags = {"--num_steps", "--lr_decay_per_epoch", "--eval_train_samples"}  # the scripts' own dataclasses
    parser = HfArgumentParser(TrainingArguments)
    for name, preset in reproduce.PRESETS.items():
        args = reproduce.script_arguments(name, preset, "out", "fp32", max_train_seconds=60)
        training = args[args.index("--output_dir"):]
        _, rest = parser.parse_args_into_dataclasses(training, return_remaining_strings=True)
        unknown = [flag for flag in rest if flag.startswith("--") and flag not in script_flags]
        assert not unknown, (name, unknown)


@pytest.mark.parametrize("name", ["ndr-listops-128-binned-40k-decay", "ndr-listops-128-binned-40k-decay-6k",
                                  "ndr-listops-128-binned-44k-decay"])
def test_the_annealed_listops_preset_resumes_its_constant_run_at_the_same_rate_then_follows_a_cosine_to_zero(name):
    """The annealed ListOps presets resume the constant-rate 40K-step checkpoint under transformers' warmup-stable-decay
    schedule: loaded from the constant run's saved state (as the Trainer does on resume), the rate stays the constant
    run's from the resumed step until the decay's last T steps, and then is that rate * (1 + cos(pi * t / T)) / 2."""
    import math

    from transformers import get_scheduler

    training = reproduce.PRESETS[name].training_flags()
    parent = reproduce.PRESETS["ndr-listops-128-binned-40k"].training_flags()
    resumed_at, max_steps = int(parent["--max_steps"][0]), int(training["--max_steps"][0])
    kwargs = json.loads(training["--lr_scheduler_kwargs"][0])
    decay = kwargs["num_decay_steps"]
    rate = float(training["--learning_rate"][0])
    assert resumed_at + decay <= max_steps and parent["--lr_scheduler_type"] == ["constant"]
    assert parent["--learning_rate"] == training["--learning_rate"]

    def optimizer():
        return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=rate)

    constant_optimizer = optimizer()
    constant = get_scheduler("constant", constant_optimizer)
    for _ in range(resumed_at):
        constant_optimizer.step()
        constant.step()
    resumed_optimizer = optimizer()
    resumed_optimizer.load_state_dict(constant_optimizer.state_dict())
    annealed = get_scheduler(training["--lr_scheduler_type"][0], resumed_optimizer, num_warmup_steps=0,
                             num_training_steps=max_steps, scheduler_specific_kwargs=kwargs)
    annealed.load_state_dict(constant.state_dict())
    rates = []
    for _ in range(max_steps - resumed_at):
        rates.append(resumed_optimizer.param_groups[0]["lr"])
        resumed_optimizer.step()
        annealed.step()
    stable = max_steps - decay - resumed_at
    expected = [rate] * stable + [rate * (1 + math.cos(math.pi * t / decay)) / 2 for t in range(decay)]
    assert rates[0] == rate and rates == pytest.approx(expected, rel=1e-9, abs=1e-12)
    assert resumed_optimizer.param_groups[0]["lr"] == pytest.approx(0, abs=1e-12)


def test_a_presets_seed_reaches_the_script_once():
    """A preset that repeats a run with another draw sets `seed`; the script gets that one --seed and nothing else
    changes (its parent's training arguments, e.g. the 30-epoch I-BERT recipe, are inherited)."""
    parent = reproduce.script_arguments("ibert-nsp-add-30epochs", reproduce.PRESETS["ibert-nsp-add-30epochs"], "out", "bf16")
    child = reproduce.script_arguments("ibert-nsp-add-30epochs-seed2", reproduce.PRESETS["ibert-nsp-add-30epochs-seed2"],
                                       "out", "bf16")
    assert child.count("--seed") == 1 and child[child.index("--seed") + 1] == "2"
    assert parent[parent.index("--seed") + 1] == "0"
    child[child.index("--seed") + 1] = "0"
    assert child == parent


@pytest.mark.parametrize("name, done, not_done", [
    ("ndr-ctl-backward-128-8steps", {"global_step": 20000, "epoch": 3.0}, {"global_step": 19999, "epoch": 3.0}),
    ("ibert-nsp-add", {"global_step": 1, "epoch": 10.0}, {"global_step": 10 ** 6, "epoch": 9.9}),
])
def test_training_finished_reads_the_presets_max_steps_or_epochs(name, done, not_done, tmp_path):
    """A step preset ends at its --max_steps (the 8-step CTL preset inherits 20,000), an epoch preset at its
    --num_train_epochs (10 for I-BERT add), whatever the other count says."""
    assert not reproduce.training_finished(str(tmp_path), reproduce.PRESETS[name])  # no trainer_state.json yet
    for state, finished in ((done, True), (not_done, False)):
        (tmp_path / "trainer_state.json").write_text(json.dumps(state))
        assert reproduce.training_finished(str(tmp_path), reproduce.PRESETS[name]) is finished
