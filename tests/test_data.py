import collections
import json
import os

import datasets
import pytest

from lengthgen.cli import UsageError
from lengthgen.commands.data import main as cli_main
from lengthgen.data.export import build, export, fingerprint
from lengthgen.data.nsp import DELIMITER, MASK, generate_nsp_splits
from lengthgen.data.nsp_inductive import NSPInductive
from lengthgen.data.ptb import generate_ptb_splits, read_ptb_sentences
from lengthgen.data.ptb_inductive import PTBInductive
from lengthgen.data.tokenization import character_tokenizer, digit_tokenizer, word_tokenizer

# sha256 of the default splits' rows (seed 0) as canonical JSON; a change here changes everyone's data.
DEFAULT_FINGERPRINTS = {
    "add": "fcde5ba654b02b40a9a54cf91aa3e7f20c81a72fd1cf79bfc40c36b7de95cb2d",
    "copy": "de6ff827f110698fe93fa557c825f6ed5d7c883a3853bc015622b479ea1a8fd8",
    "reverse": "01371ddd3076c0ee880a7ac16bb670f503bc0b319c279bfab9ebc8eb5e688aa9",
}
PTB_FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "ptb")


def numbers_from_tokens(tokens: list[str]) -> list[int]:
    """Decode little-endian digit groups separated by the delimiter: '3 4 _ 1' -> [43, 1]."""
    groups = " ".join(tokens).split(DELIMITER)
    return [int("".join(reversed(group.split()))) for group in groups]


