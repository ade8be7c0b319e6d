"""lengthgen-release: a trained output directory -> a Hub-ready folder that loads and scores without lengthgen."""

import json
import os
import shutil
import subprocess
import sys

import pytest
from huggingface_hub import HfApi, ModelCard

from lengthgen.data.export import build, parse_param
from lengthgen.release import ReleaseError, main, release

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "examples"))
import run_classification  # noqa: E402

CTL_PARAMS = ["train_size=300", "validation_iid_size=20", "validation_size=40", "test_size=20"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny NDR trained for a few steps by run_classification.py, evaluated with more steps than it trained."""
    output_dir = tmp_path_factory.mktemp("run") / "ndr-tiny"
    metrics = run_classification.main(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"),
         "--config_overrides", "hidden_size=32,intermediate_size=64,num_layers=3",
         "--dataset_name", "ctl", "--dataset_config_name", "backward", "--dataset_param", *CTL_PARAMS,
         "--output_dir", str(output_dir), "--do_train", "--do_eval", "--max_steps", "30", "--learning_rate", "3e-3",
         "--per_device_train_batch_size", "32", "--num_steps", "5", "--save_strategy", "no", "--use_cpu",
         "--disable_tqdm", "true", "--report_to", "none"]
    )
    return output_dir, metrics


def card_results(folder) -> dict:
    """{(split, metric name): value} from the model-index YAML, parsed by huggingface_hub."""
    card = ModelCard.load(os.path.join(folder, "README.md"))
    return {(r.dataset_split, r.metric_name): r.metric_value for r in card.data.eval_results}


def test_release_folder_loads_without_lengthgen_and_scores_its_card(trained, tmp_path):
    output_dir, metrics = trained
    folder = release(str(output_dir), "someone/ndr-tiny", target=str(tmp_path / "ndr-tiny"))
    names = set(os.listdir(folder))
    assert {"config.json", "model.safetensors", "modeling_ndr.py", "configuration_ndr.py", "geometric_attention.py",
            "tokenizer.json", "README.md"} <= names
    assert not any(n.startswith(("checkpoint", "training_args", "trainer_state", "runs")) for n in names)
    config = json.loads(open(os.path.join(folder, "config.json")).read())
    assert config["auto_map"]["AutoModelForSequenceClassification"] == "modeling_ndr.NDRForSequenceClassification"
    assert config["num_steps"] == 5 and config["num_layers"] == 3  # the card's numbers are at 5 steps
    results = card_results(folder)
    for split in ("validation", "test"):  # the card carries the Trainer's evaluation, rounded to 4 places
        assert results[(split, "accuracy")] == pytest.approx(metrics[f"eval_{split}_accuracy"], abs=5e-5)
    assert results[("test", "accuracy, difficulty 10")] == pytest.approx(metrics["eval_test_accuracy_d10"], abs=5e-5)
    card = open(os.path.join(folder, "README.md")).read()
    assert "python examples/run_classification.py --config_name" in card and "--num_steps 5" in card

    # score the validation split again in a process where lengthgen cannot be imported
    rows = build("ctl", "backward", cache_dir=str(tmp_path / "cache"),
                 **dict(parse_param(p) for p in CTL_PARAMS))[1]["validation"]
    rows_file = tmp_path / "validation.jsonl"
    rows_file.write_text("".join(json.dumps({"input": r["input"], "target": r["target"]}) + "\n" for r in rows))
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "verify_release.py"), folder, "--rows", str(rows_file),
         "--split", "validation", "--without-lengthgen"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["rows"] == 40 and report["measured"] == pytest.approx(metrics["eval_validation_accuracy"], abs=1e-9)

    # the card alone says how to generate its splits again: the builder, its config, the run's generating parameters
    data = ModelCard.load(os.path.join(folder, "README.md")).data.to_dict()
    assert data["train_difficulties"] == [1, 5] and data["dataset_params"] == CTL_PARAMS
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "verify_release.py"), folder, "--split", "test",
         "--without-lengthgen"], capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["rows"] == 20 and report["measured"] == pytest.approx(metrics["eval_test_accuracy"], abs=1e-9)


def test_a_trained_folder_evaluated_with_more_steps_releases_with_those_numbers(trained, tmp_path):
    """run_classification.py evaluating a trained NDR with --num_steps writes a folder that releases as that model,
    num_steps set to what its card's numbers were measured with, and both commands on the card."""
    output_dir, _ = trained
    evaluated = tmp_path / "evaluated"
    metrics = run_classification.main(
        ["--model_name_or_path", str(output_dir), "--dataset_name", "ctl", "--dataset_config_name", "backward",
         "--dataset_param", *CTL_PARAMS, "--output_dir", str(evaluated), "--do_eval", "--num_steps", "7",
         "--use_cpu", "--disable_tqdm", "true", "--report_to", "none"]
    )
    # transformers 5 saves how the evaluation loaded the tokenizer (from a folder, offline): not for the Hub
    saved = {**json.loads((evaluated / "tokenizer_config.json").read_text()), "local_files_only": True, "is_local": True}
    (evaluated / "tokenizer_config.json").write_text(json.dumps(saved, indent=2))
    folder = release(str(evaluated), "someone/ndr-tiny-7", target=str(tmp_path / "release"))
    released = json.loads(open(os.path.join(folder, "tokenizer_config.json")).read())
    assert "local_files_only" not in released and "is_local" not in released
    assert {k: v for k, v in saved.items() if k not in ("local_files_only", "is_local")} == released
    config = json.loads(open(os.path.join(folder, "config.json")).read())
    assert config["num_steps"] == 7 and config["num_layers"] == 3
    card = open(os.path.join(folder, "README.md")).read()
    assert "--max_steps 30" in card and "--num_steps 7" in card  # how it was trained, how it was evaluated
    assert card_results(folder)[("test", "accuracy")] == pytest.approx(metrics["eval_test_accuracy"], abs=5e-5)
    result = subprocess.run(
        [sys.executable, os.path.join(REPO, "benchmarks", "verify_release.py"), folder, "--split", "test",
         "--without-lengthgen"], capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["measured"] == pytest.approx(metrics["eval_test_accuracy"])


def test_push_uploads_the_folder_and_its_card_parses(trained, tmp_path, monkeypatch):
    output_dir, metrics = trained
    calls = []
    monkeypatch.setenv("HF_TOKEN", "hf_offline_test_token")
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: calls.append(("create_repo", repo_id, kw)))

    def fake_upload(self, repo_id, folder_path, **kw):
        uploaded = tmp_path / "uploaded"
        shutil.copytree(folder_path, uploaded)  # what the Hub would receive
        calls.append(("upload_folder", repo_id, sorted(os.listdir(uploaded))))

    monkeypatch.setattr(HfApi, "upload_folder", fake_upload)
    folder = release(str(output_dir), "someone/ndr-tiny", target=str(tmp_path / "out"), push=True)
    assert [c[:2] for c in calls] == [("create_repo", "someone/ndr-tiny"), ("upload_folder", "someone/ndr-tiny")]
    assert calls[1][2] == sorted(os.listdir(folder))
    assert {"model.safetensors", "modeling_ndr.py", "README.md", "tokenizer.json"} <= set(calls[1][2])
    card = ModelCard.load(tmp_path / "uploaded" / "README.md")
    assert card.data.model_name == "ndr-tiny" and card.data.pipeline_tag == "text-classification"
    by_split = {r.dataset_split: r for r in card.data.eval_results if r.metric_name == "accuracy"}
    assert set(by_split) == {"validation_iid", "validation", "test"}
    assert by_split["validation"].dataset_type == "ctl" and by_split["validation"].dataset_config == "backward"
    assert by_split["test"].metric_value == pytest.approx(metrics["eval_test_accuracy"], abs=5e-5)


def test_a_release_folder_is_pushed_unchanged(trained, tmp_path, monkeypatch, capsys):
    """`lengthgen-release FOLDER --push` on a release folder (as shipped in checkpoints/) uploads it byte for byte."""
    output_dir, _ = trained
    folder = release(str(output_dir), "someone/ndr-tiny", target=str(tmp_path / "released"))
    before = {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}
    monkeypatch.setenv("HF_TOKEN", "hf_offline_test_token")
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: None)
    uploaded = tmp_path / "uploaded"
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, repo_id, folder_path, **kw: shutil.copytree(folder_path, uploaded))
    main([folder, "--repo-id", "someone/ndr-tiny", "--push"])
    assert capsys.readouterr().out.strip() == folder
    # as the console script runs it: exit status 0 and the folder's path (a value returned by main would become
    # exit status 1)
    target = tmp_path / "by-script"
    result = subprocess.run([sys.executable, "-c", "import sys; from lengthgen.release import main; sys.exit(main())",
                             str(output_dir), "--repo-id", "someone/ndr-tiny", "--target", str(target)],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(target) and (target / "model.safetensors").is_file()
    assert {name: (uploaded / name).read_bytes() for name in os.listdir(uploaded)} == before
    with pytest.raises(SystemExit) as exit_info:  # without --push there is nothing to do with it
        main([folder, "--repo-id", "someone/ndr-tiny"])
    assert exit_info.value.code == 2
    assert "is already a release folder: upload it as it is with --push" in capsys.readouterr().err


def test_bad_input_one_line_error_and_no_folder(trained, tmp_path, monkeypatch, capsys):
    output_dir, _ = trained
    empty = tmp_path / "empty"
    empty.mkdir()
    no_results = tmp_path / "no_results"
    shutil.copytree(output_dir, no_results)
    os.remove(no_results / "all_results.json")
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "mine.txt").write_text("keep me")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("lengthgen.release.hub.hub_token", lambda: None)
    uploads = []
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, **kw: uploads.append(kw))

    cases = [
        ([str(empty)], "holds no trained model: config.json and model.safetensors missing"),
        ([str(no_results)], "has no results: all_results.json missing"),
        ([str(output_dir), "--target", str(occupied)], "exists and is not empty"),
        ([str(output_dir), "--push"], "--push needs a Hugging Face token"),
    ]
    for i, (args, message) in enumerate(cases):
        target = [] if "--target" in args else ["--target", str(tmp_path / f"release{i}")]
        with pytest.raises(SystemExit) as exit_info:
            main([*args, "--repo-id", "someone/model", *target])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / f"release{i}").exists()
    assert os.listdir(occupied) == ["mine.txt"] and uploads == []
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".release-")]
    with pytest.raises(ReleaseError, match="ORG/NAME"):
        release(str(output_dir), "no-slash", target=str(tmp_path / "x"))


