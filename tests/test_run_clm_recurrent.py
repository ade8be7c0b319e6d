"""Long-document corpora (lengthgen.data.long_documents) and the recurrent LM training of examples/run_clm_recurrent.py
(lengthgen.training.causal_lm) on small local files in PG-19's and WikiText-103's formats."""

import json
import math
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import datasets
import pytest
import torch
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    GPT2Config,
    GPT2LMHeadModel,
    LlamaConfig,
    LlamaForCausalLM,
    Qwen3_5ForCausalLM,
    Qwen3_5TextConfig,
)

from lengthgen.data.long_documents import (
    first_books,
    load_documents,
    tokenize_documents,
    wikitext_documents,
)
from lengthgen.cli import UsageError
from lengthgen.data.tokenization import word_tokenizer
from lengthgen.modeling import (
    CausalLMWithRecurrence,
    GPT2WithRecurrence,
    GPT2WithRecurrenceConfig,
    flops_per_token,
)
from lengthgen.training import causal_lm
from lengthgen.training.windows import document_runs


def run_clm_recurrent(argv) -> dict:
    """examples/run_clm_recurrent.py's work, in this process: the metrics."""
    return causal_lm.train_and_evaluate(*causal_lm.parse_args(argv))

WORDS = "the a of king queen river town said went came , . ; and was were old new".split()


def text(rng, words):
    return " ".join(rng.choice(WORDS) for _ in range(words)) + "\n"


def write_pg19(root: Path):
    """PG-19's own layout (a folder of <id>.txt books per split) and a parquet mirror in the Hub layout."""
    rng = random.Random(0)
    books = {}
    for split, names in (("train", ["30", "10", "200"]), ("validation", ["7"]), ("test", ["8", "9"])):
        (root / split).mkdir(parents=True)
        for name in names:
            books[(split, name)] = "".join(text(rng, 25) for _ in range(4 + int(name) % 5))
            (root / split / f"{name}.txt").write_text(books[(split, name)])
    mirror = root / "mirror" / "data"
    mirror.mkdir(parents=True)
    for split in ("train", "validation"):
        rows = [{"short_book_title": f"Book {n}", "publication_date": 1900, "url": f"http://www.gutenberg.org/ebooks/{n}",
                 "text": t} for (s, n), t in books.items() if s == split]
        datasets.Dataset.from_list(rows).to_parquet(str(mirror / f"{split}-00000-of-00001.parquet"))
    return books


def write_wikitext(root: Path):
    """wiki.{train,valid,test}.raw: articles opening with ' = Title = ', sections ' = = Section = = '."""
    rng = random.Random(1)
    root.mkdir(parents=True, exist_ok=True)
    articles = {}
    for split, count in (("train", 3), ("valid", 2), ("test", 1)):
        lines = []
        for index in range(count):
            title = f" = {split.title()} Article {index} = \n"
            body = [" \n", title, " \n", " " + text(rng, 30), " \n", " = = Section = = \n", " \n", " " + text(rng, 40)]
            articles[(split, index)] = "".join(body[1:])
            lines += body
        (root / f"wiki.{split}.raw").write_text("".join(lines))
    return articles


def tiny_setup(tmp_path: Path, texts):
    tokenizer = word_tokenizer(texts)
    tokenizer.save_pretrained(tmp_path / "tokenizer")
    config = GPT2Config(n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0)
    config.save_pretrained(tmp_path / "config")
    return tokenizer


def test_wikitext_documents_split_at_article_headings():
    lines = [" \n", " = A = \n", " \n", " x y . \n", " = = B = = \n", " z \n", " = C = \n", " w \n"]
    assert list(wikitext_documents(lines)) == [
        {"name": "A", "text": " = A = \n \n x y . \n = = B = = \n z \n"},
        {"name": "C", "text": " = C = \n w \n"},
    ]


@pytest.mark.parametrize("window, overlap, k, length", [(4, 0, 2, 23), (4, 1, 2, 23), (5, 3, 3, 40), (4, 1, 20, 9)])
def test_document_runs_train_every_token_at_most_once(window, overlap, k, length):
    """Each run is at most K windows long; each token is a predicted label (not -100, not a run's first position)
    in exactly one run, except the document's first token and, with o = 0, the first token of each later run."""
    ids = list(range(100, 100 + length))
    runs = document_runs({"input_ids": [ids]}, window, overlap, k)
    span = k * (window - overlap)
    predicted = []
    for index, (run, labels) in enumerate(zip(runs["input_ids"], runs["labels"])):
        assert run == ids[index * span: index * span + span + overlap]
        predicted += [label for label in labels[1:] if label != -100]
    unpredicted = {ids[0]} | ({ids[i] for i in range(span, length, span)} if overlap == 0 else set())
    assert sorted(predicted) == [t for t in ids if t not in unpredicted]


