"""ListOps, the NDR thesis variant (§5.2.3, appendix D.3.2), not Long Range Arena's.

Prefix-notation list operations on digits: SM (sum modulo 10), MIN, MAX and MED (median, floored: the mean of the two
middle values when the count is even), each with 2-5 arguments, e.g. `[MED 4 8 5 [MAX 8 4 9 ] ]` -> `6`. An argument
is a sub-list with probability 0.3; at most 50 tokens. Difficulty = *dependency depth*: the depth in operations of the
parse tree after pruning the arguments no operation selects (MIN and MAX select one argument, MED one or two, SM all),
so a depth-k problem really needs k levels of computation. Splits are balanced by it: train 1-5, validation 6,
test 7-8; 1M / 1K / 1K by default. The thesis's §5.2.3 and Table 5.4 give these depths; its appendix D.3.2 says 0-5,
6 and 7: the table's are followed. It gives at most 5 arguments; at least 2 is this builder's choice (an operation
of one argument would be its argument).
"""

import random
from dataclasses import dataclass

import datasets
from tqdm.auto import tqdm

from lengthgen.cli import UsageError

from .ctl import NDR_CITATION
from .length_split import LengthSplitBuilder, LengthSplitConfig
from .splits import assert_splits_disjoint, balanced_counts, check_ranges

OPERATIONS = ("SM", "MIN", "MAX", "MED")


@dataclass
class Node:
    tokens: list[str]
    value: int
    depth: int  # nested operations (a digit: 0)
    dependency_depth: int  # depth of the pruned tree


def apply_operation(op: str, args: list[Node]) -> Node:
    values = [a.value for a in args]
    if op == "SM":
        value, selected = sum(values) % 10, args
    elif op in ("MIN", "MAX"):
        best = min(values) if op == "MIN" else max(values)
        value, selected = best, [args[values.index(best)]]
    else:
        order = sorted(range(len(args)), key=lambda i: values[i])
        middle = [order[len(args) // 2]] if len(args) % 2 else [order[len(args) // 2 - 1], order[len(args) // 2]]
        value, selected = sum(values[i] for i in middle) // len(middle), [args[i] for i in middle]
    return Node(
        tokens=[f"[{op}", *(t for a in args for t in a.tokens), "]"],
        value=value,
        depth=1 + max(a.depth for a in args),
        dependency_depth=1 + max(a.dependency_depth for a in selected),
    )


class TooLong(Exception):
    """A tree under construction passed the token limit: it would be rejected, so stop building it."""


def random_tree(rng: random.Random, max_depth: int, p_op: float, max_args: int, budget: list[int]) -> Node:
    """A random tree; `budget[0]` counts the tokens still allowed and TooLong is raised once it is spent."""
    if max_depth == 0 or rng.random() > p_op:
        budget[0] -= 1
        if budget[0] < 0:
            raise TooLong
        digit = rng.randrange(10)
        return Node([str(digit)], digit, 0, 0)
    budget[0] -= 2  # "[OP" and "]"
    args = [random_tree(rng, max_depth - 1, p_op, max_args, budget) for _ in range(rng.randint(2, max_args))]
    return apply_operation(rng.choice(OPERATIONS), args)


def tree_of_depth(rng: random.Random, min_depth: int, max_depth: int, p_op: float, max_args: int, max_length: int):
    """A random tree with min_depth <= depth <= max_depth, wrapping a random tree in new operations until it is deep
    enough; None when it grows past `max_length` tokens (such trees are rejected anyway)."""
    budget = [max_length - 2]
    try:
        args = [random_tree(rng, max_depth - 1, p_op, max_args, budget) for _ in range(2)]
        tree = apply_operation(rng.choice(OPERATIONS), args)
        while tree.depth < min_depth:
            budget[0] -= 2
            args = [
                random_tree(rng, max_depth - 1, p_op, max_args, budget) for _ in range(rng.randint(1, max_args - 1))
            ]
            args.insert(rng.randrange(len(args) + 1), tree)
            tree = apply_operation(rng.choice(OPERATIONS), args)
    except TooLong:
        return None
    return tree


def balanced_trees(size, depths, rng, p_op, max_args, max_length, seen, desc):
    """`size` distinct trees whose dependency depths are balanced over `depths` (rejection sampling)."""
    lo, hi = depths
    wanted = balanced_counts(size, {d: size for d in range(lo, hi + 1)})
    rows, attempts = [], 0
    with tqdm(total=size, desc=desc, disable=size < 10_000) as bar:
        while len(rows) < size:
            attempts += 1
            if attempts > 2000 * size + 100_000:
                raise UsageError(f"Could not balance {size} ListOps trees over dependency depths {lo}-{hi}.")
            tree = tree_of_depth(rng, lo, hi, p_op, max_args, max_length)
            if tree is None or wanted.get(tree.dependency_depth, 0) == 0:
                continue
            text = " ".join(tree.tokens)
            if text in seen:
                continue
            seen.add(text)
            wanted[tree.dependency_depth] -= 1
            rows.append({"input": text, "target": str(tree.value), "difficulty": tree.dependency_depth,
                         "length": len(tree.tokens), "depth": tree.depth})
            bar.update(1)
    return rows


def generate_listops_splits(
    train_size: int = 1_000_000,
    train_depths: tuple[int, int] = (1, 5),
    validation_size: int = 1_000,
    validation_depths: tuple[int, int] = (6, 6),
    test_size: int = 1_000,
    test_depths: tuple[int, int] = (7, 8),
    p_op: float = 0.3,
    max_args: int = 5,
    max_length: int = 50,
    seed: int = 0,
) -> dict[str, list[dict]]:
    check_ranges(1, train_depths=train_depths, validation_depths=validation_depths, test_depths=test_depths)
    rng, seen = random.Random(seed), set()
    splits = {
        name: balanced_trees(size, depths, rng, p_op, max_args, max_length, seen, f"listops {name}")
        for name, size, depths in (
            ("train", train_size, train_depths),
            ("validation", validation_size, validation_depths),
            ("test", test_size, test_depths),
        )
    }
    assert_splits_disjoint(splits)
    return splits


@dataclass
class ListOpsConfig(LengthSplitConfig):
    """Generating parameters; defaults are the thesis's (appendix D.3.2)."""

    train_size: int = 1_000_000
    train_depths: tuple[int, int] = (1, 5)
    validation_size: int = 1_000
    validation_depths: tuple[int, int] = (6, 6)
    test_size: int = 1_000
    test_depths: tuple[int, int] = (7, 8)
    p_op: float = 0.3
    max_args: int = 5
    max_length: int = 50
    seed: int = 0


class ListOps(LengthSplitBuilder):
    """ListOps (SM, MIN, MAX, MED) balanced by dependency depth (NDR thesis §5.2.3)."""

    BUILDER_CONFIG_CLASS = ListOpsConfig
    BUILDER_CONFIGS = [ListOpsConfig(name="default", description="ListOps split by dependency depth")]
    DEFAULT_CONFIG_NAME = "default"
    EXTRA_FEATURES = {"depth": datasets.Value("int32")}  # nesting depth before pruning
    CITATION = NDR_CITATION

    def generate_splits(self):
        return generate_listops_splits(**self.config.generator_arguments())
