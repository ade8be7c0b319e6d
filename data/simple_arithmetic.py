"""Simple arithmetic (thesis §5.2.2, appendix D.3.2): nested modulo-10 additions and multiplications.

Every operation is bracketed, e.g. `( ( 4 * 7 ) + 2 )` -> `0`. Difficulty = depth = the number of nested
operations (leaves not counted: the example has depth 2). A sub-expression replaces a digit with probability 0.2, at
most 50 tokens, and depths are balanced by rejection sampling. Train depths 1-5, validation 6, test 7-8;
100K / 1K / 1K by default. The thesis's §5.2.2 and Table 5.3 give these depths; its appendix D.3.2 says 0-5, 6 and
7 (a depth of 0 is a bare digit): the table's are followed.
"""

import random
from dataclasses import dataclass

from tqdm.auto import tqdm

from lengthgen.cli import UsageError

from .ctl import NDR_CITATION
from .length_split import LengthSplitBuilder, LengthSplitConfig
from .splits import assert_splits_disjoint, balanced_counts, check_ranges

OPERATIONS = {"+": lambda a, b: (a + b) % 10, "*": lambda a, b: (a * b) % 10}


def random_expression(rng: random.Random, max_depth: int, p_subop: float) -> tuple[list[str], int, int]:
    """(tokens, value, depth) of a random expression of depth <= max_depth; depth 0 is a bare digit."""
    if max_depth == 0 or rng.random() > p_subop:
        digit = rng.randrange(10)
        return [str(digit)], digit, 0
    return combine(rng, random_expression(rng, max_depth - 1, p_subop), random_expression(rng, max_depth - 1, p_subop))


def combine(rng: random.Random, left, right):
    op = rng.choice(sorted(OPERATIONS))
    return ["(", *left[0], op, *right[0], ")"], OPERATIONS[op](left[1], right[1]), max(left[2], right[2]) + 1


def expression_of_depth(rng: random.Random, depth: int, p_subop: float):
    """A random expression of exactly `depth`: sample one of depth <= depth, then wrap it in operations with
    shallower random operands until it is that deep (each wrap adds exactly one level)."""
    expression = combine(rng, random_expression(rng, depth - 1, p_subop), random_expression(rng, depth - 1, p_subop))
    while expression[2] < depth:
        other = random_expression(rng, depth - 1, p_subop)
        expression = combine(rng, *((expression, other) if rng.random() < 0.5 else (other, expression)))
    return expression


def balanced_expressions(sizes_by_depth: dict[int, int], rng, p_subop: float, max_length: int, seen: set, desc: str):
    rows = []
    with tqdm(total=sum(sizes_by_depth.values()), desc=desc, disable=sum(sizes_by_depth.values()) < 10_000) as bar:
        for depth, size in sizes_by_depth.items():
            made, attempts = 0, 0
            while made < size:
                attempts += 1
                if attempts > 1000 * size + 10_000:
                    raise UsageError(f"Could not find {size} distinct expressions of depth {depth} within "
                                     f"{max_length} tokens; lower the size or raise max_length.")
                tokens, value, _ = expression_of_depth(rng, depth, p_subop)
                text = " ".join(tokens)
                if len(tokens) > max_length or text in seen:
                    continue
                seen.add(text)
                rows.append({"input": text, "target": str(value), "difficulty": depth, "length": len(tokens)})
                made += 1
                bar.update(1)
    rng.shuffle(rows)
    return rows


def distinct_expressions(depth: int) -> int:
    """How many distinct expressions have exactly `depth` nested operations (ignoring the length limit)."""
    at_most = [10]
    for _ in range(depth):
        at_most.append(10 + len(OPERATIONS) * at_most[-1] ** 2)
    return at_most[depth] - (at_most[depth - 1] if depth else 0)


def per_depth(size: int, depths: tuple[int, int]) -> dict[int, int]:
    """Balanced counts per depth; a shallow depth with few distinct expressions takes at most 3/4 of them."""
    capacities = {d: max(1, distinct_expressions(d) * 3 // 4) for d in range(depths[0], depths[1] + 1)}
    return balanced_counts(size, capacities)


def generate_arithmetic_splits(
    train_size: int = 100_000,
    train_depths: tuple[int, int] = (1, 5),
    validation_size: int = 1_000,
    validation_depths: tuple[int, int] = (6, 6),
    test_size: int = 1_000,
    test_depths: tuple[int, int] = (7, 8),
    p_subop: float = 0.2,
    max_length: int = 50,
    seed: int = 0,
) -> dict[str, list[dict]]:
    check_ranges(1, train_depths=train_depths, validation_depths=validation_depths, test_depths=test_depths)
    rng, seen = random.Random(seed), set()
    splits = {
        name: balanced_expressions(per_depth(size, depths), rng, p_subop, max_length, seen, f"simple_arithmetic {name}")
        for name, size, depths in (
            ("train", train_size, train_depths),
            ("validation", validation_size, validation_depths),
            ("test", test_size, test_depths),
        )
    }
    assert_splits_disjoint(splits)
    return splits


@dataclass
class ArithmeticConfig(LengthSplitConfig):
    """Generating parameters; defaults are the thesis's (appendix D.3.2)."""

    train_size: int = 100_000
    train_depths: tuple[int, int] = (1, 5)
    validation_size: int = 1_000
    validation_depths: tuple[int, int] = (6, 6)
    test_size: int = 1_000
    test_depths: tuple[int, int] = (7, 8)
    p_subop: float = 0.2
    max_length: int = 50
    seed: int = 0


class SimpleArithmetic(LengthSplitBuilder):
    """Nested modulo-10 + and * split by depth (NDR thesis §5.2.2)."""

    BUILDER_CONFIG_CLASS = ArithmeticConfig
    BUILDER_CONFIGS = [ArithmeticConfig(name="default", description="simple arithmetic split by depth")]
    DEFAULT_CONFIG_NAME = "default"
    CITATION = NDR_CITATION

    def generate_splits(self):
        return generate_arithmetic_splits(**self.config.generator_arguments())
