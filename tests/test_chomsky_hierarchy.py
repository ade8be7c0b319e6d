"""The Chomsky-hierarchy builder: every task's answer against an independent function written from the paper's
definition, the length split, and pinned fingerprints."""

import collections
import functools
import operator

import pytest

from lengthgen.data.chomsky_hierarchy import TASKS, ChomskyHierarchy, generate_chomsky_splits
from lengthgen.data.export import build, fingerprint

SMALL = dict(train_size=400, train_lengths=(1, 12), test_size=120, test_lengths=(13, 30))


def parity(tokens):
    return [str(functools.reduce(operator.xor, (int(t) for t in tokens), 0))]


def even_pairs(tokens):
    # as many 01 as 10 pairs exactly when the string starts and ends with the same symbol (paper, §4)
    return ["0" if tokens[0] == tokens[-1] else "1"]


def modular_arithmetic(tokens):
    return [str(eval("".join(tokens)) % 5)]  # Python's precedence is the usual one; the tokens are digits and + - *


def stack_manipulation(tokens):
    stack = ""  # bottom at the left
    for token in tokens:
        if token in "01":
            stack += token
        elif token == "POP":
            stack = stack[:-1]
        else:
            stack += token.removeprefix("PUSH_")
    return list(reversed(stack)) + ["END"]


def missing_duplicate(tokens):
    string = [t for t in tokens if t != "."]
    half = len(string) // 2
    answers = [b for b in "01" if (filled := [b if t == "_" else t for t in string])[:half] == filled[half:]]
    assert len(answers) == 1  # the answer is determined
    return answers


def odds_first(tokens):
    return [t for i, t in enumerate(tokens, 1) if i % 2] + [t for i, t in enumerate(tokens, 1) if not i % 2]


ANSWERS = {
    "parity_check": parity,
    "even_pairs": even_pairs,
    "modular_arithmetic": modular_arithmetic,
    "reverse_string": lambda tokens: tokens[::-1],
    "stack_manipulation": stack_manipulation,
    "bucket_sort": lambda tokens: sorted(tokens, key=int),
    "missing_duplicate_string": missing_duplicate,
    "odds_first": odds_first,
}

# sha256 of the SMALL splits' rows (seed 0); a change here changes everyone's data
FINGERPRINTS = {
    "bucket_sort": "270ff9449b84b982feaa2c66effc1644f51a6481b21c36a5d9579ce10aa2cdd8",
    "even_pairs": "8d01f952eaf7af2071f5053fdfb9df9ea4df81697484cf08ceeb11da99a2450f",
    "missing_duplicate_string": "dc0d5d367ac4b1fdc5b371debd1925b9d7e269206da1277d24c739ee4099d8bb",
    "modular_arithmetic": "8389c4a6604e7d2d51d1cb1f973c57e4417c78b311187061af07086a17b098ca",
    "odds_first": "3bcfed5e872907a03e48d57ef1ec3329be8b67cad71342b1ed1883eba97179b3",
    "parity_check": "fc6e0f045e9df8c8871aa6583d34edfd4f8fd0e3615f854ff4128236d845516d",
    "reverse_string": "3934e49b9a9384582f303982ad61cee5296fa4edc566d2fa4f3b2c5201426b87",
    "stack_manipulation": "359a4170ef02942a36b8a4af3f65f735259443bc941a7ffa7e0f0fe2a7325a3d",
}


def test_every_task_has_an_independent_answer():
    assert sorted(ANSWERS) == sorted(TASKS)


@pytest.mark.parametrize("task", sorted(TASKS))
def test_targets_follow_the_definitions_and_lengths_split(task):
    splits = generate_chomsky_splits(task, **SMALL)
    for split, (lo, hi) in (("train", SMALL["train_lengths"]), ("test", SMALL["test_lengths"])):
        rows = splits[split]
        assert len(rows) == SMALL[f"{split}_size"]
        lengths = collections.Counter(r["difficulty"] for r in rows)
        expected = [n for n in range(lo, hi + 1) if (n % 2 or task != "modular_arithmetic")
                    and (n > 1 or task != "missing_duplicate_string")]
        assert sorted(lengths) == expected
        assert max(lengths.values()) - min(lengths.values()) <= 1
        for row in rows:
            tokens = row["input"].split()
            assert row["length"] == row["difficulty"] == len(tokens)
            assert row["target"].split() == ANSWERS[task](tokens), row
    train = {r["difficulty"] for r in splits["train"]}
    assert not train & {r["difficulty"] for r in splits["test"]}
    # the answers are not constant (a generator stuck on one class would pass the checks above)
    assert len({r["target"] for r in splits["train"]}) > 1


def test_hand_worked_examples():
    assert modular_arithmetic("1 + 2 * 3".split()) == ["2"] and modular_arithmetic("1 - 1 - 1".split()) == ["4"]
    assert stack_manipulation("0 1 1 0 PUSH_1 POP POP".split()) == ["1", "1", "0", "END"]
    assert stack_manipulation("1 1 0 POP POP POP POP".split()) == ["END"]
    assert odds_first("0 0 1 1 0 1 0 1".split()) == "0 1 0 0 0 1 1 1".split()


def test_odds_first_in_the_authors_code_order():
    rows = generate_chomsky_splits("odds_first", odds_first_code_order=True, **SMALL)["train"]
    for row in rows:
        tokens = row["input"].split()
        assert row["target"].split() == tokens[1::2] + tokens[::2]


def test_builder_fingerprints_and_determinism(tmp_path):
    for task in sorted(TASKS):
        splits = build("chomsky_hierarchy", task, cache_dir=str(tmp_path), **SMALL)[1]
        assert sorted(splits) == ["test", "train"]
        assert fingerprint(splits) == FINGERPRINTS[task], task
    again = generate_chomsky_splits("parity_check", **SMALL)
    assert again == generate_chomsky_splits("parity_check", **SMALL)
    assert again != generate_chomsky_splits("parity_check", **{**SMALL, "seed": 1})


def test_bad_input():
    with pytest.raises(ValueError, match="Unknown Chomsky-hierarchy task 'parity'.*parity_check"):
        generate_chomsky_splits("parity", **SMALL)
    with pytest.raises(ValueError, match="no input of length 2-2"):
        generate_chomsky_splits("modular_arithmetic", **{**SMALL, "test_lengths": (2, 2)})
    with pytest.raises(ValueError, match="overlap"):
        generate_chomsky_splits("parity_check", **{**SMALL, "test_lengths": (12, 20)})
    with pytest.raises(ValueError, match="parity_check"):
        ChomskyHierarchy(config_name="parity")