def test_pg19_local_folder_mirror_and_first_books(tmp_path):
    books = write_pg19(tmp_path)
    folder = load_documents("pg19", data_files={"train": str(tmp_path / "train")})["train"]
    assert folder["name"] == ["10.txt", "200.txt", "30.txt"] and folder[0]["text"] == books[("train", "10")]
    # by file name: "10.txt" < "200.txt" < "30.txt", whatever the stored order
    for streaming in (False, True):
        mirror = load_documents("pg19", str(tmp_path / "mirror"), streaming=streaming, max_train_books=2)["train"]
        assert sorted(row["url"].rsplit("/", 1)[1] for row in mirror) == ["10", "200"]
    with pytest.raises(ValueError, match="corpus must be one of"):
        load_documents("pg20", data_files={"train": str(tmp_path / "train")})
    with pytest.raises(ValueError, match="Unknown split"):
        load_documents("pg19", data_files={"dev": str(tmp_path / "train")})
    with pytest.raises(ValueError, match="name"):
        first_books(datasets.Dataset.from_list([{"text": "x"}]), 1)


def test_wikitext_local_files_and_hub_rows_give_the_same_articles(tmp_path):
    articles = write_wikitext(tmp_path / "raw")
    raw = (tmp_path / "raw" / "wiki.valid.raw").read_text()
    local = load_documents("wikitext103", data_files={"validation": str(tmp_path / "raw" / "wiki.valid.raw")})
    assert local["validation"]["name"] == ["Valid Article 0", "Valid Article 1"]
    for document, index in zip(local["validation"]["text"], (0, 1)):
        assert document.startswith(articles[("valid", index)])  # the blank line before the next title stays with it
    assert "".join(local["validation"]["text"]) == raw[len(" \n"):]
    # the Hub stores one line per row (Salesforce/wikitext): same articles
    lines = raw.splitlines(keepends=True)
    hub = tmp_path / "hub" / "wikitext-103-raw-v1"
    hub.mkdir(parents=True)
    datasets.Dataset.from_dict({"text": lines}).to_parquet(str(hub / "validation-00000-of-00001.parquet"))
    from_rows = load_documents("wikitext103", data_files={"validation": str(hub / "validation-00000-of-00001.parquet")})
    assert from_rows["validation"]["text"] == local["validation"]["text"]


def test_tokenize_documents_prepends_bos_and_counts_words_of_the_kept_tokens():
    tokenizer = word_tokenizer(WORDS)
    batch = {"text": ["the king said , the queen went", "old town"]}
    whole = tokenize_documents(batch, tokenizer)
    assert whole["num_words"] == [7, 2] and whole["num_tokens"] == [7, 2]
    assert whole["input_ids"][1] == (
        [tokenizer.bos_token_id] + tokenizer("old town", add_special_tokens=False)["input_ids"]
    )
    first = tokenize_documents(batch, tokenizer, max_tokens=3)
    assert first["num_words"] == [3, 2] and first["num_tokens"] == [3, 2]


def whole_document_nll(model, input_ids):
    """Independent reference: one forward call over the whole document, no batching, no chunks."""
    with torch.no_grad():
        out = model(torch.tensor([input_ids]), labels=torch.tensor([input_ids]))
    return out.loss.item() * out.num_predicted_tokens, out.num_predicted_tokens


