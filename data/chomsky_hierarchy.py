"""Tasks of the Chomsky-hierarchy benchmark (Delétang et al., Neural Networks and the Chomsky Hierarchy, ICLR 2023),
split by input length: one `datasets` config per task.

    builder = ChomskyHierarchy(config_name="parity_check", train_size=1000)
    builder.download_and_prepare()
    splits = builder.as_dataset()          # train (lengths 1-40), test (41-500); difficulty = input length

Every task maps a random string to an answer, written from the paper's definitions (its appendix A.3); the level is
the task's in the hierarchy, R (regular), DCF (deterministic context-free) or CS (context-sensitive):

| config | level | answer | input -> target |
| --- | --- | --- | --- |
| parity_check | R | class | binary string -> number of 1s mod 2 |
| even_pairs | R | class | binary string -> number of `01` and `10` pairs mod 2 (0 when they are equally many) |
| modular_arithmetic | R | class | `n op n op ... n`, n in 0-4, op in + - * (usual precedence) -> value mod 5 |
| cycle_navigation | R | class | actions 0 (stay), 1 (up), 2 (down) from 0 on a cycle of 5 -> the last position |
| modular_arithmetic_brackets | DCF | class | expression over 0-4 with + - *, brackets and unary minus -> value mod 5 |
| reverse_string | DCF | sequence | binary string -> the string reversed |
| solve_equation | DCF | class | such an expression with a number replaced by `x`, then `=` v -> the x giving v mod 5 |
| stack_manipulation | DCF | sequence | stack bottom-up, POP/PUSH_0/PUSH_1 actions -> final stack top-down, then END |
| duplicate_string | CS | sequence | binary w -> w w |
| missing_duplicate_string | CS | class | `w w` (binary w) with one symbol replaced by `_` -> that symbol |
| odds_first | CS | sequence | s1 s2 ... sn -> s1 s3 s5 ... s2 s4 ... |
| bucket_sort | CS | sequence | string over 0-4 -> the string sorted |
| binary_addition | CS | sequence | `a + b` (binary, little-endian) -> a + b (little-endian, no leading zeros) |
| binary_multiplication | CS | sequence | `a * b` (binary, little-endian) -> a * b (little-endian, no leading zeros) |
| compute_sqrt | CS | sequence | binary n (little-endian) -> floor(sqrt(n)) (little-endian, no leading zeros) |

The difficulty is the input length n in tokens, the length the paper samples. Every n >= 1 exists but for
these: modular_arithmetic has odd lengths only (an even length is one token short of an expression);
missing_duplicate_string starts at 2 and pads odd lengths with a final `.`; solve_equation, binary_addition and
binary_multiplication start at 3. modular_arithmetic_brackets has every length (2: `- d`, 4: `( - d )` among others,
as the paper notes). A stack_manipulation input of length n > 1 holds a stack of 1 to n - 1 symbols, the rest
actions, and POP on an empty stack does nothing; a solve_equation input is an expression of n - 2 tokens, `=` and a
value; a binary_addition (binary_multiplication) input is `a + b` (`a * b`) with a's digits uniform in 1 .. n - 2
and b's the rest, and a compute_sqrt input an n-digit number, each number a random nonzero string of its digits
(leading zeros allowed), as the authors' code samples them.

The bracket expressions are the paper's: precedence as usual, and a unary minus may open any expression, as in its
example `-(1-2)*(4-3*(-2))`. They are drawn from E -> S | - S, S -> T | S + T | S - T, T -> F | T * F,
F -> number | ( E ), taking at each step, uniformly, one of the productions that can reach the required length, and
a uniform split point. A solve_equation input is such an expression with a uniformly drawn number replaced by `x`
(the paper writes z), then `=` and the expression's value. With multiplication an equation can have several
solutions (the paper's own example `-(z-2)*(4-3*(-2)) = 0` holds for every z, as `4-3*(-2)` = 10 = 0 mod 5), so an
equation is drawn again unless the replaced number is its only solution; that number is the answer.

Where the authors' code (google-deepmind/neural_networks_chomsky_hierarchy) departs from the paper, an option gives
the code's choice:

* odds_first: the code writes s2 s4 ... s1 s3 ... (its 0-based "odd" indices first), against the paper's definition
  and its own docstring example; `odds_first_code_order=True`.
* cycle_navigation: the code's actions are 0 down, 1 stay, 2 up; `cycle_navigation_code_actions=True`.
* modular_arithmetic_brackets and solve_equation: the code brackets every operation, `( a op b )`, puts a unary
  minus on numbers only (`- d`, `( - d )`), and writes solve_equation without multiplication (so every equation has
  one solution); `brackets_code_grammar=True`. (The code picks the number to replace by a uniform position in the
  string and the next number from there, which favours numbers after runs of brackets; here, with either grammar,
  every number of the equation is equally likely.)
* binary_addition, binary_multiplication, compute_sqrt: the paper gives inputs and outputs little-endian (its worked
  examples do not follow this) and the answer as the number, without leading zeros; the answer then has as many
  slots as digits, as the paper gives a model as many empty tokens as the answer has. The code follows the sum with
  END and zeros up to n + 1 tokens and the product with END and zeros up to n tokens (and scores an answer up to
  END: so does the answer-slots head), and writes compute_sqrt's input and root big-endian, the root zero-padded to
  ceil(n / 2) digits; `binary_code_layout=True`.
* stack_manipulation: the paper gives as many empty tokens as the answer has, the final stack and END; the code
  pads the answer with zeros after END up to n + 1 tokens, so that the number of slots does not tell the stack's
  height, and scores it up to END (as the answer-slots head does); `stack_code_layout=True`.

The paper trains on lengths 1-40 and tests on 41-500 and scores a model by its accuracy averaged over test lengths;
here `train_size` and `test_size` rows are spread evenly over the lengths of each split (i.i.d., duplicates allowed,
as the paper samples).
"""