def test_masked_lm_release_scores_its_card_without_lengthgen(tmp_path):
    """I-BERT through run_mlm.py: the card's sequence accuracy (whole masked number) is scored again from the folder."""
    import run_mlm

    params = ["train_size=64", "validation_size=24", "train_difficulties=[1,3]", "validation_difficulties=[4,5]"]
    output_dir = tmp_path / "ibert-tiny"
    metrics = run_mlm.main(
        ["--config_name", os.path.join(REPO, "hub_configs/ibert-nsp"),
         "--config_overrides", "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64",
         "--dataset_name", "nsp_inductive", "--dataset_config_name", "copy", "--dataset_param", *params,
         "--output_dir", str(output_dir), "--do_train", "--do_eval", "--max_steps", "40", "--learning_rate", "3e-3",
         "--eval_train_samples", "32",
         "--per_device_train_batch_size", "16", "--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true",
         "--report_to", "none"]
    )
    folder = release(str(output_dir), "someone/ibert-tiny", target=str(tmp_path / "release"))
    results = card_results(folder)
    assert results[("validation", "sequence accuracy")] == pytest.approx(metrics["eval_validation_sequence_accuracy"], abs=5e-5)
    assert ModelCard.load(os.path.join(folder, "README.md")).data.pipeline_tag == "fill-mask"
    splits = build("nsp_inductive", "copy", cache_dir=str(tmp_path / "cache"), **dict(parse_param(p) for p in params))[1]
    # the validation digits are unseen (accuracy 0 after 40 steps); the first 32 training rows are partly right
    for split, rows in (("validation", splits["validation"]), ("train", splits["train"].select(range(32)))):
        rows_file = tmp_path / f"{split}.jsonl"
        rows_file.write_text("".join(json.dumps({"input": r["input"], "target": r["target"]}) + "\n" for r in rows))
        result = subprocess.run(
            [sys.executable, os.path.join(REPO, "benchmarks", "verify_release.py"), folder, "--rows", str(rows_file),
             "--split", split, "--without-lengthgen"], capture_output=True, text=True, cwd=tmp_path,
        )
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["measured"] == pytest.approx(metrics[f"eval_{split}_sequence_accuracy"], abs=1e-9)
    assert 0 < metrics["eval_train_sequence_accuracy"] < 1


