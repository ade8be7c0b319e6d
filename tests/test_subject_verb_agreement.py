"""Subject-verb agreement: the generated sentences' labels against an independent reading of the sentence, the splits,
the pinned fingerprint, and Linzen et al.'s TSV read in its real format."""

import gzip

import pytest

from lengthgen.data.export import fingerprint, load_splits
from lengthgen.data.subject_verb_agreement import LABELS, generate_agreement_splits, linzen_agreement_splits

SINGULAR = {"author", "pilot", "key", "cabinet", "senator", "farmer", "teacher", "child", "doctor", "painting",
            "surgeon", "manager", "dog", "student", "building", "woman"}
PLURAL = {"authors", "pilots", "keys", "cabinets", "senators", "farmers", "teachers", "children", "doctors",
          "paintings", "surgeons", "managers", "dogs", "students", "buildings", "women"}
SMALL = dict(train_size=300, validation_size=40, test_size=60)


def read_sentence(text: str) -> dict:
    """The subject is the first noun after a preamble ("... said / knew / thought / heard that"), else the first
    noun; every later noun of the other number is an attractor; the verb would follow the last word."""
    words = text.split()
    start = words.index("that") + 1 if len(words) > 3 and words[2:4] in (["said", "that"], ["knew", "that"],
                                                                         ["thought", "that"], ["heard", "that"]) \
        or len(words) > 4 and words[3] in ("said", "knew", "thought", "heard") else 0
    nouns = [(i, w in PLURAL) for i, w in enumerate(words) if w in SINGULAR | PLURAL and i >= start]
    (subject, plural), rest = nouns[0], nouns[1:]
    return {"target": "VBP" if plural else "VBZ", "n_diff_intervening": sum(p != plural for _, p in rest),
            "n_intervening": len(rest), "distance": len(words) - subject}


@pytest.mark.parametrize("split_by", ["attractors", "distance"])
def test_labels_attractors_and_distances_match_an_independent_reading(split_by):
    ranges = {} if split_by == "attractors" else dict(train_difficulties=(4, 8), validation_difficulties=(9, 10),
                                                      test_difficulties=(11, 16))
    splits = generate_agreement_splits(split_by, **SMALL, **ranges)
    for name, rows in splits.items():
        for row in rows:
            expected = read_sentence(row["input"])
            assert {k: row[k] for k in expected} == expected, row
            assert row["difficulty"] == row["n_diff_intervening" if split_by == "attractors" else "distance"]
            assert row["length"] == len(row["input"].split())
    low, high = (0, 1) if split_by == "attractors" else (4, 8)
    assert {r["difficulty"] for r in splits["train"]} == set(range(low, high + 1))
    assert min(r["difficulty"] for r in splits["test"]) > max(r["difficulty"] for r in splits["validation"]) > high
    assert {r["target"] for r in splits["train"]} == set(LABELS)
    inputs = [r["input"] for rows in splits.values() for r in rows]
    assert len(set(inputs)) == len(inputs)  # no sentence in two splits


def test_builder_configs_and_pinned_fingerprint():
    attractors = load_splits("subject_verb_agreement", "attractors", SMALL)
    assert {name: len(rows) for name, rows in attractors.items()} == {"train": 300, "validation": 40, "test": 60}
    assert sorted(set(attractors["test"]["difficulty"])) == [3, 4]
    assert fingerprint(attractors) == "275c9e8f6796cbaa17436ee004094a88c3c9eaf82eeca514db3fdf762235caed"
    distance = load_splits("subject_verb_agreement", "distance", SMALL)
    assert sorted(set(distance["test"]["difficulty"])) == list(range(11, 17))


def write_linzen_tsv(path, rows, columns=None):
    header = columns or ["sentence", "orig_sentence", "pos_sentence", "subj", "verb", "subj_pos", "has_rel",
                         "has_nsubj", "verb_pos", "subj_index", "verb_index", "n_intervening", "last_intervening",
                         "n_diff_intervening", "distance", "max_depth", "all_nouns", "nouns_up_to_verb"]
    lines = ["\t".join(header)]
    for sentence, verb_pos, verb_index, attractors in rows:
        values = {"sentence": sentence, "orig_sentence": sentence, "verb_pos": verb_pos, "verb_index": verb_index,
                  "n_intervening": attractors, "n_diff_intervening": attractors, "distance": verb_index - 2}
        lines.append("\t".join(str(values.get(c, "x")) for c in header))
    with gzip.open(path, "wt") as f:
        f.write("\n".join(lines) + "\n")


def test_linzen_tsv_prefix_labels_and_the_10_1_89_split(tmp_path):
    rows = [(f"the keys to the cabinet number {i} are here", "VBP", 8, 1) for i in range(50)]
    rows += [(f"the author of {i} books is famous", "VBZ", 6, 1 if i % 2 else 0) for i in range(50)]
    path = tmp_path / "agr_50_mostcommon_10K.tsv.gz"
    write_linzen_tsv(path, rows)
    splits = linzen_agreement_splits(str(path))
    assert {name: len(split) for name, split in splits.items()} == {"train": 10, "validation": 1, "test": 89}
    for row in (r for split in splits.values() for r in split):
        words = row["sentence"].split()
        assert row["input"] == " ".join(words[: row["verb_index"] - 1])  # the words before the (1-based) verb
        assert words[row["verb_index"] - 1] in ("are", "is") and row["target"] == row["verb_pos"]
        assert row["difficulty"] == row["n_diff_intervening"]
    again = linzen_agreement_splits(str(path))
    assert again["train"]["input"] == splits["train"]["input"]  # seed 42: the same split every time


def test_linzen_tsv_missing_a_column_is_named(tmp_path):
    path = tmp_path / "bad.tsv.gz"
    write_linzen_tsv(path, [("the dog is", "VBZ", 3, 0)], columns=["sentence", "verb_pos", "verb_index"])
    with pytest.raises(ValueError, match="lacks the column\\(s\\) n_intervening, n_diff_intervening, distance"):
        linzen_agreement_splits(str(path))


@pytest.mark.parametrize(
    "arguments, message",
    [
        (dict(split_by="length"), "split_by must be"),
        (dict(test_difficulties=(5, 6)), "max_modifiers >= 6"),
        (dict(split_by="distance", train_difficulties=(2, 3), validation_difficulties=(4, 4),
              test_difficulties=(5, 6)), "distance 2"),
    ],
)
def test_bad_parameters_are_named(arguments, message):
    with pytest.raises(ValueError, match=message):
        generate_agreement_splits(**{**SMALL, **arguments})
