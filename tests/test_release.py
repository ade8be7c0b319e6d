"""`lengthgen release`: a trained output folder -> a Hub-ready folder that loads and scores without lengthgen
(`lengthgen verify`)."""

import json
import os
import shutil
import subprocess
import sys
import types

import pytest
from huggingface_hub import HfApi, ModelCard
from huggingface_hub.utils import filter_repo_objects

from lengthgen.cli import run_command
from lengthgen.commands.release import main as release_command
from lengthgen.commands.train import main as train
from lengthgen.data.export import build, parse_params
from lengthgen.release.folder import release
from lengthgen.release.hub import ReleaseError
from lengthgen.release.verify import verify
from lengthgen.training import RESULTS_FILE, ExperimentResult

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
VERIFY = [sys.executable, "-m", "lengthgen.commands.main", "verify"]


def run_classification(argv) -> dict:
    """examples/run_classification.py's main, in this process: the run's metrics."""
    return train(argv, head="classification", program="python examples/run_classification.py",
                 train_and_evaluate=False).metrics


def main(argv):
    """`lengthgen release`, a mistake answered in one line."""
    run_command(release_command, "lengthgen release", argv)


CTL_PARAMS = ["train_size=300", "validation_iid_size=20", "validation_size=40", "test_size=20"]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny NDR trained for a few steps by run_classification.py, evaluated with more steps than it trained."""
    output_dir = tmp_path_factory.mktemp("run") / "ndr-tiny"
    metrics = run_classification(
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
                 **parse_params(CTL_PARAMS))[1]["validation"]
    rows_file = tmp_path / "validation.jsonl"
    rows_file.write_text("".join(json.dumps({"input": r["input"], "target": r["target"]}) + "\n" for r in rows))
    result = subprocess.run(
        [*VERIFY, folder, "--rows", str(rows_file), "--split", "validation", "--without_lengthgen"],
        capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["rows"] == 40 and report["measured"] == pytest.approx(metrics["eval_validation_accuracy"], abs=1e-9)

    # the card alone says how to generate its splits again: the builder, its config, the run's generating parameters
    data = ModelCard.load(os.path.join(folder, "README.md")).data.to_dict()
    assert data["train_difficulties"] == [1, 5] and data["dataset_params"] == CTL_PARAMS
    result = subprocess.run(
        [*VERIFY, folder, "--split", "test", "--without_lengthgen"], capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["rows"] == 20 and report["measured"] == pytest.approx(metrics["eval_test_accuracy"], abs=1e-9)


def test_a_trained_folder_evaluated_with_more_steps_releases_with_those_numbers(trained, tmp_path):
    """Evaluating a trained NDR with --num_steps writes a folder that releases as that model, num_steps set to what its
    card's numbers were measured with, and both commands on the card."""
    output_dir, _ = trained
    evaluated = tmp_path / "evaluated"
    metrics = run_classification(
        ["--model_name_or_path", str(output_dir), "--dataset_name", "ctl", "--dataset_config_name", "backward",
         "--dataset_param", *CTL_PARAMS, "--output_dir", str(evaluated), "--do_eval", "--num_steps", "7",
         "--use_cpu", "--disable_tqdm", "true", "--report_to", "none"]
    )
    # transformers 5 saves how the evaluation loaded the tokenizer (from a folder, offline): not for the Hub
    saved = {**json.loads((evaluated / "tokenizer_config.json").read_text()),
             "local_files_only": True, "is_local": True}
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
        [*VERIFY, folder, "--split", "test", "--without_lengthgen"], capture_output=True, text=True, cwd=tmp_path,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1])["measured"] == pytest.approx(
        metrics["eval_test_accuracy"]
    )


