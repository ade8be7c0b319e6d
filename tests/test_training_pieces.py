"""Training in pieces: a run stopped by its wall-clock budget, moved as packed files and resumed, ends where one
uninterrupted run ends; a thesis-size NDR checkpoint packs into files that fit in what a machine with a size-limited
output (at most 8 files of 16 MiB) can hand back."""

import json
import os
import shutil
import types

import pytest
import torch
from safetensors.torch import load_file

from lengthgen.commands.train import main as lengthgen_train
from lengthgen.training import pieces

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CTL_PARAMS = ["train_size=200", "validation_iid_size=10", "validation_size=10", "test_size=10"]


def train(output_dir, max_steps=12, extra=()):
    """A tiny NDR with dropout (so the RNG state matters) on CTL, `max_steps` steps of 16, no checkpoint but the
    budget's."""
    return lengthgen_train(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"),
         "--config_overrides", "hidden_size=16,intermediate_size=32,num_layers=3",
         "--dataset_name", "ctl", "--dataset_config_name", "backward", "--dataset_param", *CTL_PARAMS,
         "--output_dir", str(output_dir), "--do_train", "--max_steps", str(max_steps), "--learning_rate", "3e-3",
         "--per_device_train_batch_size", "16", "--save_strategy", "no", "--logging_steps", "1", "--use_cpu",
         "--seed", "0", "--disable_tqdm", "true", "--report_to", "none", "--do_eval", "false", *extra]
    )


def losses(output_dir):
    history = json.loads((output_dir / "trainer_state.json").read_text())["log_history"]
    return {h["step"]: h["loss"] for h in history if "loss" in h}