@pytest.fixture(scope="module")
def nsp_splits(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    out = {}
    for task in DEFAULT_FINGERPRINTS:
        builder = NSPInductive(config_name=task, cache_dir=str(cache))
        builder.download_and_prepare()
        out[task] = builder.as_dataset()
    return out


@pytest.mark.parametrize("task", sorted(DEFAULT_FINGERPRINTS))
def test_nsp_sizes_difficulties_and_fingerprint(nsp_splits, task):
    splits = nsp_splits[task]
    assert len(splits["train"]) == 25_600 and len(splits["validation"]) == 1_536
    train_counts = collections.Counter(splits["train"]["difficulty"])
    assert sorted(train_counts) == list(range(2, 13))
    assert max(train_counts.values()) - min(train_counts.values()) <= 1  # 25,600 / 11 is not whole
    assert collections.Counter(splits["validation"]["difficulty"]) == {d: 384 for d in range(13, 17)}
    assert fingerprint(splits) == DEFAULT_FINGERPRINTS[task]


@pytest.mark.parametrize("task", sorted(DEFAULT_FINGERPRINTS))
def test_nsp_rows_follow_the_task_rule(nsp_splits, task):
    for split in ("train", "validation"):
        for row in nsp_splits[task][split]:
            inputs, targets = row["input"].split(), row["target"].split()
            assert row["length"] == len(inputs) == len(targets)
            numbers = numbers_from_tokens(targets)
            groups = [g.split() for g in row["target"].split(DELIMITER)]
            masked = [i for i, t in enumerate(inputs) if t == MASK]
            # exactly the digits of the last number are masked, everything else is given unchanged
            assert masked == list(range(len(targets) - len(groups[-1]), len(targets)))
            assert all(i == t for i, t in zip(inputs, targets) if i != MASK)
            d = row["difficulty"]
            assert len(groups[-2]) == d and all(len(g) <= d for g in groups[:-1])
            if task == "add":
                assert numbers[2] == numbers[0] + numbers[1]
            elif task == "copy":
                assert groups[1] == groups[0]
            else:
                assert groups[1] == groups[0][::-1]


def test_nsp_lengths_never_overlap_and_overlap_is_refused():
    splits = generate_nsp_splits("copy", train_size=50, validation_size=20, train_difficulties=(1, 3),
                                 validation_difficulties=(4, 5))
    assert max(r["difficulty"] for r in splits["train"]) < min(r["difficulty"] for r in splits["validation"])
    # copy: the token length is 2d + 1, so disjoint digits mean disjoint lengths
    assert max(r["length"] for r in splits["train"]) < min(r["length"] for r in splits["validation"])
    with pytest.raises(ValueError, match="overlap"):
        generate_nsp_splits("add", train_size=50, validation_size=20, train_difficulties=(1, 4),
                            validation_difficulties=(4, 6))


def split_generators():
    """{name: (generator taking ranges as keywords, tiny sizes)} of every length split."""
    from lengthgen.data.chomsky_hierarchy import generate_chomsky_splits
    from lengthgen.data.ctl import generate_ctl_splits
    from lengthgen.data.listops import generate_listops_splits
    from lengthgen.data.simple_arithmetic import generate_arithmetic_splits
    from lengthgen.data.subject_verb_agreement import generate_agreement_splits

    return {
        "ctl": lambda **r: generate_ctl_splits("forward", train_size=100, validation_iid_size=1, validation_size=1,
                                               test_size=1, **r),
        "listops": lambda **r: generate_listops_splits(train_size=5, validation_size=1, test_size=1, **r),
        "arithmetic": lambda **r: generate_arithmetic_splits(train_size=5, validation_size=1, test_size=1, **r),
        "agreement": lambda **r: generate_agreement_splits(train_size=3, validation_size=1, test_size=1, **r),
        "chomsky": lambda **r: generate_chomsky_splits("parity_check", train_size=40, test_size=1, **r),
        "nsp": lambda **r: generate_nsp_splits("copy", train_size=11, validation_size=1, **r),
        "ptb": lambda **r: generate_ptb_splits(read_ptb_sentences(os.path.join(PTB_FIXTURE, "ptb.train.txt")),
                                               "word", **r),
    }


@pytest.mark.parametrize("name, ranges, message", [
    ("ctl", dict(test_depths=(8, 10)), r"validation_depths \[6, 8\] and test_depths \[8, 10\] overlap at 8-8"),
    ("listops", dict(validation_depths=(5, 8)), r"train_depths \[1, 5\] and validation_depths \[5, 8\] overlap at 5-5"),
    ("arithmetic", dict(test_depths=(2, 3)), r"train_depths \[1, 5\] and test_depths \[2, 3\] overlap at 2-3"),
    ("agreement", dict(train_difficulties=(0, 2)),
     r"train_difficulties \[0, 2\] and validation_difficulties \[2, 2\] overlap at 2-2"),
    ("chomsky", dict(test_lengths=(40, 500)), r"train_lengths \[1, 40\] and test_lengths \[40, 500\] overlap at 40-40"),
    ("nsp", dict(validation_difficulties=(12, 16)),
     r"train_difficulties \[2, 12\] and validation_difficulties \[12, 16\] overlap at 12-12"),
    ("ptb", dict(validation_lengths=(30, 64)),
     r"train_lengths \[2, 32\] and validation_lengths \[30, 64\] overlap at 30-32"),
])
def test_overlapping_ranges_are_refused_before_anything_is_drawn(name, ranges, message):
    """Every length split refuses configured ranges that share a difficulty (the others at their defaults), naming
    both, even when its sample is too small to draw the shared one: one ListOps validation tree of depths 5-8 is
    drawn at depth 8, one CTL test problem of depths 8-10 at depth 10."""
    from lengthgen.data.splits import balanced_counts

    assert balanced_counts(1, {d: 10 for d in range(5, 9)}) == {5: 0, 6: 0, 7: 0, 8: 1}
    with pytest.raises(UsageError, match=message):
        split_generators()[name](**ranges)


def test_a_reversed_range_or_one_below_the_least_difficulty_is_refused():
    for name, ranges, least in [("ctl", dict(test_depths=(10, 9)), 1), ("chomsky", dict(test_lengths=(500, 41)), 1),
                                ("nsp", dict(validation_difficulties=(16, 13)), 1),
                                ("ctl", dict(train_depths=(0, 5)), 1), ("nsp", dict(train_difficulties=(-3, 4)), 1),
                                ("agreement", dict(train_difficulties=(-1, 1)), 0)]:
        (key, value), = ranges.items()
        with pytest.raises(UsageError, match=rf"{key} must be \[low, high\] with {least} <= low <= high, got "
                                             rf"\[{value[0]}, {value[1]}\]"):
            split_generators()[name](**ranges)


def test_nsp_same_seed_same_rows_other_seed_other_rows():
    a = generate_nsp_splits("add", train_size=100, validation_size=10, seed=3)
    b = generate_nsp_splits("add", train_size=100, validation_size=10, seed=3)
    c = generate_nsp_splits("add", train_size=100, validation_size=10, seed=4)
    assert a == b and a != c


def test_a_builder_checks_its_generating_parameters_as_the_command_line_does(tmp_path):
    from lengthgen.data.chomsky_hierarchy import ChomskyHierarchy

    with pytest.raises(UsageError, match="train_size of nsp_inductive must be at least 1, got 0"):
        NSPInductive(config_name="add", train_size=0, cache_dir=str(tmp_path))
    with pytest.raises(UsageError, match=r"train_size of nsp_inductive takes an integer \(default 25600\), got '10'"):
        NSPInductive(config_name="add", train_size="10", cache_dir=str(tmp_path))
    with pytest.raises(UsageError, match="chomsky_hierarchy has no generating parameter 'train_sizes'; its parameters: "
                                         "train_size, train_lengths"):
        ChomskyHierarchy(config_name="parity_check", train_sizes=5, cache_dir=str(tmp_path))


def test_unknown_config_raises_value_error(tmp_path):
    with pytest.raises(ValueError, match="mul"):
        NSPInductive(config_name="mul", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="sentence"):
        PTBInductive(config_name="sentence", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="mul"):
        export("nsp_inductive", str(tmp_path), ["mul"])


def test_export_folder_loads_with_load_dataset(tmp_path, monkeypatch):
    params = {"train_size": 40, "validation_size": 8, "train_difficulties": (1, 3), "validation_difficulties": (4, 5)}
    folder = export("nsp_inductive", str(tmp_path), ["add"], **params)
    export("nsp_inductive", str(tmp_path), ["copy"], **params)  # a second export keeps the first config
    card = open(os.path.join(folder, "README.md")).read()
    assert card.startswith("---\nconfigs:\n- config_name: add\n")
    assert "- config_name: copy" in card and "  default: true" in card
    meta = json.load(open(os.path.join(folder, "add", "generation.json")))
    assert meta["parameters"]["train_size"] == 40 and meta["splits"] == {"train": 40, "validation": 8}

    direct = NSPInductive(config_name="add", cache_dir=str(tmp_path / "cache"), **params)
    direct.download_and_prepare()
    expected = direct.as_dataset()
    assert meta["fingerprint"] == fingerprint(expected)

    loaded = datasets.load_dataset(folder, "add")
    assert loaded["train"].to_list() == expected["train"].to_list()
    assert datasets.load_dataset(folder)["validation"].to_list() == expected["validation"].to_list()  # default: add
    monkeypatch.chdir(tmp_path)
    assert datasets.load_dataset("nsp_inductive", "copy")["train"][0]["input"].count(MASK) >= 1

    # exported again with other parameters (here, and into another folder of the same name): plain load_dataset reads
    # the new rows, not those datasets cached from the first export
    for output_dir in (tmp_path, tmp_path / "elsewhere"):
        again = export("nsp_inductive", str(output_dir), ["add"], **{**params, "train_size": 24})
        assert len(datasets.load_dataset(again, "add")["train"]) == 24
    assert sorted(os.listdir(os.path.join(folder, "add"))) == sorted(
        ["generation.json", *(f"{split}-{fingerprint(datasets.load_dataset(folder, 'add'))[:16]}.parquet"
                              for split in ("train", "validation"))])  # the earlier export's files are gone
    with pytest.raises(UsageError, match="parameter validation_size of nsp_inductive must be at least 1, got 0"):
        export("nsp_inductive", str(tmp_path), ["add"], validation_size=0)


def test_cli_export_and_push_to_hub_intercepted(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(
        "huggingface_hub.HfApi.create_repo", lambda self, repo_id, **kw: calls.append(("create", repo_id, kw))
    )
    monkeypatch.setattr(
        "huggingface_hub.HfApi.upload_folder",
        lambda self, folder_path, repo_id, **kw: calls.append(("upload", repo_id, sorted(os.listdir(folder_path)))),
    )
    cli_main(["export", "nsp_inductive", "--dataset_config_name", "reverse", "--output_dir", str(tmp_path),
              "--push_to_hub", "me/nsp", "--dataset_param", "train_size=10", "--dataset_param", "validation_size=4"])
    assert calls[0][:2] == ("create", "me/nsp") and calls[0][2]["repo_type"] == "dataset"
    assert calls[1] == ("upload", "me/nsp", ["README.md", "reverse"])
    meta = json.load(open(tmp_path / "nsp_inductive" / "reverse" / "generation.json"))  # both --dataset_param taken
    assert meta["splits"]["train"] == 10 and meta["splits"]["validation"] == 4


def test_ptb_splits_on_fixture():
    sentences = read_ptb_sentences(os.path.join(PTB_FIXTURE, "ptb.train.txt"))
    word = generate_ptb_splits(sentences, "word")
    char = generate_ptb_splits(sentences, "char")
    for splits, (train_range, valid_range) in ((word, ((2, 32), (33, 64))), (char, ((16, 192), (193, 224)))):
        assert splits["train"] and splits["validation"]
        for name, (low, high) in (("train", train_range), ("validation", valid_range)):
            for row in splits[name]:
                assert low <= row["length"] <= high
                assert row["length"] == len(row["input"].split()) == len(row["target"].split())
    # word level: exactly one masked word, and it is the recorded one
    for row in word["train"]:
        diffs = [(i, t) for i, t in zip(row["input"].split(), row["target"].split()) if i != t]
        assert len(diffs) == 1 and diffs[0] == (MASK, row["masked_word"])
    # char level: the masked characters spell the recorded word, between word boundaries
    for row in char["train"] + char["validation"]:
        inputs, targets = row["input"].split(), row["target"].split()
        masked = [i for i, t in enumerate(inputs) if t == MASK]
        assert "".join(targets[i] for i in masked) == row["masked_word"]
        assert masked == list(range(masked[0], masked[0] + len(masked)))
        assert masked[0] == 0 or targets[masked[0] - 1] == "_"
        assert masked[-1] == len(targets) - 1 or targets[masked[-1] + 1] == "_"
    # every fixture sentence of a split's length range is in that split, once
    in_range = [s for s in sentences if 16 <= sum(map(len, s)) + len(s) - 1 <= 192]
    assert sorted(r["target"] for r in char["train"]) == sorted(" _ ".join(" ".join(w) for w in s) for s in in_range)


def test_ptb_builder_reads_a_local_folder(tmp_path):
    builder = PTBInductive(config_name="word", source=PTB_FIXTURE, cache_dir=str(tmp_path), train_lengths=(2, 20),
                           validation_lengths=(21, 64))
    builder.download_and_prepare()
    splits = builder.as_dataset()
    assert max(splits["train"]["length"]) <= 20 < min(splits["validation"]["length"])
    again = PTBInductive(config_name="word", source=PTB_FIXTURE, cache_dir=str(tmp_path / "b"), train_lengths=(2, 20),
                         validation_lengths=(21, 64))
    again.download_and_prepare()
    assert fingerprint(again.as_dataset()) == fingerprint(splits)
    with pytest.raises(UsageError, match="ptb.train.txt not found; a PTB folder holds"):
        PTBInductive(config_name="word", source=str(tmp_path), cache_dir=str(tmp_path / "c")).download_and_prepare()
    with pytest.raises(UsageError, match="no such folder"):  # a mistyped folder is not looked up on the Hub
        PTBInductive(config_name="word", source=str(tmp_path / "nope"),
                     cache_dir=str(tmp_path / "d")).download_and_prepare()


def test_ptb_source_as_hub_dataset_id(tmp_path, monkeypatch):
    asked = []

    def fake_download(repo_id, filename, repo_type):
        asked.append((repo_id, filename, repo_type))
        return os.path.join(PTB_FIXTURE, filename)

    monkeypatch.setattr("huggingface_hub.hf_hub_download", fake_download)
    builder = PTBInductive(config_name="char", source="someone/ptb", cache_dir=str(tmp_path))
    builder.download_and_prepare()
    assert asked == [("someone/ptb", "ptb.train.txt", "dataset")]
    assert len(builder.as_dataset()["train"]) > 0
    monkeypatch.undo()
    # a relative folder name that does not exist reads as a Hub id: the Hub's answer (offline here) in one line
    with pytest.raises(UsageError, match="source=ptb_typo: no such folder here, and the Hub dataset 'ptb_typo' gave "
                                         "no ptb.train.txt \\(LocalEntryNotFoundError: "):
        PTBInductive(config_name="char", source="ptb_typo", cache_dir=str(tmp_path / "b")).download_and_prepare()
    with pytest.raises(UsageError, match="source=no such dir: no such folder here, and the Hub dataset 'no such dir' "
                                         "gave no ptb.train.txt \\(HFValidationError: "):  # not even a repo id
        PTBInductive(config_name="char", source="no such dir", cache_dir=str(tmp_path / "c")).download_and_prepare()


def test_ptb_source_as_url_prefix(monkeypatch):
    """The default source, a URL prefix, is fetched with datasets' cached download (the file named under it)."""
    from lengthgen.data.ptb import DEFAULT_PTB_SOURCE, ptb_file

    asked = []

    def fake_cached_path(url, download_config):
        asked.append(url)
        return os.path.join(PTB_FIXTURE, "ptb.train.txt")

    monkeypatch.setattr("datasets.utils.file_utils.cached_path", fake_cached_path)
    assert ptb_file(DEFAULT_PTB_SOURCE, "train") == os.path.join(PTB_FIXTURE, "ptb.train.txt")
    assert asked == [f"{DEFAULT_PTB_SOURCE.rstrip('/')}/ptb.train.txt"]


def encode_masked(inputs, targets, tokenizer):
    from datasets import Dataset

    from lengthgen.training.models import encode_masked

    return encode_masked(Dataset.from_dict({"input": inputs, "target": targets}), tokenizer)


def test_tokenizers_and_label_alignment(repo_root):
    tokenizer = digit_tokenizer()
    features = encode_masked(["3 4 _ [MASK] [MASK]"], ["3 4 _ 3 4"], tokenizer)
    ids = tokenizer.convert_tokens_to_ids(["[CLS]", "3", "4", "_", "[MASK]", "[MASK]", "[SEP]"])
    assert features["input_ids"][0] == ids
    three, four = tokenizer.convert_tokens_to_ids(["3", "4"])
    assert features["labels"][0] == [-100, -100, -100, -100, three, four, -100]
    # the shipped hub_configs tokenizers are the ones the code builds
    from transformers import AutoTokenizer

    for folder, built in (("ibert-nsp", tokenizer), ("bert-nsp-baseline", tokenizer),
                          ("ibert-base", character_tokenizer())):
        shipped = AutoTokenizer.from_pretrained(repo_root / "hub_configs" / folder)
        assert shipped.get_vocab() == built.get_vocab()
        assert shipped.mask_token == "[MASK]" and shipped.pad_token_id == 0
    words = word_tokenizer(["the cat <unk> sat", "a cat"])
    assert words.unk_token == "<unk>"
    assert words("the dog")["input_ids"][2] == words.unk_token_id
    with pytest.raises(ValueError, match="one target token per input token"):
        encode_masked(["1 2"], ["1 2 3"], tokenizer)


def test_masked_span_scores_hand_worked():
    """Three masked spans (the masked LM head's evaluation: per position the predicted id, its probability, the
    label's log-probability; padding -100): accuracy is the whole span right, token accuracy each span's share of
    right tokens averaged over spans, and the NLL the mean over every masked token."""
    import numpy as np
    from transformers import EvalPrediction

    from lengthgen.training.runner import Scorer

    predicted, references = [[1, 2], [3, -100], [4, 5]], [[1, 2], [4, -100], [4, 6]]
    log_probs = [[0.0, 0.0], [-2.0, -100], [-1.0, -1.0]]
    predictions = np.stack([np.array(predicted), np.full((3, 2), 0.5), np.array(log_probs)], axis=-1)
    metrics = Scorer([2, 2, 3], "masked_lm")(EvalPrediction(predictions=predictions, label_ids=np.array(references)))
    assert metrics["accuracy"] == pytest.approx(1 / 3)
    assert metrics["token_accuracy"] == pytest.approx((1 + 0 + 0.5) / 3)
    assert (metrics["accuracy_d2"], metrics["accuracy_d3"]) == (0.5, 0.0)
    assert (metrics["token_accuracy_d2"], metrics["token_accuracy_d3"]) == (0.5, 0.5)
    assert metrics["nll"] == pytest.approx(4 / 5)
    assert metrics["bits_per_token"] == pytest.approx(0.8 / 0.6931471805599453)
    assert metrics["perplexity"] == pytest.approx(2.718281828459045**0.8)

def test_the_whole_suite_exports_and_every_family_loads_offline(tmp_path, monkeypatch):
    """`lengthgen data export --all`: a Hub-style folder per generated task family, every config in it, each loading
    with `load_dataset(folder, config)` offline to the rows the builder generates; the shared sizes reach every
    family that has them, and the card lists every config."""
    from lengthgen.data.export import BUILDERS, GENERATED, load_splits

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    sizes = ["train_size=100", "test_size=12", "validation_size=8", "validation_iid_size=8"]
    cli_main(["export", "--all", "--output_dir", str(tmp_path), "--dataset_param", *sizes])
    assert sorted(os.listdir(tmp_path)) == sorted(GENERATED) and "ptb_inductive" not in GENERATED
    for name in GENERATED:
        folder = tmp_path / name
        configs = [c.name for c in BUILDERS[name].BUILDER_CONFIGS]
        assert sorted(p.name for p in folder.iterdir() if p.is_dir()) == sorted(configs)
        card = (folder / "README.md").read_text()
        assert all(f"config_name: {config}" in card for config in configs)
        config = configs[-1]
        own = {k: v for k, v in (s.split("=") for s in sizes)}
        generation = json.loads((folder / config / "generation.json").read_text())
        params = {k: int(v) for k, v in own.items() if k in generation["parameters"]}
        expected = load_splits(name, config, params)
        loaded = datasets.load_dataset(str(folder), config)
        assert sorted(loaded) == sorted(expected)
        for split in expected:
            assert loaded[split].to_list() == expected[split].to_list(), (name, config, split)
    with pytest.raises(UsageError, match="no generated task family has this generating parameter"):
        cli_main(["export", "--all", "--output_dir", str(tmp_path), "--dataset_param", "nosuch=1"])
    with pytest.raises(UsageError, match="Give a dataset name or --all, not both"):
        cli_main(["export", "ctl", "--all", "--output_dir", str(tmp_path)])


def test_fewer_problems_than_depths_spread_from_the_shallowest_to_the_deepest():
    """Three problems over depths 1-5 go to 1, 3 and 5 (not to the three deepest); one per depth and more fill as
    before, shallow depths first."""
    from lengthgen.data.splits import balanced_counts

    assert balanced_counts(3, {d: 5 for d in range(1, 6)}) == {1: 1, 2: 0, 3: 1, 4: 0, 5: 1}
    assert balanced_counts(7, {d: 5 for d in range(1, 6)}) == {1: 1, 2: 1, 3: 1, 4: 2, 5: 2}
    assert balanced_counts(3, {1: 0, 2: 5, 3: 5, 4: 5, 5: 5}) == {1: 0, 2: 1, 3: 0, 4: 1, 5: 1}
    lengths = build("chomsky_hierarchy", "reverse_string", train_size=20, test_size=40, train_lengths=(1, 20),
                    test_lengths=(21, 100))[1]["test"]["length"]
    assert min(lengths) == 21 and max(lengths) == 100 and len(set(lengths)) == 40


def test_a_folder_exported_again_is_read_again(tmp_path):
    """Two exports of a task with different rows, to folders of the same name (datasets caches a local folder's
    configs by the names alone): each loads with its own rows."""
    from lengthgen.data.export import load_splits

    rows = {}
    for seed in (0, 1):
        folder = export("chomsky_hierarchy", str(tmp_path / f"run{seed}"), ["parity_check"], train_size=8,
                        test_size=4, test_lengths=(41, 44), seed=seed)
        rows[seed] = load_splits(folder, "parity_check")["test"]["input"]
        assert rows[seed] == build("chomsky_hierarchy", "parity_check", cache_dir=str(tmp_path / f"c{seed}"),
                                   train_size=8, test_size=4, test_lengths=(41, 44), seed=seed)[1]["test"]["input"]
    assert rows[0] != rows[1]


def test_a_folder_of_other_rows_or_of_no_rows_is_named(tmp_path):
    """A folder of JSON lines without a length split's columns, and a model folder, each refused in one line."""
    from lengthgen.data.export import load_splits

    (tmp_path / "reviews").mkdir()
    for split in ("train", "validation"):
        (tmp_path / "reviews" / f"{split}.jsonl").write_text('{"text": "a b", "label": 1}\n')
    with pytest.raises(UsageError, match=r"reviews: split train lacks the column\(s\) input, target, difficulty "
                                         r"\(it has text, label\)"):
        load_splits(str(tmp_path / "reviews"))
    model = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "checkpoints", "ndr-ctl-backward")
    with pytest.raises(UsageError, match="ndr-ctl-backward does not read as a dataset: its files are not one table"):
        load_splits(model)


def test_the_cache_key_of_generated_data_covers_a_generator_kept_in_its_own_module(monkeypatch):
    """NSP's generator lives in nsp.py, which the builder's module imports: a change there changes the key under which
    `datasets` caches the builder's rows, as a change in the builder's own module does."""
    import inspect

    from lengthgen.data import length_split, nsp

    before = length_split.source_hash(NSPInductive)
    original = inspect.getsource
    monkeypatch.setattr(inspect, "getsource", lambda obj: original(obj) + ("# changed" if obj is nsp else ""))
    assert length_split.source_hash(NSPInductive) != before


@pytest.mark.parametrize("generator, config", [
    ("ctl:generate_ctl_splits", "ctl:CTLConfig"), ("listops:generate_listops_splits", "listops:ListOpsConfig"),
    ("simple_arithmetic:generate_arithmetic_splits", "simple_arithmetic:ArithmeticConfig"),
    ("nsp:generate_nsp_splits", "nsp_inductive:NSPConfig"),
    ("subject_verb_agreement:generate_agreement_splits", "subject_verb_agreement:AgreementConfig"),
    ("chomsky_hierarchy:generate_chomsky_splits", "chomsky_hierarchy:ChomskyConfig"),
    ("ptb:generate_ptb_splits", "ptb_inductive:PTBConfig"),
])
def test_a_generators_defaults_are_its_builder_configs(generator, config):
    """Each generator function states its defaults in its signature (a call without a builder reads them there), and
    its builder's config states them again as dataclass fields (what `load_dataset` generates): the two must agree,
    field by field, for every parameter they share."""
    import dataclasses
    import importlib
    import inspect

    def named(path):
        module, name = path.split(":")
        return getattr(importlib.import_module(f"lengthgen.data.{module}"), name)

    parameters = inspect.signature(named(generator)).parameters
    shared = {f.name: f.default for f in dataclasses.fields(named(config))
              if f.name in parameters and f.name not in datasets.BuilderConfig.__dataclass_fields__}
    assert len(shared) >= 2, shared
    for name, default in shared.items():
        assert parameters[name].default == default, (name, parameters[name].default, default)
