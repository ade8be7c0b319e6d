"""Long-document corpora for window-level recurrence (Yoshida, Ettinger and Gimpel, "Adding Recurrence to Pretrained
Transformers", 2020, §5): PG-19 and WikiText-103 (raw), and the King James Bible (installed from Debian,
`lengthgen.data.kjv`), as datasets with one whole document per row (columns `name`, `text`).

Sources, for both corpora:

* a Hub dataset (`dataset_name`, `dataset_config_name`), or a local folder in the same layout. WikiText-103 on the
  Hub (`Salesforce/wikitext`, `wikitext-103-raw-v1`) stores one line per row; its articles are re-assembled here.
  The canonical PG-19 repository (`deepmind/pg19`) is a loading script, which `datasets` 5 no longer runs: any
  parquet mirror with a `text` column works (PG-19's own columns are `short_book_title`, `publication_date`, `url`,
  `text`); `streaming=True` reads it without downloading the 11 GB first;
* local files: PG-19's own layout, a folder of books `<id>.txt` (one document per file), or WikiText-103's
  `wiki.train.raw` / `wiki.valid.raw` / `wiki.test.raw`; parquet, JSON lines or CSV files with a `text` column work for
  either.

PG-19 subsets of §5: the first N training books alphabetically by file name (`max_train_books`, paper: 1,250), and the
first 15,000 tokens of each validation book for early stopping (`max_tokens` of `tokenize_documents`).

Training examples are runs of up to K windows of one document (paper: 20 windows of 300 tokens) that the model reads
with backpropagation through time (`lengthgen.training.windows.document_runs`: the model's windows); evaluation reads
whole documents. Word counts are kept so perplexity can be
reported per word, as the paper does, as well as per token.
"""

import os
import re

import datasets

from lengthgen.cli import UsageError
from lengthgen.data.kjv import kjv_books

CORPORA = ("pg19", "wikitext103", "kjv")
SPLITS = ("train", "validation", "test")
# An article starts with a top-level heading " = Title = "; section headings have two or more "=" (" = = Life = = ").
WIKITEXT_ARTICLE_HEADING = re.compile(r"^ = [^=].* = $")
DOCUMENT_FEATURES = datasets.Features({"name": datasets.Value("string"), "text": datasets.Value("string")})


def wikitext_documents(lines):
    """Join WikiText lines (each ending in a newline, as in the raw files and the Hub rows) into articles.

    Yields `{"name": title, "text": article}`; the text is the article's lines joined unchanged."""
    name, lines_of_article = None, []
    for line in lines:
        if WIKITEXT_ARTICLE_HEADING.match(line.rstrip("\n")):
            if lines_of_article and "".join(lines_of_article).strip():
                yield {"name": name, "text": "".join(lines_of_article)}
            name, lines_of_article = line.strip(" =\n"), []
        lines_of_article.append(line)
    if lines_of_article and "".join(lines_of_article).strip():
        yield {"name": name, "text": "".join(lines_of_article)}


def pg19_book_name(row: dict) -> str:
    """A PG-19 book's file name, by which §5 orders the books: the `name` column if there is one, else `<id>.txt`
    with the id taken from the Project Gutenberg URL (`.../ebooks/10146` -> `10146.txt`)."""
    if row.get("name"):
        return row["name"]
    url = row.get("url")
    if not url:
        raise UsageError("A PG-19 row needs a `name` or a `url` column to order books by file name.")
    return url.rstrip("/").rsplit("/", 1)[-1] + ".txt"


def _wikitext_rows(dataset):
    """Articles of a line-per-row WikiText split (a generator for `Dataset.from_generator`)."""
    yield from wikitext_documents(row["text"] for row in dataset)