import math
import os
import random
from collections.abc import Callable
from dataclasses import dataclass

from lengthgen.cli import UsageError

from .length_split import LengthSplitBuilder, LengthSplitConfig
from .splits import assert_splits_disjoint, balanced_counts, check_ranges

END = "END"  # the termination token of an answer (stack_manipulation, the binary tasks' code layout)


def is_chomsky_hierarchy(dataset_name: str | None) -> bool:
    """Whether `dataset_name` names these tasks: the builder, or the folder or Hub repository `lengthgen data export`
    writes them to (named `chomsky_hierarchy`)."""
    return bool(dataset_name) and os.path.basename(os.path.normpath(dataset_name)) == "chomsky_hierarchy"


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


def cycle_position(actions: list[str], cycle_length: int = 5, code_actions: bool = False) -> int:
    """Where a walk from position 0 ends on a cycle of `cycle_length` positions: action 0 stays, 1 moves up, 2 moves
    down (the paper's); with `code_actions` 0 moves down, 1 stays, 2 moves up (the authors' code)."""
    steps = {"0": -1, "1": 0, "2": 1} if code_actions else {"0": 0, "1": 1, "2": -1}
    return sum(steps[action] for action in actions) % cycle_length


def cycle_navigation(rng, length, modulus=5, cycle_navigation_code_actions=False, **_):
    actions = [str(rng.randrange(3)) for _ in range(length)]
    return actions, [str(cycle_position(actions, modulus, cycle_navigation_code_actions))]


# --- expressions with brackets (modular_arithmetic_brackets, solve_equation) ---------------------------------------
#
# The paper's expressions: E -> S | - S;  S -> T | S + T | S - T;  T -> F | T * F;  F -> number | ( E ).
# A unary minus opens an expression (the paper's -(1-2)*(4-3*(-2))); a sum, term or factor has any length but 2
# (F: 1 or n + 2 for E of length n >= 1), an expression any length (2: `- d`, 4: `( - d )` among others).


