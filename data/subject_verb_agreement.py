"""Subject-verb agreement (Linzen, Dupoux and Goldberg, "Assessing the Ability of LSTMs to Learn Syntax-Sensitive
Dependencies", TACL 2016): read an English sentence up to its main verb and predict the verb's number, singular (VBZ)
or plural (VBP). The task of Abnar, Dehghani and Zuidema ("Transferring Inductive Biases through Knowledge
Distillation", 2020) for the recurrent inductive bias.

Two sources:

* `linzen_agreement_splits`: Linzen et al.'s TSV (`agr_50_mostcommon_10K.tsv.gz`, tab-separated with a header; the
  columns used are `sentence`, `verb_pos`, `verb_index` (1-based), `n_intervening`, `n_diff_intervening`,
  `distance`), from a local path, a URL or a file in a Hub repository, split 10 / 1 / 89 % (train / validation / test)
  with seed 42 as Abnar et al.'s code does. The input is the sentence's words before the verb (Linzen et al.'s
  number prediction; Abnar et al.'s text speaks of "the masked verb in a given sentence" without saying whether the
  words after it are seen), the difficulty the number of attractors (intervening nouns of the other number).
* `generate_agreement_splits` (the builder): sentences of a small English grammar, for offline use and controlled
  length splits. A subject noun phrase is followed by modifiers, each a prepositional phrase ("near the keys"), an
  object relative clause ("that the pilots saw") or a subject relative clause ("that saw the pilots"); every
  modifier holds one noun, which is an attractor when its number differs from the subject's. Half the sentences
  start with a preamble ("the authors said that ..."), so the subject is not always the first noun. Relative-clause
  and preamble verbs are in the past tense, so nothing but the subject tells the main verb's number. Split by
  attractors (config `attractors`: train 0-1, validation 2, test 3-4) or by subject-verb distance in words (config
  `distance`: train 4-8, validation 9-10, test 11-16; the verb follows the subject noun directly at distance 1, and a
  modifier takes 3 to 5 words, so 2 and 3 do not occur), so the study is a generalization study like the library's
  other tasks.
"""

import random
from dataclasses import dataclass

import datasets

from lengthgen.cli import UsageError

from .length_split import LengthSplitBuilder, LengthSplitConfig
from .splits import assert_splits_disjoint, check_ranges

LABELS = ("VBZ", "VBP")  # singular, plural: Linzen's `verb_pos` (Penn Treebank tags)
NOUNS = (("author", "authors"), ("pilot", "pilots"), ("key", "keys"), ("cabinet", "cabinets"),
         ("senator", "senators"), ("farmer", "farmers"), ("teacher", "teachers"), ("child", "children"),
         ("doctor", "doctors"), ("painting", "paintings"), ("surgeon", "surgeons"), ("manager", "managers"),
         ("dog", "dogs"), ("student", "students"), ("building", "buildings"), ("woman", "women"))
ADJECTIVES = ("old", "young", "tall", "famous", "new", "small")
PREPOSITIONS = ("near", "behind", "beside", "with", "of", "from")
PAST_VERBS = ("saw", "liked", "met", "helped", "called", "admired")
SAYING_VERBS = ("said", "knew", "thought", "heard")  # the preamble's: "the pilots said that ..."
LINZEN_COLUMNS = ("sentence", "verb_pos", "verb_index", "n_intervening", "n_diff_intervening", "distance")
AGREEMENT_CITATION = """@article{linzen2016assessing,
  title={Assessing the Ability of {LSTM}s to Learn Syntax-Sensitive Dependencies},
  author={Linzen, Tal and Dupoux, Emmanuel and Goldberg, Yoav},
  journal={Transactions of the Association for Computational Linguistics},
  volume={4}, pages={521--535}, year={2016}
}"""


def noun_phrase(rng: random.Random, plural: bool) -> list[str]:
    """'the (adjective) noun', the adjective with probability 1/3."""
    noun = rng.choice(NOUNS)[plural]
    return ["the", rng.choice(ADJECTIVES), noun] if rng.random() < 1 / 3 else ["the", noun]


