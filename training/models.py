"""The model, the tokenizer and the encoded examples of an experiment, for each way of reading a model's answer
(`ModelArguments.head`):

* ``classification``: a sequence classifier (`AutoModelForSequenceClassification`: the NDR, the Universal Transformer,
  the LSTM, BERT, ...); the answer is the class. From scratch, the tokenizer is a word-level one over the training
  inputs and the classes are the training targets.
* ``masked_lm``: a masked LM (`AutoModelForMaskedLM`: I-BERT, BERT); the answer is the tokens at the input's `[MASK]`
  positions, the target restoring the whole sequence. From scratch, the task's own tokenizer.
* ``answer_slots``: `lengthgen.modeling.AnswerReader`, any base model (`AutoModel`, or the one-layer `lstm`) under one
  linear layer; the model reads the input, a separator and one `[MASK]` slot per answer token
  (`lengthgen.data.answer_slots`), and the layer predicts the answer's tokens at the slots (inputs with their own
  `[MASK]` tokens are read there). No task-specific head: how the leaderboard compares architectures. A causal model
  sees the whole input before its first slot. A trained reader's folder is read back with its own tokenizer.
"""

import difflib
import logging

import numpy as np
import torch
from huggingface_hub.errors import StrictDataclassError
from torch import nn
from transformers import (
    AutoConfig,
    AutoModelForMaskedLM,
    AutoModelForSequenceClassification,
    AutoTokenizer,
)

import lengthgen.modeling  # noqa: F401  (registers lengthgen's models with the Auto classes)
from lengthgen.modeling import AnswerReader, AnswerSlotsConfig
from lengthgen.cli import UsageError
from lengthgen.data.export import BUILDERS
from lengthgen.data.tokenization import DIGITS, tokenizer_for_task, word_tokenizer

from .arguments import HEADS, ModelArguments

logger = logging.getLogger(__name__)
LSTM = "lstm"  # the answer-slots head's own recurrent baseline (no transformers config)


def abacus_digit_token_ids(tokenizer, answer_slots: bool) -> list[int]:
    """The token ids Abacus embeddings number (McLeish et al., arXiv:2405.17399): the task's digits, and with the
    answer-slots head its [MASK] slots too, so that the i-th answer slot gets the place of the i-th digit of a number
    (the paper's generated answer digits get theirs)."""
    vocabulary = tokenizer.get_vocab()
    digits = [vocabulary[d] for d in DIGITS if d in vocabulary]
    if not digits:
        raise UsageError("position_encoding=abacus numbers the digit tokens 0-9; this task's vocabulary has none.")
    return digits + ([tokenizer.mask_token_id] if answer_slots else [])


def load_config(model_args: ModelArguments, tokenizer=None, answer_slots: bool = False):
    """The config to train from scratch: `config_name` (a folder or Hub id) with `config_overrides` applied, or the
    default config of `model_type` built with them. None for the `lstm` baseline. With the task's `tokenizer`, an Abacus
    position transformer without `abacus_digit_token_ids` gets the task's digit ids (`abacus_digit_token_ids`)."""
    overrides = model_args.overrides
    if tokenizer is not None and overrides.get("position_encoding") == "abacus" and \
            "abacus_digit_token_ids" not in overrides:
        overrides["abacus_digit_token_ids"] = abacus_digit_token_ids(tokenizer, answer_slots)
    if model_args.model_type == LSTM:
        return None
    if model_args.model_type:
        from transformers.models.auto.configuration_auto import CONFIG_MAPPING

        if model_args.model_type not in CONFIG_MAPPING:
            raise UsageError(f"--model_type {model_args.model_type!r} is not a model type of transformers or lengthgen "
                             f"(e.g. bert, llama, ndr, inductive_bert, universal_transformer, {LSTM}).")
        check_overrides(AutoConfig.for_model(model_args.model_type), overrides)
        try:
            return AutoConfig.for_model(model_args.model_type, **overrides)  # derived fields (head_dim, ...) follow
        except (ValueError, StrictDataclassError) as error:  # the checks the config makes (head size, choices)
            raise UsageError(f"--config_overrides {overrides}: {error.__cause__ or error}") from None
    config = read_config(model_args.config_name, "--config_name", model_args.trust_remote_code)
    check_overrides(config, overrides)
    config.update(overrides)
    try:  # the checks the config makes when it is built (head size, a field's choices), which update() skips; a
        # transformers config raises its validators' errors as StrictDataclassError, the ValueError as its cause
        type(config)(**config.to_dict())
    except (ValueError, StrictDataclassError) as error:
        raise UsageError(f"--config_overrides {overrides}: {error.__cause__ or error}") from None
    return config