def test_stopped_by_the_budget_packed_and_resumed_equals_one_uninterrupted_run(tmp_path, monkeypatch):
    whole = tmp_path / "whole"
    train(whole)

    # a clock that advances one second per reading (training starts at 0, step k ends at k): the budget of 10 s stops
    # the first piece after step 9, where the elapsed 9 s plus twice the longest step (2 s) would pass 10 s
    ticks = iter(range(10**6))
    monkeypatch.setattr(pieces, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    first = tmp_path / "first-machine"
    train(first, extra=["--max_train_seconds", "10"])
    checkpoints = sorted(p.name for p in first.iterdir() if p.name.startswith("checkpoint-"))
    assert checkpoints == ["checkpoint-9"]
    assert json.loads((first / "trainer_state.json").read_text())["global_step"] == 9

    # the piece's checkpoint travels as parts; a second machine restores it and runs the same command
    parts = pieces.pack_checkpoint(str(first / "checkpoint-9"), str(tmp_path / "out"), part_bytes=4096,
                                   max_parts=10**4)
    assert len(parts) > 2 and all(os.path.getsize(p) <= 4096 for p in parts)  # cut into many parts
    second = tmp_path / "second-machine"
    restored = pieces.unpack_checkpoint(str(tmp_path / "out"), str(second))
    for name in os.listdir(first / "checkpoint-9"):  # byte for byte
        assert (first / "checkpoint-9" / name).read_bytes() == (second / "checkpoint-9" / name).read_bytes(), name
    assert restored == str(second / "checkpoint-9")
    monkeypatch.undo()
    train(second)

    final_whole = load_file(str(whole / "model.safetensors"))
    final_resumed = load_file(str(second / "model.safetensors"))
    assert final_whole.keys() == final_resumed.keys()
    for key in final_whole:
        torch.testing.assert_close(final_resumed[key], final_whole[key], rtol=0, atol=1e-6, msg=key)
    # the same curve: the resumed run's log (the first piece's steps carried in its checkpoint, then its own) is the
    # uninterrupted run's, step by step
    assert set(losses(second)) == set(range(1, 13))
    assert losses(second) == pytest.approx(losses(whole), abs=1e-6)


def test_the_best_checkpoint_travels_with_the_last_and_ends_the_resumed_run(tmp_path):
    """With load_best_model_at_end, a piece resumed on another machine still ends with the best checkpoint's weights:
    it is packed beside the last one (without optimizer state), and the Trainer finds it there."""
    best_args = ["--eval_strategy", "steps", "--eval_steps", "3", "--save_strategy", "steps", "--save_steps", "3",
                 "--save_total_limit", "2", "--load_best_model_at_end", "true", "--metric_for_best_model", "accuracy",
                 "--do_eval"]
    first = tmp_path / "first-machine"
    train(first, max_steps=6, extra=best_args)
    # make step 3 the best, beyond any accuracy a later evaluation can reach, so that the run must end with it
    state_file = first / "checkpoint-6" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state.update(best_global_step=3, best_metric=2.0, best_model_checkpoint=str(first / "checkpoint-3"))
    state_file.write_text(json.dumps(state))
    best_weights = load_file(str(first / "checkpoint-3" / "model.safetensors"))

    pieces.pack_checkpoint(str(first / "checkpoint-6"), str(tmp_path / "out"))
    first_best_files = os.listdir(first / "checkpoint-3")
    shutil.rmtree(first)  # the first machine is gone
    second = tmp_path / "second-machine"
    assert pieces.unpack_checkpoint(str(tmp_path / "out"), str(second)) == str(second / "checkpoint-6")
    assert (second / "checkpoint-6" / "optimizer.pt").exists()  # the last checkpoint whole, to resume from
    assert sorted(os.listdir(second / "checkpoint-3")) == sorted(
        n for n in first_best_files if not n.startswith(pieces.TRAINING_STATE_FILES))
    assert not (second / "checkpoint-3" / "optimizer.pt").exists()
    train(second, max_steps=9, extra=best_args)
    assert (json.loads((second / "trainer_state.json").read_text())["best_model_checkpoint"]
            == str(second / "checkpoint-3"))
    final = load_file(str(second / "model.safetensors"))
    for key in best_weights:
        torch.testing.assert_close(final[key], best_weights[key], rtol=0, atol=0, msg=key)


def test_a_piece_replaces_an_older_checkpoint_of_the_run_but_not_a_newer_one(tmp_path):
    """A run folder that already holds checkpoint-24 (a CPU session's) and is handed a piece packed at step 30 (a GPU
    session's) resumes from 30; handed back a piece at 24 again, it keeps its own 30 untouched."""
    def checkpoint(folder, step, text):
        (folder / f"checkpoint-{step}").mkdir(parents=True)
        (folder / f"checkpoint-{step}" / "model.safetensors").write_text(text)
        (folder / f"checkpoint-{step}" / "trainer_state.json").write_text("{}")
        return str(folder / f"checkpoint-{step}")

    run = tmp_path / "run"
    checkpoint(run, 24, "cpu session")
    pieces.pack_checkpoint(checkpoint(tmp_path / "gpu", 30, "the GPU piece"), str(tmp_path / "piece-30"))
    pieces.pack_checkpoint(checkpoint(tmp_path / "old", 24, "older piece"), str(tmp_path / "piece-24"))
    assert pieces.packed_step(str(tmp_path / "piece-30")) == 30

    assert pieces.unpack_unless_behind(str(tmp_path / "piece-30"), str(run)) == str(run / "checkpoint-30")
    assert (run / "checkpoint-30" / "model.safetensors").read_text() == "the GPU piece"
    assert pieces.unpack_unless_behind(str(tmp_path / "piece-24"), str(run)) is None
    assert (run / "checkpoint-24" / "model.safetensors").read_text() == "cpu session"
    assert pieces.unpack_unless_behind(str(tmp_path / "piece-30"), str(tmp_path / "new")) == str(
        tmp_path / "new" / "checkpoint-30")


def test_budget_callback_checks():
    with pytest.raises(ValueError, match="max_train_seconds must be positive"):
        pieces.TimeBudgetCallback(0)


def test_a_resumed_piece_does_not_start_an_evaluation_its_budget_cannot_hold():
    """A run whose log records evaluations of 30 s (two splits, 18 + 12 s, at step 10) resumes with a budget of 70 s
    and steps of 1 s: it stops, with a checkpoint, once 2 x 30 s no longer fit, at 11 s (without that log: at 69 s,
    with no time left for an evaluation)."""
    from transformers import TrainerControl, TrainerState

    log = [{"loss": 2.0, "step": 5}, {"eval_validation_runtime": 18.0, "eval_validation_accuracy": 0.5, "step": 10},
           {"eval_test_runtime": 12.0, "step": 10}, {"eval_validation_runtime": 25.0, "step": 20}]
    assert pieces.longest_evaluation(log) == 30.0 and pieces.longest_evaluation([]) == 0.0
    now = [0.0]
    budget = pieces.TimeBudgetCallback(70, clock=lambda: now[0])
    state, control = TrainerState(log_history=log, global_step=20, max_steps=1000), TrainerControl()
    args = type("Args", (), {"save_strategy": "steps"})()
    budget.on_train_begin(args, state, control)
    while not control.should_training_stop:
        now[0] += 1.0
        state.global_step += 1
        budget.on_step_end(args, state, control)
    assert now[0] == 11.0 and control.should_save and budget.stopped_at == 31  # 11 + 2 x 30 > 70


def test_packing_refuses_more_than_the_parts_allowed_and_names_the_size(tmp_path):
    folder = tmp_path / "checkpoint-3"
    folder.mkdir()
    (folder / "optimizer.pt").write_bytes(os.urandom(5000))
    with pytest.raises(ValueError, match=r"more than 2"):
        pieces.pack_checkpoint(str(folder), str(tmp_path / "out"), part_bytes=1024, max_parts=2)
    assert not (tmp_path / "out").exists()
    with pytest.raises(FileNotFoundError, match="No packed checkpoint"):
        pieces.unpack_checkpoint(str(tmp_path), str(tmp_path / "restored"))



def test_the_pieces_folder_keeps_one_archive_per_run(tmp_path):
    """A run packed again and again into one folder leaves its latest archive there, which unpacks whole: its earlier
    checkpoints' parts are removed (the run known by the output folder its training_args.bin names), and so is a part
    left over from packing the same checkpoint when it was larger (it would be read as the archive's tail). Another
    run's archive in the same folder stays."""
    out = tmp_path / "pieces"

    def pack(run, step, size):
        folder = tmp_path / run / f"checkpoint-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "weights.bin").write_bytes(bytes([step]) * size)
        torch.save({"output_dir": str(tmp_path / run)}, folder / "training_args.bin")  # as the Trainer's names it
        return pieces.pack_checkpoint(str(folder), str(out), part_bytes=16_384, max_parts=8)

    other = [os.path.basename(p) for p in pack("run-b", 90, 1_500)]
    for step, size in ((3, 30_000), (7, 30_000), (7, 1_500)):
        paths = pack("run-a", step, size)
    assert sorted(os.listdir(out)) == sorted(other + [os.path.basename(p) for p in paths])
    assert [os.path.basename(p) for p in paths] == ["checkpoint-7.tar.part00"]  # a tar of 1,500 bytes: 10 KiB
    with pieces.joined_archive(str(out), "checkpoint-7") as archive:
        assert archive.extractfile("checkpoint-7/weights.bin").read() == bytes([7]) * 1_500


@pytest.mark.parametrize("config, dataset, params", [
    ("ndr-ctl", "ctl", ["train_size=80", "validation_iid_size=8", "validation_size=8", "test_size=8"]),
    ("ndr-simple-arithmetic", "simple_arithmetic", ["train_size=64", "validation_size=8", "test_size=8"]),
    ("ndr-listops", "listops", ["train_size=64", "validation_size=8", "test_size=8"]),
])
def test_thesis_size_ndr_checkpoint_packs_into_at_most_8_files_of_16_mib(config, dataset, params, tmp_path):
    """One training step of the thesis-size model (hub_configs/ as it is) with AdamW, checkpointed by the Trainer:
    weights, both Adam moments, scheduler, RNG, model code and tokenizer."""
    output_dir = tmp_path / config
    lengthgen_train(
        ["--config_name", os.path.join(REPO, "hub_configs", config), "--dataset_name", dataset,
         *(["--dataset_config_name", "backward"] if dataset == "ctl" else []), "--dataset_param", *params,
         "--output_dir", str(output_dir), "--do_train", "--max_steps", "1", "--per_device_train_batch_size", "2",
         "--save_strategy", "steps", "--save_steps", "1", "--use_cpu", "--disable_tqdm", "true", "--report_to", "none",
         "--do_eval", "false"]
    )
    checkpoint = output_dir / "checkpoint-1"
    total = sum(f.stat().st_size for f in checkpoint.iterdir())
    assert (checkpoint / "optimizer.pt").stat().st_size > 2 * (checkpoint / "model.safetensors").stat().st_size * 0.9
    parts = pieces.pack_checkpoint(str(checkpoint), str(tmp_path / "out"))
    assert 1 <= len(parts) <= 8
    assert all(os.path.getsize(p) <= 16 * 2**20 for p in parts)
    assert sum(os.path.getsize(p) for p in parts) >= total  # the whole checkpoint is in them
    restored = pieces.unpack_checkpoint(str(tmp_path / "out"), str(tmp_path / "restored"))
    assert sorted(os.listdir(restored)) == sorted(os.listdir(checkpoint))
    for name in os.listdir(checkpoint):  # byte for byte, whichever part each byte travelled in
        assert (checkpoint / name).read_bytes() == open(os.path.join(restored, name), "rb").read(), name
    shutil.rmtree(output_dir)


def test_a_run_prints_its_final_scores_per_split_and_difficulty(tmp_path, capsys):
    """The final evaluation of every split reaches the terminal (the Trainer's progress bar is closed by then and
    prints none of it): one line per split, over all examples and per difficulty, as the results file holds them, and
    where that file is."""
    out = tmp_path / "run"
    train(out, max_steps=2, extra=["--do_eval", "true"])
    printed = capsys.readouterr().out.splitlines()
    scores = json.loads((out / "lengthgen_results.json").read_text())["scores"]
    assert set(scores) == {"validation_iid", "validation", "test"}
    for split, row in scores.items():
        line = next(line for line in printed if line.split()[:1] == [split])
        assert f"all {row['all']['accuracy']:.3f}" in line
        difficulties = [key for key in row if key != "all"]
        assert difficulties and all(f"{key} {row[key]['accuracy']:.3f}" in line for key in difficulties)
    assert printed[-1] == f"(all scores: {out / 'lengthgen_results.json'})"


def test_a_finished_run_given_again_is_not_trained_further(tmp_path):
    """The same command twice: the second finds the run's checkpoint at max_steps and loads it (transformers' Trainer
    resumed there would train one step more: at a constant rate, new weights). Same step count, weights, metrics."""
    out = tmp_path / "run"
    extra = ["--save_strategy", "steps", "--save_steps", "6", "--lr_scheduler_type", "constant"]
    train(out, max_steps=6, extra=extra)
    weights, metrics = load_file(str(out / "model.safetensors")), json.loads((out / "train_results.json").read_text())
    train(out, max_steps=6, extra=extra)
    assert sorted(p.name for p in out.iterdir() if p.name.startswith("checkpoint-")) == ["checkpoint-6"]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
    again = load_file(str(out / "model.safetensors"))
    assert all(torch.equal(again[k], v) for k, v in weights.items())
    assert json.loads((out / "train_results.json").read_text()) == metrics
    assert json.loads((out / "lengthgen_results.json").read_text())["training"]["steps"] == 6


def test_a_finished_run_measured_in_epochs_given_again_is_not_trained_further(tmp_path):
    """As above for a run of one epoch (200 rows of 16: 13 steps): the second command loads it, and a third that asks
    for two epochs goes on from it."""
    out = tmp_path / "run"
    extra = ["--num_train_epochs", "1", "--save_strategy", "epoch", "--lr_scheduler_type", "constant"]
    train(out, max_steps=-1, extra=extra)
    metrics = json.loads((out / "train_results.json").read_text())
    train(out, max_steps=-1, extra=extra)
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 13
    assert json.loads((out / "train_results.json").read_text()) == metrics
    train(out, max_steps=-1, extra=[*extra[2:], "--num_train_epochs", "2"])
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 26
    train(out, max_steps=-1, extra=[*extra[2:], "--num_train_epochs", "2.5"])  # 2.5 x 13 steps, rounded up
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 33


def test_a_run_resumed_with_another_model_or_data_is_refused_and_a_longer_one_goes_on(tmp_path):
    """The Trainer resumes from the output folder's last checkpoint: a command that asks another model or other data
    there is stopped with what differs (it would load weights of another model, or train them on other data); other
    training arguments (more steps, another rate) go on from the checkpoint. A checkpoint to resume that is not there
    is named."""
    from lengthgen.cli import UsageError

    out = tmp_path / "run"
    extra = ["--save_strategy", "steps", "--save_steps", "3"]
    train(out, max_steps=3, extra=extra)
    refused = (r"holds a checkpoint of a run with another model or data, which this run would resume: "
               r"config_overrides .*num_layers': 3.* \(asked: .*num_layers': 2")
    with pytest.raises(UsageError, match=refused):
        lengthgen_train(["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"),
                         "--config_overrides", "hidden_size=16,intermediate_size=32,num_layers=2",
                         "--dataset_name", "ctl", "--dataset_config_name", "backward", "--dataset_param", *CTL_PARAMS,
                         "--output_dir", str(out), "--do_train", "--max_steps", "6", "--use_cpu", "--report_to",
                         "none", "--do_eval", "false"])
    with pytest.raises(UsageError, match="dataset_param"):
        train(out, max_steps=6, extra=["--dataset_param", "train_size=100"])
    # the same config in another checkout (a piece restored elsewhere): compared by its folder's name
    spec_file = out / "lengthgen_spec.json"
    spec = json.loads(spec_file.read_text())
    spec["model"]["config_name"] = "/another/checkout/hub_configs/ndr-ctl"
    spec_file.write_text(json.dumps(spec))
    # the head the config implies (the NDR's: classification), named or not, is the same model; another head is not
    with pytest.raises(UsageError, match=r"head 'classification' \(asked: 'answer_slots'\)"):
        train(out, max_steps=6, extra=[*extra, "--head", "answer_slots"])
    train(out, max_steps=6, extra=[*extra, "--learning_rate", "1e-3", "--head", "classification"])
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 6
    # not resumed (--resume_from_checkpoint false): a new run of any model may start in the folder
    train(out, max_steps=2, extra=["--resume_from_checkpoint", "false", "--dataset_param", "train_size=100"])
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 2
    with pytest.raises(UsageError, match="--resume_from_checkpoint .*nowhere: no checkpoint there"):
        train(tmp_path / "other", max_steps=3, extra=["--resume_from_checkpoint", str(tmp_path / "nowhere")])