def modifier(rng: random.Random, plural: bool) -> list[str]:
    """One modifier whose only noun has the given number: a prepositional phrase or a relative clause."""
    kind = rng.randrange(3)
    if kind == 0:
        return [rng.choice(PREPOSITIONS), *noun_phrase(rng, plural)]
    if kind == 1:  # object relative clause: the noun is the clause's subject
        return ["that", *noun_phrase(rng, plural), rng.choice(PAST_VERBS)]
    return ["that", rng.choice(PAST_VERBS), *noun_phrase(rng, plural)]


def agreement_example(rng: random.Random, num_modifiers: int, num_attractors: int) -> dict:
    """A sentence prefix: half the time a preamble ("the pilots said that"), then a subject and `num_modifiers`
    modifiers, `num_attractors` of them of the other number. The preamble moves the subject away from the start and
    puts a noun of either number before it; it is not between subject and verb, so it is not an attractor."""
    plural = rng.random() < 0.5
    attractors = set(rng.sample(range(num_modifiers), num_attractors))
    words = [*noun_phrase(rng, rng.random() < 0.5), rng.choice(SAYING_VERBS), "that"] if rng.random() < 0.5 else []
    words += noun_phrase(rng, plural)
    subject_index = len(words) - 1
    for position in range(num_modifiers):
        words += modifier(rng, plural != (position in attractors))
    return {
        "input": " ".join(words),
        "target": LABELS[plural],
        "length": len(words),
        "n_intervening": num_modifiers,
        "n_diff_intervening": num_attractors,
        "distance": len(words) - subject_index,  # the verb would stand at len(words)
    }