@pytest.mark.parametrize("corpus, use_recurrence", [("pg19", True), ("wikitext103", True), ("wikitext103", False)])
def test_run_clm_recurrent_end_to_end(tmp_path, monkeypatch, corpus, use_recurrence):
    monkeypatch.chdir(tmp_path)
    if corpus == "pg19":
        books = write_pg19(tmp_path / "pg19")
        files = ["--train_file", str(tmp_path / "pg19" / "train"),
                 "--validation_file", str(tmp_path / "pg19" / "validation"),
                 "--test_file", str(tmp_path / "pg19" / "test"), "--max_eval_tokens", "50", "--max_train_books", "2",
                 "--gradient_checkpointing", "--streaming"]
        texts = list(books.values())
    else:
        articles = write_wikitext(tmp_path / "wikitext")
        raw = tmp_path / "wikitext"
        files = ["--train_file", str(raw / "wiki.train.raw"), "--validation_file", str(raw / "wiki.valid.raw"),
                 "--test_file", str(raw / "wiki.test.raw")]
        texts = list(articles.values())
    tiny_setup(tmp_path, texts)
    output = tmp_path / "out"
    metrics = run_clm_recurrent([
        "--config_name", str(tmp_path / "config"), "--tokenizer_name", str(tmp_path / "tokenizer"),
        "--corpus", corpus, *files, "--window_size", "8", "--overlap", "2", "--insertion_layer", "1",
        "--windows_per_example", "3", "--use_recurrence", str(use_recurrence),
        "--output_dir", str(output), "--do_train", "--do_eval", "--do_predict", "--max_steps", "6",
        "--per_device_train_batch_size", "2", "--per_device_eval_batch_size", "2", "--learning_rate", "1e-3",
        "--eval_every_tokens", "60", "--eval_overlaps", "2", "0", "--eval_chunk_windows", "2",
        "--eval_strategy", "steps", "--load_best_model_at_end", "--metric_for_best_model", "loss",
        "--report_to", "none", "--seed", "0",
    ])
    model = AutoModelForCausalLM.from_pretrained(output).eval()
    assert model.config.use_recurrence == use_recurrence and model.config.overlap == 2
    assert json.loads((output / "all_results.json").read_text()) == pytest.approx(metrics)
    assert (output / "checkpoint-6").is_dir() and "perplexity per word" in (output / "README.md").read_text()
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    assert [entry["step"] for entry in history if "eval_loss" in entry] == [2, 4, 6]  # every 60 tokens: 2 steps of 36

    # the Trainer's evaluation (batched, padded, chunked, sharded) equals each whole document in one call
    validation = load_documents(corpus, data_files={"validation": files[files.index("--validation_file") + 1]})
    max_tokens = 50 if corpus == "pg19" else None
    docs = validation["validation"].map(tokenize_documents, batched=True, fn_kwargs={
        "tokenizer": AutoTokenizer.from_pretrained(output), "max_tokens": max_tokens})
    for overlap in (2, 0):
        model.config.overlap = overlap
        nll, count = map(sum, zip(*(whole_document_nll(model, ids) for ids in docs["input_ids"])))
        prefix = f"eval_overlap{overlap}"
        assert metrics[f"{prefix}_tokens"] == count == sum(docs["num_tokens"])
        assert metrics[f"{prefix}_words"] == sum(docs["num_words"])
        assert metrics[f"{prefix}_loss"] == pytest.approx(nll / count, rel=1e-5)
        assert metrics[f"{prefix}_perplexity_per_word"] == pytest.approx(
            math.exp(nll / sum(docs["num_words"])), rel=1e-5
        )
    # the test split too, at the model's overlap, each document whole (--max_eval_tokens cuts validation documents)
    test = load_documents(corpus, data_files={"test": files[files.index("--test_file") + 1]})
    docs = test["test"].map(tokenize_documents, batched=True, fn_kwargs={
        "tokenizer": AutoTokenizer.from_pretrained(output), "max_tokens": None})
    model.config.overlap = 2
    nll, count = map(sum, zip(*(whole_document_nll(model, ids) for ids in docs["input_ids"])))
    assert metrics["test_overlap2_tokens"] == count and metrics["test_overlap2_loss"] == pytest.approx(nll / count,
                                                                                                        rel=1e-5)
    for overlap in (2, 0):  # the cost of reading at each overlap, as the paper's Tables 1-2 count it
        assert metrics[f"eval_overlap{overlap}_flops_per_token"] == pytest.approx(
            flops_per_token(model.config, 8, overlap))


@pytest.mark.parametrize("name", ["gpt2-recurrent-pg19", "gpt2-recurrent-wikitext103"])
def test_hub_configs_hold_the_papers_settings_and_apply_to_a_gpt2_checkpoint(name, tmp_path):
    folder = Path(__file__).resolve().parents[1] / "hub_configs" / name
    config = AutoConfig.from_pretrained(folder)
    assert (config.model_type, config.window_size, config.overlap, config.insertion_layer,
            config.recurrence_hidden_size, config.recurrence_num_hidden_layers, config.n_layer, config.n_embd) == \
        ("gpt2_recurrent", 300, 0, 1, 200, 3, 12, 768)  # l_ins = 2 counts blocks from 1 (§3.1): index 1
    assert flops_per_token(config, 300, 0) == pytest.approx(1.75e8, rel=0.01)  # Tables 1-2, overlap 0
    assert not hasattr(config, "training_hyperparameters")  # the recipe is the script's defaults, not the config's
    # §5's recipe as the defaults: 2 epochs, linear warm-up over 100 steps to a constant rate, K = 20 windows
    _, data, training = causal_lm.parse_args(["--corpus", "pg19", "--output_dir", str(tmp_path / "x")])
    assert (training.num_train_epochs, training.warmup_steps, training.lr_scheduler_type, data.windows_per_example) \
        == (2, 100, "constant_with_warmup", 20)
    # the preset on a (tiny) GPT-2 checkpoint: GPT-2's weights kept, recurrence fields from the preset, the command
    # line wins
    torch.manual_seed(0)
    gpt2 = GPT2LMHeadModel(GPT2Config(n_positions=320, n_embd=32, n_layer=3, n_head=2, vocab_size=60))
    gpt2.save_pretrained(tmp_path / "gpt2")
    arguments = causal_lm.RecurrentLMArguments(model_name_or_path=str(tmp_path / "gpt2"), config_name=str(folder),
                                                 overlap=5)
    model = causal_lm.load_model(arguments, tokenizer=None)
    assert (model.config.window_size, model.config.overlap, model.config.insertion_layer,
            model.config.recurrence_hidden_size, model.config.n_embd) == (300, 5, 1, 200, 32)
    for key, value in gpt2.state_dict().items():
        torch.testing.assert_close(model.state_dict()[key], value, rtol=0, atol=0)


