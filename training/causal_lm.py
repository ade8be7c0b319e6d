"""Fine-tuning and evaluating a causal LM with window-level recurrence (or the plain baseline, or memory tokens) on long
documents (Yoshida, Ettinger and Gimpel, "Adding Recurrence to Pretrained Transformers for Improved Efficiency and
Context Size", arXiv:2008.07027, §4-5): what `examples/run_clm_recurrent.py` runs
(`train_and_evaluate(*parse_args(argv))`).

GPT-2 checkpoints become `GPT2WithRecurrence`; any other causal LM family (Llama, Qwen2, Mistral, GPT-NeoX, ...)
becomes `CausalLMWithRecurrence`, which also carries memory tokens (`num_memory_tokens`, the RMT baseline).

Training (§5): every document is cut into runs of `windows_per_example` windows (20 of 300 tokens) that the model reads
with backpropagation through time (`--gradient_checkpointing` keeps only each window's bottleneck); Adam (AdamW with
weight decay 0) with the learning rate warmed up linearly from 0 over 100 steps, then constant; 2 epochs; evaluation
every `eval_every_tokens` training tokens (paper: 2 million), keeping the best checkpoint by validation loss with
`--eval_strategy steps --load_best_model_at_end --metric_for_best_model loss`. The paper chose learning rates per model
on WikiText-103 and does not give them.

Evaluation reads each whole document window by window, as the model is used: a batch of documents is fed in chunks of
`eval_chunk_windows` windows with the recurrent state, so memory is bounded for book-length documents. Metrics: `loss`
(per token, nats), `perplexity` (per token), `perplexity_per_word` (the paper's: the same total negative
log-likelihood over the number of words), `flops_per_token` (Tables 1-2). `eval_overlaps` evaluates at several overlaps
after training; the recurrent model is meant to be evaluated at the overlap it was trained with (§4.2).
"""

import itertools
import json
import logging
import math
import os
import time
from dataclasses import dataclass, field

import torch
import transformers
from transformers import (
    AutoConfig,
    AutoModelForCausalLM,
    AutoTokenizer,
    DataCollatorForSeq2Seq,
    Trainer,
    set_seed,
)
from transformers.trainer_utils import IntervalStrategy

from lengthgen.cli import UsageError, check_positive
from lengthgen.data.long_documents import CORPORA, load_documents, tokenize_documents
from lengthgen.modeling import (
    CausalLMWithRecurrence,
    CausalLMWithRecurrenceConfig,
    GPT2WithRecurrence,
    GPT2WithRecurrenceConfig,
    check_overlap,
    flops_per_token,
)

from .arguments import TrainingArguments, check_model_paths, log_under_output_dir, parse_command_line, time_budget
from .models import recurrence_fields
from .results import RECURRENCE_PAPER, written_whole
from .runner import guard_recurrent_run, train_and_save, upload_output_dir
from .sharding import check_launch, shards_parameters
from .windows import document_runs

logger = logging.getLogger(__name__)
RECURRENCE_FIELDS = ("window_size", "overlap", "insertion_layer", "recurrence_hidden_size",
                     "recurrence_num_hidden_layers", "use_recurrence", "num_memory_tokens", "carry_layer_states")