def test_an_evaluation_of_a_trainer_checkpoint_takes_its_runs_record(tmp_path):
    import json
    from types import SimpleNamespace

    from lengthgen.release import records

    run = tmp_path / "run"
    (run / "checkpoint-3").mkdir(parents=True)
    (run / records.RUN_RECORD).write_text(json.dumps({"command": "python train.py", "dataset": "ctl"}))
    output = tmp_path / "eval"
    output.mkdir()
    records.record_evaluation(str(output), str(run / "checkpoint-3"), "examples/run_classification.py",
                              ["--num_steps", "14"], SimpleNamespace(num_steps=14))
    record = json.loads((output / records.RUN_RECORD).read_text())
    assert record["command"] == "python train.py" and record["num_steps"] == 14
    assert record["evaluation_command"] == "python examples/run_classification.py --num_steps 14"


def test_a_run_stopped_by_its_time_budget_records_the_recipe_and_where_it_stopped(tmp_path):
    """The card's command is the recipe without the session's budget; it says how many steps were trained and which
    checkpoint's weights were kept, as the Trainer's own trainer_state.json records them."""
    output_dir = tmp_path / "run"
    run_classification.main(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"),
         "--config_overrides", "hidden_size=32,intermediate_size=64,num_layers=3",
         "--dataset_name", "ctl", "--dataset_config_name", "backward", "--dataset_param", *CTL_PARAMS,
         "--output_dir", str(output_dir), "--do_train", "--do_eval", "--max_steps", "100000", "--max_train_seconds", "8",
         "--per_device_train_batch_size", "32", "--eval_strategy", "steps", "--eval_steps", "2", "--save_steps", "2",
         "--save_total_limit", "2",
         "--load_best_model_at_end", "--metric_for_best_model", "accuracy", "--use_cpu", "--disable_tqdm", "true",
         "--report_to", "none"]
    )
    state = json.loads((output_dir / "trainer_state.json").read_text())
    record = json.loads((output_dir / "lengthgen_run.json").read_text())
    assert "--max_train_seconds" not in record["command"] and "--max_steps 100000" in record["command"]
    assert record["max_train_seconds"] == 8 and 0 < record["trained_steps"] == state["global_step"] < 100000
    assert record["best_step"] == int(state["best_model_checkpoint"].rsplit("-", 1)[1])
    card = open(os.path.join(release(str(output_dir), "someone/ndr-budget", target=str(tmp_path / "r")),
                             "README.md")).read()
    assert f"Trained {state['global_step']:,} steps under a wall-clock budget" in card
    assert (f"The weights are step {record['best_step']:,}'s" in card) == (record["best_step"] != state["global_step"])
