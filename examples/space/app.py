#!/usr/bin/env python
"""Try lengthgen's trained models in a browser: answers, and for the NDR its attention and copy gates per step.

    pip install -e ".[demo]" && python examples/space/app.py            # http://127.0.0.1:7860
    python examples/space/app.py --checkpoint outputs/release/ndr-ctl-backward --port 7861

Choose a checkpoint (the trained models shipped in the repository's `checkpoints/` are offered first, then release
folders made by `lengthgen release` under `outputs/release/` and the quick-start example's I-BERT; any folder or Hub
id can be typed), type a problem or draw one from the task's generator at a difficulty the slider sets (it goes past the
training range), and see the model's answer beside the correct one:

* an NDR (`ctl`, `listops`, `simple_arithmetic`): the attention map and the copy-gate activations of every step, as
  `examples/plot_ndr.py` draws them, with a control for the number of steps (more than in training lets it go deeper);
* I-BERT (`nsp_inductive` add / copy / reverse): the restored sequence digit by digit, wrong digits marked.

The task comes from the checkpoint's model card (its `model-index` dataset and config) and so does the training range
(its `train_difficulties`). Bad input is answered in the page: a problem that does not parse, a token outside the
model's vocabulary, a problem longer than the model takes, a checkpoint that cannot be loaded (a name that is neither
a folder here nor a Hub repository the Hub confirms fails at once, without the download retries). This folder (app.py,
requirements.txt, README.md) can be pushed as a Space: set its variable LENGTHGEN_CHECKPOINTS to the Hub ids to offer
(comma-separated); it serves where the Space's GRADIO_SERVER_NAME and GRADIO_SERVER_PORT say.
"""

import argparse
import functools
import glob
import html
import os
import random
import string
from dataclasses import dataclass

import gradio as gr
import torch
from huggingface_hub import ModelCard, model_info, try_to_load_from_cache
from huggingface_hub.utils import RepositoryNotFoundError
from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401  (registers the models: no remote code needed)
from lengthgen.data import ctl, listops, nsp, simple_arithmetic
from lengthgen.plots import ndr_step_figures

HERE = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(os.path.dirname(HERE))
# offered in this order: the checkpoints shipped with the repository, release folders, the quick-start example's I-BERT
CHECKPOINT_DIRS = ["checkpoints", "outputs/release", "outputs/nsp_length_generalization/release"]
FIRST = "checkpoints/ndr-ctl-backward"  # the model the README's quick start shows: the page opens on it
# checkpoints to offer first, comma-separated folders or Hub ids: a Space's variable, where no repository is beside
CHECKPOINTS_VARIABLE = "LENGTHGEN_CHECKPOINTS"


class ProblemError(ValueError):
    """Input the page answers with a message instead of a result."""


# ---------------------------------------------------------------------------------------------------------------
# Tasks: parse a typed problem, draw one at a difficulty, know the correct answer (the builders' generators)
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Problem:
    input: str  # space-separated tokens, as the dataset writes them
    answer: str  # the class (NDR tasks) or the last number in usual notation (NSP)
    difficulty: int
    typed: str = ""  # the problem as a user types it (NSP: the given numbers in usual notation); default `input`

    def __post_init__(self):
        self.typed = self.typed or self.input


# the builders' defaults: CTL's tables are those every release was trained on, the other problems are drawn as the
# builders draw them
CTL = ctl.CTLConfig()
CTL_TABLES = ctl.ctl_tables(CTL.num_symbols, CTL.num_functions, seed=CTL.seed)
CTL_BITS = ctl.symbol_bits(CTL.num_symbols)
LISTOPS = listops.ListOpsConfig()
ARITHMETIC = simple_arithmetic.ArithmeticConfig()