@dataclass
class RecurrentLMArguments:
    model_name_or_path: str | None = field(
        default=None,
        metadata={"help": "A causal LM checkpoint (e.g. gpt2, Qwen/Qwen2-0.5B: its weights are kept and the recurrence "
                          "is added) or a gpt2_recurrent / causal_lm_recurrent checkpoint to continue."},
    )
    config_name: str | None = field(
        default=None,
        metadata={"help": "A causal LM config to train from scratch; with model_name_or_path, a recurrent config whose "
                          "recurrence fields (window, overlap, l_ins, h_prev network) to use, e.g. "
                          "hub_configs/gpt2-recurrent-pg19. Command-line fields win."},
    )
    config_overrides: str | None = field(
        default=None, metadata={"help": "Override config fields when training from scratch: 'n_layer=2,n_embd=64'."}
    )
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer (default: model_name_or_path)."})
    use_recurrence: bool | None = field(
        default=None,
        metadata={"help": "False: the plain model on the same windows (default True or the checkpoint's)."},
    )
    window_size: int | None = field(default=None, metadata={"help": "Window size T (default 300 or the checkpoint's)."})
    overlap: int | None = field(
        default=None, metadata={"help": "Overlap o in training (default 0 or the checkpoint's)."}
    )
    insertion_layer: int | None = field(default=None, metadata={
        "help": "l_ins, the 0-based index of the layer h_prev enters (default 1: the paper's second layer); in a "
                "hybrid (Qwen3.5, LFM2, Granite 4, ...) one of its softmax-attention layers"})
    recurrence_hidden_size: int | None = field(default=None, metadata={"help": "Width of the h_prev FFN (200)."})
    recurrence_num_hidden_layers: int | None = field(default=None, metadata={"help": "Hidden layers of it (3)."})
    num_memory_tokens: int | None = field(
        default=None, metadata={"help": "Carry this many memory tokens instead of h_prev (RMT; not for GPT-2 models)."}
    )
    carry_layer_states: bool | None = field(default=None, metadata={
        "help": "A hybrid's (Qwen3.5, LFM2, Granite 4, ...) or Mamba-2's recurrent layers carry their states from "
                "window to window (not in the paper; with an overlap, the state after each window's first "
                "T - overlap tokens)."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow model code shipped with a checkpoint."})
    dtype: str = field(default="float32", metadata={
        "help": "Precision the checkpoint's weights are loaded in: float32 (the default: fp32 weights and optimizer "
                "states, --bf16 trains in autocast, as FSDP's mixed precision does), bfloat16, float16, or auto (the "
                "precision the checkpoint was saved in, what transformers' from_pretrained does by default).",
        "choices": ["float32", "bfloat16", "float16", "auto"]})

    def __post_init__(self):  # mistakes named before any model is loaded
        if self.dtype not in ("float32", "bfloat16", "float16", "auto"):
            raise UsageError(f"--dtype must be float32, bfloat16, float16 or auto, got {self.dtype!r}.")
        check_model_paths(self)
        check_positive({f"--{flag}": getattr(self, flag) for flag in ("window_size", "recurrence_hidden_size")})
        for flag in ("overlap", "insertion_layer", "num_memory_tokens", "recurrence_num_hidden_layers"):
            if getattr(self, flag) is not None and getattr(self, flag) < 0:
                raise UsageError(f"--{flag} must be at least 0, got {getattr(self, flag)}.")
        if self.window_size is not None and self.overlap is not None:
            try:
                check_overlap(self.window_size, self.overlap)
            except ValueError as error:
                raise UsageError(f"--window_size, --overlap: {error}.") from None


@dataclass
class DocumentArguments:
    corpus: str = field(metadata={"help": f"One of {CORPORA}: how rows or files become documents."})
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset (or a local folder like one)."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Its config."})
    train_file: str | None = field(default=None, metadata={"help": "Local training documents."})
    validation_file: str | None = field(default=None, metadata={"help": "Local validation documents."})
    test_file: str | None = field(default=None, metadata={"help": "Local test documents."})
    streaming: bool = field(
        default=False, metadata={"help": "Stream the corpus (PG-19); training then needs max_steps."}
    )
    max_train_books: int | None = field(default=None, metadata={"help": "First N training books by file name (1250)."})
    max_eval_tokens: int | None = field(
        default=None, metadata={"help": "First N tokens of each validation document (PG-19 early stopping: 15000)."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Keep the first N training documents."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Keep the first N documents per eval split."})
    windows_per_example: int = field(default=20, metadata={"help": "K: windows per training example (BPTT length)."})
    eval_every_tokens: int | None = field(
        default=None, metadata={"help": "Evaluate (and save) every N training tokens (paper: 2000000)."}
    )
    eval_overlaps: list[int] = field(
        default_factory=list, metadata={"help": "Overlaps to evaluate at after training (default: the training one)."}
    )
    eval_chunk_windows: int = field(default=4, metadata={"help": "Windows per forward call when evaluating."})

    def __post_init__(self):  # mistakes named before any corpus is read
        if self.corpus not in CORPORA:
            raise UsageError(f"--corpus must be one of {', '.join(CORPORA)}, got {self.corpus!r}.")
        for flag in ("train_file", "validation_file", "test_file"):
            if getattr(self, flag) and not os.path.exists(getattr(self, flag)):
                raise UsageError(f"--{flag}: no such file or directory: {getattr(self, flag)}")
        check_positive({f"--{flag}": getattr(self, flag)
                        for flag in ("max_train_books", "max_eval_tokens", "max_train_samples", "windows_per_example",
                                     "eval_every_tokens", "eval_chunk_windows")})


