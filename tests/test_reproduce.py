"""`lengthgen reproduce` on tiny presets: results JSON and plot, resumption, pieces, the num_steps table; the
presets."""

import dataclasses
import json
import math
import os
import shutil

import pytest
import torch
from transformers import AutoConfig

from lengthgen.cli import UsageError
from lengthgen.commands import reproduce as command
from lengthgen.presets import load_yaml
from lengthgen.reproduction import reproduce
from lengthgen.reproduction.study import STUDIES
from lengthgen.training import ExperimentResult
from lengthgen.training.pieces import unpack_checkpoint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TINY_CTL = {"train_size": 300, "validation_iid_size": 20, "validation_size": 30, "test_size": 20}


@pytest.fixture
def tiny_presets(monkeypatch):
    """The CTL NDR preset and its transformer baseline, tiny and a few steps long."""
    presets = {}
    for name in ("ndr-ctl-backward", "transformer-ctl-backward"):
        preset = reproduce.PRESETS[name]
        spec = preset.sections()
        spec["model"]["config_overrides"] = {**spec["model"]["config_overrides"], "hidden_size": 16,
                                             "intermediate_size": 32, "num_layers": 2}
        spec["data"]["dataset_param"] = TINY_CTL
        spec["training"].update(max_steps=6, eval_steps=3, save_steps=3, per_device_train_batch_size=32,
                                disable_tqdm=True)
        presets[name] = dataclasses.replace(
            preset, spec=spec, deeper={"test_depths": (11, 12), "test_size": 40} if preset.deeper else None)
    monkeypatch.setattr(reproduce, "PRESETS", presets)
    monkeypatch.setattr(command, "PRESETS", presets)
    return presets


def test_reproduce_writes_results_and_plot_and_resumes(tiny_presets, tmp_path, capsys, monkeypatch):
    results_dir, output_root = tmp_path / "results", tmp_path / "runs"
    baseline = reproduce.reproduce("transformer-ctl-backward", str(output_root), "fp32", str(results_dir))
    result = reproduce.reproduce("ndr-ctl-backward", str(output_root), "fp32", str(results_dir))
    assert (results_dir / "ndr-ctl-backward.png").stat().st_size > 0
    saved = json.loads((results_dir / "ndr-ctl-backward.json").read_text())
    assert saved["training"]["steps"] == 6 and saved["train_range"] == [1, 5]
    assert saved["model_config"]["num_layers"] == 2 and saved["model_config"]["attention_type"] == "geometric"
    assert saved["hardware"]["threads"] >= 1 and saved["precision"] == "fp32" and saved["device"] == "cpu"
    assert saved["command"] == "lengthgen reproduce ndr-ctl-backward"
    assert saved["spec"]["training"]["max_steps"] == 6 and saved["spec"]["model"]["config_overrides"]["num_layers"] == 2
    # per-depth accuracy is the runner's evaluation, split by split
    run = ExperimentResult.load(str(output_root / "ndr-ctl-backward"))
    assert (
        saved["accuracy"]["test"]["all"] == run.scores["test"]["all"]["accuracy"] == run.metrics["eval_test_accuracy"]
    )
    assert {d: saved["accuracy"]["validation"][str(d)] for d in (6, 7, 8)} == {
        d: run.metrics[f"eval_validation_accuracy_d{d}"] for d in (6, 7, 8)}
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
    # written to --results_dir (docs/results/ untouched)
    run_dir = output_root / "ndr-ctl-backward"
    published = os.path.join(REPO, "docs", "results", "ndr-ctl-backward.json")
    published_before = os.stat(published).st_mtime_ns
    # asked on another machine, at another precision: the JSON still says how and where the model was trained
    with monkeypatch.context() as patch:
        patch.setattr(reproduce, "hardware", lambda: {**saved["hardware"], "cpu": "another CPU"})
        command.main(["ndr-ctl-backward", "--precision", "bf16", "--output_root", str(output_root),
                      "--results_dir", str(results_dir), "--pack_to", str(tmp_path / "piece")])
    again = json.loads((results_dir / "ndr-ctl-backward.json").read_text())
    assert again["training"]["steps"] == 6 and again["accuracy"] == result["accuracy"]
    assert again["precision"] == "fp32" and again["evaluation_precision"] == "fp32"
    assert again["hardware"] == saved["hardware"]
    assert os.stat(published).st_mtime_ns == published_before
    assert len(json.loads((run_dir / "reproduce_wall_seconds.json").read_text())) == 1
    record = ExperimentResult.load(str(run_dir))
    assert record.command == "lengthgen reproduce ndr-ctl-backward" and record.training is None
    assert record.trained_by["training"]["steps"] == 6  # evaluated again: how it was trained is kept beside
    assert record.trained_by["spec"]["model"]["config_name"].endswith("hub_configs/ndr-ctl")
    # the piece carries the run's record: unpacked on another machine, the run's folder knows how it was trained
    unpack_checkpoint(str(tmp_path / "piece"), str(tmp_path / "elsewhere-run"))
    assert ExperimentResult.load(str(tmp_path / "elsewhere-run")) == record

    # the piece given to another preset is refused before anything is restored: the run record packed with it names
    # another model
    with pytest.raises(UsageError, match=r"holds a piece of a run with another model or data than "
                                         r"transformer-ctl-backward: config_name 'hub_configs/ndr-ctl'"):
        command.main(["transformer-ctl-backward", "--unpack_from", str(tmp_path / "piece"), "--output_root",
                      str(tmp_path / "other"), "--results_dir", str(results_dir)])
    assert not (tmp_path / "other").exists()

    # interrupted after the checkpoint at step 3: the same command trains steps 4-6 only. The evaluation at step 3
    # is taken from that checkpoint's state (a sentinel accuracy written into it): a run started afresh would
    # evaluate step 3 again and log its own number
    shutil.rmtree(run_dir / "checkpoint-6")
    os.remove(run_dir / "trainer_state.json")
    state_file = run_dir / "checkpoint-3" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    (evaluation,) = [entry for entry in state["log_history"] if "eval_accuracy" in entry]
    assert evaluation["step"] == 3
    evaluation["eval_accuracy"] = 0.123
    state_file.write_text(json.dumps(state))
    resumed = reproduce.reproduce("ndr-ctl-backward", str(output_root), "fp32", str(results_dir))
    assert resumed["training"]["steps"] == 6
    assert [p["eval_accuracy"] for p in resumed["learning_curve"] if "eval_accuracy" in p][0] == 0.123
    assert ([p["step"] for p in resumed["learning_curve"] if "loss" in p]
            == [p["step"] for p in saved["learning_curve"] if "loss" in p])
    assert len(json.loads((run_dir / "reproduce_wall_seconds.json").read_text())) == 2
    assert not (run_dir / reproduce.PIECE_FILE).exists()  # a session that returned leaves no start behind

    table = reproduce.results_table(str(results_dir))
    test_accuracy = resumed["accuracy"]["test"]["all"]
    assert "| ndr-ctl-backward | thesis Table 5.1 | test  |" in table and f"{test_accuracy:.2f}" in table
    capsys.readouterr()
    command.main(["--table", "--results_dir", str(results_dir)])
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
    with pytest.raises(UsageError, match="no results JSON .*elsewhere.ndr-ctl-backward.json"):
        reproduce.num_steps_table("ndr-ctl-backward", str(output_root), str(tmp_path / "elsewhere"),
                                  last_checkpoint=True)
    for folder in run_dir.glob("checkpoint-*"):
        shutil.rmtree(folder)
    with pytest.raises(UsageError, match="no checkpoint in"):
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


