"""`lengthgen-bench`: train every model on every length-split task and score it on the longer inputs.

    lengthgen-bench --models ibert ndr bert rope alibi lstm \
        --tasks ctl/backward listops nsp_inductive/copy chomsky_hierarchy/parity_check \
        --seeds 3 --output-dir outputs/bench

One *cell* is (model, task, seed): the model is built from scratch for the task's vocabulary, trained on the `train`
split with the same budget as every other model, and evaluated on every other split. Its results go to
`OUTPUT_DIR/cells/<model>__<task>__seed<n>.json` (accuracy per difficulty, the score, the training time); a cell
whose JSON exists is skipped on a re-run, a cell that fails is recorded with its error and the others go on. At the
end `OUTPUT_DIR/leaderboard.md`, `leaderboard.csv`, `accuracy_by_length.csv` and one plot per task are written from
all the JSONs there (`lengthgen.bench.leaderboard`).

**Where the answer is read.** Every model gets the same input and is read the same way, so no model needs a
task-specific head: the tokens of the input, then a separator and one `[MASK]` slot per answer token (the answer's
length is given, as Delétang et al. give it); a linear layer over the model's last hidden states predicts the
answer's tokens at the slots. Inputs that carry their own `[MASK]` tokens (NSP) are read at those. A causal model
(RoPE, ALiBi, the LSTM) sees the whole input before its first slot, so a one-token answer is read at its last token.

**Score.** The mean, over the difficulties (lengths, depths) above the training range, of the accuracy at each:
token accuracy (the fraction of an answer's tokens predicted right, averaged over examples) for the
Chomsky-hierarchy tasks, as Delétang et al. score them, and sequence accuracy (every answer token right) for the
others, as their papers score them. Both are in every JSON.

**Models.** `MODELS` are presets with one budget (width 64, 4 heads, feed-forward 256, 4 layers; the NDR runs its
one shared layer for 12 steps, the LSTM is one layer of 64 units), dropout off. `hf:PATH_OR_HUB_ID` takes any
transformers config as it is; a bare transformers model type (`gpt2`, `roberta`, ...) gets the preset budget.
"""

import argparse
import json
import math
import os
import statistics
import tempfile
import time
import traceback
from dataclasses import dataclass, field

import numpy as np
import torch
from torch import nn
from transformers.modeling_outputs import MaskedLMOutput

from ..data.export import BUILDERS, load_splits, parse_param
from ..data.nsp import MASK
from ..training.hardware import hardware

WIDTH, HEADS, FEED_FORWARD, LAYERS, NDR_STEPS = 64, 4, 256, 4, 12
TRAIN_SAMPLE = 512  # training examples evaluated for the fit column


# ---------------------------------------------------------------------------------------------------------------
# Models: a base model (hidden states per position) under one answer-reading head
# ---------------------------------------------------------------------------------------------------------------


class LSTMEncoder(nn.Module):
    """The recurrent baseline: token embeddings and a one-layer left-to-right LSTM (Delétang et al.'s strongest)."""

    def __init__(self, vocab_size: int, hidden_size: int = WIDTH):
        super().__init__()
        self.hidden_size = hidden_size
        self.embeddings = nn.Embedding(vocab_size, hidden_size)
        self.lstm = nn.LSTM(hidden_size, hidden_size, batch_first=True)

    def forward(self, input_ids, attention_mask=None):
        # right padding: the states of the real positions never see a pad token
        return (self.lstm(self.embeddings(input_ids))[0],)


class AnswerReader(nn.Module):
    """A base model and a linear layer from its last hidden states to the vocabulary; the loss is taken at the
    labelled positions (the answer slots) only."""

    def __init__(self, base: nn.Module, hidden_size: int, vocab_size: int):
        super().__init__()
        self.base = base
        self.head = nn.Linear(hidden_size, vocab_size)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden = self.base(input_ids=input_ids, attention_mask=attention_mask)[0]
        logits = self.head(hidden)
        loss = None
        if labels is not None:
            loss = nn.functional.cross_entropy(logits.flatten(0, 1).float(), labels.flatten(), ignore_index=-100)
        return MaskedLMOutput(loss=loss, logits=logits)


def _budget(**extra) -> dict:
    return dict(hidden_size=WIDTH, num_attention_heads=HEADS, intermediate_size=FEED_FORWARD, **extra)