@dataclass
class RecurrentLMTrainingArguments(TrainingArguments):
    """TrainingArguments with §5's recipe as defaults: 2 epochs, linear warm-up over 100 steps to a constant rate."""

    num_train_epochs: float = field(default=2.0, metadata={"help": "Epochs (paper: 2)."})
    warmup_steps: float = field(default=100, metadata={"help": "Linear warm-up steps from 0 (paper: 100)."})
    lr_scheduler_type: str = field(default="constant_with_warmup", metadata={"help": "Paper: constant after warm-up."})


@torch.no_grad()
def document_nll(model, documents, batch_size: int, chunk_tokens: int, overlap: int, shard: tuple[int, int] = (0, 1),
                 longest_of_all=None):
    """Summed next-token negative log-likelihood, predicted tokens and words of whole documents, each read from start
    to end window by window (with `overlap`) with the recurrent state carried between calls of `chunk_tokens` tokens.

    `documents` has `input_ids` (bos first) and `num_words`; `shard` = (index, count) takes every count-th document.
    `longest_of_all` (for sharded parameters, where every process must make the same calls): a function giving the
    largest of the processes' values; each batch is then padded to the longest document of all processes' batches, and
    a process out of documents reads one row of padding until every process is done."""
    device = next(model.parameters()).device
    pad = getattr(model.config, "eos_token_id", None) or 0
    rows = itertools.islice(iter(documents), shard[0], None, shard[1])
    nll, tokens, words = 0.0, 0, 0
    while True:
        batch = list(itertools.islice(rows, batch_size))
        longest = max((len(row["input_ids"]) for row in batch), default=0)
        if longest_of_all is not None:
            longest = longest_of_all(longest)
        if longest == 0:
            break
        ids = torch.full((max(len(batch), 1), longest), pad, dtype=torch.long)
        mask = torch.zeros_like(ids)
        for i, row in enumerate(batch):
            ids[i, : len(row["input_ids"])] = torch.tensor(row["input_ids"])
            mask[i, : len(row["input_ids"])] = 1
        ids, mask, state = ids.to(device), mask.to(device), None
        for start in range(0, longest, chunk_tokens):
            piece = slice(start, start + chunk_tokens)
            out = model(ids[:, piece], attention_mask=mask[:, piece], labels=ids[:, piece], recurrent_state=state,
                        overlap=overlap)
            state = out.recurrent_state
            nll += out.loss.item() * out.num_predicted_tokens
            tokens += out.num_predicted_tokens
        words += sum(row["num_words"] for row in batch)
    return nll, tokens, words


