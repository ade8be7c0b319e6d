import glob
import json
import math
import os
import subprocess
import sys

import pytest
import torch
from transformers import AutoModelForMaskedLM, AutoTokenizer

import lengthgen.modeling  # noqa: F401
from lengthgen.cli import UsageError
from lengthgen.commands.train import main as train
from lengthgen.data.nsp import generate_nsp, generate_nsp_splits
from lengthgen.training import ExperimentResult
from lengthgen.training.runner import ExperimentTrainer

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run_mlm(argv) -> dict:
    """examples/run_mlm.py's main, in this process: the run's metrics."""
    return train(argv, head="masked_lm", program="python examples/run_mlm.py", train_and_evaluate=False).metrics


def quick_start_module():
    """examples/nsp_length_generalization.py, loaded from its file."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(
        "quick_start", os.path.join(REPO, "examples", "nsp_length_generalization.py")
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def quick_start(argv) -> dict:
    """examples/nsp_length_generalization.py's main, in this process."""
    return quick_start_module().main(argv)


def test_quick_start_example_model_size_changes_the_fields_it_names_and_keeps_the_presets_others(tmp_path):
    from lengthgen.reproduction.reproduce import preset

    module = quick_start_module()
    for name in ("ibert-nsp-copy-small", "bert-nsp-copy-small"):
        given = preset(name).experiment().model.overrides
        assert given["num_attention_heads"] == 4 and given["hidden_size"] == 128  # the preset's, as written there
        spec = module.experiment(name, str(tmp_path), module.parse_args(["--model_size", "hidden_size=64"]))
        assert spec.model.overrides == {**given, "hidden_size": 64}
        assert module.experiment(name, str(tmp_path), module.parse_args([])).model.overrides == given


TINY = "hidden_size=32,num_hidden_layers=1,num_attention_heads=2,intermediate_size=64"


GENERATING = ["train_size=256", "train_difficulties=[1,3]", "validation_size=32", "validation_difficulties=[4,5]"]


def run_args(output_dir, config="hub_configs/ibert-nsp", overrides=TINY, extra=(), task="copy", generating=GENERATING):
    return [
        "--config_name", os.path.join(REPO, config),
        "--config_overrides", overrides,
        "--dataset_name", "nsp_inductive", "--dataset_config_name", task,
        *(["--dataset_param", *generating] if generating else []),
        "--output_dir", str(output_dir),
        "--do_train", "--do_eval",
        "--num_train_epochs", "1",
        "--per_device_train_batch_size", "16",
        "--save_strategy", "no",
        "--use_cpu",
        "--disable_tqdm", "true",
        *extra,
    ]