def parse_ctl(text: str, direction: str) -> Problem:
    tokens = text.split()
    symbol_text = tokens[0] if direction == "forward" else (tokens[-1] if tokens else "")
    calls = tokens[1:] if direction == "forward" else list(reversed(tokens[:-1]))
    names = string.ascii_lowercase[:CTL.num_functions]  # as ctl_example writes them
    if len(symbol_text) != CTL_BITS or set(symbol_text) - {"0", "1"} or not calls:
        symbol, functions = f"a {CTL_BITS}-bit symbol", f"functions {names[0]}-{names[-1]}"
        order, example = {"forward": (f"{symbol}, then {functions}", "101 d a b"),
                          "backward": (f"{functions}, then {symbol}", "b a d 101")}[direction]
        raise ProblemError(f"A {direction} CTL problem is {order}, e.g. {example!r}; got {text!r}.")
    bad = [c for c in calls if c not in names]
    if bad:
        raise ProblemError(f"CTL functions are {names[0]}-{names[-1]}; {bad[0]!r} is not one.")
    row = ctl.ctl_example(int(symbol_text, 2), tuple(names.index(c) for c in calls), CTL_TABLES, direction, CTL_BITS)
    return Problem(row["input"], row["target"], row["difficulty"])


def draw_ctl(difficulty: int, rng: random.Random, direction: str) -> Problem:
    functions = tuple(rng.randrange(CTL.num_functions) for _ in range(difficulty))
    row = ctl.ctl_example(rng.randrange(CTL.num_symbols), functions, CTL_TABLES, direction, CTL_BITS)
    return Problem(row["input"], row["target"], row["difficulty"])


def parse_listops(text: str, _config=None) -> Problem:
    tokens = text.split()

    def node(position: int) -> tuple[listops.Node, int]:
        if position >= len(tokens):
            raise ProblemError(f"The ListOps problem ends inside an operation: {text!r}.")
        token = tokens[position]
        if token.isdigit() and len(token) == 1:
            return listops.Node([token], int(token), 0, 0), position + 1
        op = token[1:]
        if not token.startswith("[") or op not in listops.OPERATIONS:
            raise ProblemError(f"Expected a digit or one of [{' ['.join(listops.OPERATIONS)} at {token!r}.")
        args, position = [], position + 1
        while position < len(tokens) and tokens[position] != "]":
            arg, position = node(position)
            args.append(arg)
        if position >= len(tokens):
            raise ProblemError(f"Missing ']' for {token!r}.")
        if not args:
            raise ProblemError(f"{token} has no arguments.")
        return listops.apply_operation(op, args), position + 1

    tree, end = node(0) if tokens else (None, 0)
    if tree is None or end != len(tokens) or not tree.depth:
        raise ProblemError("A ListOps problem is one operation in prefix notation, e.g. '[MAX 3 [MIN 4 7 ] 0 ]'.")
    return Problem(" ".join(tree.tokens), str(tree.value), tree.dependency_depth)


def draw_listops(difficulty: int, rng: random.Random, _config=None) -> Problem:
    for _ in range(20_000):
        tree = listops.tree_of_depth(rng, difficulty, difficulty + 2, LISTOPS.p_op, LISTOPS.max_args,
                                     max(LISTOPS.max_length, 15 * difficulty))  # longer, deeper problems
        if tree is not None and tree.dependency_depth == difficulty:
            return Problem(" ".join(tree.tokens), str(tree.value), difficulty)
    raise ProblemError(f"No ListOps problem of dependency depth {difficulty} found; try a lower depth.")


def parse_arithmetic(text: str, _config=None) -> Problem:
    tokens = text.split()

    def expression(position: int) -> tuple[int, int, int]:  # value, depth, next position
        if position < len(tokens) and len(tokens[position]) == 1 and tokens[position].isdigit():
            return int(tokens[position]), 0, position + 1
        if position >= len(tokens) or tokens[position] != "(":
            raise ProblemError(f"Expected a digit or '(' in {text!r} at token {position + 1}.")
        left, left_depth, position = expression(position + 1)
        if position >= len(tokens) or tokens[position] not in simple_arithmetic.OPERATIONS:
            raise ProblemError(f"Expected + or * in {text!r} at token {position + 1}.")
        op = tokens[position]
        right, right_depth, position = expression(position + 1)
        if position >= len(tokens) or tokens[position] != ")":
            raise ProblemError(f"Expected ')' in {text!r} at token {position + 1}.")
        return simple_arithmetic.OPERATIONS[op](left, right), max(left_depth, right_depth) + 1, position + 1

    value, depth, end = expression(0)
    if end != len(tokens) or depth == 0:
        raise ProblemError(f"A problem is one bracketed operation, e.g. '( ( 4 * 7 ) + 2 )'; got {text!r}.")
    return Problem(" ".join(tokens), str(value), depth)