class DocumentPerplexityTrainer(Trainer):
    """Trainer whose evaluation reads whole documents window by window (`document_nll`) instead of batching
    training-style examples, and reports per-token and per-word perplexity and FLOPs/token."""

    def __init__(self, *args, eval_chunk_windows: int = 4, **kwargs):
        super().__init__(*args, **kwargs)
        self.eval_chunk_windows = eval_chunk_windows

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval", overlap: int | None = None):
        """Perplexity of whole documents read with `overlap` (default: the model's)."""
        documents = self.eval_dataset if eval_dataset is None else eval_dataset
        if documents is None:
            raise UsageError("No evaluation documents: pass --validation_file or a dataset with a validation split.")
        if isinstance(documents, dict):
            return {k: v for name, d in documents.items()
                    for k, v in self.evaluate(d, ignore_keys, f"{metric_key_prefix}_{name}", overlap).items()}
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        start_time = time.time()
        config = model.config
        overlap = config.overlap if overlap is None else overlap
        check_overlap(config.window_size, overlap)
        chunk = config.window_size + (self.eval_chunk_windows - 1) * (config.window_size - overlap)
        if "num_tokens" in (getattr(documents, "column_names", None) or []):  # longest first: less padding per batch
            documents = documents.sort("num_tokens", reverse=True)
        shard = (self.args.process_index, self.args.world_size)
        longest_of_all = None
        if shards_parameters(self.args) and self.args.world_size > 1:  # every process makes the same calls
            def longest_of_all(length: int) -> int:
                return int(self.accelerator.gather(torch.tensor([length], device=self.args.device)).max())
        nll, tokens, words = document_nll(model, documents, self.args.eval_batch_size, chunk, overlap, shard,
                                          longest_of_all)
        totals = torch.tensor([nll, tokens, words], dtype=torch.float64, device=self.args.device)
        if self.args.world_size > 1:
            totals = self.accelerator.reduce(totals, reduction="sum")
        nll, tokens, words = totals.tolist()
        if tokens == 0:
            raise UsageError("The evaluation documents hold no token to predict.")
        model.train(was_training)
        prefix = metric_key_prefix
        metrics = {
            f"{prefix}_loss": nll / tokens,
            f"{prefix}_perplexity": math.exp(nll / tokens),
            f"{prefix}_perplexity_per_word": math.exp(nll / words) if words else float("nan"),
            f"{prefix}_tokens": int(tokens),
            f"{prefix}_words": int(words),
            f"{prefix}_overlap": overlap,
            f"{prefix}_flops_per_token": flops_per_token(config, config.window_size, overlap,
                                                         getattr(config, "num_memory_tokens", 0)),
            f"{prefix}_runtime": round(time.time() - start_time, 4),
        }
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


def load_model(model_args: RecurrentLMArguments, tokenizer) -> GPT2WithRecurrence | CausalLMWithRecurrence:
    """A causal LM checkpoint with the recurrence added (GPT-2: `GPT2WithRecurrence`, any other family:
    `CausalLMWithRecurrence`), a recurrent checkpoint to continue, or a new model from a config."""
    fields = recurrence_fields(model_args, RECURRENCE_FIELDS)
    source = model_args.model_name_or_path or model_args.config_name
    if not source:
        raise UsageError("Pass --model_name_or_path (fine-tune a model) or --config_name (train from scratch).")
    config = AutoConfig.from_pretrained(source, trust_remote_code=model_args.trust_remote_code)
    if config.model_type in ("gpt2", "gpt2_recurrent"):
        for flag in ("num_memory_tokens", "carry_layer_states"):
            if fields.pop(flag, None):
                raise UsageError(f"--{flag} needs a CausalLMWithRecurrence; GPT-2 models here carry h_prev only.")
    if model_args.model_name_or_path:
        dtype = model_args.dtype if model_args.dtype == "auto" else getattr(torch, model_args.dtype)
        if config.model_type == "gpt2":
            model = GPT2WithRecurrence.from_pretrained_gpt2(model_args.model_name_or_path, **fields)
            if dtype == "auto":  # the precision the checkpoint was saved in, as its config records it
                dtype = getattr(config, "dtype", None)
                dtype = getattr(torch, dtype) if isinstance(dtype, str) else dtype
            return model.to(dtype) if dtype is not None else model
        if config.model_type in ("gpt2_recurrent", "causal_lm_recurrent"):
            return AutoModelForCausalLM.from_pretrained(
                model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code, dtype=dtype, **fields
            )
        return CausalLMWithRecurrence.from_pretrained(model_args.model_name_or_path, dtype=dtype,
                                                      trust_remote_code=model_args.trust_remote_code, **fields)
    if model_args.config_overrides:
        config.update_from_string(model_args.config_overrides)
    bos = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    tokens = {"vocab_size": len(tokenizer), "bos_token_id": bos, "eos_token_id": tokenizer.eos_token_id}
    try:  # the recurrence's checks against the model (an insertion layer it has, a window its positions hold)
        if config.model_type == "gpt2":
            recurrent = GPT2WithRecurrenceConfig(**{**config.to_dict(), **fields, **tokens})
        else:
            config.update(tokens)
            recurrent = CausalLMWithRecurrenceConfig(decoder_config=config, **fields)
    except ValueError as error:
        raise UsageError(f"--config_name {model_args.config_name}: {error}") from None
    if config.model_type == "gpt2":
        return GPT2WithRecurrence(recurrent)
    return CausalLMWithRecurrence(recurrent)