@pytest.mark.parametrize("memory_tokens", [0, 2])
def test_run_clm_recurrent_wraps_any_causal_lm_checkpoint(tmp_path, monkeypatch, memory_tokens):
    """A plain Llama checkpoint becomes a CausalLMWithRecurrence (h_prev, or memory tokens), keeps its weights in the
    first window, trains, and its evaluation equals each whole document read in one call."""
    monkeypatch.chdir(tmp_path)
    articles = write_wikitext(tmp_path / "wikitext")
    tokenizer = tiny_setup(tmp_path, list(articles.values()))
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64,
                                         num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=32))
    llama.save_pretrained(tmp_path / "llama")
    raw = tmp_path / "wikitext"
    output = tmp_path / "out"
    metrics = run_clm_recurrent([
        "--model_name_or_path", str(tmp_path / "llama"), "--tokenizer_name", str(tmp_path / "tokenizer"),
        "--corpus", "wikitext103", "--train_file", str(raw / "wiki.train.raw"),
        "--validation_file", str(raw / "wiki.valid.raw"), "--window_size", "8", "--insertion_layer", "1",
        "--num_memory_tokens", str(memory_tokens), "--windows_per_example", "3", "--output_dir", str(output),
        "--do_train", "--do_eval", "--max_steps", "3", "--per_device_train_batch_size", "2",
        "--per_device_eval_batch_size", "2", "--report_to", "none", "--seed", "0",
    ])
    model = AutoModelForCausalLM.from_pretrained(output).eval()
    assert model.config.model_type == "causal_lm_recurrent" and model.config.num_memory_tokens == memory_tokens
    assert model.config.decoder_config["model_type"] == "llama"
    validation = load_documents("wikitext103", data_files={"validation": str(raw / "wiki.valid.raw")})
    docs = validation["validation"].map(tokenize_documents, batched=True, fn_kwargs={"tokenizer": tokenizer})
    nll, count = map(sum, zip(*(whole_document_nll(model, ids) for ids in docs["input_ids"])))
    assert metrics["eval_overlap0_loss"] == pytest.approx(nll / count, rel=1e-5)
    per_position = 2 * 2 * (4 * 32 * 32 + 3 * 32 * 64) + 2 * 2 * (8 + 2 * memory_tokens) * 32  # by hand: SwiGLU
    assert metrics["eval_overlap0_flops_per_token"] == pytest.approx(per_position * (8 + 2 * memory_tokens) / 8)


def test_run_clm_recurrent_carries_a_hybrids_layer_states(tmp_path, monkeypatch):
    """A Qwen3.5 checkpoint (gated DeltaNet, attention) with `--carry_layer_states`: trains, saves the field, and its
    evaluation equals each whole document read in one call, which differs from reading it without carried states."""
    monkeypatch.chdir(tmp_path)
    articles = write_wikitext(tmp_path / "wikitext")
    tokenizer = tiny_setup(tmp_path, list(articles.values()))
    torch.manual_seed(0)
    Qwen3_5ForCausalLM(Qwen3_5TextConfig(
        vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, head_dim=8, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
        linear_value_head_dim=8, max_position_embeddings=32, layer_types=["linear_attention", "full_attention"],
    )).save_pretrained(tmp_path / "qwen3_5")
    raw = tmp_path / "wikitext"
    metrics = run_clm_recurrent([
        "--model_name_or_path", str(tmp_path / "qwen3_5"), "--tokenizer_name", str(tmp_path / "tokenizer"),
        "--corpus", "wikitext103", "--train_file", str(raw / "wiki.train.raw"),
        "--validation_file", str(raw / "wiki.valid.raw"), "--window_size", "8", "--overlap", "0",
        "--insertion_layer", "1", "--carry_layer_states", "True", "--windows_per_example", "3",
        "--output_dir", str(tmp_path / "out"), "--do_train", "--do_eval", "--max_steps", "3",
        "--per_device_train_batch_size", "2", "--per_device_eval_batch_size", "2", "--report_to", "none",
        "--seed", "0",
    ])
    model = AutoModelForCausalLM.from_pretrained(tmp_path / "out").eval()
    assert model.config.carry_layer_states and model.config.decoder_config["model_type"] == "qwen3_5_text"
    validation = load_documents("wikitext103", data_files={"validation": str(raw / "wiki.valid.raw")})
    docs = validation["validation"].map(tokenize_documents, batched=True, fn_kwargs={"tokenizer": tokenizer})
    nll, count = map(sum, zip(*(whole_document_nll(model, ids) for ids in docs["input_ids"])))
    assert metrics["eval_overlap0_loss"] == pytest.approx(nll / count, rel=1e-5)
    model.config.carry_layer_states = False
    afresh, _ = map(sum, zip(*(whole_document_nll(model, ids) for ids in docs["input_ids"])))
    assert abs(afresh - nll) > 1e-5 * nll  # tiny and random: its DeltaNet layer moves the loss by 1e-4


@pytest.mark.parametrize("flag", ["num_memory_tokens", "carry_layer_states"])
def test_memory_tokens_or_carried_states_on_a_gpt2_checkpoint_are_refused(tmp_path, flag):
    GPT2LMHeadModel(GPT2Config(n_positions=16, n_embd=32, n_layer=2, n_head=2)).save_pretrained(tmp_path / "gpt2")
    arguments = causal_lm.RecurrentLMArguments(model_name_or_path=str(tmp_path / "gpt2"), **{flag: 2})
    with pytest.raises(ValueError, match=f"--{flag} needs a CausalLMWithRecurrence"):
        causal_lm.load_model(arguments, tokenizer=None)