def _splittable(length: int) -> bool:
    """Whether S (or T) of this length can be S op T (T * F): both sides of a length that is not 2."""
    return length == 3 or length >= 5


def _split(rng, length: int) -> tuple[int, int]:
    """A uniform split of `length` into left op right, neither side of length 2."""
    while True:
        left = rng.randint(1, length - 2)
        if left != 2 and length - 1 - left != 2:
            return left, length - 1 - left


def _expression(rng, length, modulus, multiplication, tokens):
    """E of `length` tokens, appended to `tokens`: at each step a production that can reach the length, uniformly."""
    if length == 2 or length >= 4 and rng.randrange(2):
        tokens.append("-")
        length -= 1
    # S: a uniform choice among T, S + T and S - T while the length splits; the terms are generated left to right
    ops, lengths = [], []
    while _splittable(length) and rng.randrange(3):
        length, right = _split(rng, length)
        ops.append(rng.choice("+-"))
        lengths.append(right)
    lengths.append(length)
    for index, term_length in enumerate(reversed(lengths)):
        if index:
            tokens.append(ops[len(ops) - index])
        _term(rng, term_length, modulus, multiplication, tokens)


def _term(rng, length, modulus, multiplication, tokens):
    lengths = []
    while multiplication and _splittable(length) and rng.randrange(2):  # T or T * F
        length, right = _split(rng, length)
        lengths.append(right)
    lengths.append(length)
    for index, factor_length in enumerate(reversed(lengths)):
        if index:
            tokens.append("*")
        if factor_length == 1:
            tokens.append(str(rng.randrange(modulus)))
        else:
            tokens.append("(")
            _expression(rng, factor_length - 2, modulus, multiplication, tokens)
            tokens.append(")")


def _code_expression(rng, length, modulus, multiplication, tokens):
    """The authors' code's expressions: `d`, `- d`, `( d )`, `( - d )` up to length 4, else `( left op right )` with
    the left side's length uniform in 1 .. length - 4."""
    if length <= 4:
        number = ["-"] * (length % 2 == 0) + [str(rng.randrange(modulus))]
        tokens.extend(["(", *number, ")"] if length >= 3 else number)
        return
    left = rng.randint(1, length - 4)
    op = rng.choice("+-*" if multiplication else "+-")
    tokens.append("(")
    _code_expression(rng, left, modulus, multiplication, tokens)
    tokens.append(op)
    _code_expression(rng, length - 3 - left, modulus, multiplication, tokens)
    tokens.append(")")


def bracket_expression(
    rng, length: int, modulus: int = 5, multiplication: bool = True, code_grammar: bool = False
) -> list[str]:
    """A random expression of exactly `length` tokens over the numbers 0 .. modulus - 1."""
    tokens = []
    (_code_expression if code_grammar else _expression)(rng, length, modulus, multiplication, tokens)
    return tokens


def evaluate_expression(tokens: list[str], modulus: int = 5, x: int | None = None) -> int:
    """The value mod `modulus` of an expression with brackets, + - * (usual precedence) and unary minus wherever an
    operand may stand; the token `x` stands for the number `x`. Evaluated with a stack, not recursion."""
    stack = []
    total, sign, term, multiply, negate, expecting = 0, 1, 0, False, False, True
    for token in tokens:
        if token == "(":
            stack.append((total, sign, term, multiply, negate))
            total, sign, term, multiply, negate, expecting = 0, 1, 0, False, False, True
            continue
        if token == ")":
            value = total + sign * term
            total, sign, term, multiply, negate = stack.pop()
        elif token in ("+", "-") and not expecting:
            total, sign, term, expecting = (total + sign * term) % modulus, 1 if token == "+" else -1, 0, True
            continue
        elif token == "-":  # unary minus
            negate = not negate
            continue
        elif token == "*":
            multiply, expecting = True, True
            continue
        else:
            value = x if token == "x" else int(token)
        value = -value if negate else value
        term, multiply, negate, expecting = (term * value if multiply else value) % modulus, False, False, False
    if stack:
        raise ValueError(f"Unbalanced brackets in {' '.join(tokens)!r}.")
    return (total + sign * term) % modulus