def test_a_model_saved_in_shards_releases_every_shard_and_scores_its_card(trained, tmp_path):
    """A model larger than `max_shard_size` is saved as an index and shards, no `model.safetensors`: the release
    carries the index and every shard it names, and loads to the same predictions as the unsharded folder."""
    from transformers import AutoModelForSequenceClassification

    output_dir, metrics = trained
    sharded = tmp_path / "sharded"
    shutil.copytree(output_dir, sharded)
    os.remove(sharded / "model.safetensors")
    AutoModelForSequenceClassification.from_pretrained(output_dir).save_pretrained(sharded, max_shard_size="20KB")
    index = json.loads((sharded / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) > 1 and not (sharded / "model.safetensors").exists()
    folder = release(str(sharded), "someone/ndr-tiny-sharded", target=str(tmp_path / "release"))
    assert {"model.safetensors.index.json", *shards} <= set(os.listdir(folder))
    report = verify([folder], split="test")[0]
    assert report["agrees"] and report["measured"] == pytest.approx(metrics["eval_test_accuracy"], abs=1e-9)

    os.remove(sharded / sorted(shards)[0])
    with pytest.raises(ReleaseError, match=f"names missing shards: {sorted(shards)[0]}"):
        release(str(sharded), "someone/ndr-tiny-sharded", target=str(tmp_path / "release2"))
    assert not (tmp_path / "release2").exists()


def test_a_card_measured_on_some_rows_is_verified_on_those_rows(trained, tmp_path):
    """Results measured on the first rows of each split (--max_eval_samples) and on a sample of the first training
    rows (--eval_train_samples, --max_train_samples): the card names them and `verify` scores those rows, so it
    agrees with the card (scored on the whole split it would not)."""
    output_dir, _ = trained
    evaluated = tmp_path / "evaluated"
    metrics = run_classification(
        ["--model_name_or_path", str(output_dir), "--dataset_name", "ctl", "--dataset_config_name", "backward",
         "--dataset_param", *CTL_PARAMS, "--output_dir", str(evaluated), "--do_eval", "--max_eval_samples", "7",
         "--eval_train_samples", "9", "--max_train_samples", "100", "--use_cpu", "--disable_tqdm", "true",
         "--report_to", "none"]
    )
    folder = release(str(evaluated), "someone/ndr-tiny-rows", target=str(tmp_path / "release"))
    data = ModelCard.load(os.path.join(folder, "README.md")).data.to_dict()
    assert (data["eval_rows"], data["eval_train_rows"], data["train_rows"]) == (7, 9, 100)
    reports = {split: verify([folder], split=split)[0] for split in ("validation", "train")}
    assert reports["validation"]["rows"] == 7 and reports["train"]["rows"] == 9
    for split, report in reports.items():
        assert report["agrees"], report
        assert report["measured"] == pytest.approx(metrics[f"eval_{split}_accuracy"], abs=1e-9)


def test_verify_without_lengthgen_leaves_the_process_able_to_import_it_again(tmp_path):
    """`verify(..., without_lengthgen=True)` from Python blocks lengthgen's imports for the scoring only."""
    rows = build("ctl", "backward", cache_dir=str(tmp_path / "cache"), **parse_params(CTL_PARAMS))[1]["test"]
    rows_file = tmp_path / "rows.jsonl"
    rows_file.write_text("".join(json.dumps({"input": r["input"], "target": r["target"]}) + "\n" for r in rows))
    code = (
        "import json, sys\n"
        "from lengthgen.release.verify import verify\n"
        "rows = [json.loads(line) for line in open(sys.argv[2])]\n"
        "report = verify([sys.argv[1]], rows, 'test', without_lengthgen=True)[0]\n"
        "from lengthgen.modeling import NDRForSequenceClassification\n"
        "import lengthgen.data\n"
        "print(report['rows'], NDRForSequenceClassification.__name__)\n"
    )
    result = subprocess.run([sys.executable, "-c", code, os.path.join(REPO, "checkpoints", "ndr-ctl-backward"),
                             str(rows_file)], capture_output=True, text=True, cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.split() == ["20", "NDRForSequenceClassification"]


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


def fake_upload_folder(uploaded):
    """HfApi.upload_folder that copies what the Hub would receive (the folder less its ignore_patterns, as
    huggingface_hub filters them) into `uploaded`."""

    def upload_folder(self, repo_id, folder_path, ignore_patterns=None, **kw):
        paths = [os.path.relpath(os.path.join(root, name), folder_path)
                 for root, _, names in os.walk(folder_path) for name in names]
        for path in filter_repo_objects(paths, ignore_patterns=ignore_patterns):
            os.makedirs(os.path.dirname(uploaded / path), exist_ok=True)
            shutil.copy(os.path.join(folder_path, path), uploaded / path)

    return upload_folder


def test_a_release_folder_is_pushed_unchanged(trained, tmp_path, monkeypatch, capsys):
    """`lengthgen release FOLDER --push` on a release folder (as shipped in checkpoints/) uploads it byte for byte,
    without the bytecode Python caches beside its code."""
    output_dir, _ = trained
    folder = release(str(output_dir), "someone/ndr-tiny", target=str(tmp_path / "released"))
    before = {name: open(os.path.join(folder, name), "rb").read() for name in os.listdir(folder)}
    os.makedirs(os.path.join(folder, "__pycache__"))
    open(os.path.join(folder, "__pycache__", "modeling_ndr.cpython-311.pyc"), "wb").write(b"cache")
    monkeypatch.setenv("HF_TOKEN", "hf_offline_test_token")
    monkeypatch.setattr(HfApi, "create_repo", lambda self, repo_id, **kw: None)
    uploaded = tmp_path / "uploaded"
    monkeypatch.setattr(HfApi, "upload_folder", fake_upload_folder(uploaded))
    main([folder, "--repo_id", "someone/ndr-tiny", "--push"])
    assert capsys.readouterr().out.strip() == folder
    # as the console script runs it: exit status 0 and the folder's path
    target = tmp_path / "by-script"
    result = subprocess.run([sys.executable, "-m", "lengthgen.commands.main", "release", str(output_dir), "--repo_id",
                             "someone/ndr-tiny", "--target", str(target)], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]
    assert result.stdout.strip() == str(target) and (target / "model.safetensors").is_file()
    assert {name: (uploaded / name).read_bytes() for name in os.listdir(uploaded)} == before
    with pytest.raises(SystemExit) as exit_info:  # without --push there is nothing to do with it
        main([folder, "--repo_id", "someone/ndr-tiny"])
    assert exit_info.value.code == 2
    assert "is already a release folder: upload it as it is with --push" in capsys.readouterr().err

    # under another repo id: the same files, the card's usage lines naming the repo it goes to
    elsewhere = tmp_path / "elsewhere"
    monkeypatch.setattr(HfApi, "upload_folder", fake_upload_folder(elsewhere))
    main([folder, "--repo_id", "other-org/ndr-fork", "--push"])
    assert set(os.listdir(elsewhere)) == set(before)
    assert all((elsewhere / name).read_bytes() == before[name] for name in before if name != "README.md")
    card = (elsewhere / "README.md").read_text()
    assert card == before["README.md"].decode().replace('("someone/ndr-tiny"', '("other-org/ndr-fork"')
    assert 'from_pretrained("other-org/ndr-fork", trust_remote_code=True)' in card and "someone/" not in card
    assert set(os.listdir(folder)) == {*before, "__pycache__"}
    assert open(os.path.join(folder, "README.md"), "rb").read() == before["README.md"]  # the folder is left as it is


def test_bad_input_one_line_error_and_no_folder(trained, tmp_path, monkeypatch, capsys):
    output_dir, _ = trained
    empty = tmp_path / "empty"
    empty.mkdir()
    no_results = tmp_path / "no_results"
    shutil.copytree(output_dir, no_results)
    os.remove(no_results / RESULTS_FILE)
    occupied = tmp_path / "occupied"
    occupied.mkdir()
    (occupied / "mine.txt").write_text("keep me")
    monkeypatch.delenv("HF_TOKEN", raising=False)
    monkeypatch.setattr("lengthgen.release.hub.hub_token", lambda: None)
    uploads = []
    monkeypatch.setattr(HfApi, "upload_folder", lambda self, **kw: uploads.append(kw))

    cases = [
        ([str(empty)], "holds no trained model: config.json and model.safetensors missing"),
        ([str(no_results)], f"has no {RESULTS_FILE}: it was not written by lengthgen's experiment runner"),
        ([str(output_dir), "--target", str(occupied)], "exists and is not empty"),
        ([str(output_dir), "--push"], "--push needs a Hugging Face token"),
        ([str(output_dir), "--repo_id", "someone/my model"], "--repo_id 'someone/my model' is not a Hub repo id"),
    ]
    for i, (args, message) in enumerate(cases):
        target = [] if "--target" in args else ["--target", str(tmp_path / f"release{i}")]
        with pytest.raises(SystemExit) as exit_info:
            main([*args, *([] if "--repo_id" in args else ["--repo_id", "someone/model"]), *target])
        assert exit_info.value.code == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
        assert not (tmp_path / f"release{i}").exists()
    assert os.listdir(occupied) == ["mine.txt"] and uploads == []
    assert not [n for n in os.listdir(tmp_path) if n.startswith(".release-")]
    with pytest.raises(ReleaseError, match="ORG/NAME"):
        release(str(output_dir), "no-slash", target=str(tmp_path / "x"))


def test_masked_lm_release_scores_its_card_without_lengthgen(tmp_path):
    """I-BERT as examples/run_mlm.py trains it: the card's accuracy (the whole masked number) is scored again from the
    folder, on the validation split and on the training sample the run evaluated."""
    params = ["train_size=64", "validation_size=24", "train_difficulties=[1,3]", "validation_difficulties=[4,5]"]
    output_dir = tmp_path / "ibert-tiny"
    metrics = train(
        ["--config_name", os.path.join(REPO, "hub_configs/ibert-nsp"),
         "--config_overrides", "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64",
         "--dataset_name", "nsp_inductive", "--dataset_config_name", "copy", "--dataset_param", *params,
         "--output_dir", str(output_dir), "--do_train", "--do_eval", "--max_steps", "40", "--learning_rate", "3e-3",
         "--eval_train_samples", "32",
         "--per_device_train_batch_size", "16", "--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true",
         "--report_to", "none"], head="masked_lm", train_and_evaluate=False,
    ).metrics
    folder = release(str(output_dir), "someone/ibert-tiny", target=str(tmp_path / "release"))
    results = card_results(folder)
    assert results[("validation", "accuracy")] == pytest.approx(metrics["eval_validation_accuracy"], abs=5e-5)
    assert ModelCard.load(os.path.join(folder, "README.md")).data.pipeline_tag == "fill-mask"
    splits = build("nsp_inductive", "copy", cache_dir=str(tmp_path / "cache"), **parse_params(params))[1]
    # the validation digits are unseen (accuracy 0 after 40 steps); the sample of 32 training rows is partly right
    sample = splits["train"].shuffle(seed=0).select(range(32))
    for split, rows in (("validation", splits["validation"]), ("train", sample)):
        rows_file = tmp_path / f"{split}.jsonl"
        rows_file.write_text("".join(json.dumps({"input": r["input"], "target": r["target"]}) + "\n" for r in rows))
        result = subprocess.run([*VERIFY, folder, "--rows", str(rows_file), "--split", split, "--without_lengthgen"],
                                capture_output=True, text=True, cwd=tmp_path)
        assert result.returncode == 0, result.stderr[-3000:]
        report = json.loads(result.stdout.strip().splitlines()[-1])
        assert report["measured"] == pytest.approx(metrics[f"eval_{split}_accuracy"], abs=1e-9)
    assert 0 < metrics["eval_train_accuracy"] < 1


LLAMA_SLOTS = ["--model_type", "llama", "--config_overrides",
               "hidden_size=16,num_attention_heads=2,num_key_value_heads=2,intermediate_size=32,num_hidden_layers=2",
               "--max_steps", "30", "--dataset_param", "train_lengths=[1,10]", "test_lengths=[11,14]", "train_size=400",
               "test_size=200"]
STACK_RNN_SLOTS = ["--model_type", "stack_rnn", "--config_overrides", "hidden_size=8", "--max_steps", "2",
                   "--dataset_param", "train_lengths=[1,4]", "test_lengths=[5,6]", "train_size=40", "test_size=8"]


@pytest.mark.parametrize("model, rows, code", [(LLAMA_SLOTS, 200, []),
                                               (STACK_RNN_SLOTS, 8, ["configuration_stack_rnn", "modeling_stack_rnn"])],
                         ids=["llama", "stack_rnn"])
def test_answer_slots_release_scores_its_card_without_lengthgen(tmp_path, model, rows, code):
    """A Llama, and one of lengthgen's own models, under the answer-slots head (`lengthgen train --head answer_slots`):
    the released folder carries the reader's code, and the base's where it is not transformers' (named in
    base_config's auto_map), loads with transformers alone, and `lengthgen verify` scores the generated test split as
    the run did, answer slot by answer slot. A reader saved without its base's code is refused in one line."""
    output_dir = tmp_path / "slots"
    metrics = train(
        [*model, "--head", "answer_slots", "--dataset_name", "chomsky_hierarchy", "--dataset_config_name",
         "parity_check", "--output_dir", str(output_dir), "--save_strategy", "no", "--use_cpu", "--disable_tqdm",
         "true", "--report_to", "none"],
    ).metrics
    folder = release(str(output_dir), "someone/slots", target=str(tmp_path / "release"))
    files = {f"{name}.py" for name in ["modeling_answer_slots", "configuration_answer_slots", *code]}
    assert files <= set(os.listdir(folder))
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    auto_map = config["base_config"].get("auto_map")
    assert auto_map == ({"AutoConfig": "configuration_stack_rnn.StackRNNConfig",
                         "AutoModel": "modeling_stack_rnn.StackRNNModel"} if code else None)
    result = subprocess.run([*VERIFY, folder, "--split", "test", "--without_lengthgen"], capture_output=True, text=True,
                            cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert report["agrees"] and report["rows"] == rows
    assert report["measured"] == pytest.approx(metrics["eval_test_accuracy"], abs=1e-9)
    assert code or 0 < report["measured"] < 1  # the Llama's 30 steps: some answers right, not all
    if code:  # as a reader over a lengthgen base was saved before its base's code travelled with it
        del config["base_config"]["auto_map"]
        (output_dir / "config.json").write_text(json.dumps(config))
        with pytest.raises(ReleaseError, match="answer-slots reader over stack_rnn saved without stack_rnn's code"):
            release(str(output_dir), "someone/slots", target=str(tmp_path / "again"))
        assert not (tmp_path / "again").exists()


def test_answer_slot_batch_pads_and_scores_up_to_end_by_hand():
    """Two binary sums in the authors' layout, 1 + 1 = 0 1 END 0 and 1 0 1 + 1 1 = 0 0 0 1 END 0 0: ids framed by
    [CLS] ... [SEP] and padded, labels at the answer slots up to END."""
    from datasets import Dataset

    from lengthgen.data.chomsky_hierarchy import END
    from lengthgen.release.verify import answer_slot_batch
    from lengthgen.training.models import answer_slots_tokenizer

    rows = [{"input": "1 + 1", "target": "0 1 END 0"}, {"input": "1 0 1 + 1 1", "target": "0 0 0 1 END 0 0"}]
    tokenizer = answer_slots_tokenizer({"test": Dataset.from_list(rows)})
    encoded, labels = answer_slot_batch(tokenizer, rows, END)
    t = tokenizer.convert_tokens_to_ids
    first = ["[CLS]", "1", "+", "1", "[SEP]"] + ["[MASK]"] * 4 + ["[SEP]"]
    assert encoded["input_ids"][0].tolist() == t(first) + [tokenizer.pad_token_id] * 6
    assert encoded["attention_mask"].tolist() == [[1] * 10 + [0] * 6, [1] * 16]
    assert labels[0] == [-100] * 5 + t(["0", "1", "END"]) + [-100] * 8
    assert labels[1] == [-100] * 8 + t(["0", "0", "0", "1", "END"]) + [-100] * 3


def test_an_evaluation_of_a_trainer_checkpoint_takes_its_runs_record(trained, tmp_path):
    """Evaluating a run's `checkpoint-N` folder: the output releases as that run's model (its spec, command and
    training come from the run's results file), with this evaluation's command beside them."""
    output_dir, _ = trained
    run = tmp_path / "run"
    shutil.copytree(output_dir, run / "checkpoint-30")
    shutil.copy(output_dir / RESULTS_FILE, run / RESULTS_FILE)
    os.remove(run / "checkpoint-30" / RESULTS_FILE)
    argv = ["--model_name_or_path", str(run / "checkpoint-30"), "--dataset_name", "ctl", "--dataset_config_name",
            "backward", "--dataset_param", *CTL_PARAMS, "--output_dir", str(tmp_path / "eval"), "--do_eval",
            "--num_steps", "4", "--use_cpu", "--report_to", "none"]
    run_classification(argv)
    record = ExperimentResult.load(str(tmp_path / "eval"))
    trained_record = ExperimentResult.load(str(output_dir))
    assert record.trained_by == {"spec": trained_record.spec, "command": trained_record.command,
                                 "training": trained_record.training, "hardware": trained_record.hardware}
    assert record.command.endswith("--num_steps 4 --use_cpu --report_to none") and record.training is None
    card = open(
        os.path.join(release(str(tmp_path / "eval"), "someone/x", target=str(tmp_path / "r")), "README.md")
    ).read()
    assert trained_record.command in card and record.command in card and "Trained 30 steps" in card


def test_a_run_stopped_by_its_time_budget_records_the_recipe_and_where_it_stopped(tmp_path, monkeypatch):
    """The card's command is the recipe without the session's budget; it says how many steps were trained and which
    checkpoint's weights were kept, as the Trainer's own trainer_state.json records them. A clock that advances one
    second per reading stops the run after step 9 of a 10 s budget, whatever the machine's speed; only step 2's
    evaluation counts as a best (the evaluation at the run's start, which measures the cost of one, is no candidate),
    so the weights kept are not the last step's."""
    from lengthgen.training import pieces, runner

    ticks = iter(range(10**6))
    monkeypatch.setattr(pieces, "time", types.SimpleNamespace(monotonic=lambda: float(next(ticks))))
    original = runner.ExperimentTrainer._determine_best_metric
    monkeypatch.setattr(runner.ExperimentTrainer, "_determine_best_metric",
                        lambda self, metrics, trial: original(self, metrics, trial) and self.state.global_step == 2)
    output_dir = tmp_path / "run"
    run_classification(
        ["--config_name", os.path.join(REPO, "hub_configs/ndr-ctl"),
         "--config_overrides", "hidden_size=32,intermediate_size=64,num_layers=3",
         "--dataset_name", "ctl", "--dataset_config_name", "backward", "--dataset_param", *CTL_PARAMS,
         "--output_dir", str(output_dir), "--do_train", "--do_eval", "--max_steps", "100000",
         "--max_train_seconds", "10",
         "--per_device_train_batch_size", "32", "--eval_strategy", "steps", "--eval_steps", "2", "--save_steps", "2",
         "--save_total_limit", "2",
         "--load_best_model_at_end", "--metric_for_best_model", "accuracy", "--use_cpu", "--disable_tqdm", "true",
         "--report_to", "none"]
    )
    state = json.loads((output_dir / "trainer_state.json").read_text())
    record = ExperimentResult.load(str(output_dir))
    assert "--max_train_seconds" not in record.command and "--max_steps 100000" in record.command
    assert "max_train_seconds" not in record.spec["training"] and record.spec["training"]["max_steps"] == 100000
    assert record.training["max_train_seconds"] == 10 and record.training["steps"] == state["global_step"] == 9
    assert record.training["best_step"] == 2 and state["best_model_checkpoint"].endswith("checkpoint-2")
    card = open(os.path.join(release(str(output_dir), "someone/ndr-budget", target=str(tmp_path / "r")),
                             "README.md")).read()
    assert "Trained 9 steps under a wall-clock budget" in card and "The weights are step 2's" in card
