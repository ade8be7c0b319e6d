"""HotpotQA data (lengthgen.data.hotpotqa) and the answer metric, on a small fixture in the official JSON format."""

import json
import os
import random

import evaluate
import pytest
import torch
from tokenizers import ByteLevelBPETokenizer
from transformers import RobertaTokenizer

from lengthgen.data.hotpotqa import (
    HOTPOTQA_ANSWER,
    context_text,
    decode_answer,
    from_official_json,
    load_hotpotqa,
    prepare_windows,
)

WORDS = ("river town castle bridge king queen music film album band city museum painter novel river garden "
         "harbour ship station").split()


def filler(rng, count):
    return " ".join(rng.choice(WORDS) for _ in range(count)).capitalize() + "."


def hotpot_fixture(count=6, seed=0):
    """Official-format examples: span answers in a supporting paragraph (one also in an earlier distractor), yes, no,
    and an answer that is not in the context. Contexts of 10 paragraphs run over several windows."""
    rng = random.Random(seed)
    answers = ["Gustave Eiffel", "yes", "no", "Lake Geneva", "Blue Harbour", "Nowhere Land"]
    rows = []
    for index in range(count):
        answer = answers[index % len(answers)]
        titles = [f"Title {index} {p}" for p in range(10)]
        context = [[t, [" " + filler(rng, 6), " " + filler(rng, 5)]] for t in titles]
        if answer not in ("yes", "no", "Nowhere Land"):
            context[7][1][1] = f" It was made by {answer} in the end."
            if index == 0:  # also in a distractor before it: the supporting paragraph wins
                context[2][1][0] = f" {answer} is mentioned here too."
        rows.append({"_id": f"q{index}", "question": f"Who made the thing number {index}?", "answer": answer,
                     "type": "bridge", "level": "easy", "supporting_facts": [[titles[7], 1], [titles[3], 0]],
                     "context": context})
    return rows


