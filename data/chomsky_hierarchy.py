"""Tasks of the Chomsky-hierarchy benchmark (Delétang et al., Neural Networks and the Chomsky Hierarchy, ICLR 2023),
split by input length: one `datasets` config per task.

    builder = ChomskyHierarchy(config_name="parity_check", train_size=1000)
    builder.download_and_prepare()
    splits = builder.as_dataset()          # train (lengths 1-40), test (41-500); difficulty = input length

Every task maps a random string to an answer, written from the paper's definitions:

| config | level | answer | input -> target |
| --- | --- | --- | --- |
| parity_check | regular | class | binary string -> number of 1s mod 2 |
| even_pairs | regular | class | binary string -> number of `01` and `10` pairs mod 2 (0 when they are equally many) |
| modular_arithmetic | regular | class | `n op n op ... n`, n in 0-4, op in + - * (usual precedence) -> value mod 5 |
| reverse_string | deterministic context-free | sequence | binary string -> the string reversed |
| stack_manipulation | deterministic context-free | sequence | stack bottom to top, then POP / PUSH_0 / PUSH_1 actions -> final stack top to bottom, then END |
| bucket_sort | context-sensitive | sequence | string over 0-4 -> the string sorted |
| missing_duplicate_string | context-sensitive | class | `w w` (binary w) with one symbol replaced by `_` -> that symbol |
| odds_first | context-sensitive | sequence | s1 s2 ... sn -> s1 s3 s5 ... s2 s4 ... |

Lengths as the paper samples them: modular_arithmetic has odd lengths only (an even length is one token short of an
expression); missing_duplicate_string starts at 2 and pads odd lengths with a final `.`; a stack_manipulation input
of length n > 1 holds a stack of 1 to n - 1 symbols, the rest actions, and POP on an empty stack does nothing.
The authors' code writes odds_first's output as s2 s4 ... s1 s3 ... (its 0-based "odd" indices first), against the
paper's definition and its own docstring example; `odds_first_code_order=True` gives the code's order.

The paper trains on lengths 1-40 and tests on 41-500 and scores a model by its accuracy averaged over test lengths;
here `train_size` and `test_size` rows are spread evenly over the lengths of each split (i.i.d., duplicates allowed,
as the paper samples).
"""

import random
from collections.abc import Callable
from dataclasses import dataclass

from lengthgen.cli import UsageError

from .length_split import LengthSplitBuilder, LengthSplitConfig
from .splits import assert_splits_disjoint, balanced_counts

CHOMSKY_CITATION = "Delétang et al., Neural Networks and the Chomsky Hierarchy, ICLR 2023."


def bits(rng: random.Random, length: int) -> list[str]:
    return [str(rng.randrange(2)) for _ in range(length)]


def parity_check(rng, length, **_):
    string = bits(rng, length)
    return string, [str(string.count("1") % 2)]


def even_pairs(rng, length, **_):
    string = bits(rng, length)
    unequal = sum(a != b for a, b in zip(string, string[1:]))
    return string, [str(unequal % 2)]


