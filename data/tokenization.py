"""Tokenizers for the length-split tasks, built with `tokenizers` and wrapped as `PreTrainedTokenizerFast`.

Every task's `input`/`target` columns are space-separated tokens, so all three tokenizers are a word-level model over
whitespace-split tokens; they differ in their vocabulary:

* digits (NSP): 0-9 and the delimiter `_`;
* characters (PTB char): printable ASCII, with `_` standing for a space, plus `[UNK]`;
* words (PTB word): the words of a corpus; PTB's own `<unk>` is the unknown token.

The post-processor frames each sequence as `[CLS] ... [SEP]` (bos/eos), like BERT.
"""

import string

from tokenizers import Tokenizer, models, pre_tokenizers, processors
from transformers import PreTrainedTokenizerFast

from lengthgen.cli import UsageError

from .nsp import DELIMITER, MASK

PAD, UNK, CLS, SEP = "[PAD]", "[UNK]", "[CLS]", "[SEP]"
SPECIAL_TOKENS = [PAD, UNK, CLS, SEP, MASK]
DIGITS = [str(i) for i in range(10)]
CHARACTERS = sorted(set(string.printable) - set(string.whitespace))


def build_tokenizer(
    tokens: list[str], unk_token: str = UNK, model_max_length: int = 1_000_000_000
) -> PreTrainedTokenizerFast:
    """A word-level tokenizer over `SPECIAL_TOKENS + tokens` (ids in that order, `[PAD]` = 0)."""
    vocab = {}
    for token in SPECIAL_TOKENS + ([unk_token] if unk_token not in SPECIAL_TOKENS else []) + list(tokens):
        vocab.setdefault(token, len(vocab))
    tokenizer = Tokenizer(models.WordLevel(vocab=vocab, unk_token=unk_token))
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer.post_processor = processors.TemplateProcessing(
        single=f"{CLS} $A {SEP}",
        pair=f"{CLS} $A {SEP} $B {SEP}",
        special_tokens=[(CLS, vocab[CLS]), (SEP, vocab[SEP])],
    )
    tokenizer.add_special_tokens(SPECIAL_TOKENS)
    return PreTrainedTokenizerFast(
        tokenizer_object=tokenizer,
        pad_token=PAD,
        unk_token=unk_token,
        cls_token=CLS,
        sep_token=SEP,
        bos_token=CLS,
        eos_token=SEP,
        mask_token=MASK,
        model_input_names=["input_ids", "attention_mask"],
        model_max_length=model_max_length,
    )


def digit_tokenizer() -> PreTrainedTokenizerFast:
    """Tokenizer of the NSP tasks: digits and the delimiter."""
    return build_tokenizer(DIGITS + [DELIMITER])


def character_tokenizer() -> PreTrainedTokenizerFast:
    """Tokenizer of character-level tasks: printable ASCII characters (`_` is the space)."""
    return build_tokenizer(CHARACTERS)


def word_tokenizer(texts, min_frequency: int = 1, unk_token: str = "<unk>") -> PreTrainedTokenizerFast:
    """Tokenizer over the words of `texts` (space-separated strings) seen at least `min_frequency` times."""
    counts = {}
    for text in texts:
        for word in text.split():
            counts[word] = counts.get(word, 0) + 1
    words = sorted(w for w, c in counts.items() if c >= min_frequency and w not in SPECIAL_TOKENS and w != unk_token)
    return build_tokenizer(words, unk_token=unk_token)


def tokenizer_for_task(name: str, config_name: str, texts=None) -> PreTrainedTokenizerFast:
    """The tokenizer of a dataset (`nsp_inductive` or `ptb_inductive`) and config; `texts` build a word vocabulary."""
    if name == "nsp_inductive":
        return digit_tokenizer()
    if config_name == "char":
        return character_tokenizer()
    if texts is None:
        raise UsageError("A word-level tokenizer needs `texts` to build its vocabulary from.")
    return word_tokenizer(texts)