def test_the_per_epoch_decay_warms_up_as_transformers_schedules_do():
    """lr_decay_per_epoch after a linear warm-up of warmup_steps (transformers' linear warm-up: step / warmup), by
    hand: 10 rows of 4 make 3 steps an epoch; warm-up 2 steps; decay 0.5 per epoch."""
    from lengthgen.training.arguments import TrainingArguments
    from lengthgen.training.runner import exponential_decay_optimizer

    def rates(warmup_steps):
        args = TrainingArguments(output_dir="unused", per_device_train_batch_size=4, learning_rate=1.0,
                                 warmup_steps=warmup_steps, lr_decay_per_epoch=0.5, max_steps=9, use_cpu=True)
        optimizer, schedule = exponential_decay_optimizer(torch.nn.Linear(1, 1), args, num_train_rows=10)
        seen = []
        for _ in range(9):
            seen.append(optimizer.param_groups[0]["lr"])
            optimizer.step()
            schedule.step()
        return seen

    assert rates(2) == pytest.approx([0.0, 0.5, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25])
    assert rates(0) == pytest.approx([1.0, 1.0, 1.0, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25])  # the decay alone


def test_a_first_piece_measures_an_evaluation_before_it_depends_on_one(tmp_path, monkeypatch):
    """Steps of 1 s, evaluations of 10 s every 8 steps, a budget of 14 s. Knowing no evaluation's cost, the budget
    would let step 8 end at 10 s (8 + 2 x 1 <= 14) and its evaluation end at 18 s, past the budget. The first piece
    evaluates at its start instead (0 s to 10 s, as `eval_on_start` does: no best model chosen, nothing saved): step 1
    ends at 11 s, its interval holds that evaluation, and 11 + 2 x 11 > 14 stops the run there, within the budget. A
    piece resumed with an evaluation on record does not evaluate at its start. (The evaluation of every split after
    training is the runner's, outside the training budget.)"""
    from lengthgen.training import runner

    clock = {"now": -1.0}

    def monotonic():
        clock["now"] += 1.0
        return clock["now"]

    evaluate = runner.ExperimentTrainer.evaluate

    def slow_evaluate(self, *args, **kwargs):
        if kwargs.get("metric_key_prefix", "eval") == "eval":  # the Trainer's own, during training
            during_training.append((self.state.global_step, clock["now"]))
            clock["now"] += 10.0
        return evaluate(self, *args, **kwargs)

    during_training = []
    monkeypatch.setattr(pieces, "time", types.SimpleNamespace(monotonic=monotonic))
    monkeypatch.setattr(runner.ExperimentTrainer, "evaluate", slow_evaluate)
    out = tmp_path / "run"
    budget = ["--max_train_seconds", "14", "--eval_strategy", "steps", "--eval_steps", "8", "--do_eval"]
    train(out, extra=budget)
    assert during_training == [(0, 0.0)]  # started at 0 s, finished at 10 s
    state = json.loads((out / "trainer_state.json").read_text())
    assert state["global_step"] == 1 and (out / "checkpoint-1").is_dir() and state["best_global_step"] is None
    assert not torch.load(out / "checkpoint-1" / "training_args.bin", weights_only=False).eval_on_start

    during_training.clear()  # the next piece: an evaluation on record, so none at its start (step 1)
    clock["now"] = -1.0
    train(out, extra=budget)
    assert during_training and during_training[0][0] != 1


def test_a_budget_that_stops_a_run_saving_only_its_best_still_leaves_the_checkpoint_to_resume(tmp_path, monkeypatch):
    """`--save_strategy best` saves at an evaluation only when it is a new best, even at the step the budget stops
    (the Trainer decides after the callbacks): the step it stopped at is saved all the same, so the next piece goes on
    from there and not from the last best. Made certain with a best that no evaluation can beat."""
    from lengthgen.training import runner

    original = runner.ExperimentTrainer._determine_best_metric
    monkeypatch.setattr(runner.ExperimentTrainer, "_determine_best_metric",
                        lambda self, metrics, trial: original(self, metrics, trial) and self.state.global_step == 3)
    ticks = iter(range(10**6))  # as above: the budget of 10 s stops after step 9
    monkeypatch.setattr(pieces, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    out = tmp_path / "run"
    train(out, extra=["--max_train_seconds", "10", "--eval_strategy", "steps", "--eval_steps", "3",
                      "--save_strategy", "best", "--metric_for_best_model", "accuracy", "--do_eval"])
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 9
    assert {"checkpoint-3", "checkpoint-9"} <= {p.name for p in out.iterdir()}
    assert pieces.get_last_checkpoint_or_none(str(out)).endswith("checkpoint-9")