def parse_args(argv: list[str]):
    """(model, data, training) arguments of a command line, or of one JSON or YAML file named alone."""
    return parse_command_line((RecurrentLMArguments, DocumentArguments, RecurrentLMTrainingArguments), argv)


def train_and_evaluate(model_args: RecurrentLMArguments, data_args: DocumentArguments,
                       training_args: RecurrentLMTrainingArguments) -> dict:
    """Fine-tune (`do_train`) and evaluate (`do_eval`: validation, `do_predict`: test) at the overlaps asked for; the
    metrics, also written to the output folder's all_results.json and model card."""
    check_launch(training_args, reads_windows=True)
    if data_args.streaming and training_args.do_train and training_args.max_steps <= 0:
        raise UsageError("--streaming reads the corpus without knowing its length: give --max_steps.")
    if training_args.ddp_find_unused_parameters is None:  # the recurrence module is idle in one-window examples
        training_args.ddp_find_unused_parameters = True

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if not training_args.should_log:
        transformers.utils.logging.set_verbosity_warning()
    set_seed(training_args.seed)

    if not (model_args.tokenizer_name or model_args.model_name_or_path):
        raise UsageError("A model trained from --config_name needs --tokenizer_name (a tokenizer folder or Hub id).")
    tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path)
    tokenizer.model_max_length = int(1e30)  # documents are read in windows, never truncated to the model's positions
    tokenizer.padding_side = "right"
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    model = load_model(model_args, tokenizer)
    guard_recurrent_run(training_args, model_args, model, RECURRENCE_FIELDS, data_args,
                        ("corpus", "dataset_name", "dataset_config_name", "train_file", "max_train_books",
                         "max_train_samples", "windows_per_example"))
    window, overlap = model.config.window_size, model.config.overlap
    logger.info("window %d, overlap %d, recurrence %s", window, overlap, model.config.use_recurrence)

    data_files = {split: path for split, path in (("train", data_args.train_file),
                  ("validation", data_args.validation_file), ("test", data_args.test_file)) if path}
    with training_args.main_process_first(desc="loading documents"):
        documents = load_documents(data_args.corpus, data_args.dataset_name, data_args.dataset_config_name,
                                   data_files, data_args.streaming, data_args.max_train_books)
    for split, wanted in (("train", training_args.do_train), ("validation", training_args.do_eval),
                          ("test", training_args.do_predict)):
        if wanted and split not in documents:
            raise UsageError(f"No {split!r} split: the corpus has {sorted(documents)}.")

    def prepare(split, limit, max_tokens=None):
        dataset = documents[split]
        if limit is not None:
            dataset = dataset.take(limit)
        columns = dataset.column_names or list(next(iter(dataset)))  # a streamed JSON file may not know them yet
        dataset = dataset.map(tokenize_documents, batched=True, remove_columns=columns,
                              fn_kwargs={"tokenizer": tokenizer, "max_tokens": max_tokens})
        return dataset.filter(lambda row: row["num_tokens"] > 0)

    with training_args.main_process_first(desc="tokenization"):
        train_dataset = None
        if training_args.do_train:
            train_dataset = prepare("train", data_args.max_train_samples).map(
                document_runs, batched=True, remove_columns=["input_ids", "num_words", "num_tokens"],
                fn_kwargs={"window": window, "overlap": overlap, "windows_per_example": data_args.windows_per_example},
            )
        validation = prepare("validation", data_args.max_eval_samples, data_args.max_eval_tokens) \
            if "validation" in documents else None
        test = prepare("test", data_args.max_eval_samples) if training_args.do_predict else None

    if data_args.eval_every_tokens:
        tokens_per_step = (training_args.per_device_train_batch_size * training_args.gradient_accumulation_steps
                           * training_args.world_size * data_args.windows_per_example * (window - overlap))
        training_args.eval_strategy = IntervalStrategy.STEPS
        training_args.eval_steps = max(1, round(data_args.eval_every_tokens / tokens_per_step))
        if training_args.save_strategy == IntervalStrategy.STEPS:
            training_args.save_steps = training_args.eval_steps

    # sharded parameters are gathered at every call of a layer, once per window: every process's batch must hold the
    # same number of windows, so each is padded to the longest training example (padding never reaches a real token)
    run_tokens = data_args.windows_per_example * (window - overlap) + overlap \
        if shards_parameters(training_args) else None
    trainer = DocumentPerplexityTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=validation,
        processing_class=tokenizer,
        data_collator=DataCollatorForSeq2Seq(tokenizer, label_pad_token_id=-100, pad_to_multiple_of=run_tokens),
        eval_chunk_windows=data_args.eval_chunk_windows,
        callbacks=time_budget(training_args),
    )
    log_under_output_dir(trainer)

    all_metrics = {}
    if training_args.do_train:
        result = train_and_save(trainer, log=True)
        all_metrics.update(result.metrics)

    evaluations = [("eval", validation)] * training_args.do_eval + [("test", test)] * training_args.do_predict
    for overlap_at_eval in data_args.eval_overlaps or [overlap]:
        check_overlap(window, overlap_at_eval)
        if model.config.use_recurrence and overlap_at_eval != overlap:
            logger.warning("Evaluating a recurrent model trained with overlap %d at overlap %d (§4.2: use the "
                           "training overlap; h_prev then pools the positions the next window does not repeat).",
                           overlap, overlap_at_eval)
        for split, dataset in evaluations:
            metrics = trainer.evaluate(dataset, metric_key_prefix=f"{split}_overlap{overlap_at_eval}",
                                       overlap=overlap_at_eval)
            trainer.log_metrics(f"{split}_overlap{overlap_at_eval}", metrics)
            all_metrics.update(metrics)

    if training_args.should_save:
        os.makedirs(training_args.output_dir, exist_ok=True)
        with written_whole(os.path.join(training_args.output_dir, "all_results.json")) as f:
            json.dump(all_metrics, f, indent=2)
        trainer.create_model_card(
            finetuned_from=model_args.model_name_or_path,
            tasks="text-generation",
            dataset=data_args.dataset_name or data_args.corpus,
            tags=["lengthgen", "window-level-recurrence", model.config.model_type],
        )
        rows = [(split, o, all_metrics[f"{split}_overlap{o}_perplexity_per_word"],
                 all_metrics[f"{split}_overlap{o}_perplexity"], all_metrics[f"{split}_overlap{o}_flops_per_token"])
                for o in data_args.eval_overlaps or [overlap] for split, _ in evaluations]
        with open(os.path.join(training_args.output_dir, "README.md"), "a") as f:
            f.write(
                f"\n## lengthgen\n\nA causal LM with window-level recurrence (`{model.config.model_type}`, recurrence "
                f"{'on' if model.config.use_recurrence else 'off'}, window {window}, trained with overlap {overlap}): "
                f"{RECURRENCE_PAPER}.\n"
            )
            if rows:
                f.write("\n| split | overlap | perplexity per word | perplexity per token | FLOPs/token |\n"
                        "| --- | --- | --- | --- | --- |\n")
                f.writelines(f"| {s} | {o} | {w:.2f} | {t:.2f} | {fl:.3g} |\n" for s, o, w, t, fl in rows)
        if training_args.push_to_hub:
            upload_output_dir(trainer.hub_model_id, training_args.output_dir)
    return all_metrics