ACCELERATE_CONFIGS = Path(__file__).resolve().parents[1] / "examples" / "accelerate"


def tiny_recurrent_models(root: Path, vocab: int = 40) -> list[Path]:
    """A Llama with h_prev (hooks at l_ins) and a GPT-2 with h_prev, each in root/<name>/model, and three global
    steps of two micro-batches (one per process) in root/<name>/batches.pt: 20 tokens = 3 windows of 8 with overlap
    2, the second row padded; the second micro-batch 12 tokens (2 windows); and three documents to evaluate."""
    torch.manual_seed(0)
    llama = LlamaForCausalLM(LlamaConfig(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                         num_attention_heads=4, max_position_embeddings=32))
    models = {
        "llama": CausalLMWithRecurrence.wrap(llama, window_size=8, overlap=2, insertion_layer=1),
        "gpt2": GPT2WithRecurrence(GPT2WithRecurrenceConfig(
            vocab_size=vocab, n_positions=16, n_embd=32, n_layer=2, n_head=2, resid_pdrop=0.0, embd_pdrop=0.0,
            attn_pdrop=0.0, bos_token_id=1, eos_token_id=1, window_size=8, overlap=2, insertion_layer=1)),
    }
    generator = torch.Generator().manual_seed(1)
    runs = []
    for name, model in models.items():
        model.save_pretrained(root / name / "model")
        steps = []
        for _ in range(3):
            ids = torch.randint(0, vocab, (2, 2, 20), generator=generator)
            mask = torch.ones_like(ids[0])
            mask[1, 15:] = 0
            micro = [{"input_ids": i, "attention_mask": mask, "labels": i.clone()} for i in ids]
            micro[1] = {key: values[:, :12] for key, values in micro[1].items()}  # 2 windows, not 3
            steps.append(micro)
        torch.save(steps, root / name / "batches.pt")
        documents = [{"input_ids": torch.randint(0, vocab, (n,), generator=generator).tolist(), "num_words": n}
                     for n in (30, 7, 19)]
        (root / name / "documents.json").write_text(json.dumps(documents))
        runs.append(root / name)
    return runs


def test_fsdp_over_two_cpu_processes_trains_like_one_process(tmp_path):
    """examples/accelerate/fsdp.yaml's sharding (FSDP2, every decoder layer its own group) on two CPU processes over
    gloo, recurrence and whole-window checkpointing on, micro-batches of 3 and 2 windows: each step's loss and gradient
    norm equal one unsharded process's accumulating the same two micro-batches, the documents read in lockstep by
    both processes give that process's summed loss, and the gathered model saved with save_pretrained loads with
    from_pretrained and gives that process's logits over several windows."""
    import fsdp_worker

    runs = tiny_recurrent_models(tmp_path)
    for run in runs:
        fsdp_worker.train(str(run), plugin=None, rank=0, world=1)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": os.pathsep.join(sys.path)}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
               fsdp_worker.__file__, "--config_file", str(ACCELERATE_CONFIGS / "fsdp.yaml"), *map(str, runs)]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    expected_groups = {"llama": ["decoder.model.layers.0", "decoder.model.layers.1"],
                       "gpt2": ["transformer.h.0", "transformer.h.1"]}
    for run in runs:
        single = json.loads((run / "single" / "steps.json").read_text())
        sharded = json.loads((run / "sharded" / "steps.json").read_text())
        assert set(expected_groups[run.name]) | {""} <= set(sharded["wrapped"])
        for one, two in zip(single["steps"], sharded["steps"], strict=True):
            assert two["loss"] == pytest.approx(one["loss"], rel=1e-5)
            assert two["grad_norm"] == pytest.approx(one["grad_norm"], rel=1e-5)
        assert single["steps"][0]["grad_norm"] > fsdp_worker.MAX_GRAD_NORM  # clipping acts on the gathered norm
        assert sharded["documents"] == pytest.approx(single["documents"], rel=1e-5)
        assert single["documents"][1] == 30 + 7 + 19 - 3  # every token but each document's first
        ids = torch.randint(0, 40, (1, 30), generator=torch.Generator().manual_seed(2))
        logits = {}
        for kind in ("model", "single/model", "sharded/model"):
            with torch.no_grad():
                logits[kind] = AutoModelForCausalLM.from_pretrained(run / kind).eval()(ids).logits
        torch.testing.assert_close(logits["sharded/model"], logits["single/model"], rtol=1e-5, atol=1e-5)
        assert not torch.allclose(logits["single/model"], logits["model"], atol=1e-3)  # training moved the weights


