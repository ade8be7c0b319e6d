"""`datasets` builder of Penn Treebank masked LM split by sentence length (I-BERT paper §5.2): configs `char`, `word`.

    builder = PTBInductive(config_name="char", source="path/to/ptb")   # folder, URL prefix or Hub dataset id
    builder.download_and_prepare()
"""

from dataclasses import dataclass

import datasets

from .length_split import LengthSplitBuilder, LengthSplitConfig
from .nsp_inductive import IBERT_CITATION
from .ptb import (
    DEFAULT_PTB_SOURCE,
    LEVELS,
    generate_ptb_splits,
    ptb_file,
    read_ptb_sentences,
)


@dataclass
class PTBConfig(LengthSplitConfig):
    """`source`: where ptb.train.txt lives. Length ranges are inclusive; None takes the paper's thresholds
    (char: train 16-192, validation 193-224 characters; word: train 2-32, validation 33-64 words)."""

    source: str = DEFAULT_PTB_SOURCE
    train_lengths: tuple[int, int] | None = None
    validation_lengths: tuple[int, int] | None = None
    seed: int = 0


class PTBInductive(LengthSplitBuilder):
    """Penn Treebank masked language modelling split by sentence length, from the I-BERT paper (§5.2)."""

    BUILDER_CONFIG_CLASS = PTBConfig
    BUILDER_CONFIGS = [
        PTBConfig(name=level, description=f"PTB {level}-level masked LM split by length") for level in LEVELS
    ]
    DEFAULT_CONFIG_NAME = "char"
    EXTRA_FEATURES = {"masked_word": datasets.Value("string")}
    CITATION = IBERT_CITATION

    def generate_splits(self):
        sentences = read_ptb_sentences(ptb_file(self.config.source, "train"))
        config = self.config
        return generate_ptb_splits(sentences, config.name, config.train_lengths, config.validation_lengths, config.seed)