def fixture_tokenizer(path, folder):
    """A byte-level BPE RoBERTa tokenizer trained on the questions and contexts of the fixture file `path`."""
    data = from_official_json(str(path))
    texts = list(data["question"]) + [context_text(context)[0] for context in data["context"]]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(texts, vocab_size=400, min_frequency=1,
                            special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"])
    os.makedirs(folder, exist_ok=True)
    bpe.save_model(str(folder))
    tokenizer = RobertaTokenizer(vocab=os.path.join(folder, "vocab.json"), merges=os.path.join(folder, "merges.txt"))
    tokenizer.save_pretrained(folder)
    return tokenizer


def write_fixture(tmp_path, count=6):
    rows = hotpot_fixture(count)
    path = tmp_path / "hotpot_dev_distractor_v1.json"
    path.write_text(json.dumps(rows))
    return rows, path


def test_official_json_and_hub_parquet_give_the_same_examples(tmp_path):
    rows, path = write_fixture(tmp_path)
    local = load_hotpotqa(data_files={"validation": str(path)})["validation"]
    assert local["id"] == [r["_id"] for r in rows] and local["answer"] == [r["answer"] for r in rows]
    assert local[0]["context"]["title"][7] == "Title 0 7"
    hub = tmp_path / "hub" / "distractor"
    hub.mkdir(parents=True)
    local.to_parquet(str(hub / "validation-00000-of-00001.parquet"))
    from_hub = load_hotpotqa(str(tmp_path / "hub"), None)["validation"]
    assert from_hub.to_list() == local.to_list()


def test_max_train_samples_is_a_seeded_random_subset(tmp_path):
    _, path = write_fixture(tmp_path, count=12)
    first = load_hotpotqa(data_files={"train": str(path)}, max_train_samples=5, seed=3)["train"]["id"]
    again = load_hotpotqa(data_files={"train": str(path)}, max_train_samples=5, seed=3)["train"]["id"]
    other = load_hotpotqa(data_files={"train": str(path)}, max_train_samples=5, seed=4)["train"]["id"]
    assert first == again and first != other and len(set(first)) == 5 and first != [f"q{i}" for i in range(5)]


@pytest.mark.parametrize("window, stride", [(48, 8), (64, 16), (40, 4)])
def test_gold_spans_round_trip_through_the_windows(tmp_path, window, stride):
    """For every answerable example, one-hot logits at the gold tokens decode to exactly the answer text."""
    _, path = write_fixture(tmp_path)
    tokenizer = fixture_tokenizer(path, tmp_path / "tokenizer")
    data = load_hotpotqa(data_files={"validation": str(path)})["validation"]
    features = data.map(prepare_windows, batched=True, remove_columns=data.column_names,
                        fn_kwargs={"tokenizer": tokenizer, "window_size": window, "doc_stride": stride})
    assert all(len(f["input_ids"]) > 1 for f in features)  # the contexts need several windows
    question_ids = tokenizer("Who made the thing number 0?", add_special_tokens=False)["input_ids"]
    spans = 0
    for feature in features:
        ids = torch.tensor(feature["input_ids"])
        assert ids.shape[1] == window and bool(
            (ids[:, 1:1 + len(question_ids)] == ids[0, 1:1 + len(question_ids)]).all()
        )
        kinds = {"yes": 1, "no": 2}
        assert feature["answer_types"] == kinds.get(feature["answer"], 0)
        if feature["answer"] == "Nowhere Land" or feature["answer_types"]:
            assert feature["answer_window"] == -100
            continue
        start, end = torch.full(ids.shape, -10.0), torch.full(ids.shape, -10.0)
        start[feature["answer_window"], feature["start_positions"]] = 10.0
        end[feature["answer_window"], feature["end_positions"]] = 10.0
        decoded = decode_answer(start, end, torch.tensor([1.0, 0.0, 0.0]), feature["offsets"], feature["context"])
        assert decoded == feature["answer"]
        spans += 1
        # the supporting paragraph (title 7), not the earlier distractor mention
        context = feature["context"]
        window_offsets = feature["offsets"][feature["answer_window"]]
        assert window_offsets[feature["start_positions"]][0] > context.index(f"Title {feature['id'][1:]} 7")
    assert spans == 3
    for kind, name in ((1, "yes"), (2, "no")):
        type_logits = torch.zeros(3)
        type_logits[kind] = 1.0
        assert decode_answer(start, end, type_logits, feature["offsets"], feature["context"]) == name


def test_bad_input_raises_value_error(tmp_path):
    _, path = write_fixture(tmp_path, count=2)
    tokenizer = fixture_tokenizer(path, tmp_path / "tokenizer")
    data = load_hotpotqa(data_files={"validation": str(path)})["validation"]
    with pytest.raises(ValueError, match="Question q0 has"):
        prepare_windows(data[:1], tokenizer, window_size=12, doc_stride=2)
    empty = {**data[:1], "context": [{"title": [], "sentences": []}]}
    with pytest.raises(ValueError, match="context is missing"):
        prepare_windows(empty, tokenizer, window_size=64, doc_stride=8)
    with pytest.raises(ValueError, match="either a dataset name or local data files"):
        load_hotpotqa()


def test_answer_metric_on_hand_worked_examples():
    metric = evaluate.load(HOTPOTQA_ANSWER)
    cases = [
        ("the Eiffel Tower.", "Eiffel Tower", 100.0, 100.0),  # article and punctuation dropped
        ("Gustave Eiffel", "Eiffel", 0.0, 100 * 2 * (1 / 2) * 1 / (1 / 2 + 1)),  # P 1/2, R 1 -> F1 2/3
        ("yes", "no", 0.0, 0.0),
        ("yes no maybe", "yes", 0.0, 0.0),  # no partial credit against a yes/no answer
        ("Yes", "yes", 100.0, 100.0),
        ("an", "the", 100.0, 0.0),  # both normalise to "": exact match, but no words in common
    ]
    for prediction, reference, exact, f1 in cases:
        result = metric.compute(predictions=[prediction], references=[reference])
        assert result["exact_match"] == pytest.approx(exact) and result["f1"] == pytest.approx(f1), prediction
    both = metric.compute(predictions=["the Eiffel Tower.", "yes"], references=["Eiffel Tower", "no"])
    assert both == pytest.approx({"exact_match": 50.0, "f1": 50.0})
