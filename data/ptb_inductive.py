"""`datasets` builder of Penn Treebank masked LM split by sentence length (I-BERT paper §5.2): configs `char`, `word`.

    builder = PTBInductive(config_name="char", source="path/to/ptb")   # folder, URL prefix or Hub dataset id
    builder.download_and_prepare()
"""

from dataclasses import dataclass

import datasets

from .ptb import DEFAULT_PTB_SOURCE, LEVELS, generate_ptb_splits, ptb_file, read_ptb_sentences


@dataclass
class PTBConfig(datasets.BuilderConfig):
    """`source`: where ptb.train.txt lives. Length ranges are inclusive; None takes the paper's thresholds
    (char: train 16-192, validation 193-224 characters; word: train 2-32, validation 33-64 words)."""

    source: str = DEFAULT_PTB_SOURCE
    train_lengths: tuple[int, int] | None = None
    validation_lengths: tuple[int, int] | None = None
    seed: int = 0

    def generating_parameters(self) -> dict:
        return {
            "level": self.name,
            "source": self.source,
            "train_lengths": list(self.train_lengths) if self.train_lengths else None,
            "validation_lengths": list(self.validation_lengths) if self.validation_lengths else None,
            "seed": self.seed,
        }


class PTBInductive(datasets.GeneratorBasedBuilder):
    """Penn Treebank masked language modelling split by sentence length, from the I-BERT paper (§5.2)."""

    BUILDER_CONFIG_CLASS = PTBConfig
    BUILDER_CONFIGS = [PTBConfig(name=level, description=f"PTB {level}-level masked LM split by length") for level in LEVELS]
    DEFAULT_CONFIG_NAME = "char"

    def _info(self):
        return datasets.DatasetInfo(
            description=__doc__,
            features=datasets.Features(
                {
                    "input": datasets.Value("string"),
                    "target": datasets.Value("string"),
                    "difficulty": datasets.Value("int32"),
                    "length": datasets.Value("int32"),
                    "masked_word": datasets.Value("string"),
                }
            ),
        )

    def _split_generators(self, dl_manager):
        if self.config.name not in LEVELS:
            raise ValueError(f"Unknown ptb_inductive config {self.config.name!r}; expected one of {LEVELS}.")
        sentences = read_ptb_sentences(ptb_file(self.config.source, "train"))
        splits = generate_ptb_splits(
            sentences,
            self.config.name,
            self.config.train_lengths,
            self.config.validation_lengths,
            self.config.seed,
        )
        return [
            datasets.SplitGenerator(name=getattr(datasets.Split, name.upper()), gen_kwargs={"rows": rows})
            for name, rows in splits.items()
        ]

    def _generate_examples(self, rows):
        yield from enumerate(rows)