def draw_arithmetic(difficulty: int, rng: random.Random, _config=None) -> Problem:
    tokens, value, depth = simple_arithmetic.expression_of_depth(rng, difficulty, ARITHMETIC.p_subop)
    return Problem(" ".join(tokens), str(value), depth)


def nsp_problem(numbers: list[str]) -> Problem:
    given = [token for number in numbers[:-1] for token in (*nsp.little_endian(number), nsp.DELIMITER)]
    masked = given + [nsp.MASK] * len(numbers[-1])
    # the difficulty is the longest given number's digits (the builder's: NSP add draws the second number that long)
    difficulty = max(len(number) for number in numbers[:-1])
    return Problem(" ".join(masked), numbers[-1], difficulty, typed=", ".join(numbers[:-1]))


def parse_nsp(text: str, task: str) -> Problem:
    numbers = text.replace(",", " ").split()
    wanted = 2 if task == "add" else 1
    if len(numbers) != wanted or not all(n.isascii() and n.isdigit() for n in numbers):
        example = "'123, 4567'" if task == "add" else "'98765'"
        raise ProblemError(f"NSP {task} takes {wanted} non-negative number{'s' if wanted > 1 else ''} in usual "
                           f"notation, e.g. {example}; got {text!r}.")
    numbers = [str(int(n)) for n in numbers]
    answer = {"add": lambda: str(int(numbers[0]) + int(numbers[1])), "copy": lambda: numbers[0],
              "reverse": lambda: numbers[0][::-1]}[task]()
    return nsp_problem(numbers + [answer])


def draw_nsp(difficulty: int, rng: random.Random, task: str) -> Problem:
    return nsp_problem(nsp.nsp_numbers(task, difficulty, rng))


@dataclass
class TaskSpec:
    parse: callable
    draw: callable
    slider_max: int
    difficulty_name: str


TASKS = {
    "ctl": TaskSpec(parse_ctl, draw_ctl, 16, "function applications"),
    "listops": TaskSpec(parse_listops, draw_listops, 10, "dependency depth"),
    "simple_arithmetic": TaskSpec(parse_arithmetic, draw_arithmetic, 10, "depth"),
    "nsp_inductive": TaskSpec(parse_nsp, draw_nsp, 24, "digits"),
}


# ---------------------------------------------------------------------------------------------------------------
# Checkpoints
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Checkpoint:
    name: str
    model: torch.nn.Module
    tokenizer: object
    dataset: str
    config: str | None
    train_range: tuple[int, int] | None  # the card's train_difficulties

    @property
    def spec(self) -> TaskSpec:
        return TASKS[self.dataset]

    @property
    def max_tokens(self) -> int:
        return self.model.config.max_position_embeddings


def locate(name: str) -> str:
    """`name` as a local folder, or a Hub id the Hub (or, offline, the local cache) confirms; ProblemError at once
    otherwise, instead of transformers' download retries."""
    if os.path.isdir(name):
        return name
    looks_like_path = name.startswith((".", "/", "~")) or name.count("/") != 1 or os.sep in name.split("/", 1)[1]
    if looks_like_path:
        raise ProblemError(f"No checkpoint folder {name!r} here (a Hub id is ORG/NAME).")
    if os.environ.get("HF_HUB_OFFLINE", "0").lower() in ("1", "true", "yes", "on"):
        if not isinstance(try_to_load_from_cache(name, "config.json"), str):
            raise ProblemError(f"{name!r} is not a folder here, and HF_HUB_OFFLINE is set with no cached copy of it.")
        return name
    try:
        model_info(name, timeout=10)  # one request, no retries
    except RepositoryNotFoundError:
        raise ProblemError(f"{name!r} is not a folder here, nor a model repository on the Hub.") from None
    except Exception as error:  # no network, DNS, timeout
        raise ProblemError(f"{name!r} is not a folder here, and the Hub cannot be reached to fetch it "
                           f"({type(error).__name__}).") from None
    return name


