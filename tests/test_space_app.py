"""The Space app (examples/space/app.py) in a real browser: Playwright driving Debian's Chromium."""

import importlib.util
import os
import shutil
import socket

import pytest

gradio = pytest.importorskip("gradio", reason="the app needs gradio: pip install -e '.[demo]'")
sync_api = pytest.importorskip("playwright.sync_api",
                               reason="the browser test needs playwright: pip install -e '.[test]'")
CHROMIUM = next((p for p in map(shutil.which, ("chromium", "chromium-browser", "google-chrome")) if p), None)
if CHROMIUM is None:
    pytest.skip("no Chromium to drive (Debian: apt-get install chromium; .ci/run installs it)", allow_module_level=True)

from huggingface_hub import EvalResult, ModelCard, ModelCardData  # noqa: E402

import lengthgen.modeling  # noqa: E402
from lengthgen.data.ctl import ctl_example, ctl_tables  # noqa: E402
from lengthgen.data.tokenization import digit_tokenizer, word_tokenizer  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location("space_app", os.path.join(REPO, "examples", "space", "app.py"))
space = importlib.util.module_from_spec(_spec)  # the app's file, loaded without putting its folder on sys.path
_spec.loader.exec_module(space)

SHIPPED_NDR = os.path.join(REPO, "checkpoints", "ndr-ctl-backward")  # trained on 1-5 applications
SYMBOLS = [format(i, "03b") for i in range(8)]


def write_release(folder, model, tokenizer, dataset, config, train_difficulties):
    """What `lengthgen release` writes that the app reads: weights, config, tokenizer, a card with model-index and the
    training range."""
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    result = EvalResult(task_type="text-classification", dataset_type=dataset, dataset_name=f"{dataset} ({config})",
                        dataset_config=config, dataset_split="validation", metric_type="accuracy", metric_value=0.5)
    data = ModelCardData(model_name="tiny", eval_results=[result], train_difficulties=list(train_difficulties))
    ModelCard.from_template(data).save(os.path.join(folder, "README.md"))
    return str(folder)


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    import torch

    root = tmp_path_factory.mktemp("releases")
    torch.manual_seed(0)
    tokenizer = word_tokenizer([" ".join(SYMBOLS + list("abcdefghi"))])
    config = lengthgen.modeling.NDRConfig(
        vocab_size=len(tokenizer), hidden_size=16, intermediate_size=32, num_attention_heads=2, num_layers=3,
        id2label=dict(enumerate(SYMBOLS)), label2id={s: i for i, s in enumerate(SYMBOLS)},
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
    )
    ndr = write_release(root / "ndr-ctl", lengthgen.modeling.NDRForSequenceClassification(config), tokenizer, "ctl",
                        "backward", (1, 5))
    digits = digit_tokenizer()
    config = lengthgen.modeling.IBertConfig(
        vocab_size=len(digits), hidden_size=16, intermediate_size=32, num_attention_heads=2, num_hidden_layers=1,
        pad_token_id=digits.pad_token_id,
    )
    # trained on 1-6 digits (the quick-start example's range), not the builder's default 2-12: the page must say 1-6
    ibert = write_release(root / "ibert-nsp", lengthgen.modeling.IBertForMaskedLM(config), digits, "nsp_inductive",
                          "add", (1, 6))
    return ndr, ibert


@pytest.fixture(scope="module")
def page(releases):
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    # what a fresh clone offers (the checkpoints shipped in the repository), then the fixtures' releases
    choices = space.checkpoint_choices([os.path.join(REPO, "checkpoints")])
    assert os.path.relpath(SHIPPED_NDR) in choices
    demo = space.build_app(choices + list(releases))
    demo.launch(server_name="127.0.0.1", server_port=port, prevent_thread_lock=True, css=space.CSS, quiet=True)
    with sync_api.sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = browser.new_page(viewport={"width": 1300, "height": 1000})
        page.goto(f"http://127.0.0.1:{port}/")
        choose_checkpoint(page, os.path.relpath(SHIPPED_NDR))
        page.locator("#task", has_text="ctl (backward)").wait_for()
        yield page
        browser.close()
    demo.close()