def modular_arithmetic_brackets(rng, length, modulus=5, brackets_code_grammar=False, **_):
    tokens = bracket_expression(rng, length, modulus, True, brackets_code_grammar)
    return tokens, [str(evaluate_expression(tokens, modulus))]


def _affine(expression: list[str], modulus: int) -> tuple[int, int]:
    """(a, b) with expression = a * x + b mod `modulus`, for an expression in which `x` occurs once."""
    b = evaluate_expression(expression, modulus, 0)
    return (evaluate_expression(expression, modulus, 1) - b) % modulus, b


def equation_solutions(tokens: list[str], modulus: int = 5) -> list[int]:
    """The values of `x` (once in the equation `expression = value`) for which the equation holds mod `modulus`."""
    equals = tokens.index("=")
    a, b = _affine(tokens[:equals], modulus)
    return [v for v in range(modulus) if (a * v + b - int(tokens[equals + 1])) % modulus == 0]


def solve_equation(rng, length, modulus=5, brackets_code_grammar=False, **_):
    # an expression of length - 2 tokens (the code's without multiplication), a uniformly drawn number of it replaced
    # by x, then `= value`; drawn again unless the replaced number is the only solution
    while True:
        expression = bracket_expression(rng, length - 2, modulus, not brackets_code_grammar, brackets_code_grammar)
        position = rng.choice([i for i, token in enumerate(expression) if token.isdigit()])
        number, expression[position] = int(expression[position]), "x"
        a, b = _affine(expression, modulus)
        if math.gcd(a, modulus) == 1:
            return expression + ["=", str((a * number + b) % modulus)], [str(number)]


def reverse_string(rng, length, **_):
    string = bits(rng, length)
    return string, string[::-1]


def stack_manipulation(rng, length, stack_code_layout=False, **_):
    if length == 1:
        string = bits(rng, 1)
        return string, [*string, END]
    stack = bits(rng, rng.randint(1, length - 1))
    actions = [rng.choice(("POP", "PUSH_0", "PUSH_1")) for _ in range(length - len(stack))]
    final = list(stack)
    for action in actions:
        if action == "POP":
            if final:
                final.pop()
        else:
            final.append(action[-1])
    answer = final[::-1] + [END]
    if stack_code_layout:  # the code's: zeros after END up to length + 1 tokens
        answer += ["0"] * (length + 1 - len(answer))
    return stack + actions, answer


def duplicate_string(rng, length, **_):
    string = bits(rng, length)
    return string, string + string


def number_to_bits(number: int, width: int = 0, little_endian: bool = True) -> list[str]:
    """`number` in base 2, zero-padded to `width` digits; least significant digit first when `little_endian`."""
    digits = list(f"{number:b}".zfill(width))
    return digits[::-1] if little_endian else digits


def bits_to_number(digits: list[str], little_endian: bool = True) -> int:
    return int("".join(digits[::-1] if little_endian else digits), 2)


def binary_arithmetic(tokens: list[str], binary_code_layout: bool = False) -> list[str]:
    """The answer to `a + b` or `a * b` (a and b little-endian): the sum or product little-endian, without leading
    zeros; with `binary_code_layout`, then END and zeros up to input length + 1 (a sum) or input length (a product),
    which the answer-slots head neither scores nor trains on (the authors' code scores up to END, and trains on the
    zeros too)."""
    op = "+" if "+" in tokens else "*"
    split = tokens.index(op)
    first, second = bits_to_number(tokens[:split]), bits_to_number(tokens[split + 1 :])
    answer = number_to_bits(first + second if op == "+" else first * second)
    if binary_code_layout:
        width = len(tokens) + (op == "+")
        answer += [END] + ["0"] * (width - len(answer) - 1)
    return answer


