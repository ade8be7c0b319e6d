"""The trained checkpoints shipped in checkpoints/: each loads through the Auto classes with lengthgen installed (no
remote code) and without it (the code in the folder), and scores its model card's number again on the split
generated anew by the builder the card names."""

import json
import os
import subprocess
import sys

import pytest
import torch
from huggingface_hub import ModelCard
from transformers import AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401  (registers the models: no remote code)
from lengthgen.data.export import load_splits, parse_params

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECKPOINTS = os.path.join(REPO, "checkpoints")
FOLDERS = sorted(f for f in os.listdir(CHECKPOINTS) if os.path.isfile(os.path.join(CHECKPOINTS, f, "config.json")))
# the split each task's target is judged on (the papers' held-out split)
HEADLINE_SPLIT = {"ctl": "test", "simple_arithmetic": "test", "listops": "test", "nsp_inductive": "validation"}


def card(folder):
    data = ModelCard.load(os.path.join(CHECKPOINTS, folder, "README.md")).data
    results = {(r.dataset_split, r.metric_name): r.metric_value for r in data.eval_results}
    return data, results


def test_the_promised_checkpoints_are_shipped():
    tasks = {(card(f)[0].eval_results[0].dataset_type, card(f)[0].eval_results[0].dataset_config) for f in FOLDERS}
    promised = {("ctl", "backward"), ("nsp_inductive", "copy"), ("nsp_inductive", "reverse"), ("nsp_inductive", "add"),
                ("simple_arithmetic", None)}
    assert promised <= tasks


@pytest.mark.parametrize("folder", FOLDERS)
def test_checkpoint_is_a_hub_folder_of_a_few_mb(folder):
    path = os.path.join(CHECKPOINTS, folder)
    names = set(os.listdir(path))
    assert {"config.json", "model.safetensors", "tokenizer.json", "README.md"} <= names
    config = json.loads(open(os.path.join(path, "config.json")).read())
    assert all(ref.split(".")[0] + ".py" in names for ref in config["auto_map"].values())  # the code travels
    assert sum(os.path.getsize(os.path.join(path, n)) for n in names) < 8 * 2**20
    data, _ = card(folder)
    # the papers' training ranges: I-BERT §5.1 numbers of 2-12 digits; the thesis's CTL and arithmetic depths 1-5
    paper_range = {"nsp_inductive": [2, 12], "ctl": [1, 5], "simple_arithmetic": [1, 5]}
    assert data.to_dict()["train_difficulties"] == paper_range[data.eval_results[0].dataset_type]


@pytest.mark.parametrize("folder", FOLDERS)
def test_checkpoint_code_is_the_librarys(folder):
    """The model code a shipped folder carries (what runs with `trust_remote_code`) is the library's file of the same
    name, so a fix to a model reaches the checkpoints users load without lengthgen."""
    path = os.path.join(CHECKPOINTS, folder)
    for name in sorted(n for n in os.listdir(path) if n.endswith(".py")):
        library = [os.path.join(root, name) for root, _, files in os.walk(os.path.join(REPO, "modeling"))
                   if name in files]
        assert len(library) == 1, (folder, name, library)
        with open(os.path.join(path, name)) as shipped, open(library[0]) as source:
            assert shipped.read() == source.read(), f"{folder}/{name} differs from {library[0]}: copy it again"


@pytest.fixture(scope="module")
def without_lengthgen(tmp_path_factory):
    """`lengthgen verify` of every shipped folder in one process where lengthgen cannot be imported once the splits
    are generated: only the code in the folders runs (trust_remote_code). Its report of each folder, by folder."""
    result = subprocess.run(
        [sys.executable, "-m", "lengthgen.commands.main", "verify", *(os.path.join(CHECKPOINTS, f) for f in FOLDERS),
         "--without_lengthgen"],
        capture_output=True, text=True, cwd=tmp_path_factory.mktemp("verify"),
    )
    assert result.returncode == 0, result.stderr[-3000:]
    reports = [json.loads(line) for line in result.stdout.strip().splitlines() if line.startswith("{")]
    return {os.path.basename(r["folder"]): r for r in reports}


@pytest.mark.parametrize("folder", FOLDERS)
def test_checkpoint_scores_its_card_with_and_without_lengthgen(folder, without_lengthgen):
    path = os.path.join(CHECKPOINTS, folder)
    data, results = card(folder)
    dataset, config_name = data.eval_results[0].dataset_type, data.eval_results[0].dataset_config
    split = HEADLINE_SPLIT[dataset]
    params = parse_params(data.to_dict().get("dataset_params", []))
    rows = load_splits(dataset, config_name, params)[split]

    # with lengthgen: the registered classes, no remote code
    masked = dataset == "nsp_inductive"
    model = (AutoModelForMaskedLM if masked else AutoModelForSequenceClassification).from_pretrained(path).eval()
    assert type(model).__module__.startswith("lengthgen.modeling.")
    tokenizer = AutoTokenizer.from_pretrained(path)
    correct = 0
    for start in range(0, len(rows), 256):
        batch = rows.select(range(start, min(start + 256, len(rows))))
        encoded = tokenizer(list(batch["input"]), padding=True, return_tensors="pt")
        with torch.no_grad():
            predicted = model(**encoded).logits.argmax(-1)
        if masked:  # the whole masked number right
            targets = tokenizer(list(batch["target"]), padding=True, return_tensors="pt")["input_ids"]
            slots = encoded["input_ids"] == tokenizer.mask_token_id
            correct += int(((predicted == targets) | ~slots).all(-1).sum())
        else:
            correct += sum(model.config.id2label[int(p)] == t for p, t in zip(predicted, batch["target"]))
    metric = "sequence accuracy" if masked else "accuracy"
    assert correct / len(rows) == pytest.approx(results[(split, metric)], abs=5e-5)

    # without lengthgen: the same split, the same number
    report = without_lengthgen[folder]
    assert report["split"] == split and report["rows"] == len(rows) and report["agrees"]
    assert report["measured"] == pytest.approx(correct / len(rows), abs=1e-9)