def _local_split(path: str, corpus: str, streaming: bool):
    """One split from a local file or folder (see the module docstring)."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.endswith(".txt"))
        if not names:
            raise UsageError(f"{path} holds no .txt files: a PG-19 folder holds one book per <id>.txt file.")

        def books():
            for name in names:
                with open(os.path.join(path, name), encoding="utf-8") as f:
                    yield {"name": name, "text": f.read()}

        return books
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} does not exist")
    if path.endswith((".parquet", ".json", ".jsonl", ".csv")):
        kind = {"jsonl": "json"}.get(path.rsplit(".", 1)[-1], path.rsplit(".", 1)[-1])
        dataset = datasets.load_dataset(kind, data_files=path, split="train", streaming=streaming)
        if corpus == "wikitext103":
            return lambda: _wikitext_rows(dataset)
        return dataset
    if corpus == "wikitext103":
        def articles():
            with open(path, encoding="utf-8") as f:
                yield from wikitext_documents(f)

        return articles

    def book():
        with open(path, encoding="utf-8") as f:
            yield {"name": os.path.basename(path), "text": f.read()}

    return book


def _as_documents(source, corpus: str, streaming: bool):
    """A Dataset/IterableDataset of documents from a generator function or a dataset of rows."""
    if callable(source):
        builder = datasets.IterableDataset if streaming else datasets.Dataset
        return builder.from_generator(source, features=DOCUMENT_FEATURES)
    if "text" not in source.column_names:
        raise UsageError(f"The dataset has no `text` column (columns: {source.column_names}).")
    if corpus == "wikitext103":
        builder = datasets.IterableDataset if streaming else datasets.Dataset
        return builder.from_generator(_wikitext_rows, gen_kwargs={"dataset": source}, features=DOCUMENT_FEATURES)
    return source


def first_books(dataset, count: int):
    """The first `count` books alphabetically by file name (PG-19 subset of §5), read from the name columns only (the
    texts of the other books are never loaded). A `Dataset` comes back in file-name order, like the paper's listing; a
    streamed one yields the kept books in its own order."""
    key_columns = [c for c in ("name", "url") if c in dataset.column_names]
    if not key_columns:
        raise UsageError("A PG-19 row needs a `name` or a `url` column to order books by file name.")
    names = [pg19_book_name(row) for row in dataset.select_columns(key_columns)]
    order = sorted(range(len(names)), key=names.__getitem__)[:count]
    if isinstance(dataset, datasets.Dataset):
        return dataset.select(order)
    keep = {names[i] for i in order}
    return dataset.filter(lambda row: pg19_book_name(row) in keep)


def load_documents(
    corpus: str,
    dataset_name: str | None = None,
    dataset_config_name: str | None = None,
    data_files: dict[str, str] | None = None,
    streaming: bool = False,
    max_train_books: int | None = None,
) -> dict:
    """`{split: dataset of whole documents}` from the Hub (`dataset_name`) or local `data_files` (`{split: path}`).

    corpus: "pg19" (a row or a file is a book), "wikitext103" (lines re-assembled into articles) or "kjv" (the King
        James Bible, one book per document, from Debian's `bible-kjv` package when no dataset or files are given:
        `lengthgen.data.kjv`; otherwise read like PG-19).
    streaming: return `IterableDataset`s (for PG-19's size); the texts are read as they are consumed.
    max_train_books: keep the first N training books by file name (PG-19, §5: 1,250).
    """
    if corpus not in CORPORA:
        raise UsageError(f"corpus must be one of {CORPORA}, got {corpus!r}")
    if corpus == "kjv" and dataset_name is None and not data_files:
        books = kjv_books()
        return {split: datasets.Dataset.from_list([{"name": b["name"], "text": b["text"]} for b in books
                                                   if b["split"] == split], features=DOCUMENT_FEATURES)
                for split in SPLITS}
    if (dataset_name is None) == (not data_files):
        raise UsageError("Give either a dataset name or local data files, not both and not neither.")
    if data_files:
        unknown = sorted(set(data_files) - set(SPLITS))
        if unknown:
            raise UsageError(f"Unknown split(s) {unknown}: the splits are {SPLITS}")
        raw = {split: _local_split(path, corpus, streaming) for split, path in data_files.items()}
    else:
        raw = dict(datasets.load_dataset(dataset_name, dataset_config_name, streaming=streaming))
    documents = {split: _as_documents(source, corpus, streaming) for split, source in raw.items()}
    if max_train_books is not None:
        if "train" not in documents:
            raise UsageError("max_train_books needs a train split")
        documents["train"] = first_books(documents["train"], max_train_books)
    return documents


def tokenize_documents(batch: dict, tokenizer, max_tokens: int | None = None) -> dict:
    """Token ids of whole documents, for `Dataset.map(batched=True)`.

    Each document starts with the tokenizer's bos token (GPT-2: `<|endoftext|>`), so its first real token is
    predicted too and per-word perplexity covers every word. `max_tokens` keeps a document's first N tokens (PG-19
    validation during training, §5: 15,000). `num_words` counts the whitespace-separated words of the text those
    tokens cover; `num_tokens` the document's tokens (bos not counted), the ones a language model predicts."""
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    if bos is None:
        raise UsageError("The tokenizer has neither a bos nor an eos token to start documents with.")
    encoded = tokenizer(batch["text"], add_special_tokens=False, return_offsets_mapping=max_tokens is not None)
    input_ids, num_words = [], []
    for index, (text, ids) in enumerate(zip(batch["text"], encoded["input_ids"])):
        if max_tokens is not None and len(ids) > max_tokens:
            end_char = encoded["offset_mapping"][index][max_tokens - 1][1]
            ids, text = ids[:max_tokens], text[:end_char]
        input_ids.append([bos] + ids)
        num_words.append(len(text.split()))
    return {"input_ids": input_ids, "num_words": num_words, "num_tokens": [len(ids) - 1 for ids in input_ids]}


__all__ = [
    "CORPORA",
    "first_books",
    "load_documents",
    "pg19_book_name",
    "tokenize_documents",
    "wikitext_documents",
]