def balanced_examples(counts: dict[int, int], by: str, rng: random.Random, seen: set, max_modifiers: int) -> list:
    """`counts[d]` distinct examples with difficulty d: attractors (`by="attractors"`) or distance (`"distance"`)."""
    rows = []
    for difficulty, count in counts.items():
        made, attempts = 0, 0
        while made < count:
            attempts += 1
            if attempts > 1000 * count + 10_000:
                raise UsageError(f"Could not find {count} distinct sentences with {by} {difficulty}; lower the size.")
            if by == "attractors":
                modifiers = rng.randint(difficulty, max(difficulty, max_modifiers))
                example = agreement_example(rng, modifiers, difficulty)
            else:  # a modifier takes 3 to 5 words: the numbers of modifiers that can reach this distance
                low, high = -(-(difficulty - 1) // 5), min((difficulty - 1) // 3, max_modifiers)
                if low > high:
                    raise UsageError(f"No sentence of at most {max_modifiers} modifiers has distance {difficulty}.")
                modifiers = rng.randint(low, high)
                example = agreement_example(rng, modifiers, rng.randint(0, modifiers))
                if example["distance"] != difficulty:
                    continue
            if example["input"] in seen:
                continue
            seen.add(example["input"])
            rows.append({**example, "difficulty": difficulty})
            made += 1
    rng.shuffle(rows)
    return rows


def per_difficulty(size: int, difficulties: tuple[int, int]) -> dict[int, int]:
    values = range(difficulties[0], difficulties[1] + 1)
    return {d: size // len(values) + (i < size % len(values)) for i, d in enumerate(values)}


def generate_agreement_splits(
    split_by: str = "attractors",
    train_size: int = 20_000,
    train_difficulties: tuple[int, int] = (0, 1),
    validation_size: int = 1_000,
    validation_difficulties: tuple[int, int] = (2, 2),
    test_size: int = 1_000,
    test_difficulties: tuple[int, int] = (3, 4),
    max_modifiers: int = 4,
    seed: int = 0,
) -> dict[str, list[dict]]:
    """Train / validation / test of distinct sentences, balanced over the difficulties of each split."""
    if split_by not in ("attractors", "distance"):
        raise UsageError(f"split_by must be 'attractors' or 'distance', got {split_by!r}")
    check_ranges(0, train_difficulties=train_difficulties, validation_difficulties=validation_difficulties,
                 test_difficulties=test_difficulties)
    top = max(train_difficulties[1], validation_difficulties[1], test_difficulties[1])
    if split_by == "attractors" and top > max_modifiers:
        raise UsageError(f"{top} attractors need max_modifiers >= {top}, got {max_modifiers}")
    rng, seen = random.Random(seed), set()
    splits = {
        name: balanced_examples(per_difficulty(size, span), split_by, rng, seen, max_modifiers)
        for name, size, span in (("train", train_size, train_difficulties),
                                 ("validation", validation_size, validation_difficulties),
                                 ("test", test_size, test_difficulties))
    }
    assert_splits_disjoint(splits)
    return splits


def linzen_agreement_splits(source: str, seed: int = 42, fractions=(0.1, 0.01)) -> datasets.DatasetDict:
    """Linzen et al.'s TSV as train / validation / test (10 / 1 / 89 % by default, shuffled with `seed`).

    `source`: a local path, an http(s) URL, or `hf://datasets/OWNER/NAME/FILE` (or `hf://OWNER/NAME/FILE` for a model
    repository); gzip is read as such. Rows get `input` (the words before the verb), `target` (VBZ / VBP) and
    `difficulty` (the number of attractors, `n_diff_intervening`)."""
    if source.startswith("hf://"):
        from huggingface_hub import hf_hub_download

        parts = source[len("hf://"):].split("/")
        repo_type = "dataset" if parts[0] == "datasets" else "model"
        parts = parts[1:] if parts[0] == "datasets" else parts
        if len(parts) < 3:
            raise UsageError(f"Expected hf://[datasets/]OWNER/NAME/FILE, got {source!r}")
        source = hf_hub_download("/".join(parts[:2]), "/".join(parts[2:]), repo_type=repo_type)
    table = datasets.load_dataset("csv", data_files=source, delimiter="\t", split="train")
    missing = [c for c in LINZEN_COLUMNS if c not in table.column_names]
    if missing:
        raise UsageError(f"{source}: the agreement TSV lacks the column(s) {', '.join(missing)} "
                         f"(it has {', '.join(table.column_names)}).")

    def to_example(row):
        words = str(row["sentence"]).split()
        verb = int(row["verb_index"]) - 1  # 1-based in the TSV
        if not 0 < verb <= len(words) or row["verb_pos"] not in LABELS:
            raise UsageError(f"{source}: a row with verb_index {row['verb_index']} / verb_pos {row['verb_pos']!r} "
                             f"in a sentence of {len(words)} words")
        return {"input": " ".join(words[:verb]), "target": row["verb_pos"], "length": verb,
                "difficulty": int(row["n_diff_intervening"])}

    table = table.map(to_example).shuffle(seed=seed)
    train_end = int(fractions[0] * len(table))
    validation_end = train_end + int(fractions[1] * len(table))
    return datasets.DatasetDict({
        "train": table.select(range(train_end)),
        "validation": table.select(range(train_end, validation_end)),
        "test": table.select(range(validation_end, len(table))),
    })


@dataclass
class AgreementConfig(LengthSplitConfig):
    """Generating parameters of the grammar's sentences (`generate_agreement_splits`)."""

    split_by: str = "attractors"
    train_size: int = 20_000
    train_difficulties: tuple[int, int] = (0, 1)
    validation_size: int = 1_000
    validation_difficulties: tuple[int, int] = (2, 2)
    test_size: int = 1_000
    test_difficulties: tuple[int, int] = (3, 4)
    max_modifiers: int = 4
    seed: int = 0


class SubjectVerbAgreement(LengthSplitBuilder):
    """Subject-verb agreement in generated English-like sentences, split by attractors or by distance."""

    BUILDER_CONFIG_CLASS = AgreementConfig
    BUILDER_CONFIGS = [
        AgreementConfig(name="attractors", description="train on 0-1 attractors, test on 3-4"),
        AgreementConfig(name="distance", description="train on subject-verb distances 4-8 words, test on 11-16",
                        split_by="distance", train_difficulties=(4, 8), validation_difficulties=(9, 10),
                        test_difficulties=(11, 16)),
    ]
    DEFAULT_CONFIG_NAME = "attractors"
    CITATION = AGREEMENT_CITATION
    EXTRA_FEATURES = {"n_intervening": datasets.Value("int32"), "n_diff_intervening": datasets.Value("int32"),
                      "distance": datasets.Value("int32")}

    def generate_splits(self):
        return generate_agreement_splits(**self.config.generator_arguments())


__all__ = [
    "LABELS",
    "SubjectVerbAgreement",
    "agreement_example",
    "generate_agreement_splits",
    "linzen_agreement_splits",
]