def _preset_configs():
    from transformers import BertConfig, BloomConfig, DebertaV2Config, LlamaConfig

    from ..modeling import IBertConfig, NDRConfig

    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return {
        "ibert": IBertConfig(**_budget(num_hidden_layers=LAYERS, **no_dropout), position_embedding_type="none"),
        "ndr": NDRConfig(
            **_budget(num_layers=NDR_STEPS), hidden_dropout_prob=0.0, attention_query_dropout=0.0, gate_dropout=0.0
        ),
        "bert": BertConfig(**_budget(num_hidden_layers=LAYERS, **no_dropout), max_position_embeddings=512),
        "deberta": DebertaV2Config(
            **_budget(num_hidden_layers=LAYERS, **no_dropout),
            relative_attention=True, position_biased_input=False, pos_att_type=["p2c", "c2p"],
            position_buckets=256, max_relative_positions=-1, max_position_embeddings=512, norm_rel_ebd="layer_norm",
            share_att_key=True,
        ),
        "rope": LlamaConfig(**_budget(num_hidden_layers=LAYERS), num_key_value_heads=HEADS, attention_dropout=0.0),
        "alibi": BloomConfig(hidden_size=WIDTH, n_head=HEADS, n_layer=LAYERS, hidden_dropout=0.0, attention_dropout=0.0),
    }


MODELS = {
    "ibert": "I-BERT: BERT with a bidirectional LSTM instead of position embeddings (Nam et al.)",
    "ndr": "Neural Data Router: one shared layer, geometric attention, copy gate (Csordás et al.), 12 steps",
    "bert": "BERT: learned absolute position embeddings",
    "deberta": "DeBERTa-v2: relative positions (disentangled attention), no absolute positions",
    "rope": "Llama: rotary position embeddings, causal",
    "alibi": "BLOOM: ALiBi attention biases, causal",
    "lstm": "LSTM: one left-to-right layer",
}


def model_names_help() -> str:
    return ", ".join(MODELS) + ", hf:PATH_OR_HUB_ID (a transformers config), or a transformers model type (e.g. gpt2)"


def resolve_model_config(name: str):
    """The config of model `name` (None for the LSTM); ValueError listing the valid names for an unknown one."""
    from transformers import AutoConfig
    from transformers.models.auto.configuration_auto import CONFIG_MAPPING

    import lengthgen.modeling  # noqa: F401  (registers lengthgen's model types)

    if name == "lstm":
        return None
    if name in MODELS:
        return _preset_configs()[name]
    if name.startswith("hf:"):
        return AutoConfig.from_pretrained(name[3:])
    if name in CONFIG_MAPPING:
        config = AutoConfig.for_model(name)
        for key, value in _budget(num_hidden_layers=LAYERS).items():
            if hasattr(config, key):
                setattr(config, key, value)
        return config
    raise ValueError(f"Unknown model {name!r}; expected one of: {model_names_help()}.")


def build_model(name: str, vocab_size: int, pad_token_id: int, seed: int) -> AnswerReader:
    from transformers import AutoModel

    torch.manual_seed(seed)
    config = resolve_model_config(name)
    if config is None:
        base, hidden_size = LSTMEncoder(vocab_size), WIDTH
    else:
        if not hasattr(config, "vocab_size"):
            raise ValueError(f"Model {name!r} ({config.model_type}) has no token vocabulary; it cannot take text tasks.")
        config.vocab_size, config.pad_token_id = vocab_size, pad_token_id
        base, hidden_size = AutoModel.from_config(config), config.hidden_size
    return AnswerReader(base, hidden_size, vocab_size)


def position_limit(model: nn.Module) -> int | None:
    """Longest input a model's learned absolute position table holds (None: no such table)."""
    limits = [
        module.num_embeddings
        for module_name, module in model.named_modules()
        if isinstance(module, nn.Embedding) and ("position" in module_name.split(".")[-1] or module_name.endswith("wpe"))
    ]
    return min(limits) if limits else None


# ---------------------------------------------------------------------------------------------------------------
# Tasks: a lengthgen builder (or any dataset with input/target/difficulty columns) and how to score it
# ---------------------------------------------------------------------------------------------------------------