def test_accelerate_configs_pass_accelerates_own_checks():
    """Each config in examples/accelerate loads with accelerate's loader and passes `accelerate launch`'s checks; the
    FSDP one gives FSDP2, no FSDP activation checkpointing, sharded checkpoints, and decoder-layer groups taken from
    the model (`_no_split_modules`)."""
    from accelerate.commands.config.config_args import load_config_from_file
    from accelerate.commands.launch import _validate_launch_command, launch_command_parser

    import fsdp_worker

    names = sorted(path.name for path in ACCELERATE_CONFIGS.glob("*.yaml"))
    assert names == ["ddp.yaml", "deepspeed_zero2.yaml", "deepspeed_zero3.yaml", "fsdp.yaml"]
    for name in names:
        config = load_config_from_file(str(ACCELERATE_CONFIGS / name))
        assert config.num_processes == 8 and not config.use_cpu
        args = launch_command_parser().parse_args(["--config_file", str(ACCELERATE_CONFIGS / name), "train.py"])
        _validate_launch_command(args)
    assert load_config_from_file(str(ACCELERATE_CONFIGS / "deepspeed_zero2.yaml")).deepspeed_config["zero_stage"] == 2
    assert load_config_from_file(str(ACCELERATE_CONFIGS / "deepspeed_zero3.yaml")).deepspeed_config["zero_stage"] == 3
    plugin = fsdp_worker.fsdp_plugin_from_config_file(str(ACCELERATE_CONFIGS / "fsdp.yaml"), 8)
    assert (plugin.fsdp_version, plugin.reshard_after_forward, plugin.activation_checkpointing) == (2, True, False)
    assert plugin.state_dict_type.name == "SHARDED_STATE_DICT"
    model = CausalLMWithRecurrence.wrap(LlamaForCausalLM(LlamaConfig(
        vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4)),
        window_size=8, insertion_layer=1)
    plugin.set_auto_wrap_policy(model)
    assert plugin.transformer_cls_names_to_wrap == ["LlamaDecoderLayer"]


def test_launches_that_would_not_train_as_asked_are_refused(tmp_path, monkeypatch):
    """Processes launched together that form no process group (an FSDP config on a machine without GPUs), and FSDP's
    activation checkpointing (it wraps the decoder layers where h_prev enters), are named before a model is loaded."""
    tiny_setup(tmp_path, ["the king said"])
    arguments = ["--config_name", str(tmp_path / "config"), "--tokenizer_name", str(tmp_path / "tokenizer"),
                 "--corpus", "wikitext103", "--output_dir", str(tmp_path / "out"), "--report_to", "none"]
    parsed = causal_lm.parse_args(arguments)
    with monkeypatch.context() as patch:
        patch.setenv("WORLD_SIZE", "2")
        with pytest.raises(ValueError, match="2 processes were launched but form no process group"):
            causal_lm.train_and_evaluate(*parsed)
    monkeypatch.setenv("ACCELERATE_USE_FSDP", "true")
    monkeypatch.setenv("FSDP_ACTIVATION_CHECKPOINTING", "true")
    with pytest.raises(ValueError, match="FSDP activation checkpointing is not supported .* --gradient_checkpointing"):
        causal_lm.train_and_evaluate(*parsed)
    assert not (tmp_path / "out").exists()


RUN_CLM_RECURRENT = Path(__file__).resolve().parents[1] / "examples" / "run_clm_recurrent.py"


def recurrent_llama_command(tmp_path: Path, max_steps: int) -> tuple[list[str], int]:
    """examples/run_clm_recurrent.py with its arguments for a tiny Llama with h_prev at layer 1, trained on WikiText
    files in tmp_path: windows of 8 overlapping by 2, 3 windows per example, batches of 2, window checkpointing, a
    checkpoint every 2 steps, a loss logged every step; and the vocabulary's size."""
    articles = write_wikitext(tmp_path / "wikitext")
    tokenizer = tiny_setup(tmp_path, list(articles.values()))
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4, max_position_embeddings=32)).save_pretrained(tmp_path / "llama")
    raw = tmp_path / "wikitext"
    return [
        str(RUN_CLM_RECURRENT), "--model_name_or_path", str(tmp_path / "llama"),
        "--tokenizer_name", str(tmp_path / "tokenizer"), "--corpus", "wikitext103",
        "--train_file", str(raw / "wiki.train.raw"), "--validation_file", str(raw / "wiki.valid.raw"),
        "--window_size", "8", "--overlap", "2", "--insertion_layer", "1", "--windows_per_example", "3", "--do_train",
        "--do_eval", "--max_steps", str(max_steps), "--per_device_train_batch_size", "2",
        "--per_device_eval_batch_size", "2", "--gradient_checkpointing", "--learning_rate", "1e-2", "--warmup_steps",
        "0", "--logging_steps", "1", "--save_strategy", "steps", "--save_steps", "2", "--report_to", "none", "--seed",
        "0",
    ], len(tokenizer)


def accelerate_launch(config: str, processes: int) -> list[str]:
    return [sys.executable, "-m", "accelerate.commands.launch", "--config_file", str(ACCELERATE_CONFIGS / config),
            "--num_processes", str(processes), "--mixed_precision", "no", "--main_process_port", "0"]


def run_to_the_end(command: list[str], **env):
    done = subprocess.run(command, capture_output=True, text=True, timeout=600, env={**os.environ, **env})
    assert done.returncode == 0, done.stderr[-3000:]


def logged_steps(output: Path) -> list[dict]:
    """The training steps' log entries (loss, grad_norm, ...) of the Trainer's trainer_state.json in output."""
    history = json.loads((output / "trainer_state.json").read_text())["log_history"]
    return [entry for entry in history if "loss" in entry]