@pytest.mark.parametrize("argv, message", [
    (["ndr-ctl-backward", "--num_steps_table", "last-checkpoint", "--max_train_seconds", "60"],
     "evaluates without training"),
    (["ndr-ctl-sideways"], "Unknown preset 'ndr-ctl-sideways'; choose from ndr-ctl-backward"),
    (["ndr-ctl-backward", "ndr-ctl-forward", "--pack_to", "x"], "exactly one preset name"),
    (["recurrent-bias-attractors", "--max_train_seconds", "60"], "a study"),
    (["recurrent-bias-attractors", "--precision", "bf16"], r"a study .* --precision \(it trains as its spec says\)"),
    (["ibert-nsp-copy", "--num_steps_table"], "deeper problems, which ibert-nsp-copy does not name"),
    ([], "name a preset"),
])
def test_command_line_mistakes_are_named_before_anything_runs(argv, message):
    with pytest.raises(UsageError, match=message):
        command.parse_args(argv)


def test_a_piece_without_a_run_record_is_checked_by_its_runs_folder_and_a_cut_piece_is_named(tmp_path):
    """A piece packed before run records travelled with it (as the CTL forward one in docs/results/pieces/) names its
    run in its training arguments' output folder, read without unpickling: given to the backward preset, refused. A
    piece whose last part is cut short does not join: refused in one line, nothing restored."""
    shipped = os.path.join(REPO, "docs", "results", "pieces", "ndr-ctl-forward-128-8steps")
    out = tmp_path / "runs"
    with pytest.raises(UsageError, match="holds a piece of the run 'ndr-ctl-forward-128-8steps' .* not of "
                                         "'ndr-ctl-backward-128-8steps'"):
        command.main(["ndr-ctl-backward-128-8steps", "--unpack_from", shipped, "--output_root", str(out)])
    reproduce.check_piece("ndr-ctl-forward-128-8steps", shipped)  # its own preset takes it
    # and a preset that goes on from another's piece (same model and data, another schedule) takes that one
    listops = os.path.join(REPO, "docs", "results", "pieces", "ndr-listops-128-binned-40k")
    reproduce.check_piece("ndr-listops-128-binned-40k-decay-6k", listops)
    with pytest.raises(UsageError, match="holds a piece of the run 'ndr-listops-128-binned-40k'"):
        reproduce.check_piece("ndr-ctl-forward-128-8steps", listops)
    cut = tmp_path / "cut"
    shutil.copytree(shipped, cut)
    (last,) = sorted(cut.glob("checkpoint-*.tar.part*"))[-1:]
    last.write_bytes(last.read_bytes()[: last.stat().st_size // 2])
    with pytest.raises(UsageError, match="do not join into a checkpoint archive: a part is missing or cut short"):
        command.main(["ndr-ctl-forward-128-8steps", "--unpack_from", str(cut), "--output_root", str(out)])
    assert not out.exists()


def test_output_root_is_checked_only_when_a_preset_runs(tmp_path, monkeypatch):
    """A file where the default output root would go does not stop --list, --table or --print_spec; a preset that
    would run is refused in one line before anything is made."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "outputs").write_text("mine")
    assert command.parse_args(["--list"]).list and command.parse_args(["ndr-ctl-backward", "--print_spec"]).print_spec
    with pytest.raises(UsageError, match=r"--output_root: outputs/reproduce: .*outputs is a file, not a folder"):
        command.parse_args(["ndr-ctl-backward"])


def test_list_shows_each_presets_paper_figure_and_target(capsys):
    """`--list`: one row per preset, in columns, with the paper's accuracy and the target the preset must reach (a
    baseline has none), then the studies."""
    command.main(["--list"])
    lines = capsys.readouterr().out.splitlines()
    rows = {line.split()[0]: line for line in lines[1:]}
    assert set(reproduce.PRESETS) | set(STUDIES) == set(rows) and len(lines) == 1 + len(rows)
    assert rows["ndr-ctl-backward"].split()[1:] == ["thesis", "Table", "5.1", "test", "1.00", "test", ">=", "0.95"]
    assert rows["ibert-nsp-add"].endswith("validation 13: 0.92, 14: 0.81, 15: 0.66, 16: 0.36  validation 13 >= 0.90")
    assert rows["bert-nsp-add"].split()[-4:] == ["validation", "13:", "0.00", "baseline"]
    assert len({line.index("thesis") for line in lines if "thesis Table" in line}) == 1  # one column


def test_print_spec_is_the_spec_train_runs(capsys):
    """`--print_spec` prints the preset as one spec file: read back, it is the preset's spec, field for field."""
    command.main(["ndr-ctl-backward-256-8steps-lr5e-4", "--print_spec"])
    printed = load_yaml(capsys.readouterr().out)
    assert printed == reproduce.PRESETS["ndr-ctl-backward-256-8steps-lr5e-4"].experiment().to_dict()
    assert printed["model"]["num_steps"] == 14 and printed["training"]["learning_rate"] == 5e-4


def test_paper_scale_presets_train_the_hub_config_as_it_is_on_the_gpu_when_there_is_one():
    """The -paper presets train the hub_configs/ model as it is (no config_overrides) on the GPU when there is one, in
    bf16, batches binned by length; a budget reaches the spec; a trained model is evaluated again in fp32 on the model
    it saved, without a budget."""
    spec = reproduce.experiment("ndr-listops-paper", "out", "bf16", max_train_seconds=480)
    assert (
        spec.model.config_name.endswith(os.path.join("hub_configs", "ndr-listops")) and not spec.model.config_overrides
    )
    assert spec.training.per_device_train_batch_size == 512 and spec.training.learning_rate == 2e-4
    assert spec.training.train_sampling_strategy == "group_by_length" and spec.model.num_steps == 24
    assert spec.training.bf16 and spec.training.max_train_seconds == 480
    assert spec.training.use_cpu != torch.cuda.is_available()  # the GPU when there is one, else the CPU
    trained = reproduce.experiment("ndr-listops-paper", "out", "bf16", trained=True, max_train_seconds=480)
    assert trained.model.model_name_or_path == "out" and trained.model.num_steps == 24
    assert not trained.training.bf16 and not trained.training.max_train_seconds and not trained.training.do_train
    assert reproduce.PRESETS["ndr-listops-paper"].cpu_precision == "auto"
    assert reproduce.PRESETS["ndr-listops"].cpu_precision == "fp32"  # measured slower in bf16 at 64 wide


def test_every_preset_is_a_valid_spec_and_names_its_parts():
    """Every preset builds a spec whose fields transformers and lengthgen know (a field transformers renamed fails
    here, not on a GPU machine), names a hub_configs/ folder or a registered model type, a dataset and, when it has
    one, a baseline preset."""
    for name, preset in reproduce.PRESETS.items():
        spec = preset.experiment("out")
        if spec.model.config_name is None:
            assert AutoConfig.for_model(spec.model.model_type).model_type == spec.model.model_type, name
        else:
            assert os.path.isdir(spec.model.config_name), name
        assert spec.data.dataset_name and spec.training.do_train and spec.training.do_eval, name
        assert spec.training.seed == (0 if "seed" not in name else int(name.split("seed")[1][0])), name
        assert preset.baseline is None or preset.baseline in reproduce.PRESETS, name
        assert preset.target is None or preset.target[0] in ("validation", "test"), name


def test_a_child_preset_is_its_parent_with_what_it_says():
    """YAML merge keys make a child preset: the 8-step CTL preset is the 128-wide one with 8 layers and 14 steps at
    evaluation; a seed preset differs from its parent in the seed alone."""
    parent = reproduce.PRESETS["ndr-ctl-backward-128"].experiment().to_dict()
    child = reproduce.PRESETS["ndr-ctl-backward-128-8steps"].experiment().to_dict()
    assert child["model"] == {**parent["model"], "config_overrides": {**parent["model"]["config_overrides"],
                                                                      "num_layers": 8}, "num_steps": 14}
    assert child["data"] == parent["data"] and child["training"] == parent["training"]
    parent = reproduce.PRESETS["ibert-nsp-add-30epochs"].experiment().to_dict()
    child = reproduce.PRESETS["ibert-nsp-add-30epochs-seed2"].experiment().to_dict()
    assert child["training"] == {**parent["training"], "seed": 2} and child["model"] == parent["model"]


def test_yaml_reads_exponents_as_numbers():
    """PyYAML reads `1e-3` as a string; the presets' reader reads it as JSON and YAML 1.2 do."""
    assert load_yaml("a: 1e-3\nb: 5e-4\nc: 1.5e-4\nd: 10\ne: abc\nf: 2e5") == {
        "a": 0.001, "b": 0.0005, "c": 0.00015, "d": 10, "e": "abc", "f": 200000.0}


@pytest.mark.parametrize("name", ["ndr-listops-128-binned-40k-decay", "ndr-listops-128-binned-40k-decay-6k",
                                  "ndr-listops-128-binned-44k-decay"])
def test_the_annealed_listops_preset_resumes_its_constant_run_at_the_same_rate_then_follows_a_cosine_to_zero(name):
    """The annealed ListOps presets resume the constant-rate 40K-step checkpoint under transformers' warmup-stable-decay
    schedule: loaded from the constant run's saved state (as the Trainer does on resume), the rate stays the constant
    run's from the resumed step until the decay's last T steps, and then is that rate * (1 + cos(pi * t / T)) / 2."""
    from transformers import get_scheduler

    training = reproduce.PRESETS[name].experiment().to_dict()["training"]
    parent = reproduce.PRESETS["ndr-listops-128-binned-40k"].experiment().to_dict()["training"]
    resumed_at, max_steps = parent["max_steps"], training["max_steps"]
    kwargs = training["lr_scheduler_kwargs"]
    decay = kwargs["num_decay_steps"]
    rate = training["learning_rate"]
    assert resumed_at + decay <= max_steps and parent["lr_scheduler_type"] == "constant"
    assert parent["learning_rate"] == training["learning_rate"]

    def optimizer():
        return torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=rate)

    constant_optimizer = optimizer()
    constant = get_scheduler("constant", constant_optimizer)
    for _ in range(resumed_at):
        constant_optimizer.step()
        constant.step()
    resumed_optimizer = optimizer()
    resumed_optimizer.load_state_dict(constant_optimizer.state_dict())
    annealed = get_scheduler(training["lr_scheduler_type"], resumed_optimizer, num_warmup_steps=0,
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


@pytest.mark.parametrize("name, done, not_done", [
    ("ndr-ctl-backward-128-8steps", {"global_step": 20000, "epoch": 3.0}, {"global_step": 19999, "epoch": 3.0}),
    ("ibert-nsp-add", {"global_step": 1, "epoch": 10.0}, {"global_step": 10 ** 6, "epoch": 9.9}),
])
def test_training_finished_reads_the_presets_max_steps_or_epochs(name, done, not_done, tmp_path):
    """A step preset ends at its max_steps (the 8-step CTL preset inherits 20,000), an epoch preset at its
    num_train_epochs (10 for I-BERT add), whatever the other count says."""
    assert not reproduce.training_finished(str(tmp_path), reproduce.PRESETS[name])  # no trainer_state.json yet
    for state, finished in ((done, True), (not_done, False)):
        (tmp_path / "trainer_state.json").write_text(json.dumps(state))
        assert reproduce.training_finished(str(tmp_path), reproduce.PRESETS[name]) is finished