# Generating parameters of `--data-scale small`: a CPU leaderboard in hours (train <= 20, test 21-100 for the
# Chomsky-hierarchy tasks; fewer rows elsewhere; the splits' difficulties as in the papers).
SMALL_SCALE = {
    "chomsky_hierarchy": dict(train_lengths=(1, 20), test_lengths=(21, 100), train_size=20_000, test_size=1_600),
    "ctl": dict(validation_iid_size=500, validation_size=500, test_size=500),
    "listops": dict(train_size=20_000, validation_size=500, test_size=500),
    "simple_arithmetic": dict(train_size=20_000, validation_size=500, test_size=500),
    "nsp_inductive": dict(validation_size=512),
}
BENCH_BUILDERS = [name for name in BUILDERS if name != "ptb_inductive"]  # PTB needs a corpus download


def task_names() -> list[str]:
    return [f"{name}/{config.name}" for name in BENCH_BUILDERS for config in BUILDERS[name].BUILDER_CONFIGS]


@dataclass
class Task:
    name: str  # builder/config, or hf:PATH[:CONFIG]
    dataset: str
    config: str | None
    params: dict = field(default_factory=dict)

    @property
    def metric(self) -> str:
        return "token_accuracy" if self.dataset == "chomsky_hierarchy" else "sequence_accuracy"

    def load(self):
        return load_splits(self.dataset, self.config, self.params)


def resolve_task(name: str, data_scale: str = "small") -> Task:
    """`builder/config` (or a builder alone: its default config) or `hf:PATH_OR_HUB_ID[:CONFIG]`."""
    if name.startswith("hf:"):
        path, _, config = name[3:].partition(":")
        return Task(name, path, config or None)
    dataset, _, config = name.partition("/")
    if dataset in BENCH_BUILDERS:
        configs = [c.name for c in BUILDERS[dataset].BUILDER_CONFIGS]
        config = config or BUILDERS[dataset].DEFAULT_CONFIG_NAME or configs[0]
        if config in configs:
            params = SMALL_SCALE.get(dataset, {}) if data_scale == "small" else {}
            return Task(f"{dataset}/{config}", dataset, config, dict(params))
    raise ValueError(f"Unknown task {name!r}; expected one of: {', '.join(task_names())}, or hf:PATH_OR_HUB_ID[:CONFIG].")


# ---------------------------------------------------------------------------------------------------------------
# Encoding: input, separator, one [MASK] slot per answer token; labels at the slots
# ---------------------------------------------------------------------------------------------------------------


def answer_layout(input_text: str, target_text: str) -> tuple[list[str], list[str | None]]:
    """The tokens a model reads and, per token, the answer token expected there (None: not an answer slot)."""
    tokens, target = input_text.split(), target_text.split()
    if MASK in tokens:  # the input marks its own answer slots; the target restores the whole sequence
        if len(target) != len(tokens):
            raise ValueError(f"Masked input of {len(tokens)} tokens but target of {len(target)}: {input_text!r}")
        return tokens, [t if i == MASK else None for i, t in zip(tokens, target)]
    if not target:
        raise ValueError(f"Empty target for input {input_text!r}")
    return tokens + ["[SEP]"] + [MASK] * len(target), [None] * (len(tokens) + 1) + target


def task_tokenizer(splits):
    """A word-level tokenizer over every token of every split's inputs and targets (the task's alphabet)."""
    from ..data.tokenization import word_tokenizer

    return word_tokenizer(text for dataset in splits.values() for column in ("input", "target") for text in dataset[column])


def encode(dataset, tokenizer):
    """input_ids (framed by [CLS] ... [SEP]), labels (-100 off the answer slots), difficulty."""

    def encode_batch(batch):
        input_ids, labels = [], []
        for input_text, target_text in zip(batch["input"], batch["target"]):
            tokens, answers = answer_layout(input_text, target_text)
            ids = tokenizer.convert_tokens_to_ids([tokenizer.cls_token, *tokens, tokenizer.sep_token])
            input_ids.append(ids)
            labels.append([-100] + [-100 if a is None else tokenizer.convert_tokens_to_ids(a) for a in answers] + [-100])
        return {"input_ids": input_ids, "labels": labels}

    keep = ["difficulty"]
    return dataset.map(encode_batch, batched=True, remove_columns=[c for c in dataset.column_names if c not in keep])