@functools.lru_cache(maxsize=4)
def load_checkpoint(name: str) -> Checkpoint:
    """A release folder or Hub id -> model, tokenizer, task and training range (from the card); ProblemError naming
    what is wrong."""
    name = (name or "").strip()
    if not name:
        raise ProblemError("Choose a checkpoint: one shipped in checkpoints/, a release folder, the quick-start "
                           "example's (python examples/nsp_length_generalization.py writes one) or a Hub id.")
    name = locate(name)
    try:
        config = AutoConfig.from_pretrained(name)
        tokenizer = AutoTokenizer.from_pretrained(name)
        model_class = {"ndr": AutoModelForSequenceClassification, "inductive_bert": AutoModelForMaskedLM}.get(
            config.model_type
        )
        if model_class is None:
            raise ProblemError(f"{name} is a {config.model_type!r} model; this app shows NDR and I-BERT checkpoints.")
        model = model_class.from_pretrained(name).eval()
        card = ModelCard.load(os.path.join(name, "README.md") if os.path.isdir(name) else name)
    except ProblemError:
        raise
    except Exception as error:  # not a model, corrupt weights: all said in the page
        raise ProblemError(
            f"Cannot load checkpoint {name!r}: {type(error).__name__}: {str(error).splitlines()[0]}"
        ) from error
    results = card.data.eval_results or []
    if not results or results[0].dataset_type not in TASKS:
        raise ProblemError(f"The model card of {name!r} names no dataset this app knows ({', '.join(TASKS)}).")
    trained = card.data.to_dict().get("train_difficulties")
    return Checkpoint(name, model, tokenizer, results[0].dataset_type, results[0].dataset_config,
                      tuple(trained) if trained else None)


def checkpoint_choices(checkpoint_dirs, first=()) -> list[str]:
    """`first`, then the model folders under `checkpoint_dirs` in their order (each once); no Hub ids (they are
    typed)."""
    found = {}
    for folder in checkpoint_dirs:
        for config in sorted(glob.glob(os.path.join(folder, "*", "config.json"))):
            found.setdefault(os.path.realpath(os.path.dirname(config)), os.path.relpath(os.path.dirname(config)))
    local = [found.pop(os.path.realpath(c), c) if os.path.isdir(c) else c for c in first]
    return list(dict.fromkeys(local + list(found.values())))


# ---------------------------------------------------------------------------------------------------------------
# Answering
# ---------------------------------------------------------------------------------------------------------------


def check_tokens(checkpoint: Checkpoint, text: str) -> None:
    """Tokens outside the vocabulary, and problems longer than the model takes, named before anything runs."""
    tokens = text.split()
    if not tokens:
        raise ProblemError("The problem is empty: type one, or draw one with the slider.")
    vocabulary = checkpoint.tokenizer.get_vocab()
    unknown = sorted({t for t in tokens if t not in vocabulary})
    if unknown:
        known = " ".join(sorted(t for t in vocabulary if not (t.startswith("[") and t.endswith("]"))))
        raise ProblemError(f"{', '.join(map(repr, unknown))} {'is' if len(unknown) == 1 else 'are'} not in the model's "
                           f"vocabulary ({known}).")
    if len(tokens) + 2 > checkpoint.max_tokens:
        raise ProblemError(f"The problem is {len(tokens)} tokens (+ 2 framing tokens); this model takes at most "
                           f"{checkpoint.max_tokens}.")


def ibert_digits_html(problem: Problem, predicted: list[str]) -> str:
    """The restored last number digit by digit (usual notation), wrong digits marked with the right one."""
    truth = list(problem.answer)
    shown = list(reversed(predicted))  # the model writes little-endian
    cells = []
    for guess, right in zip(shown, truth):
        if guess == right:
            cells.append(f'<span class="digit right">{html.escape(guess)}</span>')
        else:
            cells.append(f'<span class="digit wrong" title="should be {right}">{html.escape(guess)}'
                         f'<sub>{right}</sub></span>')
    wrong = sum(g != r for g, r in zip(shown, truth))
    verdict = (
        "all digits right" if wrong == 0
        else f"{wrong} of {len(truth)} digits wrong (marked, the right digit below)"
    )
    return f'<div class="restored">{"".join(cells)}</div><p>{verdict}</p>'


