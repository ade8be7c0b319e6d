import collections

import pytest

from lengthgen.data.ctl import CTL, generate_ctl_splits
from lengthgen.data.export import fingerprint
from lengthgen.data.listops import Node, apply_operation, generate_listops_splits
from lengthgen.data.simple_arithmetic import generate_arithmetic_splits

# pinned so that a change to the generators (or their random streams) shows up as a changed dataset
DEFAULT_FINGERPRINTS = {
    "ctl forward": "f7fab9cfc3879b18b4d51123bf01872829e34f3d4459b54ebccaa574e5988441",
    "simple_arithmetic": "752f6954de46e9e34227ecbb4d9f606a2b321b54d158c270ee49f36b840fd65b",
}


@pytest.fixture(scope="module")
def ctl_forward():
    return generate_ctl_splits("forward")


def test_ctl_sizes_and_depths(ctl_forward):
    assert fingerprint(ctl_forward) == DEFAULT_FINGERPRINTS["ctl forward"]
    sizes = {name: len(rows) for name, rows in ctl_forward.items()}
    assert sizes == {"train": 53_704, "validation_iid": 1_000, "validation": 1_000, "test": 1_000}
    depths = {name: collections.Counter(r["difficulty"] for r in rows) for name, rows in ctl_forward.items()}
    # depths 1-3 hold every distinct problem (72, 648, 5832); the rest is split evenly over 4 and 5
    assert depths["train"] == {1: 72, 2: 648, 3: 5832, 4: 23576, 5: 23576}
    assert set(depths["validation"]) == {6, 7, 8} and set(depths["test"]) == {9, 10}
    assert set(depths["validation_iid"]) <= {1, 2, 3, 4, 5}
    inputs = [set(r["input"] for r in rows) for rows in ctl_forward.values()]
    assert sum(map(len, inputs)) == sum(sizes.values())  # every problem once, in one split


def test_ctl_targets_follow_the_tables_read_off_the_single_applications(ctl_forward):
    """The 72 single applications in train define the 9 functions; every row of every split must agree with them."""
    table = {}
    for row in ctl_forward["train"]:
        symbol, *functions = row["input"].split()
        if len(functions) == 1:
            table[(functions[0], symbol)] = row["target"]
    assert len(table) == 72
    assert all(sorted(table[(f, s)] for s in {s for _, s in table}) == sorted({s for _, s in table}) for f, _ in table)
    for rows in ctl_forward.values():
        for row in rows:
            symbol, *functions = row["input"].split()
            for f in functions:  # forward: applied left to right
                symbol = table[(f, symbol)]
            assert symbol == row["target"]


def test_ctl_backward_presents_the_same_problems_reversed(ctl_forward):
    backward = generate_ctl_splits("backward")
    for name in ctl_forward:
        forward_problems = {(r["input"], r["target"]) for r in ctl_forward[name]}
        for row in backward[name]:
            *functions, symbol = row["input"].split()
            assert (" ".join([symbol, *reversed(functions)]), row["target"]) in forward_problems
    assert fingerprint(backward) != fingerprint(ctl_forward)


def test_ctl_is_deterministic_and_builder_works(tmp_path):
    params = dict(train_size=300, validation_iid_size=20, validation_size=30, test_size=20)
    assert generate_ctl_splits("forward", **params) == generate_ctl_splits("forward", **params)
    builder = CTL(config_name="backward", cache_dir=str(tmp_path), **params)
    builder.download_and_prepare()
    splits = builder.as_dataset()
    assert sorted(splits) == ["test", "train", "validation", "validation_iid"]
    assert splits["validation"][0]["input"].split()[-1] in {format(i, "03b") for i in range(8)}
    with pytest.raises(ValueError, match="sideways"):
        CTL(config_name="sideways", cache_dir=str(tmp_path))
    with pytest.raises(ValueError, match="single applications"):
        generate_ctl_splits("forward", train_size=50)