def read_config(source: str, flag: str, trust_remote_code: bool = False):
    """`AutoConfig.from_pretrained(source)`; a UsageError naming `flag` when it is neither a folder here nor a Hub
    repository that can be read."""
    try:
        return AutoConfig.from_pretrained(source, trust_remote_code=trust_remote_code)
    except OSError as error:
        raise UsageError(f"{flag} {source}: not a folder here, and not read from the Hub "
                         f"({str(error).splitlines()[0]})") from error
    except (ValueError, KeyError) as error:  # a config.json of no model type transformers or lengthgen has
        if isinstance(error, ValueError) and not any(words in str(error) for words in
                                                     ("Unrecognized model", "does not recognize this architecture")):
            raise
        raise UsageError(f"{flag} {source}: not a model folder (its config.json names no model type of transformers "
                         "or lengthgen)") from error


def check_head(auto_class, config, head: str) -> None:
    """UsageError where the model of `config` has no `auto_class` form (`--head masked_lm` asked of an NDR)."""
    if type(config) in auto_class._model_mapping or auto_class.__name__ in (getattr(config, "auto_map", None) or {}):
        return
    kind = {"AutoModelForMaskedLM": "masked-LM", "AutoModelForSequenceClassification": "sequence-classification"}
    raise UsageError(f"--head {head}: {config.model_type} has no {kind[auto_class.__name__]} model; give the head it "
                     "has (classification for a sequence classifier, masked_lm for a masked LM, answer_slots for a "
                     "reader of answer slots).")


def check_overrides(config, overrides: dict) -> None:
    """UsageError naming an override of a field with a value of another kind (`hidden_size=abc`), or that is not a
    field of `config` but nearly one (a typo, which the config would keep unread), or not a field of one of lengthgen's
    own models at all; for another model an override like no field is kept with a warning, as models read some fields
    only when set (DeBERTa's `position_buckets`)."""
    fields = [key for key in config.to_dict() if not key.startswith("_")]
    own = type(config).__module__.startswith("lengthgen.")  # lengthgen's models read no field their config lacks
    for key, value in overrides.items():
        if hasattr(config, key):
            current = getattr(config, key)
            kinds = {bool: "true or false", int: "an integer", float: "a number", str: "a string"}
            if type(current) in kinds and value is not None and not (
                    type(value) is type(current) or (type(current) is float and type(value) is int)):
                raise UsageError(f"--config_overrides: {key} of {config.model_type} takes {kinds[type(current)]} "
                                 f"(now {current!r}), got {value!r}.")
            continue
        near = difflib.get_close_matches(key, fields, n=1, cutoff=0.8 if not own else 0.6)
        if near or own:
            raise UsageError(f"--config_overrides: {config.model_type} has no config field {key!r}"
                             + (f" (did you mean {near[0]!r}?)." if near else "."))
        logger.warning("--config_overrides: %s is not a field of %s's config; set as given.", key, config.model_type)


def infer_head(model_args: ModelArguments) -> str:
    """`head` as given, else from the config's architecture: an `AnswerReader` -> answer_slots, a masked LM ->
    masked_lm, anything else -> classification."""
    if model_args.head:
        return model_args.head
    if model_args.model_type == LSTM:
        return "answer_slots"
    flag = "--model_name_or_path" if model_args.model_name_or_path else "--config_name"
    source = model_args.model_name_or_path or model_args.config_name
    architectures = []
    if source:
        architectures = read_config(source, flag, model_args.trust_remote_code).architectures
    if AnswerReader.__name__ in (architectures or []):
        return "answer_slots"
    if any(name.endswith("ForMaskedLM") for name in architectures or []):
        return "masked_lm"
    return "classification"


# --- classification ---------------------------------------------------------------------------------------------


def classifier_tokenizer_and_labels(model_args: ModelArguments, splits):
    """A checkpoint's own tokenizer and labels, or new ones from the training split (a word-level tokenizer over the
    inputs; the classes are the training targets)."""
    if model_args.model_name_or_path:
        tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path)
        config = AutoConfig.from_pretrained(
            model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code
        )
        return tokenizer, [config.id2label[i] for i in range(config.num_labels)]
    if "train" not in splits:
        raise UsageError(f"Training from scratch needs a 'train' split; the dataset has {sorted(splits)}.")
    tokenizer = word_tokenizer(splits["train"]["input"])
    return tokenizer, sorted(set(splits["train"]["target"]))


def load_classifier(model_args: ModelArguments, tokenizer, labels):
    if model_args.model_name_or_path:
        config = read_config(model_args.model_name_or_path, "--model_name_or_path", model_args.trust_remote_code)
        check_head(AutoModelForSequenceClassification, config, "classification")
        return AutoModelForSequenceClassification.from_pretrained(
            model_args.model_name_or_path, config=config, trust_remote_code=model_args.trust_remote_code
        )
    config = load_config(model_args, tokenizer)
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id, config.eos_token_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    check_head(AutoModelForSequenceClassification, config, "classification")
    return AutoModelForSequenceClassification.from_config(config, trust_remote_code=model_args.trust_remote_code)