def accuracy_by_difficulty(predicted, labels, difficulties) -> dict[int, dict[str, float]]:
    """Per difficulty: sequence accuracy (all answer tokens right) and token accuracy (fraction right, averaged
    over examples)."""
    sums: dict[int, list[float]] = {}
    for prediction, label, difficulty in zip(predicted, labels, difficulties):
        slots = np.asarray(label) != -100
        right = np.asarray(prediction)[slots] == np.asarray(label)[slots]
        entry = sums.setdefault(int(difficulty), [0.0, 0.0, 0])
        entry[0] += float(right.all())
        entry[1] += float(right.mean())
        entry[2] += 1
    return {
        d: {"sequence_accuracy": s / n, "token_accuracy": t / n, "examples": n} for d, (s, t, n) in sorted(sums.items())
    }


# ---------------------------------------------------------------------------------------------------------------
# One cell
# ---------------------------------------------------------------------------------------------------------------


@dataclass
class Budget:
    max_steps: int = 2_000
    batch_size: int = 32
    learning_rate: float = 5e-4
    warmup_ratio: float = 0.1
    eval_batch_size: int = 64
    threads: int | None = None


def cell_name(model: str, task: str, seed: int) -> str:
    safe = lambda text: text.replace("hf:", "hf-").replace("/", "-").replace(":", "-")  # noqa: E731
    return f"{safe(model)}__{safe(task)}__seed{seed}"


@dataclass
class PreparedTask:
    """A task's splits encoded for every model: what one cell reads."""

    task: Task
    tokenizer: object
    train: object  # datasets.Dataset: input_ids, labels
    eval_sets: dict  # split -> datasets.Dataset: input_ids, labels, difficulty; "train_sample" is the fit
    train_difficulties: list[int]
    longest: int  # tokens of the longest example a model must take


def prepare_task(task: Task, splits=None) -> PreparedTask:
    splits = splits if splits is not None else task.load()
    if "train" not in splits or len(splits) < 2:
        raise ValueError(f"Task {task.name!r} needs a 'train' split and another to evaluate; it has {sorted(splits)}.")
    tokenizer = task_tokenizer(splits)
    sample = splits["train"].shuffle(seed=0).select(range(min(TRAIN_SAMPLE, len(splits["train"]))))
    eval_sets = {"train_sample": encode(sample, tokenizer)}
    eval_sets.update({name: encode(dataset, tokenizer) for name, dataset in splits.items() if name != "train"})
    train = encode(splits["train"], tokenizer)
    longest = max(max(len(ids) for ids in dataset["input_ids"]) for dataset in [train, *eval_sets.values()])
    return PreparedTask(task, tokenizer, train, eval_sets, sorted(set(splits["train"]["difficulty"])), longest)


def check_model_takes_task(model_name: str, prepared: PreparedTask) -> None:
    """ValueError naming the problem when the model cannot take the task's longest example (before any training)."""
    vocab_size = len(prepared.tokenizer)
    model = build_model(model_name, vocab_size, prepared.tokenizer.pad_token_id, seed=0)
    longest, name = prepared.longest, prepared.task.name
    limit = position_limit(model)
    if limit is not None and longest > limit:
        raise ValueError(
            f"Model {model_name!r} cannot take task {name!r}: its position table holds {limit} positions and the "
            f"task's longest example is {longest} tokens (input, separator and answer slots)."
        )
    model.eval()
    try:
        with torch.no_grad():
            ids = torch.full((1, longest), prepared.tokenizer.mask_token_id)
            model(input_ids=ids, attention_mask=torch.ones_like(ids))
    except Exception as error:
        raise ValueError(
            f"Model {model_name!r} cannot take task {name!r} (vocabulary {vocab_size} tokens, longest example "
            f"{longest} tokens): {type(error).__name__}: {error}"
        ) from error


def run_cell(model_name: str, prepared: PreparedTask, seed: int, budget: Budget) -> dict:
    """Train `model_name` on the task's train split and evaluate every other split; the cell's results dict."""
    with tempfile.TemporaryDirectory() as work_dir:  # Trainer wants an output folder; nothing in it is kept
        return _run_cell(model_name, prepared, seed, budget, work_dir)