def test_simple_arithmetic_defaults():
    splits = generate_arithmetic_splits()
    assert fingerprint(splits) == DEFAULT_FINGERPRINTS["simple_arithmetic"]
    assert {k: len(v) for k, v in splits.items()} == {"train": 100_000, "validation": 1_000, "test": 1_000}
    depths = {k: collections.Counter(r["difficulty"] for r in v) for k, v in splits.items()}
    assert set(depths["train"]) == {1, 2, 3, 4, 5} and set(depths["validation"]) == {6}
    assert set(depths["test"]) == {7, 8} and depths["test"][7] == depths["test"][8] == 500
    # depth 1 has only 200 distinct expressions (3/4 of them used); the deeper depths share the rest evenly
    assert depths["train"][1] == 150 and max(depths["train"][d] for d in (2, 3, 4, 5)) - min(
        depths["train"][d] for d in (2, 3, 4, 5)) <= 1
    seen = set()
    for rows in splits.values():
        for row in rows:
            tokens = row["input"].split()
            assert row["length"] == len(tokens) <= 50 and row["input"] not in seen
            seen.add(row["input"])
            # + and * commute with "mod 10", so Python's own arithmetic is an independent check
            assert eval(row["input"].replace(" ", "")) % 10 == int(row["target"])
            # depth = deepest bracket nesting
            level, deepest = 0, 0
            for t in tokens:
                level += (t == "(") - (t == ")")
                deepest = max(deepest, level)
            assert deepest == row["difficulty"]


def parse_listops(tokens):
    """Independent reference: (value, nesting depth, dependency depth) of a ListOps expression."""
    def node(i):
        if tokens[i] != "]" and not tokens[i].startswith("["):
            return int(tokens[i]), 0, 0, i + 1
        op, i, args = tokens[i][1:], i + 1, []
        while tokens[i] != "]":
            value, depth, dependency, i = node(i)
            args.append((value, depth, dependency))
        values = [a[0] for a in args]
        if op == "SM":
            value, used = sum(values) % 10, args
        elif op in ("MIN", "MAX"):
            value = min(values) if op == "MIN" else max(values)
            used = [args[values.index(value)]]
        else:
            ranked = sorted(args, key=lambda a: a[0])
            n = len(args)
            used = ranked[n // 2 : n // 2 + 1] if n % 2 else ranked[n // 2 - 1 : n // 2 + 1]
            value = sum(a[0] for a in used) // len(used)
        return value, 1 + max(a[1] for a in args), 1 + max(a[2] for a in used), i + 1

    value, depth, dependency, end = node(0)
    assert end == len(tokens)
    return value, depth, dependency


def test_listops_hand_worked_example_from_the_thesis():
    assert parse_listops("[MED 4 8 5 [MAX 8 4 9 ] ]".split())[0] == 6


def test_listops_generator_operations_on_hand_worked_trees():
    """The generator's own operations: value, nesting depth and dependency depth (D.3.2) worked out by hand."""
    def digits(*values):
        return [Node(tokens=[str(v)], value=v, depth=0, dependency_depth=0) for v in values]

    # [MED 4 8 5 [MAX 8 4 9 ] ]: MAX = 9; the median of 4 5 8 9 is floor((5 + 8) / 2) = 6, read off two digits,
    # so the MAX branch is pruned: dependency depth 1, nesting depth 2
    tree = apply_operation("MED", digits(4, 8, 5) + [apply_operation("MAX", digits(8, 4, 9))])
    assert (tree.value, tree.depth, tree.dependency_depth) == (6, 2, 1)
    assert tree.tokens == "[MED 4 8 5 [MAX 8 4 9 ] ]".split()
    # [MAX 1 [MIN 9 [SM 1 2 ] ] ]: SM = 3, MIN picks it, MAX picks the MIN: every level is needed
    tree = apply_operation(
        "MAX", digits(1) + [apply_operation("MIN", digits(9) + [apply_operation("SM", digits(1, 2))])]
    )
    assert (tree.value, tree.depth, tree.dependency_depth) == (3, 3, 3)
    # [MAX 9 [MIN 1 [SM 1 2 ] ] ]: MIN picks the digit 1 and MAX the digit 9: dependency depth 1
    tree = apply_operation(
        "MAX", digits(9) + [apply_operation("MIN", digits(1) + [apply_operation("SM", digits(1, 2))])]
    )
    assert (tree.value, tree.depth, tree.dependency_depth) == (9, 3, 1)


def test_listops_splits():
    splits = generate_listops_splits(train_size=3_000, validation_size=100, test_size=100)
    depths = {k: collections.Counter(r["difficulty"] for r in v) for k, v in splits.items()}
    assert depths == {"train": {d: 600 for d in range(1, 6)}, "validation": {6: 100}, "test": {7: 50, 8: 50}}
    seen = set()
    for rows in splits.values():
        for row in rows:
            value, depth, dependency = parse_listops(row["input"].split())
            assert (value, depth, dependency) == (int(row["target"]), row["depth"], row["difficulty"])
            assert row["length"] == len(row["input"].split()) <= 50 and row["input"] not in seen
            seen.add(row["input"])
    assert generate_listops_splits(train_size=50, validation_size=5, test_size=5, seed=3) == generate_listops_splits(
        train_size=50, validation_size=5, test_size=5, seed=3)