def encode_classification(dataset, tokenizer, labels, keep_columns=()):
    """`dataset` (rows of `input` and `target`) as model inputs: the tokens of `input`, and the index of `target` among
    `labels` as `labels`; the other columns are dropped but for `keep_columns`. A target that is not among `labels` is
    an error that names it."""
    label_ids = {label: i for i, label in enumerate(labels)}
    unknown = sorted(set(dataset["target"]) - set(label_ids))
    if unknown:
        raise UsageError(f"Targets {unknown[:5]} are not among the model's classes {labels}.")

    def encode(batch):
        return {**tokenizer(batch["input"]), "labels": [label_ids[t] for t in batch["target"]]}

    return dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c not in keep_columns])


@torch.no_grad()
def predict_classes(model, tokenizer, texts: list[str], batch_size: int = 256, **forward_kwargs) -> torch.Tensor:
    """The class ids a sequence classifier predicts for `texts`, in padded batches of `batch_size`; `forward_kwargs`
    go to every forward call (the NDR's `num_steps`, say)."""
    batches = (tokenizer(texts[i : i + batch_size], padding=True, return_tensors="pt")
               for i in range(0, len(texts), batch_size))
    return torch.cat([model(**batch, **forward_kwargs).logits.argmax(-1) for batch in batches])


# --- masked_lm ----------------------------------------------------------------------------------------------------


def masked_lm_tokenizer(model_args: ModelArguments, dataset_name: str, dataset_config_name: str | None, splits):
    """--tokenizer_name, else the checkpoint's tokenizer; from scratch on a lengthgen task, the task's own (a word
    task builds its vocabulary from the training targets); from scratch on other data, the config folder's."""
    source = model_args.tokenizer_name or model_args.model_name_or_path
    if source is None and dataset_name not in BUILDERS:
        source = model_args.config_name
    if source is not None:
        return AutoTokenizer.from_pretrained(source, trust_remote_code=model_args.trust_remote_code)
    texts = splits["train"]["target"] if "train" in splits else None
    return tokenizer_for_task(dataset_name, dataset_config_name, texts)


def load_masked_lm(model_args: ModelArguments, tokenizer):
    if model_args.model_name_or_path:
        config = read_config(model_args.model_name_or_path, "--model_name_or_path", model_args.trust_remote_code)
        check_head(AutoModelForMaskedLM, config, "masked_lm")
        return AutoModelForMaskedLM.from_pretrained(
            model_args.model_name_or_path, config=config, trust_remote_code=model_args.trust_remote_code
        )
    config = load_config(model_args)
    if config.vocab_size != len(tokenizer):
        logger.info("Setting vocab_size %d -> %d to match the tokenizer.", config.vocab_size, len(tokenizer))
        config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id, config.eos_token_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    check_head(AutoModelForMaskedLM, config, "masked_lm")
    return AutoModelForMaskedLM.from_config(config, trust_remote_code=model_args.trust_remote_code)


def encode_masked(dataset, tokenizer, keep_columns=(), every_token: bool = False):
    """input_ids / attention_mask of `input`, and labels: the target's token where the input has the mask token, -100
    (ignored) elsewhere; with `every_token`, the target's token everywhere (a loss that restores the whole sequence).
    Inputs and targets are space-separated tokens of equal count, so with a word-level tokenizer they align one to
    one."""

    def encode(batch):
        inputs = tokenizer(batch["input"])
        targets = tokenizer(batch["target"])["input_ids"]
        labels = []
        for row, (input_ids, target_ids) in enumerate(zip(inputs["input_ids"], targets)):
            if len(input_ids) != len(target_ids):
                raise UsageError(f"Row {row}: input and target tokenize to {len(input_ids)} and {len(target_ids)} "
                                 "tokens; masked tasks need one target token per input token.")
            labels.append([t if every_token or i == tokenizer.mask_token_id else -100
                           for i, t in zip(input_ids, target_ids)])
        return {**inputs, "labels": labels}

    return dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c not in keep_columns])


# --- answer_slots -------------------------------------------------------------------------------------------------


def answer_slots_tokenizer(splits, model_args: ModelArguments | None = None):
    """A trained reader's own tokenizer (`model_args.model_name_or_path`; a UsageError naming the tokens of the splits
    it does not know, which it would read as unknown), else a word-level tokenizer over every token of every split's
    inputs and targets (the task's alphabet)."""
    def texts():
        return (text for dataset in splits.values() for column in ("input", "target") for text in dataset[column])

    if model_args is not None and model_args.model_name_or_path:
        tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path)
        unknown = sorted({token for text in texts() for token in text.split()} - set(tokenizer.get_vocab()))
        if unknown:
            raise UsageError(f"{model_args.model_name_or_path} was trained on another alphabet: its tokenizer does not "
                             f"know {', '.join(unknown[:8])}" + (" ..." if len(unknown) > 8 else "") + ".")
        return tokenizer
    return word_tokenizer(texts())