def modular_arithmetic(rng, length, modulus=5, **_):
    numbers = [rng.randrange(modulus) for _ in range(length // 2 + 1)]
    operators = [rng.choice("+-*") for _ in range(length // 2)]
    # usual precedence: the products first, then the sum of the signed terms
    total, term, sign = 0, numbers[0], 1
    for op, number in zip(operators, numbers[1:]):
        if op == "*":
            term *= number
        else:
            total, term, sign = total + sign * term, number, 1 if op == "+" else -1
    total += sign * term
    tokens = [str(numbers[0])] + [t for op, number in zip(operators, numbers[1:]) for t in (op, str(number))]
    return tokens, [str(total % modulus)]


def reverse_string(rng, length, **_):
    string = bits(rng, length)
    return string, string[::-1]


def stack_manipulation(rng, length, **_):
    if length == 1:
        string = bits(rng, 1)
        return string, [*string, "END"]
    stack = bits(rng, rng.randint(1, length - 1))
    actions = [rng.choice(("POP", "PUSH_0", "PUSH_1")) for _ in range(length - len(stack))]
    final = list(stack)
    for action in actions:
        if action == "POP":
            if final:
                final.pop()
        else:
            final.append(action[-1])
    return stack + actions, final[::-1] + ["END"]


def bucket_sort(rng, length, vocabulary_size=5, **_):
    string = [str(rng.randrange(vocabulary_size)) for _ in range(length)]
    return string, sorted(string)


def missing_duplicate_string(rng, length, **_):
    half = bits(rng, length // 2)
    doubled = half + half
    missing = rng.randrange(len(doubled))
    answer = doubled[missing]
    doubled[missing] = "_"
    return doubled + ["."] * (length % 2), [answer]


def odds_first(rng, length, odds_first_code_order=False, **_):
    string = bits(rng, length)
    first, second = (string[1::2], string[::2]) if odds_first_code_order else (string[::2], string[1::2])
    return string, first + second


@dataclass(frozen=True)
class Task:
    level: str
    answer: str  # "class": one target token; "sequence": a token sequence
    generate: Callable[..., tuple[list[str], list[str]]]  # (rng, length, **parameters) -> (input, target)
    min_length: int = 1
    odd_lengths_only: bool = False


TASKS = {
    "parity_check": Task("regular", "class", parity_check),
    "even_pairs": Task("regular", "class", even_pairs),
    "modular_arithmetic": Task("regular", "class", modular_arithmetic, odd_lengths_only=True),
    "reverse_string": Task("deterministic context-free", "sequence", reverse_string),
    "stack_manipulation": Task("deterministic context-free", "sequence", stack_manipulation),
    "bucket_sort": Task("context-sensitive", "sequence", bucket_sort),
    "missing_duplicate_string": Task("context-sensitive", "class", missing_duplicate_string, min_length=2),
    "odds_first": Task("context-sensitive", "sequence", odds_first),
}


def task_lengths(task: str, lengths: tuple[int, int]) -> list[int]:
    """The input lengths of `lengths` (inclusive) that the task has."""
    spec = TASKS[task]
    return [n for n in range(max(lengths[0], spec.min_length), lengths[1] + 1) if not (spec.odd_lengths_only and n % 2 == 0)]


def generate_chomsky_splits(
    task: str,
    train_size: int = 100_000,
    train_lengths: tuple[int, int] = (1, 40),
    test_size: int = 46_000,
    test_lengths: tuple[int, int] = (41, 500),
    seed: int = 0,
    **task_parameters,
) -> dict[str, list[dict]]:
    if task not in TASKS:
        raise UsageError(f"Unknown Chomsky-hierarchy task {task!r}; expected one of {sorted(TASKS)}.")
    rng, splits = random.Random(seed), {}
    for split, size, lengths in (("train", train_size, train_lengths), ("test", test_size, test_lengths)):
        valid = task_lengths(task, lengths)
        if not valid:
            raise UsageError(f"{task} has no input of length {lengths[0]}-{lengths[1]} (split {split}).")
        rows = []
        for length, count in balanced_counts(size, {n: size for n in valid}).items():
            for _ in range(count):
                tokens, target = TASKS[task].generate(rng, length, **task_parameters)
                assert len(tokens) == length
                rows.append({"input": " ".join(tokens), "target": " ".join(target), "difficulty": length,
                             "length": length})
        splits[split] = rows
    assert_splits_disjoint(splits)
    return splits


@dataclass
class ChomskyConfig(LengthSplitConfig):
    """Generating parameters; lengths are the paper's (train 1-40, test 41-500), sizes are this library's."""

    train_size: int = 100_000
    train_lengths: tuple[int, int] = (1, 40)
    test_size: int = 46_000
    test_lengths: tuple[int, int] = (41, 500)
    seed: int = 0
    modulus: int = 5  # modular_arithmetic
    vocabulary_size: int = 5  # bucket_sort
    odds_first_code_order: bool = False  # odds_first: the authors' code's order instead of the paper's


class ChomskyHierarchy(LengthSplitBuilder):
    """Chomsky-hierarchy tasks (Delétang et al., 2023) split by input length: train 1-40, test 41-500."""

    BUILDER_CONFIG_CLASS = ChomskyConfig
    BUILDER_CONFIGS = [
        ChomskyConfig(name=name, description=f"{name} ({task.level}, {task.answer} answer) split by input length")
        for name, task in TASKS.items()
    ]
    DEFAULT_CONFIG_NAME = "parity_check"
    CITATION = CHOMSKY_CITATION

    def generate_splits(self):
        return generate_chomsky_splits(self.config.name, **self.config.generator_arguments())