def sequence_accuracy(model_dir, rows, tokens=False):
    """Exact-match accuracy on the masked spans of `rows` (with `tokens`, the mean over rows of the fraction of masked
    tokens right), computed here from the saved model, one row at a time."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModelForMaskedLM.from_pretrained(model_dir).eval()
    correct = 0
    for row in rows:
        input_ids = tokenizer(row["input"])["input_ids"]
        target_ids = torch.tensor(tokenizer(row["target"])["input_ids"])
        with torch.no_grad():
            predicted = model(torch.tensor([input_ids])).logits[0].argmax(-1)
        masked = torch.tensor(input_ids) == tokenizer.mask_token_id
        right = predicted[masked] == target_ids[masked]
        correct += right.float().mean().item() if tokens else bool(right.all())
    return correct / len(rows)


def test_tiny_ibert_learns_copy_up_to_4_digits(tmp_path):
    """End-to-end proof that training works: >= 99% exact copies on fresh sequences of the trained lengths."""
    run_mlm(
        [
            "--config_name", os.path.join(REPO, "hub_configs/ibert-nsp"),
            "--config_overrides", "hidden_size=64,num_hidden_layers=2,num_attention_heads=4,intermediate_size=128",
            "--dataset_name", "nsp_inductive", "--dataset_config_name", "copy",
            "--dataset_param", "train_size=3000", "train_difficulties=[1,4]", "validation_size=100",
            "validation_difficulties=[5,6]",
            "--output_dir", str(tmp_path),
            "--do_train",
            "--num_train_epochs", "4",
            "--per_device_train_batch_size", "32",
            "--learning_rate", "3e-3",
            "--warmup_steps", "20",
            "--save_strategy", "no",
            "--use_cpu",
            "--disable_tqdm", "true",
            "--seed", "0",
        ]
    )
    fresh = generate_nsp("copy", 400, 1, 4, seed=12345)
    assert sequence_accuracy(tmp_path, fresh) >= 0.99


def test_run_mlm_saves_model_tokenizer_card_metrics_and_tensorboard(tmp_path):
    metrics = run_mlm(run_args(tmp_path, extra=["--eval_train_samples", "16", "--lr_decay_per_epoch", "0.97"]))
    files = set(os.listdir(tmp_path))
    assert {"config.json", "model.safetensors", "modeling_ibert.py", "tokenizer.json", "README.md",
            "all_results.json"} <= files
    assert any(f.startswith("events.out.tfevents") for _, _, fs in os.walk(tmp_path / "runs") for f in fs)
    # the scores per difficulty are those of the saved model on each validation row alone
    validation = generate_nsp_splits("copy", train_size=256, validation_size=32, train_difficulties=(1, 3),
                                     validation_difficulties=(4, 5))["validation"]
    for d in (4, 5):
        rows = [row for row in validation if row["difficulty"] == d]
        assert metrics[f"eval_validation_accuracy_d{d}"] == pytest.approx(sequence_accuracy(tmp_path, rows))
        assert metrics[f"eval_validation_token_accuracy_d{d}"] == pytest.approx(
            sequence_accuracy(tmp_path, rows, tokens=True))
    assert {"eval_validation_token_accuracy", "eval_validation_bits_per_token", "eval_validation_perplexity",
            "eval_train_accuracy", "train_samples_per_second"} <= set(metrics)
    record = ExperimentResult.load(str(tmp_path))
    assert record.head == "masked_lm" and record.scores["train"]["all"]["examples"] == 16
    card = (tmp_path / "README.md").read_text()
    assert "I-BERT: Inductive Generalization" in card and "| validation | 5 |" in card
    # the saved folder loads with the Auto class
    reloaded = AutoModelForMaskedLM.from_pretrained(tmp_path)
    assert type(reloaded).__name__ == "IBertForMaskedLM"


def test_run_mlm_resumes_from_its_last_checkpoint(tmp_path, monkeypatch):
    # a later flag wins over run_args' "--save_strategy no"
    run_mlm(run_args(tmp_path, extra=["--save_strategy", "steps", "--save_steps", "8", "--max_steps", "8"]))
    assert (tmp_path / "checkpoint-8").is_dir()
    resumed_from = []
    original_train = ExperimentTrainer.train

    def spy(self, resume_from_checkpoint=None, **kwargs):
        resumed_from.append(resume_from_checkpoint)
        return original_train(self, resume_from_checkpoint=resume_from_checkpoint, **kwargs)

    monkeypatch.setattr(ExperimentTrainer, "train", spy)
    run_mlm(run_args(tmp_path, extra=["--save_strategy", "steps", "--save_steps", "8", "--max_steps", "12"]))
    assert resumed_from == [str(tmp_path / "checkpoint-8")]
    state = json.loads((tmp_path / "trainer_state.json").read_text())
    assert state["global_step"] == 12


def test_run_mlm_on_ptb_char_fixture(tmp_path):
    fixture = os.path.join(REPO, "tests", "fixtures", "ptb")
    metrics = run_mlm(
        [
            "--config_name", os.path.join(REPO, "hub_configs/ibert-base"),
            "--config_overrides", TINY,
            "--dataset_name", "ptb_inductive", "--dataset_config_name", "char",
            "--dataset_param", f"source={fixture}",
            "--difficulty_bucket", "16",
            "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--max_steps", "2",
            "--per_device_train_batch_size", "8", "--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true",
        ]
    )
    buckets = sorted(int(k.rsplit("_d", 1)[1]) for k in metrics if k.startswith("eval_validation_accuracy_d"))
    assert buckets and all(b % 16 == 0 and 192 <= b <= 224 for b in buckets)
    # bits per character over the masked characters: near log2(99 characters) = 6.6 for a barely trained model
    assert 5 < metrics["eval_validation_bits_per_token"] < 8


def test_run_mlm_on_ptb_word_fixture_builds_word_vocabulary(tmp_path):
    fixture = os.path.join(REPO, "tests", "fixtures", "ptb")
    metrics = run_mlm(
        [
            "--config_name", os.path.join(REPO, "hub_configs/ibert-base"),
            "--config_overrides", TINY,
            "--dataset_name", "ptb_inductive", "--dataset_config_name", "word",
            "--dataset_param", f"source={fixture}", "train_lengths=[2,30]", "validation_lengths=[31,64]",
            "--difficulty_bucket", "8",
            "--output_dir", str(tmp_path), "--do_train", "--do_eval", "--max_steps", "2",
            "--per_device_train_batch_size", "8", "--save_strategy", "no", "--use_cpu", "--disable_tqdm", "true",
        ]
    )
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    assert tokenizer.unk_token == "<unk>" and "market" in tokenizer.get_vocab()
    assert json.loads((tmp_path / "config.json").read_text())["vocab_size"] == len(tokenizer)
    buckets = sorted(int(k.rsplit("_d", 1)[1]) for k in metrics if k.startswith("eval_validation_accuracy_d"))
    assert buckets and all(b % 8 == 0 and 24 <= b <= 64 for b in buckets)
    # perplexity: exp of the mean negative log-likelihood of every masked word of the validation split, here from
    # the saved model, one sentence at a time
    from lengthgen.data.ptb import generate_ptb_splits, read_ptb_sentences

    sentences = read_ptb_sentences(os.path.join(fixture, "ptb.train.txt"))
    rows = generate_ptb_splits(sentences, "word", (2, 30), (31, 64))["validation"]
    model = AutoModelForMaskedLM.from_pretrained(tmp_path).eval()
    nll, count = 0.0, 0
    for row in rows:
        input_ids, target_ids = tokenizer(row["input"])["input_ids"], tokenizer(row["target"])["input_ids"]
        with torch.no_grad():
            log_probs = model(torch.tensor([input_ids])).logits[0].log_softmax(-1)
        for position, token in enumerate(input_ids):
            if token == tokenizer.mask_token_id:
                nll, count = nll - log_probs[position, target_ids[position]].item(), count + 1
    assert count >= len(rows)
    assert metrics["eval_validation_perplexity"] == pytest.approx(math.exp(nll / count), rel=1e-4)


def test_run_mlm_on_an_exported_dataset_folder(tmp_path):
    from lengthgen.data.export import export

    folder = export("nsp_inductive", str(tmp_path / "data"), ["reverse"], train_size=64, validation_size=8)
    metrics = run_mlm(run_args(tmp_path / "run", task="reverse", generating=None) + ["--dataset_name", folder])
    assert "eval_validation_accuracy_d13" in metrics
    with pytest.raises(UsageError, match="--dataset_param applies to lengthgen's builders"):
        run_mlm(run_args(tmp_path / "bad") + ["--dataset_name", folder])


def test_run_mlm_names_a_missing_split(tmp_path):
    from lengthgen.data.export import export

    folder = export("nsp_inductive", str(tmp_path / "data"), ["copy"], train_size=16, validation_size=4)
    (validation,) = glob.glob(os.path.join(folder, "copy", "validation-*.parquet"))
    os.remove(validation)
    card = open(os.path.join(folder, "README.md")).read().replace(
        f"  - split: validation\n    path: copy/{os.path.basename(validation)}\n", ""
    )
    open(os.path.join(folder, "README.md"), "w").write(card)
    with pytest.raises(UsageError, match="no split to evaluate besides 'train'"):
        run_mlm(run_args(tmp_path / "run", generating=None) + ["--dataset_name", folder])
    assert not os.path.exists(tmp_path / "run" / "model.safetensors")  # named before any training


def test_bert_baseline_through_the_same_script(tmp_path):
    metrics = run_mlm(run_args(tmp_path, config="hub_configs/bert-nsp-baseline"))
    assert json.loads((tmp_path / "config.json").read_text())["model_type"] == "bert"
    assert "eval_validation_accuracy" in metrics


def test_push_to_hub_uploads_config_weights_code_tokenizer_and_card(tmp_path, monkeypatch):
    uploads = []

    class Repo:
        def __init__(self, repo_id):
            self.repo_id = repo_id

    def upload_folder(self, *, repo_id, folder_path, ignore_patterns=None, **kwargs):
        files = sorted(f for f in os.listdir(folder_path) if not f.startswith("_") and not f.startswith("checkpoint-"))
        uploads.append((repo_id, files, json.loads(open(os.path.join(folder_path, "config.json")).read())))

    monkeypatch.setattr("huggingface_hub.HfApi.create_repo", lambda self, repo_id, **kw: Repo(repo_id))
    monkeypatch.setattr("huggingface_hub.HfApi.upload_folder", upload_folder)
    monkeypatch.setattr("huggingface_hub.HfApi.create_commit", lambda *a, **k: pytest.fail("unexpected commit"))
    run_mlm(run_args(tmp_path, extra=["--push_to_hub", "--hub_model_id", "someone/ibert-copy"]))
    assert uploads, "nothing was uploaded"
    repo_id, files, config = uploads[-1]
    assert repo_id == "someone/ibert-copy"
    assert {"config.json", "model.safetensors", "modeling_ibert.py", "configuration_ibert.py", "tokenizer.json",
            "tokenizer_config.json", "README.md"} <= set(files)
    assert config["auto_map"]["AutoModelForMaskedLM"] == "modeling_ibert.IBertForMaskedLM"


def test_two_process_ddp_with_accelerate_launch(tmp_path):
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "OMP_NUM_THREADS": "1"}
    command = [sys.executable, "-m", "accelerate.commands.launch", "--multi_gpu", "--num_processes", "2",
               os.path.join(REPO, "examples", "run_mlm.py"),
               *run_args(tmp_path, extra=["--logging_steps", "1", "--learning_rate", "3e-3", "--num_train_epochs", "4",
                                          "--eval_train_samples", "99"])]
    result = subprocess.run(command, capture_output=True, text=True, env=env, cwd=REPO, timeout=600)
    assert result.returncode == 0, result.stderr[-4000:]
    state = json.loads((tmp_path / "trainer_state.json").read_text())
    # 256 rows, 16 per process, 2 processes, 4 epochs -> 32 optimizer steps (one process would take 64)
    assert state["global_step"] == 32
    losses = [entry["loss"] for entry in state["log_history"] if "loss" in entry]
    assert sum(losses[-3:]) / 3 < sum(losses[:3]) / 3 - 0.3  # it trains
    # evaluation sharded over 2 processes keeps rows in order: the per-difficulty figures equal one process's
    distributed = json.loads((tmp_path / "all_results.json").read_text())
    single = run_mlm(
        ["--model_name_or_path", str(tmp_path), "--dataset_name", "nsp_inductive", "--dataset_config_name", "copy",
         "--dataset_param", *GENERATING,
         "--eval_train_samples", "99", "--output_dir", str(tmp_path / "single"), "--do_eval", "--use_cpu",
         "--disable_tqdm", "true"]
    )
    keys = [k for k in distributed if "accuracy_d" in k]
    assert len(keys) == 10  # train d1-d3 and validation d4-d5, accuracy and token accuracy
    assert len({round(distributed[k], 6) for k in keys}) > 2  # the difficulties differ, so order matters
    for key in keys:
        assert single[key] == pytest.approx(distributed[key]), key


def test_quick_start_example_prints_table_and_writes_plot(tmp_path, capsys):
    results = quick_start(
        ["--train_size", "128", "--validation_size", "32", "--epochs", "1", "--train_digits", "1", "2",
         "--validation_digits", "3", "4", "--model_size", TINY, "--output_dir", str(tmp_path)]
    )
    assert set(results) == {"I-BERT", "BERT"}
    assert all(set(table) == {"1", "2", "3", "4"} for table in results.values())
    out = capsys.readouterr().out
    assert "digits" in out and "   3 *" in out
    png = tmp_path / "nsp_copy_accuracy.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the trained I-BERT as a release folder: its card gives the task and this run's training range (1-2 digits)
    from huggingface_hub import ModelCard

    release = tmp_path / "release" / "ibert-nsp-copy"
    assert {"config.json", "model.safetensors", "modeling_ibert.py", "tokenizer.json"} <= set(os.listdir(release))
    data = ModelCard.load(release / "README.md").data
    assert data.to_dict()["train_difficulties"] == [1, 2]
    assert {(r.dataset_type, r.dataset_config) for r in data.eval_results} == {("nsp_inductive", "copy")}
    card = {(r.dataset_split, r.metric_name): r.metric_value for r in data.eval_results}
    for digits in (3, 4):  # the card's numbers are the table's
        assert card[("validation", f"accuracy, difficulty {digits}")] == pytest.approx(
            results["I-BERT"][str(digits)], abs=5e-5)


@pytest.mark.slow
def test_quick_start_example_shows_the_papers_contrast(tmp_path):
    """The quick-start example with its defaults (about 2 minutes): both models fit 1-6 digits; only I-BERT copies 7
    and 8 digits."""
    results = quick_start(["--output_dir", str(tmp_path)])
    ibert, bert = results["I-BERT"], results["BERT"]
    assert all(ibert[str(d)] >= 0.99 and bert[str(d)] >= 0.99 for d in range(1, 7))
    assert ibert["7"] >= 0.95 and ibert["8"] >= 0.8
    assert max(bert[str(d)] for d in (7, 8, 9)) <= 0.05


def test_masked_lm_loss_all_trains_on_every_token_and_scores_the_masks(tmp_path, monkeypatch):
    """--masked_lm_loss all (the I-BERT authors' loss): the training split's labels are the target's every token, the
    evaluation splits' the masked ones only, so the scores stay the answer's. By hand on one row: the input's [MASK]
    positions are where the default labels are not -100, and the target's tokens everywhere with every_token."""
    from datasets import Dataset

    from lengthgen.data.tokenization import digit_tokenizer
    from lengthgen.training import models

    tokenizer = digit_tokenizer()
    row = Dataset.from_list([{"input": "1 2 _ [MASK] [MASK]", "target": "1 2 _ 1 2"}])
    target = tokenizer("1 2 _ 1 2")["input_ids"]
    masked = models.encode_masked(row, tokenizer)[0]["labels"]
    assert masked == [t if i == tokenizer.mask_token_id else -100
                      for i, t in zip(tokenizer("1 2 _ [MASK] [MASK]")["input_ids"], target)]
    assert sum(label != -100 for label in masked) == 2
    assert models.encode_masked(row, tokenizer, every_token=True)[0]["labels"] == target

    seen = []
    encode = models.encode_masked

    def spy(dataset, tokenizer, keep_columns=(), every_token=False):
        seen.append((len(dataset), every_token))
        return encode(dataset, tokenizer, keep_columns, every_token)

    monkeypatch.setattr(models, "encode_masked", spy)
    run_mlm(run_args(tmp_path / "all", extra=["--masked_lm_loss", "all", "--max_steps", "2"]))
    assert seen[0] == (256, True) and seen[1:] and all(not every for _, every in seen[1:])
    with pytest.raises(UsageError, match="--masked_lm_loss must be masked or all"):
        run_mlm(run_args(tmp_path / "x", extra=["--masked_lm_loss", "some"]))