def load_answer_reader(model_args: ModelArguments, tokenizer) -> AnswerReader:
    """A trained reader (`model_name_or_path`), or a base model from scratch for the task's vocabulary (`lstm`: the
    one-layer LSTM of `config_overrides`' hidden_size, 64 by default) under the answer-slots layer."""
    if model_args.model_name_or_path:
        source = model_args.model_name_or_path
        config = read_config(source, "--model_name_or_path", model_args.trust_remote_code)
        if not isinstance(config, AnswerSlotsConfig):
            raise UsageError(f"{source} holds a {config.model_type} model, not one trained with the answer_slots head; "
                             "to train one from scratch give --config_name or --model_type.")
        return AnswerReader.from_pretrained(source)
    vocab_size = len(tokenizer)
    # the tokenizer's special tokens in the reader's config, where transformers' Trainer would otherwise copy them with
    # a warning
    special = dict(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                   eos_token_id=tokenizer.eos_token_id)
    config = load_config(model_args, tokenizer, answer_slots=True)
    if config is None:
        hidden_size = int(model_args.overrides.get("hidden_size", 64))
        return AnswerReader(AnswerSlotsConfig(vocab_size=vocab_size, hidden_size=hidden_size, **special))
    if not hasattr(config, "vocab_size"):
        raise UsageError(f"{config.model_type} has no token vocabulary; it cannot read text tasks.")
    config.vocab_size, config.pad_token_id = vocab_size, tokenizer.pad_token_id
    reader_config = AnswerSlotsConfig(base_config=config, **special)
    return AnswerReader(reader_config, trust_remote_code=model_args.trust_remote_code)


def model_type_of(model: nn.Module) -> str:
    """The model type of a model, or of the base an `AnswerReader` reads (`lstm` for its own LSTM)."""
    if isinstance(model, AnswerReader):
        base = model.config.base_config
        return base.model_type if base is not None else LSTM
    return model.config.model_type


def position_limit(model: nn.Module) -> int | None:
    """Longest input a model's learned absolute position table holds (None: no such table)."""
    limits = [
        module.num_embeddings
        for module_name, module in model.named_modules()
        if isinstance(module, nn.Embedding)
        and ("position" in module_name.split(".")[-1] or module_name.endswith("wpe"))
    ]
    return min(limits) if limits else None


# --- all heads ----------------------------------------------------------------------------------------------------


def answer_predictions(logits, labels):
    """`preprocess_logits_for_metrics` of every head: per answer position the predicted id, its probability and the
    log-probability of the label, stacked on a last axis of 3 (instead of the logits over the vocabulary)."""
    probabilities = logits.float().softmax(-1)
    label_log_prob = logits.float().log_softmax(-1).gather(-1, labels.clamp(min=0).unsqueeze(-1)).squeeze(-1)
    return torch.stack([logits.argmax(-1).to(probabilities.dtype), probabilities.amax(-1), label_log_prob], dim=-1)


def answers(predictions: np.ndarray, label_ids: np.ndarray):
    """`answer_predictions`' output of an evaluation and its labels as (predicted ids, confidences, label
    log-probabilities, labels), each with one row per example; a classifier's rows hold one answer position."""
    if predictions.ndim == 2:  # a classifier: (examples, 3)
        predictions, label_ids = predictions[:, None], np.asarray(label_ids)[:, None]
    return predictions[..., 0].astype(np.int64), predictions[..., 1], predictions[..., 2], label_ids


def recurrence_fields(model_args, names: tuple[str, ...]) -> dict:
    """The recurrence settings `names` a run asks for: those of a preset config (--config_name beside
    --model_name_or_path, e.g. hub_configs/gpt2-recurrent-pg19), overridden by the ones given on the command line."""
    fields = {name: getattr(model_args, name) for name in names if getattr(model_args, name) is not None}
    if model_args.model_name_or_path and model_args.config_name:
        preset = AutoConfig.from_pretrained(model_args.config_name, trust_remote_code=model_args.trust_remote_code)
        fields = {**{name: getattr(preset, name) for name in names if hasattr(preset, name)}, **fields}
    return fields


__all__ = ["HEADS", "LSTM", "answer_predictions", "answer_slots_tokenizer", "answers", "check_overrides",
           "classifier_tokenizer_and_labels", "encode_classification", "encode_masked", "infer_head",
           "load_answer_reader", "load_classifier", "load_config", "load_masked_lm", "masked_lm_tokenizer",
           "model_type_of", "position_limit", "predict_classes", "read_config", "recurrence_fields"]