def solve(checkpoint_name: str, text: str, num_steps: int | None):
    """Yields (answer markdown, digits HTML, attention figure, gate figure) for the page: the answer first, then the
    NDR's pictures (drawing them takes longer than the answer)."""
    try:
        checkpoint = load_checkpoint(checkpoint_name)
        spec = checkpoint.spec
        if checkpoint.dataset == "nsp_inductive":  # typed as numbers, checked as tokens
            problem = spec.parse(text, checkpoint.config)
            check_tokens(checkpoint, problem.input)
        else:  # typed as tokens: the vocabulary first, then the grammar
            check_tokens(checkpoint, text)
            problem = spec.parse(text, checkpoint.config)
    except ProblemError as error:
        yield f"**Cannot answer:** {error}", "", None, None
        return
    inputs = checkpoint.tokenizer(problem.input, return_tensors="pt")
    steps = int(num_steps) if num_steps else None
    with torch.no_grad():
        if checkpoint.dataset == "nsp_inductive":
            logits = checkpoint.model(**inputs).logits[0]
            masked = inputs["input_ids"][0] == checkpoint.tokenizer.mask_token_id
            predicted = checkpoint.tokenizer.convert_ids_to_tokens(logits[masked].argmax(-1))
            answer = "".join(reversed(predicted))  # the model writes little-endian
            yield verdict_markdown(checkpoint, problem, answer), ibert_digits_html(problem, predicted), None, None
            return
        logits = checkpoint.model(**inputs, num_steps=steps).logits[0]
    answer = checkpoint.model.config.id2label[int(logits.argmax())]
    verdict = verdict_markdown(checkpoint, problem, answer, steps)
    yield verdict, "", None, None
    _, attention, gates = ndr_step_figures(checkpoint.model, checkpoint.tokenizer, problem.input, num_steps=steps)
    yield verdict, "", attention, gates


def verdict_markdown(checkpoint: Checkpoint, problem: Problem, answer: str, steps: int | None = None) -> str:
    mark = "**right**" if answer == problem.answer else "**wrong**"
    where = "the training range is not on the model card"
    if checkpoint.train_range:
        low, high = checkpoint.train_range
        where = f"{'inside' if low <= problem.difficulty <= high else '**outside**'} the training range {low}-{high}"
    lines = [
        f"**Model answer:** `{answer}` &nbsp; **Correct answer:** `{problem.answer}` &nbsp; {mark}",
        f"Problem: `{problem.input}`; {checkpoint.spec.difficulty_name} {problem.difficulty}, {where}.",
    ]
    if checkpoint.model.config.model_type == "ndr":
        trained = checkpoint.model.config.num_layers
        lines.append(f"Steps: {steps or trained} (trained with {trained}).")
    return "\n\n".join(lines)


def draw(checkpoint_name: str, difficulty: int, seed: int | None):
    """A problem from the task's generator at `difficulty`, typed into the box as a user would type it."""
    try:
        checkpoint = load_checkpoint(checkpoint_name)
    except ProblemError as error:
        return "", f"**Cannot draw:** {error}"
    rng = random.Random(seed)
    try:
        problem = checkpoint.spec.draw(int(difficulty), rng, checkpoint.config)
    except ProblemError as error:
        return "", f"**Cannot draw:** {error}"
    return problem.typed, ""


def describe(checkpoint_name: str):
    """Task line and the slider's range for a checkpoint."""
    try:
        checkpoint = load_checkpoint(checkpoint_name)
    except ProblemError as error:
        return f"**Cannot load:** {error}", gr.update(), *[gr.update(visible=False)] * 3
    spec, config = checkpoint.spec, checkpoint.model.config
    task = f"{checkpoint.dataset} ({checkpoint.config})" if checkpoint.config else checkpoint.dataset
    if checkpoint.train_range:
        low, high = checkpoint.train_range
        trained = f"trained on {spec.difficulty_name} {low}-{high}"
    else:
        high, trained = spec.slider_max - 2, "training range not on its model card"
    text = (f"**{config.model_type}** on **{task}**; {trained}. "
            f"Type a problem, or draw one (the slider goes past the training range).")
    is_ndr = config.model_type == "ndr"
    steps = gr.update(visible=is_ndr, value=(config.num_steps or config.num_layers) if is_ndr else None)
    slider = gr.update(minimum=1, maximum=spec.slider_max, value=min(high + 2, spec.slider_max))
    return text, slider, steps, gr.update(visible=is_ndr), gr.update(visible=is_ndr)