def _run_cell(model_name: str, prepared: PreparedTask, seed: int, budget: Budget, work_dir: str) -> dict:
    import transformers
    from transformers import DataCollatorForTokenClassification, PrinterCallback, Trainer, TrainingArguments, set_seed

    set_seed(seed)
    task, tokenizer = prepared.task, prepared.tokenizer
    model = build_model(model_name, len(tokenizer), tokenizer.pad_token_id, seed)
    args = TrainingArguments(
        output_dir=work_dir,
        max_steps=budget.max_steps,
        per_device_train_batch_size=budget.batch_size,
        per_device_eval_batch_size=budget.eval_batch_size,
        learning_rate=budget.learning_rate,
        warmup_steps=math.ceil(budget.warmup_ratio * budget.max_steps),
        weight_decay=0.01,
        max_grad_norm=1.0,
        seed=seed,
        data_seed=seed,
        save_strategy="no",
        report_to=[],
        logging_steps=max(1, budget.max_steps // 20),
        disable_tqdm=True,
        use_cpu=not torch.cuda.is_available(),
        remove_unused_columns=False,
    )
    transformers.utils.logging.set_verbosity_warning()
    trainer = Trainer(
        model=model,
        args=args,
        train_dataset=prepared.train.remove_columns("difficulty"),
        data_collator=DataCollatorForTokenClassification(tokenizer),  # pads inputs, labels with -100
        preprocess_logits_for_metrics=lambda logits, labels: logits.argmax(-1),
    )
    trainer.remove_callback(PrinterCallback)  # the losses go to the JSON, not to the terminal
    start = time.perf_counter()
    train_result = trainer.train()
    train_seconds = time.perf_counter() - start
    losses = [entry["loss"] for entry in trainer.state.log_history if "loss" in entry]

    start = time.perf_counter()
    by_split = {}
    for name, dataset in prepared.eval_sets.items():
        ordered = dataset.select(np.argsort(dataset["difficulty"], kind="stable"))  # similar lengths share a batch
        output = trainer.predict(ordered.remove_columns("difficulty"))
        accuracies = accuracy_by_difficulty(output.predictions, output.label_ids, ordered["difficulty"])
        by_split[name] = {str(d): values for d, values in accuracies.items()}
    eval_seconds = time.perf_counter() - start

    top = max(prepared.train_difficulties)
    longer = {int(d): v[task.metric] for split in by_split.values() for d, v in split.items() if int(d) > top}
    return {
        "model": model_name,
        "task": task.name,
        "seed": seed,
        "status": "ok",
        "metric": task.metric,
        "score": statistics.fmean(longer.values()) if longer else None,
        "score_difficulties": sorted(longer),
        "train_difficulties": [min(prepared.train_difficulties), top],
        "accuracy": by_split,
        "parameters": sum(p.numel() for p in model.parameters()),
        "train_loss_first_last": [losses[0], losses[-1]] if losses else None,
        "train_steps": train_result.global_step,
        "train_seconds": round(train_seconds, 1),
        "eval_seconds": round(eval_seconds, 1),
        "budget": vars(budget),
        "data_parameters": {k: list(v) if isinstance(v, tuple) else v for k, v in task.params.items()},
        "threads": torch.get_num_threads(),
        "hardware": hardware(),
    }


# ---------------------------------------------------------------------------------------------------------------
# The command
# ---------------------------------------------------------------------------------------------------------------


def run_bench(
    models, tasks, seeds: int, output_dir: str, budget: Budget, data_scale: str = "small", params: dict | None = None
) -> list[dict]:
    """Every (model, task, seed) cell not already finished in `output_dir/cells`, then the leaderboard from all the
    cells there. `params` overrides generating parameters per builder: {"chomsky_hierarchy": {"train_size": 1000}}.

    Names, and whether every model can take every task, are checked before any training (ValueError)."""
    from tqdm.auto import tqdm

    from .leaderboard import write_leaderboard

    for model in models:
        resolve_model_config(model)
    resolved = [resolve_task(t, data_scale) for t in tasks]
    for task in resolved:
        task.params.update((params or {}).get(task.dataset, {}))
    if budget.threads:
        torch.set_num_threads(budget.threads)
    cells_dir = os.path.join(output_dir, "cells")
    os.makedirs(cells_dir, exist_ok=True)

    records, todo = {}, []
    for task in resolved:
        for model in models:
            for seed in range(seeds):
                path = os.path.join(cells_dir, cell_name(model, task.name, seed) + ".json")
                if os.path.exists(path):
                    with open(path) as f:
                        record = json.load(f)
                    if record.get("status") == "ok":  # finished: skipped; a failed cell is tried again
                        records[path] = record
                        continue
                todo.append((model, task, seed, path))

    prepared = {}
    for model, task, _, _ in todo:  # every task generated and every pairing checked before any training
        if task.name not in prepared:
            prepared[task.name] = prepare_task(task)
    problems = []
    for model, task_name in dict.fromkeys((m, t.name) for m, t, _, _ in todo):
        try:
            check_model_takes_task(model, prepared[task_name])
        except ValueError as error:
            problems.append(str(error))
    if problems:
        raise ValueError("\n".join(problems))

    for model, task, seed, path in (progress := tqdm(todo, desc="lengthgen-bench", unit="cell")):
        progress.set_postfix_str(f"{model} {task.name} seed {seed}")
        try:
            record = run_cell(model, prepared[task.name], seed, budget)
        except Exception as error:  # recorded; the other cells go on
            record = {
                "model": model, "task": task.name, "seed": seed, "status": "failed",
                "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(),
            }
            progress.write(f"cell {model} / {task.name} / seed {seed} failed: {record['error']}")
        with open(path, "w") as f:
            json.dump(record, f, indent=2)
        records[path] = record
    write_leaderboard(output_dir)
    return list(records.values())


def main(argv=None):
    parser = argparse.ArgumentParser(
        prog="lengthgen-bench", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", help=f"models: {model_names_help()}")
    parser.add_argument(
        "--tasks", nargs="+",
        help="tasks: builder/config (e.g. ctl/backward, chomsky_hierarchy/parity_check) or hf:PATH_OR_HUB_ID[:CONFIG]",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 per (model, task)")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument(
        "--data-scale", choices=["small", "paper"], default="small",
        help="small: the CPU leaderboard's generating parameters (Chomsky train <= 20, test 21-100); paper: the "
        "builders' defaults (Chomsky train <= 40, test 41-500)",
    )
    parser.add_argument("--max-steps", type=int, default=Budget.max_steps)
    parser.add_argument("--batch-size", type=int, default=Budget.batch_size)
    parser.add_argument("--learning-rate", type=float, default=Budget.learning_rate)
    parser.add_argument(
        "--param", action="append", default=[], metavar="BUILDER.KEY=VALUE",
        help="override a generating parameter of one builder, e.g. chomsky_hierarchy.test_lengths=[21,60] (JSON values)",
    )
    parser.add_argument("--threads", type=int, help="torch threads (two runs side by side: 1 each)")
    parser.add_argument("--leaderboard-only", action="store_true", help="rewrite the leaderboard from the cells")
    args = parser.parse_args(argv)
    if args.seeds < 1:
        parser.error("--seeds must be at least 1")
    if not args.leaderboard_only and not (args.models and args.tasks):
        parser.error("--models and --tasks are required (or --leaderboard-only to rewrite the tables from the cells)")
    try:
        if args.leaderboard_only:
            from .leaderboard import write_leaderboard

            write_leaderboard(args.output_dir)
            return
        budget = Budget(args.max_steps, args.batch_size, args.learning_rate, threads=args.threads)
        params = {}
        for text in args.param:
            builder, dot, assignment = text.partition(".")
            if not dot or builder not in BENCH_BUILDERS:
                raise ValueError(f"--param takes BUILDER.KEY=VALUE with BUILDER one of {BENCH_BUILDERS}; got {text!r}")
            key, value = parse_param(assignment)
            params.setdefault(builder, {})[key] = value
        records = run_bench(args.models, args.tasks, args.seeds, args.output_dir, budget, args.data_scale, params)
    except (ValueError, argparse.ArgumentTypeError) as error:
        parser.exit(2, f"lengthgen-bench: error: {error}\n")
    failed = [r for r in records if r["status"] != "ok"]
    print(f"{len(records) - len(failed)} cells done, {len(failed)} failed; {os.path.join(args.output_dir, 'leaderboard.md')}")


if __name__ == "__main__":
    main()
