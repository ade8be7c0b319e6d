"""The Chomsky-hierarchy builder: every task's answer against an independent function written from the paper's
definition, the length split, and pinned fingerprints."""

import collections
import functools
import math
import operator
import random

import pytest

from lengthgen.data.chomsky_hierarchy import (
    TASKS,
    ChomskyHierarchy,
    binary_arithmetic,
    binary_square_root,
    bracket_expression,
    cycle_position,
    equation_solutions,
    evaluate_expression,
    generate_chomsky_splits,
)
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


def cycle_navigation(tokens):
    return [str(sum({"0": 0, "1": 1, "2": -1}[t] for t in tokens) % 5)]  # stay, increase, decrease from position 0


def solve_equation(tokens):
    left, right = " ".join(tokens).split(" = ")
    answers = [str(v) for v in range(5) if eval(left.replace("x", f"({v})").replace(" ", "")) % 5 == int(right)]
    assert len(answers) == 1, tokens  # the answer is determined
    return answers


def little_endian(number):
    return list(bin(number)[:1:-1])  # bin(6) = '0b110' -> ['0', '1', '1']


def read_little_endian(tokens):
    return sum(int(t) << i for i, t in enumerate(tokens))


def binary_operation(tokens, op):
    split = tokens.index(op)
    first, second = read_little_endian(tokens[:split]), read_little_endian(tokens[split + 1 :])
    return little_endian(first + second if op == "+" else first * second)


ANSWERS = {
    "parity_check": parity,
    "even_pairs": even_pairs,
    "modular_arithmetic": modular_arithmetic,
    "reverse_string": lambda tokens: tokens[::-1],
    "stack_manipulation": stack_manipulation,
    "bucket_sort": lambda tokens: sorted(tokens, key=int),
    "missing_duplicate_string": missing_duplicate,
    "odds_first": odds_first,
    "cycle_navigation": cycle_navigation,
    "modular_arithmetic_brackets": modular_arithmetic,  # Python's eval reads brackets and unary minus as usual
    "solve_equation": solve_equation,
    "duplicate_string": lambda tokens: tokens + tokens,
    "binary_addition": lambda tokens: binary_operation(tokens, "+"),
    "binary_multiplication": lambda tokens: binary_operation(tokens, "*"),
    "compute_sqrt": lambda tokens: little_endian(math.isqrt(read_little_endian(tokens))),
}

# the shortest input of a task (default 1); modular_arithmetic has odd lengths only
MIN_LENGTHS = {"missing_duplicate_string": 2, "solve_equation": 3, "binary_addition": 3, "binary_multiplication": 3}

