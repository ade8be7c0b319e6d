"""Compositional table lookup (CTL; thesis §5.2.1, appendix D.3.2), configs `forward` and `backward`.

Eight symbols (3-bit strings 000-111) and nine random bijective functions named a-i. An example applies a list of
functions to a symbol: forward `101 d a b` means b(a(d(101))); backward presents the same problem as `b a d 101`.
The target is the resulting symbol. Difficulty = number of function applications. Every single application (9 x 8)
is in the training set; training has 1-5 applications with depths balanced as far as each depth has distinct
problems (depths 1-3 have only 72, 648 and 5,832), validation `validation_iid` holds unseen problems of the training
depths, `validation` depths 6-8, `test` depths 9-10.
"""

import itertools
import random
import string
from dataclasses import dataclass

from lengthgen.cli import UsageError

from .length_split import LengthSplitBuilder, LengthSplitConfig
from .splits import assert_splits_disjoint, balanced_counts, check_ranges

NDR_CITATION = (
    "Csordás, Irie, Schmidhuber. The Neural Data Router: Adaptive Control Flow in Transformers Improves "
    "Systematic Generalization. ICLR 2022 (thesis chapter 5)."
)
DIRECTIONS = ("forward", "backward")


def symbol_bits(num_symbols: int) -> int:
    """Binary digits a symbol is written with: enough for the largest, at least one."""
    return max(1, (num_symbols - 1).bit_length())


def ctl_tables(num_symbols: int, num_functions: int, seed: int) -> list[list[int]]:
    """`num_functions` random bijections of range(num_symbols)."""
    rng = random.Random(seed)
    return [rng.sample(range(num_symbols), num_symbols) for _ in range(num_functions)]


def ctl_example(symbol: int, functions: tuple[int, ...], tables, direction: str, bits: int) -> dict:
    names = string.ascii_lowercase
    result = symbol
    for f in functions:
        result = tables[f][result]
    symbol_text = format(symbol, f"0{bits}b")
    calls = [names[f] for f in functions]
    tokens = [symbol_text, *calls] if direction == "forward" else [*reversed(calls), symbol_text]
    return {
        "input": " ".join(tokens),
        "target": format(result, f"0{bits}b"),
        "difficulty": len(functions),
        "length": len(tokens),
    }


def sample_problems(depth: int, count: int, num_symbols: int, num_functions: int, rng, taken: set) -> list:
    """`count` distinct (symbol, functions) problems of `depth` applications not in `taken` (added to it)."""
    space = num_symbols * num_functions**depth
    free = space - sum(1 for p in taken if len(p[1]) == depth)
    if count > free:
        raise UsageError(f"Only {free} unused CTL problems of depth {depth}; {count} asked for.")
    chosen = []
    if space <= 4 * count:  # small space: enumerate, then draw without replacement
        candidates = [
            (s, fs)
            for s in range(num_symbols)
            for fs in itertools.product(range(num_functions), repeat=depth)
            if (s, fs) not in taken
        ]
        chosen = rng.sample(candidates, count)
    else:
        while len(chosen) < count:
            problem = (rng.randrange(num_symbols), tuple(rng.randrange(num_functions) for _ in range(depth)))
            if problem not in taken and problem not in chosen:
                chosen.append(problem)
    taken.update(chosen)
    return chosen


def generate_ctl_splits(
    direction: str = "forward",
    train_size: int = 53_704,
    train_depths: tuple[int, int] = (1, 5),
    validation_iid_size: int = 1_000,
    validation_depths: tuple[int, int] = (6, 8),
    validation_size: int = 1_000,
    test_depths: tuple[int, int] = (9, 10),
    test_size: int = 1_000,
    num_symbols: int = 8,
    num_functions: int = 9,
    seed: int = 0,
) -> dict[str, list[dict]]:
    if direction not in DIRECTIONS:
        raise UsageError(f"Unknown CTL direction {direction!r}; expected one of {DIRECTIONS}.")
    check_ranges(1, train_depths=train_depths, validation_depths=validation_depths, test_depths=test_depths)
    bits = symbol_bits(num_symbols)
    tables = ctl_tables(num_symbols, num_functions, seed)
    rng = random.Random(seed + 1)
    taken: set = set()
    train_range = range(train_depths[0], train_depths[1] + 1)
    capacity = {d: num_symbols * num_functions**d for d in train_range}
    # every single application is in training; the rest of it is balanced over the deeper training depths
    singles = [(s, (f,)) for f in range(num_functions) for s in range(num_symbols)] if 1 in capacity else []
    if train_size < len(singles):
        raise UsageError(f"train_size {train_size} is below the {len(singles)} single applications it must hold.")
    taken.update(singles)
    deeper = {d: c for d, c in capacity.items() if d > 1}
    counts = balanced_counts(train_size - len(singles), deeper) if deeper else {}
    problems = {"train": list(singles)}
    for depth, count in counts.items():
        problems["train"] += sample_problems(depth, count, num_symbols, num_functions, rng, taken)
    left = {d: deeper[d] - counts[d] for d in deeper if deeper[d] > counts[d]}
    problems["validation_iid"] = [
        p for d, n in balanced_counts(validation_iid_size, left).items()
        for p in sample_problems(d, n, num_symbols, num_functions, rng, taken)
    ]
    for name, (lo, hi), size in (("validation", validation_depths, validation_size), ("test", test_depths, test_size)):
        depths = {d: num_symbols * num_functions**d for d in range(lo, hi + 1)}
        problems[name] = [
            p for d, n in balanced_counts(size, depths).items()
            for p in sample_problems(d, n, num_symbols, num_functions, rng, taken)
        ]
    splits = {name: [ctl_example(s, fs, tables, direction, bits) for s, fs in ps] for name, ps in problems.items()}
    for name in splits:
        rng.shuffle(splits[name])
    assert_splits_disjoint(splits)
    return splits


@dataclass
class CTLConfig(LengthSplitConfig):
    """Generating parameters; defaults are the thesis's (appendix D.3.2)."""

    train_size: int = 53_704
    train_depths: tuple[int, int] = (1, 5)
    validation_iid_size: int = 1_000
    validation_depths: tuple[int, int] = (6, 8)
    validation_size: int = 1_000
    test_depths: tuple[int, int] = (9, 10)
    test_size: int = 1_000
    num_symbols: int = 8
    num_functions: int = 9
    seed: int = 0


class CTL(LengthSplitBuilder):
    """Compositional table lookup split by the number of function applications (NDR thesis §5.2.1)."""

    BUILDER_CONFIG_CLASS = CTLConfig
    BUILDER_CONFIGS = [CTLConfig(name=d, description=f"CTL, {d} presentation order") for d in DIRECTIONS]
    DEFAULT_CONFIG_NAME = "forward"
    CITATION = NDR_CITATION

    def generate_splits(self):
        return generate_ctl_splits(self.config.name, **self.config.generator_arguments())