def assert_same_model(first: Path, second: Path, vocab: int):
    """Both saved models load with from_pretrained and give the same logits over several windows."""
    ids = torch.randint(0, vocab, (1, 30), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        logits = [AutoModelForCausalLM.from_pretrained(path).eval()(ids).logits for path in (first, second)]
    torch.testing.assert_close(*logits, rtol=1e-4, atol=1e-4)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="FSDP through accelerate runs on GPUs")
def test_fsdp_launch_on_gpus_trains_like_one_process_and_resumes(tmp_path, monkeypatch):
    """`accelerate launch --config_file examples/accelerate/fsdp.yaml examples/run_clm_recurrent.py` (fp32, one
    process per GPU, at most two) against one unsharded process accumulating the same micro-batches: equal losses,
    a final model that from_pretrained loads, a run resumed from a sharded checkpoint that logs the same steps, and
    that run, finished, launched again without training a step more.
    With one GPU the launch, the sharded checkpoint format and the resume are checked, but the model is not split
    over processes: the comparison of losses checks sharding only with two GPUs or more."""
    monkeypatch.chdir(tmp_path)
    command, vocab = recurrent_llama_command(tmp_path, max_steps=4)
    processes = min(2, torch.cuda.device_count())
    launch = accelerate_launch("fsdp.yaml", processes)
    losses = lambda output: [entry["loss"] for entry in logged_steps(output)]  # noqa: E731

    run_to_the_end([*launch, *command, "--output_dir", str(tmp_path / "sharded")])
    run_to_the_end([sys.executable, *command, "--output_dir", str(tmp_path / "single"),
                    "--gradient_accumulation_steps", str(processes)], CUDA_VISIBLE_DEVICES="0")
    assert losses(tmp_path / "sharded") == pytest.approx(losses(tmp_path / "single"), rel=1e-4)
    assert len(losses(tmp_path / "single")) == 4
    assert list((tmp_path / "sharded" / "checkpoint-2").glob("pytorch_model_fsdp_0/*.distcp"))  # sharded checkpoint
    assert_same_model(tmp_path / "sharded", tmp_path / "single", vocab)
    # resumed from the sharded checkpoint of step 2: steps 3 and 4 as in the uninterrupted run
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "sharded" / "checkpoint-2", resumed / "checkpoint-2")
    run_to_the_end([*launch, *command, "--output_dir", str(resumed)])
    assert losses(resumed)[-2:] == pytest.approx(losses(tmp_path / "sharded")[-2:], rel=1e-4)
    # the finished run launched again trains no step more
    finished = logged_steps(resumed)
    run_to_the_end([*launch, *command, "--output_dir", str(resumed)])
    assert logged_steps(resumed) == finished


@pytest.mark.parametrize("stage", [pytest.param(2, marks=pytest.mark.slow), 3])  # ZeRO-3 splits the weights too
def test_deepspeed_zero_over_two_cpu_processes_trains_like_one_process_and_resumes(tmp_path, monkeypatch, stage):
    """`accelerate launch --config_file examples/accelerate/deepspeed_zero{2,3}.yaml --num_processes 2
    --mixed_precision no examples/run_clm_recurrent.py ... --use_cpu`: DeepSpeed on two CPU processes (its CPU
    accelerator, over gloo), recurrence and window checkpointing on. Each step's loss and gradient norm equal one
    process's accumulating the same two micro-batches (three steps: the fourth would take a sample twice on one
    process to even out the last batch); the checkpoint is DeepSpeed's, split per process (ZeRO-2: the optimizer
    states; ZeRO-3: the weights too); the final model, gathered, loads with from_pretrained and gives that process's
    logits; a run resumed from the step-2 checkpoint logs the third step as the uninterrupted run did; and the
    finished run launched again trains no step more (transformers' Trainer, resumed at its last step, would train one
    more): its log, checkpoints and model stay as they were."""
    pytest.importorskip("deepspeed")
    monkeypatch.chdir(tmp_path)
    command, vocab = recurrent_llama_command(tmp_path, max_steps=3)
    launch = accelerate_launch(f"deepspeed_zero{stage}.yaml", 2)
    cpu = {"OMP_NUM_THREADS": "1"}
    run_to_the_end([*launch, *command, "--use_cpu", "--output_dir", str(tmp_path / "sharded")], **cpu)
    run_to_the_end([sys.executable, *command, "--use_cpu", "--output_dir", str(tmp_path / "single"),
                    "--gradient_accumulation_steps", "2"], **cpu)
    sharded, single = logged_steps(tmp_path / "sharded"), logged_steps(tmp_path / "single")
    assert len(single) == 3
    for one, two in zip(single, sharded, strict=True):
        assert (two["loss"], two["grad_norm"]) == pytest.approx((one["loss"], one["grad_norm"]), rel=1e-5)
    split = [f"zero_pp_rank_{rank}_mp_rank_00_{kind}_states.pt" for rank in (0, 1)
             for kind in (("optim", "model") if stage == 3 else ("optim",))]
    whole = [] if stage == 3 else ["mp_rank_00_model_states.pt"]
    saved = sorted(path.name for path in (tmp_path / "sharded" / "checkpoint-2" / "global_step2").iterdir())
    assert saved == sorted(split + whole)
    assert_same_model(tmp_path / "sharded", tmp_path / "single", vocab)
    resumed = tmp_path / "resumed"
    shutil.copytree(tmp_path / "sharded" / "checkpoint-2", resumed / "checkpoint-2")
    run_to_the_end([*launch, *command, "--use_cpu", "--output_dir", str(resumed)], **cpu)
    assert logged_steps(resumed)[-1]["loss"] == pytest.approx(sharded[-1]["loss"], rel=1e-5)
    weights = (tmp_path / "sharded" / "model.safetensors").read_bytes()
    run_to_the_end([*launch, *command, "--use_cpu", "--output_dir", str(tmp_path / "sharded")], **cpu)
    assert logged_steps(tmp_path / "sharded") == sharded
    assert sorted(path.name for path in (tmp_path / "sharded").glob("checkpoint-*")) == ["checkpoint-2", "checkpoint-3"]
    assert (tmp_path / "sharded" / "model.safetensors").read_bytes() == weights