# sha256 of the SMALL splits' rows (seed 0); a change here changes everyone's data
FINGERPRINTS = {
    "binary_addition": "b495aa35d2b02b92bdef216180e9a674e9983a4e469f8fc74ff7114c65cfeb05",
    "binary_multiplication": "454f88541a72defc17babe739137cc0719057099637ed80bc8347af28f031caf",
    "bucket_sort": "270ff9449b84b982feaa2c66effc1644f51a6481b21c36a5d9579ce10aa2cdd8",
    "compute_sqrt": "ab59a5420dd37a568bc627fdde57047588f1b66c33223e41c3d17b8500ddb112",
    "cycle_navigation": "a1b8ed7f9b2f0d22e4d4ed92264371b428cc40d9f57b049f2d4cbe946bfcf29c",
    "duplicate_string": "6968fe568d176f12c49f48065ce99d8fe104768c441d45137fd918b15cff1b30",
    "even_pairs": "8d01f952eaf7af2071f5053fdfb9df9ea4df81697484cf08ceeb11da99a2450f",
    "missing_duplicate_string": "dc0d5d367ac4b1fdc5b371debd1925b9d7e269206da1277d24c739ee4099d8bb",
    "modular_arithmetic": "8389c4a6604e7d2d51d1cb1f973c57e4417c78b311187061af07086a17b098ca",
    "modular_arithmetic_brackets": "eea88c619df4be3ce21059e75d883dabab22fbbc0ef365270526ff4420d55f9e",
    "odds_first": "3bcfed5e872907a03e48d57ef1ec3329be8b67cad71342b1ed1883eba97179b3",
    "parity_check": "fc6e0f045e9df8c8871aa6583d34edfd4f8fd0e3615f854ff4128236d845516d",
    "reverse_string": "3934e49b9a9384582f303982ad61cee5296fa4edc566d2fa4f3b2c5201426b87",
    "solve_equation": "83ae904034b88f5274cc866a02ff6bb941b2a089a2ed141246e9b0e8ab348822",
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
        expected = [n for n in range(max(lo, MIN_LENGTHS.get(task, 1)), hi + 1)
                    if n % 2 or task != "modular_arithmetic"]
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


def test_hand_worked_examples_of_the_arithmetic_and_navigation_tasks():
    # the paper's walk 010211 (stay, up, stay, down, up, up): 0 + 0 + 1 + 0 - 1 + 1 + 1 = 2; seven downs: -7 = 3 mod 5
    assert cycle_position(list("010211")) == 2 and cycle_position(list("2222222")) == 3
    assert cycle_position(list("010211"), code_actions=True) == 4  # the code's 0 down, 1 stay, 2 up: -1 = 4 mod 5
    # the paper's bracket example: -(1-2) * (4-3*(-2)) = 1 * 10 = 0 mod 5
    assert evaluate_expression("- ( 1 - 2 ) * ( 4 - 3 * ( - 2 ) )".split()) == 0
    assert evaluate_expression("( 3 - ( - 4 ) ) * 2 - 1 * ( 4 + 4 )".split()) == 1  # 7 * 2 - 8 = 6
    assert evaluate_expression("( ( 1 + - 2 ) * ( - 3 ) )".split()) == 3  # the code's grammar: (-1) * (-3)
    assert evaluate_expression("- 2 * 3 + 4".split(), modulus=7) == 5  # -6 + 4 = -2
    # (x + 3) * 2 = 1: 2x + 6 = 1, 2x = 0, x = 0; 4 - 3x = 2: 3x = 2, x = 4 (12 = 2); the paper's own example holds
    # for every x, since 4 - 3 * (-2) = 10 = 0 mod 5
    assert equation_solutions("( x + 3 ) * 2 = 1".split()) == [0]
    assert equation_solutions("4 - x * 3 = 2".split()) == [4]
    assert equation_solutions("- ( x - 2 ) * ( 4 - 3 * ( - 2 ) ) = 0".split()) == [0, 1, 2, 3, 4]
    # little-endian: 10010 + 101 = 9 + 5 = 14 = 0111; 100 * 10110 = 1 * 13 = 13 = 1011
    assert binary_arithmetic("1 0 0 1 0 + 1 0 1".split()) == "0 1 1 1".split()
    assert binary_arithmetic("1 0 0 * 1 0 1 1 0".split()) == "1 0 1 1".split()
    # the code's examples: 001 + 01101 = 4 + 22 = 26 = 01011, END, zeros up to 10 tokens; 001 * 01101 = 88 = 0001101,
    # END, zeros up to 9 tokens
    assert binary_arithmetic("0 0 1 + 0 1 1 0 1".split(), binary_code_layout=True) == "0 1 0 1 1 END 0 0 0 0".split()
    assert binary_arithmetic("0 0 1 * 0 1 1 0 1".split(), binary_code_layout=True) == "0 0 0 1 1 0 1 END 0".split()
    # little-endian 100101 = 1 + 8 + 32 = 41, floor(sqrt(41)) = 6 = 011; big-endian (the code) 100101 = 37 -> 6 = 110,
    # and 000111 = 7 -> 2 = 010, padded to three digits
    assert binary_square_root("1 0 0 1 0 1".split()) == "0 1 1".split()
    assert binary_square_root("1 0 0 1 0 1".split(), binary_code_layout=True) == "1 1 0".split()
    assert binary_square_root("0 0 0 1 1 1".split(), binary_code_layout=True) == "0 1 0".split()
    # duplicate_string: w -> w w
    tokens, target = TASKS["duplicate_string"].generate(random.Random(0), 4)
    assert len(tokens) == 4 and target == tokens + tokens
    assert ANSWERS["duplicate_string"]("1 0 1".split()) == "1 0 1 1 0 1".split()


def test_bracket_expressions_have_every_length():
    rng = random.Random(0)
    for length in range(1, 40):
        for code_grammar in (False, True):
            tokens = bracket_expression(rng, length, code_grammar=code_grammar)
            assert len(tokens) == length and evaluate_expression(tokens) == eval("".join(tokens)) % 5
    # length 2 is `- d` and 4 in the code's grammar `( - d )`, as the paper notes
    assert bracket_expression(rng, 2)[0] == "-" and bracket_expression(rng, 4, code_grammar=True)[:2] == ["(", "-"]


def number(token):
    return token.isdigit() or token == "x"


def code_grammar(tokens, i=0):
    """The end of the authors' code's expression that starts at i: d, - d, ( d ), ( - d ) or ( left op right )."""
    if tokens[i] == "-" and number(tokens[i + 1]):
        return i + 2
    if number(tokens[i]):
        return i + 1
    assert tokens[i] == "("
    for inner in ([tokens[i + 1]], tokens[i + 1 : i + 3]):
        if all(t == "-" for t in inner[:-1]) and number(inner[-1]) and tokens[i + 1 + len(inner)] == ")":
            return i + 2 + len(inner)
    middle = code_grammar(tokens, i + 1)
    assert tokens[middle] in "+-*"
    end = code_grammar(tokens, middle + 1)
    assert tokens[end] == ")"
    return end + 1


def test_the_authors_code_choices():
    rows = generate_chomsky_splits("cycle_navigation", cycle_navigation_code_actions=True, **SMALL)["train"]
    assert all(row["target"] == str(sum(int(t) - 1 for t in row["input"].split()) % 5) for row in rows)
    splits = {task: generate_chomsky_splits(task, brackets_code_grammar=True, **SMALL)["test"]
              for task in ("modular_arithmetic_brackets", "solve_equation")}
    for task, rows in splits.items():
        for row in rows:
            tokens = row["input"].split()
            expression = tokens[:-2] if task == "solve_equation" else tokens
            assert code_grammar(expression) == len(expression), row
            assert row["target"].split() == ANSWERS[task](tokens)
    assert any("*" in row["input"] for row in splits["modular_arithmetic_brackets"])
    assert not any("*" in row["input"] for row in splits["solve_equation"])  # the code's equations do not multiply
    assert any("*" in row["input"] for row in generate_chomsky_splits("solve_equation", **SMALL)["test"])
    for task in ("binary_addition", "binary_multiplication", "compute_sqrt"):
        for row in generate_chomsky_splits(task, binary_code_layout=True, **SMALL)["test"]:
            tokens, target = row["input"].split(), row["target"].split()
            if task == "compute_sqrt":  # big-endian, the root padded to ceil(n / 2) digits
                assert len(target) == (len(tokens) + 1) // 2
                assert int("".join(target), 2) == math.isqrt(int("".join(tokens), 2))
            else:
                assert len(target) == len(tokens) + (task == "binary_addition")
                end = target.index("END")
                assert target[:end] == ANSWERS[task](tokens) and set(target[end + 1 :]) <= {"0"}
    # stack manipulation in the code's layout: the final stack top to bottom, END, then zeros up to n + 1 tokens
    rows = generate_chomsky_splits("stack_manipulation", stack_code_layout=True, **SMALL)["test"]
    for row in rows:
        tokens, target = row["input"].split(), row["target"].split()
        end = target.index("END") + 1
        assert len(target) == len(tokens) + 1 and target[:end] == ANSWERS["stack_manipulation"](tokens), row
        assert set(target[end:]) <= {"0"}
    assert any(row["target"].split()[-1] == "0" for row in rows)


def test_long_inputs():
    """The paper's longest test inputs: big numbers (Python's integers) and deep expressions."""
    lengths = dict(train_size=3, train_lengths=(1, 3), test_size=6, test_lengths=(495, 500))
    for task in ("binary_addition", "binary_multiplication", "compute_sqrt", "duplicate_string", "cycle_navigation"):
        for row in generate_chomsky_splits(task, **lengths)["test"]:
            assert row["target"].split() == ANSWERS[task](row["input"].split())
    for task in ("modular_arithmetic_brackets", "solve_equation"):
        for row in generate_chomsky_splits(task, **lengths)["test"]:
            tokens = row["input"].split()
            assert len(tokens) == row["length"] >= 495
            if task == "solve_equation":
                assert equation_solutions(tokens) == [int(row["target"])]
            else:
                assert evaluate_expression(tokens) == int(row["target"])


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
    with pytest.raises(ValueError, match="no input of length 14-14"):  # modular arithmetic has odd lengths only
        generate_chomsky_splits("modular_arithmetic", **{**SMALL, "test_lengths": (14, 14)})
    with pytest.raises(ValueError, match="no input of length 1-2"):
        generate_chomsky_splits("binary_addition", **{**SMALL, "train_lengths": (1, 2)})
    with pytest.raises(ValueError, match=r"train_lengths \[1, 12\] and test_lengths \[12, 20\] overlap at 12-12"):
        generate_chomsky_splits("parity_check", **{**SMALL, "test_lengths": (12, 20)})
    with pytest.raises(ValueError, match=r"test_lengths must be \[low, high\] with 1 <= low <= high, got \[30, 13\]"):
        generate_chomsky_splits("parity_check", **{**SMALL, "test_lengths": (30, 13)})
    with pytest.raises(ValueError, match=r"train_lengths must be \[low, high\] with 1 <= low <= high, got \[0, 12\]"):
        generate_chomsky_splits("parity_check", **{**SMALL, "train_lengths": (0, 12)})  # no string has length 0
    with pytest.raises(ValueError, match="modulus must be at least 2, got 0"):
        generate_chomsky_splits("cycle_navigation", **SMALL, modulus=0)
    with pytest.raises(ValueError, match="vocabulary_size must be at least 1, got 0"):
        generate_chomsky_splits("bucket_sort", **SMALL, vocabulary_size=0)
    with pytest.raises(ValueError, match="parity_check"):
        ChomskyHierarchy(config_name="parity")