CSS = """
.restored { font-family: monospace; font-size: 2em; letter-spacing: 0.15em; }
.digit.right { color: #1a7f37; }
.digit.wrong { color: #cf222e; text-decoration: underline; }
.digit sub { font-size: 0.45em; color: #57606a; }
"""


def build_app(checkpoints: list[str]) -> gr.Blocks:
    with gr.Blocks(title="lengthgen: length generalization, step by step") as app:
        gr.Markdown("# lengthgen: trained on short problems, asked long ones")
        with gr.Row():
            checkpoint = gr.Dropdown(checkpoints, value=checkpoints[0] if checkpoints else None, label="Checkpoint",
                                     allow_custom_value=True, scale=3, elem_id="checkpoint")
            load_button = gr.Button("Load", scale=1, elem_id="load")
        task_line = gr.Markdown(elem_id="task")
        with gr.Row():
            difficulty = gr.Slider(1, 16, value=7, step=1, label="Difficulty of a drawn problem")
            seed = gr.Number(value=0, precision=0, label="Seed")
            draw_button = gr.Button("Draw a problem")
        problem = gr.Textbox(label="Problem", placeholder="e.g. b a d 101 (CTL backward) or 123, 4567 (NSP add)",
                             elem_id="problem")
        num_steps = gr.Slider(1, 48, value=14, step=1, label="NDR steps (num_steps)", visible=False)
        solve_button = gr.Button("Solve", variant="primary", elem_id="solve")
        answer = gr.Markdown(elem_id="answer")
        digits = gr.HTML(elem_id="digits")
        attention = gr.Plot(label="Attention per step", elem_id="attention")
        gates = gr.Plot(label="Copy gates per step", elem_id="gates")

        outputs = [answer, digits, attention, gates]
        for trigger in (app.load, checkpoint.change, load_button.click):
            trigger(describe, checkpoint, [task_line, difficulty, num_steps, attention, gates])
        solve_button.click(solve, [checkpoint, problem, num_steps], outputs)
        problem.submit(solve, [checkpoint, problem, num_steps], outputs)
        draw_button.click(draw, [checkpoint, difficulty, seed], [problem, answer]).success(
            solve, [checkpoint, problem, num_steps], outputs
        )
    return app


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--checkpoint", action="append", default=[],
                        help=f"offered first (repeatable; default: the folders or Hub ids in {CHECKPOINTS_VARIABLE}, "
                             f"comma-separated, else {FIRST})")
    parser.add_argument("--checkpoint_dir", action="append",
                        help="folder of model folders to offer "
                             f"(default: {', '.join(CHECKPOINT_DIRS)} of this repository)")
    parser.add_argument("--host", default=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
                        help="the address to serve on (default: GRADIO_SERVER_NAME, which a Space sets, else "
                             "127.0.0.1; 0.0.0.0 serves other machines)")
    parser.add_argument("--port", type=int, default=int(os.environ.get("GRADIO_SERVER_PORT", 7860)))
    args = parser.parse_args(argv)
    checkpoint_dirs = args.checkpoint_dir or [os.path.join(REPO_ROOT, folder) for folder in CHECKPOINT_DIRS]
    variable = [name.strip() for name in os.environ.get(CHECKPOINTS_VARIABLE, "").split(",") if name.strip()]
    first = args.checkpoint or variable or [path for path in [os.path.join(REPO_ROOT, FIRST)] if os.path.isdir(path)]
    choices = checkpoint_choices(checkpoint_dirs, first)
    build_app(choices).launch(server_name=args.host, server_port=args.port, css=CSS)


if __name__ == "__main__":
    main()