def test_a_checkpoint_saved_in_half_precision_is_fine_tuned_in_fp32_unless_asked(tmp_path):
    """transformers loads a checkpoint in the precision it was saved in (dtype="auto"); the script loads float32 by
    default (fp32 weights and AdamW states; --bf16 for autocast), the checkpoint's own precision with --dtype auto."""
    torch.manual_seed(0)
    LlamaForCausalLM(LlamaConfig(vocab_size=40, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                 num_attention_heads=4)).to(torch.bfloat16).save_pretrained(tmp_path / "llama")
    GPT2LMHeadModel(GPT2Config(vocab_size=40, n_positions=16, n_embd=32, n_layer=2, n_head=2)).to(
        torch.float16).save_pretrained(tmp_path / "gpt2")
    for name, saved in (("llama", torch.bfloat16), ("gpt2", torch.float16)):
        for flag, expected in ((None, torch.float32), ("auto", saved), ("bfloat16", torch.bfloat16)):
            arguments = causal_lm.RecurrentLMArguments(model_name_or_path=str(tmp_path / name), window_size=8,
                                                       insertion_layer=1, **({"dtype": flag} if flag else {}))
            model = causal_lm.load_model(arguments, tokenizer=None)
            decoder = {p.dtype for n, p in model.named_parameters() if "recurrence" not in n}
            assert decoder == {expected}, (name, flag, decoder)
    with pytest.raises(UsageError, match="--dtype must be float32, bfloat16, float16 or auto, got 'fp8'"):
        causal_lm.RecurrentLMArguments(model_name_or_path=str(tmp_path / "llama"), dtype="fp8")


def test_a_baseline_given_the_recurrent_runs_folder_is_refused_not_resumed_from_its_checkpoint(tmp_path):
    """The baseline's command is the recurrent run's with --use_recurrence False: in the same --output_dir it would
    resume the recurrent run's checkpoint (and overwrite its model). It is refused in one line naming what differs;
    the recurrent run given again goes on from its checkpoint."""
    articles = write_wikitext(tmp_path / "wikitext")
    tiny_setup(tmp_path, list(articles.values()))
    raw, output = tmp_path / "wikitext", tmp_path / "out"
    command = ["--config_name", str(tmp_path / "config"), "--tokenizer_name", str(tmp_path / "tokenizer"),
               "--corpus", "wikitext103", "--train_file", str(raw / "wiki.train.raw"), "--window_size", "8",
               "--insertion_layer", "1", "--windows_per_example", "2", "--output_dir", str(output), "--do_train",
               "--max_steps", "2", "--save_steps", "1", "--per_device_train_batch_size", "2", "--report_to", "none",
               "--use_cpu", "--disable_tqdm", "true"]
    first = run_clm_recurrent(command)
    weights = (output / "model.safetensors").read_bytes()
    with pytest.raises(UsageError, match=r"holds a checkpoint of a run with another model or data.*use_recurrence "
                                         r"True \(asked: False\)"):
        run_clm_recurrent([*command, "--use_recurrence", "False"])
    assert (output / "model.safetensors").read_bytes() == weights  # the recurrent run's model, kept
    again = run_clm_recurrent(command)  # the same run, finished: loaded from its checkpoint, not trained again
    assert again["train_loss"] == first["train_loss"]


def test_a_new_model_without_the_insertion_layer_asked_for_is_named_in_one_line(tmp_path):
    """A 2-layer GPT-2 config trained from scratch with h_prev at index 2: the config's own check, as a usage error
    naming the config."""
    articles = write_wikitext(tmp_path / "wikitext")
    tiny_setup(tmp_path, list(articles.values()))
    with pytest.raises(UsageError, match=r"--config_name .*config: insertion_layer must lie in \[0, n_layer=2\)"):
        run_clm_recurrent(["--config_name", str(tmp_path / "config"), "--tokenizer_name", str(tmp_path / "tokenizer"),
                           "--corpus", "wikitext103", "--train_file", str(tmp_path / "wikitext" / "wiki.train.raw"),
                           "--window_size", "8", "--insertion_layer", "2", "--output_dir", str(tmp_path / "out"),
                           "--do_train",
                           "--max_steps", "1"])
