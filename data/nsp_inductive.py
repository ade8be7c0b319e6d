"""`datasets` builder of the NSP length-split tasks (I-BERT paper §5.1): configs `add`, `copy`, `reverse`.

    builder = NSPInductive(config_name="add", train_size=1000)   # any NSPConfig field can be overridden
    builder.download_and_prepare()
    splits = builder.as_dataset()

`lengthgen data export nsp_inductive --output_dir DIR` writes the same data as a Hub-style parquet folder.
"""

from dataclasses import dataclass

import datasets

from .length_split import LengthSplitBuilder, LengthSplitConfig
from .nsp import TASKS, generate_nsp_splits

IBERT_CITATION = "Nam et al., I-BERT: Inductive Generalization of Transformer to Arbitrary Context Lengths, 2020."


@dataclass
class NSPConfig(LengthSplitConfig):
    """Generating parameters; defaults are the paper's (25,600 train with d = 2..12, 1,536 validation with 13..16)."""

    train_size: int = 25_600
    validation_size: int = 1_536
    train_difficulties: tuple[int, int] = (2, 12)
    validation_difficulties: tuple[int, int] = (13, 16)
    seed: int = 0


class NSPInductive(LengthSplitBuilder):
    """Number sequence prediction (add, copy, reverse) split by digit count, from the I-BERT paper (§5.1)."""

    BUILDER_CONFIG_CLASS = NSPConfig
    BUILDER_CONFIGS = [NSPConfig(name=task, description=f"NSP {task} split by digit count") for task in TASKS]
    DEFAULT_CONFIG_NAME = "add"
    EXTRA_FEATURES = {"numbers": datasets.Sequence(datasets.Value("string"))}  # the numbers, usual notation
    CITATION = IBERT_CITATION

    def generate_splits(self):
        return generate_nsp_splits(self.config.name, **self.config.generator_arguments())