def _binary_operation(rng, length, op, binary_code_layout):
    # `a op b` in `length` tokens: a's digits uniform in 1 .. length - 2; each number a nonzero random string of them
    first = rng.randint(1, length - 2)
    second = length - 1 - first
    a = number_to_bits(rng.randint(1, 2**first - 1), first)
    b = number_to_bits(rng.randint(1, 2**second - 1), second)
    return a + [op] + b, binary_arithmetic(a + [op] + b, binary_code_layout)


def binary_addition(rng, length, binary_code_layout=False, **_):
    return _binary_operation(rng, length, "+", binary_code_layout)


def binary_multiplication(rng, length, binary_code_layout=False, **_):
    return _binary_operation(rng, length, "*", binary_code_layout)


def binary_square_root(tokens: list[str], binary_code_layout: bool = False) -> list[str]:
    """floor(sqrt(n)) of the binary number n: little-endian without leading zeros; with `binary_code_layout` (the
    authors' code) n is big-endian and the root big-endian, zero-padded to ceil(len(tokens) / 2) digits."""
    big_endian = binary_code_layout
    root = math.isqrt(bits_to_number(tokens, not big_endian))
    return number_to_bits(root, (len(tokens) + 1) // 2 if big_endian else 0, not big_endian)


def compute_sqrt(rng, length, binary_code_layout=False, **_):
    tokens = number_to_bits(rng.randint(1, 2**length - 1), length, not binary_code_layout)
    return tokens, binary_square_root(tokens, binary_code_layout)


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
    "cycle_navigation": Task("regular", "class", cycle_navigation),
    "modular_arithmetic_brackets": Task("deterministic context-free", "class", modular_arithmetic_brackets),
    "reverse_string": Task("deterministic context-free", "sequence", reverse_string),
    "solve_equation": Task("deterministic context-free", "class", solve_equation, min_length=3),
    "stack_manipulation": Task("deterministic context-free", "sequence", stack_manipulation),
    "duplicate_string": Task("context-sensitive", "sequence", duplicate_string),
    "missing_duplicate_string": Task("context-sensitive", "class", missing_duplicate_string, min_length=2),
    "odds_first": Task("context-sensitive", "sequence", odds_first),
    "bucket_sort": Task("context-sensitive", "sequence", bucket_sort),
    "binary_addition": Task("context-sensitive", "sequence", binary_addition, min_length=3),
    "binary_multiplication": Task("context-sensitive", "sequence", binary_multiplication, min_length=3),
    "compute_sqrt": Task("context-sensitive", "sequence", compute_sqrt),
}


def task_lengths(task: str, lengths: tuple[int, int]) -> list[int]:
    """The input lengths of `lengths` (inclusive) that the task has."""
    spec = TASKS[task]
    return [
        n for n in range(max(lengths[0], spec.min_length), lengths[1] + 1)
        if not (spec.odd_lengths_only and n % 2 == 0)
    ]


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
    check_ranges(1, train_lengths=train_lengths, test_lengths=test_lengths)
    for key, least in (("modulus", 2), ("vocabulary_size", 1)):
        if task_parameters.get(key, least) < least:
            raise UsageError(f"{key} must be at least {least}, got {task_parameters[key]}.")
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
    modulus: int = 5  # modular_arithmetic, modular_arithmetic_brackets, solve_equation; cycle_navigation's cycle length
    vocabulary_size: int = 5  # bucket_sort
    odds_first_code_order: bool = False  # odds_first: the authors' code's order instead of the paper's
    cycle_navigation_code_actions: bool = False  # cycle_navigation: the code's actions (0 down, 1 stay, 2 up)
    brackets_code_grammar: bool = False  # modular_arithmetic_brackets, solve_equation: the code's expressions
    binary_code_layout: bool = False  # binary_addition, binary_multiplication, compute_sqrt: the code's answers
    stack_code_layout: bool = False  # stack_manipulation: the code's answer, zeros after END up to length + 1 tokens


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
