"""The model and tokenizer an example script trains: from a checkpoint, or from a config folder (e.g. hub_configs/)
with overrides, sized to the task's tokenizer and labels. Shared by run_classification.py, run_mlm.py and the
benchmarks that time their models."""

import logging
from dataclasses import dataclass, field

import torch
from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401  (registers lengthgen's models with the Auto classes)
from lengthgen.cli import local_path_or_hub_id
from lengthgen.data.export import BUILDERS
from lengthgen.data.tokenization import tokenizer_for_task, word_tokenizer

logger = logging.getLogger(__name__)


@dataclass
class ModelArguments:
    model_name_or_path: str | None = field(default=None, metadata={"help": "Checkpoint folder or Hub id to fine-tune."})
    config_name: str | None = field(
        default=None, metadata={"help": "Config folder or Hub id (e.g. hub_configs/ndr-ctl) to train from scratch."}
    )
    tokenizer_name: str | None = field(
        default=None, metadata={"help": "Tokenizer folder or Hub id; default: the model's, else the task's."}
    )
    config_overrides: str | None = field(
        default=None, metadata={"help": "Override config fields when training from scratch: 'num_layers=8,hidden_size=64'."}
    )
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow model code shipped with a checkpoint."})

    def __post_init__(self):
        check_model_paths(self)


def check_model_paths(model_args):
    """A mistyped local folder in --model_name_or_path, --config_name or --tokenizer_name is named as missing before
    any Hub lookup (every example script's ModelArguments calls this)."""
    for flag in ("model_name_or_path", "config_name", "tokenizer_name"):
        if getattr(model_args, flag):
            local_path_or_hub_id(getattr(model_args, flag), f"--{flag}")


def config_from_name(model_args: ModelArguments):
    """The config to train from scratch: --config_name with --config_overrides applied."""
    if not model_args.config_name:
        raise ValueError("Pass --model_name_or_path (fine-tune) or --config_name (train from scratch).")
    config = AutoConfig.from_pretrained(model_args.config_name, trust_remote_code=model_args.trust_remote_code)
    if model_args.config_overrides:
        config.update_from_string(model_args.config_overrides)
    return config


def classifier_tokenizer_and_labels(model_args: ModelArguments, splits):
    """A checkpoint's own tokenizer and labels, or new ones from the training split (a word-level tokenizer over the
    inputs; the classes are the training targets)."""
    if model_args.model_name_or_path:
        tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path)
        config = AutoConfig.from_pretrained(model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code)
        return tokenizer, [config.id2label[i] for i in range(config.num_labels)]
    if "train" not in splits:
        raise ValueError(f"Training from scratch needs a 'train' split; the dataset has {sorted(splits)}.")
    tokenizer = word_tokenizer(splits["train"]["input"])
    return tokenizer, sorted(set(splits["train"]["target"]))


def encode_classification(dataset, tokenizer, labels, keep_columns=()):
    """`dataset` (a `datasets.Dataset` of `input` and `target` rows) as model inputs: the tokens of `input`, and the
    index of `target` among `labels` as `labels`; the other columns are dropped but for `keep_columns`. A target that
    is not among `labels` is an error that names it."""
    label_ids = {label: i for i, label in enumerate(labels)}
    unknown = sorted(set(dataset["target"]) - set(label_ids))
    if unknown:
        raise ValueError(f"Targets {unknown[:5]} are not among the model's classes {labels}.")

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


def load_classifier(model_args: ModelArguments, tokenizer, labels):
    if model_args.model_name_or_path:
        return AutoModelForSequenceClassification.from_pretrained(
            model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code
        )
    config = config_from_name(model_args)
    config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    config.bos_token_id, config.eos_token_id = tokenizer.cls_token_id, tokenizer.sep_token_id
    config.id2label = dict(enumerate(labels))
    config.label2id = {label: i for i, label in enumerate(labels)}
    return AutoModelForSequenceClassification.from_config(config, trust_remote_code=model_args.trust_remote_code)


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
        return AutoModelForMaskedLM.from_pretrained(
            model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code
        )
    config = config_from_name(model_args)
    if config.vocab_size != len(tokenizer):
        logger.info("Setting vocab_size %d -> %d to match the tokenizer.", config.vocab_size, len(tokenizer))
        config.vocab_size = len(tokenizer)
    config.pad_token_id = tokenizer.pad_token_id
    return AutoModelForMaskedLM.from_config(config, trust_remote_code=model_args.trust_remote_code)


def record_training_hyperparameters(config, training_args):
    """A config folder's `training_hyperparameters` (the paper's recipe, e.g. hub_configs/ndr-ctl's) replaced field by
    field with the values this run trains with, so that a trained model's config says how it was trained, not how the
    paper trained its own. Fields that are not TrainingArguments keep their value; a run that counts epochs
    (max_steps -1) also records num_train_epochs. A config without the field is left as it is."""
    recipe = getattr(config, "training_hyperparameters", None)
    if not recipe:
        return
    recipe = {name: getattr(training_args, name, value) for name, value in recipe.items()}
    if recipe.get("max_steps") == -1:
        recipe["num_train_epochs"] = training_args.num_train_epochs
    config.training_hyperparameters = recipe


def recurrence_fields(model_args, names: tuple[str, ...]) -> dict:
    """The recurrence settings `names` a run asks for: those of a preset config (--config_name beside
    --model_name_or_path, e.g. hub_configs/gpt2-recurrent-pg19), overridden by the ones given on the command line."""
    fields = {name: getattr(model_args, name) for name in names if getattr(model_args, name) is not None}
    if model_args.model_name_or_path and model_args.config_name:
        preset = AutoConfig.from_pretrained(model_args.config_name, trust_remote_code=model_args.trust_remote_code)
        fields = {**{name: getattr(preset, name) for name in names if hasattr(preset, name)}, **fields}
    return fields
