"""Number sequence prediction (NSP) tasks of the I-BERT paper (§5.1, Figure 3), as a pure, seeded generator.

A sequence holds numbers written as little-endian decimal digits and separated by a delimiter token. The digits of the
last number are masked; the model restores them. Tasks:

* ``add`` (Fibonacci): a1, a2, a3 = a1 + a2
* ``copy``: a1, a2 = a1
* ``reverse`` (palindrome): a1, a2 = a1's digits in reverse order

Difficulty d = digits: every initial number has at most d digits and the second-to-last has exactly d. As in the
authors' code, the mask covers exactly the digits of the last number (one mask token per digit).
"""

import random

from lengthgen.cli import UsageError

from .splits import assert_splits_disjoint, check_ranges

DELIMITER = "_"
MASK = "[MASK]"
TASKS = ("add", "copy", "reverse")


def random_number(rng: random.Random, digits: int) -> int:
    """A uniformly random number with exactly `digits` decimal digits (0-9 for one digit)."""
    low = 0 if digits == 1 else 10 ** (digits - 1)
    return rng.randrange(low, 10**digits)


def little_endian(number_text: str) -> list[str]:
    """'1234' -> ['4', '3', '2', '1']."""
    return list(reversed(number_text))


def nsp_numbers(task: str, difficulty: int, rng: random.Random) -> list[str]:
    """The decimal numbers (usual big-endian notation) of one sequence; the last one is the answer."""
    if task == "add":
        first = random_number(rng, rng.randint(1, difficulty))  # at most d digits
        second = random_number(rng, difficulty)  # the second-to-last has exactly d digits
        return [str(first), str(second), str(first + second)]
    if task == "copy":
        number = str(random_number(rng, difficulty))
        return [number, number]
    if task == "reverse":
        number = str(random_number(rng, difficulty))
        return [number, number[::-1]]
    raise UsageError(f"Unknown NSP task {task!r}; expected one of {TASKS}.")


def nsp_example(task: str, difficulty: int, rng: random.Random) -> dict:
    """One row: `input` (last number masked), `target` (restored), `difficulty`, `length`, `numbers`."""
    numbers = nsp_numbers(task, difficulty, rng)
    given = [token for number in numbers[:-1] for token in (*little_endian(number), DELIMITER)]
    answer = little_endian(numbers[-1])
    input_tokens = given + [MASK] * len(answer)
    return {
        "input": " ".join(input_tokens),
        "target": " ".join(given + answer),
        "difficulty": difficulty,
        "length": len(input_tokens),
        "numbers": numbers,
    }


def balanced_difficulties(size: int, difficulties: list[int]) -> list[int]:
    """`size` difficulty values, each of `difficulties` used equally often (counts differ by at most one)."""
    if size < 0:
        raise UsageError(f"size must be >= 0, got {size}")
    return [difficulties[i * len(difficulties) // size] for i in range(size)] if size else []


def generate_nsp(task: str, size: int, min_difficulty: int, max_difficulty: int, seed: int) -> list[dict]:
    """`size` rows of `task` with difficulties min..max equally represented, in a seeded random order."""
    if task not in TASKS:
        raise UsageError(f"Unknown NSP task {task!r}; expected one of {TASKS}.")
    if not 1 <= min_difficulty <= max_difficulty:
        raise UsageError(f"Need 1 <= min_difficulty <= max_difficulty, got {min_difficulty}..{max_difficulty}")
    rng = random.Random(seed)
    rows = [
        nsp_example(task, d, rng)
        for d in balanced_difficulties(size, list(range(min_difficulty, max_difficulty + 1)))
    ]
    rng.shuffle(rows)
    return rows


def generate_nsp_splits(
    task: str,
    train_size: int = 25_600,
    validation_size: int = 1_536,
    train_difficulties: tuple[int, int] = (2, 12),
    validation_difficulties: tuple[int, int] = (13, 16),
    seed: int = 0,
) -> dict[str, list[dict]]:
    """Train and validation splits of the paper (§5.1): 25,600 with d = 2..12 and 1,536 with d = 13..16.

    Difficulty is the digit count of the longest given number, so asserting that the difficulties of the splits are
    disjoint asserts that no validation sequence holds a number as short as the longest training one. (Total token
    counts can coincide: in `add` the first number may be short.)
    """
    check_ranges(1, train_difficulties=train_difficulties, validation_difficulties=validation_difficulties)
    splits = {
        "train": generate_nsp(task, train_size, *train_difficulties, seed=seed),
        "validation": generate_nsp(task, validation_size, *validation_difficulties, seed=seed + 1),
    }
    assert_splits_disjoint(splits)
    return splits