def ask(page, problem: str, expected: str) -> str:
    """Type a problem, press Solve, and return the answer area's text once `expected` shows in it."""
    page.locator("#problem textarea").fill(problem)
    page.locator("#solve").click()
    answer = page.locator("#answer")
    sync_api.expect(answer).to_contain_text(expected, timeout=20_000)
    return answer.inner_text().replace("`", "")


def choose_checkpoint(page, name: str):
    box = page.locator("#checkpoint input")
    box.fill(name)
    box.press("Enter")
    page.locator("#load").click()


def test_shipped_ndr_answers_and_draws_its_pictures_in_a_browser(page, tmp_path):
    tables = ctl_tables(8, 9, seed=0)
    # the builder's rows (functions in the order applied) for a problem inside the training range and one past it
    inside = ctl_example(0b101, (3, 0, 1), tables, "backward", bits=3)
    past = ctl_example(0b110, (5, 3, 7, 2, 4, 0, 8, 1, 6), tables, "backward", bits=3)
    assert inside["input"] == "b a d 101" and inside["target"] == format(tables[1][tables[0][tables[3][0b101]]], "03b")
    for row, where in ((inside, "function applications 3, inside the training range 1-5"),
                       (past, "function applications 9, outside the training range 1-5")):
        problem, expected = row["input"], row["target"]
        text = ask(page, problem, f"Correct answer: {expected}")
        model_answer = text.split("Model answer:")[1].split()[0].strip("`")
        assert model_answer == expected and "right" in text  # the shipped model (test 9-10: 1.000 at 14 steps)
        assert where in text
        # the pictures arrive after the answer (the page takes no new problem before)
        for plot in ("#attention", "#gates"):
            page.wait_for_function(
                "sel => { const img = document.querySelector(sel + ' img'); "
                "return img && img.complete && img.naturalWidth > 300 }",
                arg=plot,
            )
    page.screenshot(path=str(tmp_path / "space.png"), full_page=True)
    if os.environ.get("LENGTHGEN_SCREENSHOT"):
        page.screenshot(path=os.environ["LENGTHGEN_SCREENSHOT"], full_page=True)
    assert (tmp_path / "space.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # a drawn problem: the slider starts two past the training range (1-5)
    page.get_by_role("button", name="Draw a problem").click()
    sync_api.expect(page.locator("#answer")).to_contain_text("function applications 7, outside the training range 1-5")
    drawn = page.locator("#problem textarea").input_value().split()
    assert len(drawn) == 8 and drawn[-1] in SYMBOLS and all(c in "abcdefghi" for c in drawn[:-1])


def test_bad_input_is_answered_in_the_page(page, monkeypatch):
    ask(page, "z a 101", "Cannot answer: 'z' is not in the model's vocabulary (000 001")
    ask(page, "a 101 b", "Cannot answer: A backward CTL problem is functions a-i, then a 3-bit symbol")
    ask(page, "a " * 1100 + "101", "1101 tokens (+ 2 framing tokens); this model takes at most 1024")
    choose_checkpoint(page, "/nonexistent/checkpoint")
    ask(page, "b a 101", "Cannot answer: No checkpoint folder '/nonexistent/checkpoint' here")
    # a Hub id that is not at hand (HF_HUB_OFFLINE=1 in the tests) is answered from the cache, with no request
    monkeypatch.setattr(space, "model_info", lambda *args, **kwargs: pytest.fail("asked the Hub while offline"))
    choose_checkpoint(page, "lengthgen/no-such-model")
    ask(page, "b a 101", "Cannot answer: 'lengthgen/no-such-model' is not a folder here, and HF_HUB_OFFLINE is set")


def test_ibert_digits_marked_in_a_browser(page, releases):
    choose_checkpoint(page, releases[1])
    page.locator("#task", has_text="nsp_inductive (add)").wait_for()
    sync_api.expect(page.locator("#task")).to_contain_text("trained on digits 1-6")
    sync_api.expect(page.locator("#attention")).to_be_hidden()  # the NDR's pictures only
    text = ask(page, "123, 4567", "Correct answer: 4690")
    assert "digits 4, inside the training range 1-6" in text
    model_answer = text.split("Model answer:")[1].split()[0].strip("`")
    digits = page.locator("#digits .digit")
    assert digits.count() == 4
    wrong = sum(a != b for a, b in zip(model_answer, "4690"))
    assert page.locator("#digits .digit.wrong").count() == wrong


@pytest.mark.parametrize(
    "dataset, config, params",
    [
        ("ctl", "backward", dict(train_size=300, validation_iid_size=10, validation_size=10, test_size=10)),
        ("ctl", "forward", dict(train_size=300, validation_iid_size=10, validation_size=10, test_size=10)),
        ("listops", None, dict(train_size=200, validation_size=10, test_size=10)),
        ("simple_arithmetic", None, dict(train_size=200, validation_size=10, test_size=10)),
        ("nsp_inductive", "add", dict(train_size=100, validation_size=20)),
        ("nsp_inductive", "reverse", dict(train_size=100, validation_size=20)),
    ],
)
def test_typed_and_drawn_problems_agree_with_the_builders(dataset, config, params, tmp_path):
    """The app's parser gives each builder row's target and difficulty; a drawn problem parses to its own answer."""
    import random

    from lengthgen.data.export import build

    spec = space.TASKS[dataset]
    splits = build(dataset, config, cache_dir=str(tmp_path), **params)[1]
    for row in list(splits["train"].select(range(50))) + list(splits[list(splits)[-1]]):
        typed = row["input"] if dataset != "nsp_inductive" else ", ".join(row["numbers"][:-1])
        problem = spec.parse(typed, config)
        answer = row["target"] if dataset != "nsp_inductive" else row["numbers"][-1]
        assert (problem.input, problem.answer, problem.difficulty) == (row["input"], answer, row["difficulty"])
    rng = random.Random(0)
    for difficulty in (1, 3, 8):
        drawn = spec.draw(difficulty, rng, config)
        assert drawn.difficulty == difficulty
        again = spec.parse(drawn.typed, config)
        assert (again.input, again.answer, again.difficulty) == (drawn.input, drawn.answer, drawn.difficulty)


def test_a_typed_nsp_problem_has_the_builders_difficulty_in_either_order():
    """NSP add's difficulty is its longer given number's digits (the builder draws the second that long, the first
    at most that long), whichever order the numbers are typed in; digits other than 0-9 are refused in words."""
    for text in ("12345678901234, 5", "5, 12345678901234"):
        problem = space.parse_nsp(text, "add")
        assert (problem.difficulty, problem.answer) == (14, "12345678901239")
    assert space.parse_nsp("98765", "reverse").difficulty == 5
    for text in ("1, ³", "1, ٣"):  # a superscript, an Arabic-Indic digit: str.isdigit says yes, the tokenizer no
        with pytest.raises(space.ProblemError, match="non-negative numbers in usual notation"):
            space.parse_nsp(text, "add")


def test_as_a_space_it_serves_where_the_space_says_and_offers_its_variables_checkpoints(monkeypatch):
    """On a Space the app reads GRADIO_SERVER_NAME and GRADIO_SERVER_PORT and offers the checkpoints of
    LENGTHGEN_CHECKPOINTS first; flags win over them."""
    launched = []

    class App:
        def launch(self, **kw):
            launched.append(kw)

    monkeypatch.setattr(space, "build_app", lambda choices: launched.append(choices) or App())
    monkeypatch.setenv("GRADIO_SERVER_NAME", "0.0.0.0")
    monkeypatch.setenv("GRADIO_SERVER_PORT", "7861")
    monkeypatch.setenv("LENGTHGEN_CHECKPOINTS", "someone/ndr-ctl, someone/ibert-nsp-add")
    space.main(["--checkpoint_dir", os.path.join(REPO, "no-such-folder")])
    assert launched[0] == ["someone/ndr-ctl", "someone/ibert-nsp-add"]
    assert (launched[1]["server_name"], launched[1]["server_port"]) == ("0.0.0.0", 7861)
    space.main(["--checkpoint_dir", os.path.join(REPO, "no-such-folder"), "--checkpoint", SHIPPED_NDR,
                "--host", "127.0.0.1"])
    assert launched[2] == [SHIPPED_NDR] and launched[3]["server_name"] == "127.0.0.1"
