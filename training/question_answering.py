"""Fine-tuning RoBERTa with window-level recurrence (or the disjoint baseline) on HotpotQA, distractor setting, with
answer-only F1 / exact match (Yoshida, Ettinger and Gimpel, arXiv:2008.07027, §5.4, Table 3): what
`examples/run_qa_recurrent.py` runs (`train_and_evaluate(*parse_args(argv))`).

Each question becomes windows of `window_size` tokens that begin with the question and a separator, consecutive
context pieces sharing `doc_stride` tokens (lengthgen.data.hotpotqa). The recipe of §5.4 is the default: learning rate
2e-5, 4 epochs, 30,000 random training questions (`max_train_samples`). Evaluation decodes "yes" / "no" from the
answer-type classifier or the best span over all windows, and scores it with the official answer normalisation
(`data/metrics/hotpotqa_answer`): overall, by the number of windows the question needed (`eval_f1_windows_3`, ...: how
the score holds up as contexts get longer) and by answer type (`eval_f1_span`, `eval_f1_yes`, `eval_f1_no`).
"""

import json
import logging
import os
import time
from dataclasses import dataclass, field
from functools import partial

import evaluate
import torch
import transformers
from accelerate.utils import gather_object
from transformers import (
    AutoConfig,
    AutoModelForQuestionAnswering,
    AutoTokenizer,
    Trainer,
    set_seed,
)

from lengthgen.cli import UsageError, check_positive
from lengthgen.data.hotpotqa import (
    ANSWER_TYPES,
    HOTPOTQA_ANSWER,
    decode_answer,
    load_hotpotqa,
    prepare_windows,
)
from lengthgen.modeling import (
    RobertaWithRecurrenceConfig,
    RobertaWithRecurrenceForQuestionAnswering,
)

from .arguments import TrainingArguments, check_model_paths, log_under_output_dir, parse_command_line, time_budget
from .models import recurrence_fields
from .results import RECURRENCE_PAPER, written_whole
from .runner import guard_recurrent_run, train_and_save, upload_output_dir

logger = logging.getLogger(__name__)
RECURRENCE_FIELDS = ("insertion_layer", "recurrence_hidden_size", "recurrence_num_hidden_layers", "recurrence_pooling",
                     "use_recurrence")
MODEL_INPUTS = ("input_ids", "attention_mask", "answer_window", "start_positions", "end_positions", "answer_types")


@dataclass
class RecurrentQAArguments:
    model_name_or_path: str | None = field(
        default=None, metadata={"help": "A RoBERTa checkpoint (e.g. roberta-base) or a roberta_recurrent one."}
    )
    config_name: str | None = field(
        default=None,
        metadata={"help": "A RoBERTa config to train from scratch; with model_name_or_path, a roberta_recurrent config "
                          "whose recurrence fields to use (hub_configs/roberta-recurrent-hotpotqa)."},
    )
    config_overrides: str | None = field(default=None, metadata={"help": "From scratch: 'num_hidden_layers=2,...'."})
    tokenizer_name: str | None = field(default=None, metadata={"help": "Tokenizer (default: model_name_or_path)."})
    use_recurrence: bool | None = field(default=None, metadata={"help": "False: the disjoint baseline."})
    insertion_layer: int | None = field(default=None, metadata={
        "help": "l_ins, the 0-based index of the layer h_prev enters (paper: the second layer, index 1)."})
    recurrence_hidden_size: int | None = field(default=None, metadata={"help": "MLP width (paper: 768)."})
    recurrence_num_hidden_layers: int | None = field(
        default=None, metadata={"help": "MLP hidden layers (paper: 1, its \"2 layer\" MLP)."})
    recurrence_pooling: str | None = field(default=None, metadata={"help": "last_layer (paper) or layer_weighted."})
    trust_remote_code: bool = field(default=False, metadata={"help": "Allow model code shipped with a checkpoint."})

    def __post_init__(self):  # mistakes named before any model is loaded
        check_model_paths(self)
        check_positive({"--recurrence_hidden_size": self.recurrence_hidden_size})
        for flag in ("insertion_layer", "recurrence_num_hidden_layers"):
            if getattr(self, flag) is not None and getattr(self, flag) < 0:
                raise UsageError(f"--{flag} must be at least 0, got {getattr(self, flag)}.")


@dataclass
class HotpotQAArguments:
    dataset_name: str | None = field(default=None, metadata={"help": "Hub dataset, e.g. hotpotqa/hotpot_qa."})
    dataset_config_name: str | None = field(default="distractor", metadata={"help": "Its config."})
    train_file: str | None = field(default=None, metadata={"help": "Official-format JSON training file."})
    validation_file: str | None = field(default=None, metadata={"help": "Official-format JSON dev file."})
    max_train_samples: int | None = field(default=None, metadata={"help": "Random training questions (paper: 30000)."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "First N validation questions."})
    window_size: int = field(default=512, metadata={"help": "Tokens per window, question and separators included."})
    doc_stride: int = field(default=128, metadata={"help": "Context tokens shared by consecutive windows."})
    max_answer_length: int = field(default=30, metadata={"help": "Longest span decoded, in tokens."})

    def __post_init__(self):  # mistakes named before any data is read
        for flag in ("train_file", "validation_file"):
            if getattr(self, flag) and not os.path.exists(getattr(self, flag)):
                raise UsageError(f"--{flag}: no such file or directory: {getattr(self, flag)}")
        if not 0 <= self.doc_stride < self.window_size:
            raise UsageError(f"--doc_stride must be in [0, --window_size {self.window_size}), got {self.doc_stride}.")
        check_positive({f"--{flag}": getattr(self, flag)
                        for flag in ("max_train_samples", "max_eval_samples", "max_answer_length")})


@dataclass
class QATrainingArguments(TrainingArguments):
    """TrainingArguments with §5.4's recipe as defaults."""

    learning_rate: float = field(default=2e-5, metadata={"help": "Paper: 2e-5."})
    num_train_epochs: float = field(default=4.0, metadata={"help": "Paper: 4."})


def collate_windows(features: list[dict], pad_token_id: int) -> dict:
    """Batch examples with different numbers of windows: missing windows are all padding (mask 0) at the end."""
    most = max(len(f["input_ids"]) for f in features)
    length = len(features[0]["input_ids"][0])
    ids = torch.full((len(features), most, length), pad_token_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for row, feature in enumerate(features):
        ids[row, : len(feature["input_ids"])] = torch.tensor(feature["input_ids"])
        mask[row, : len(feature["attention_mask"])] = torch.tensor(feature["attention_mask"])
    batch = {"input_ids": ids, "attention_mask": mask}
    for name in MODEL_INPUTS[2:]:
        if name in features[0]:
            batch[name] = torch.tensor([f[name] for f in features])
    return batch


class HotpotQATrainer(Trainer):
    """Trainer whose evaluation decodes each question's answer across its windows and scores answer-only F1 / EM."""

    def __init__(self, *args, max_answer_length: int = 30, **kwargs):
        super().__init__(*args, **kwargs)
        self.max_answer_length = max_answer_length
        self.answer_metric = evaluate.load(HOTPOTQA_ANSWER)

    def predict_answers(self, features) -> list[dict]:
        """`{"id", "prediction", "answer", "windows", "answer_type"}` per question of this process's share."""
        model = self.accelerator.unwrap_model(self.model)
        was_training = model.training
        model.eval()
        pad = model.config.pad_token_id
        rows = features.select(range(self.args.process_index, len(features), self.args.world_size))
        results = []
        for start in range(0, len(rows), self.args.eval_batch_size):
            chunk = rows.select(range(start, min(start + self.args.eval_batch_size, len(rows))))
            batch = collate_windows([{k: f[k] for k in MODEL_INPUTS[:2]} for f in chunk], pad)
            with torch.no_grad():
                out = model(**{k: v.to(self.args.device) for k, v in batch.items()})
            for i, feature in enumerate(chunk):
                prediction = decode_answer(out.start_logits[i].float().cpu(), out.end_logits[i].float().cpu(),
                                           out.answer_type_logits[i].float().cpu(), feature["offsets"],
                                           feature["context"], self.max_answer_length)
                results.append({"id": feature["id"], "prediction": prediction, "answer": feature["answer"],
                                "windows": len(feature["input_ids"]), "answer_type": feature["answer_types"]})
        model.train(was_training)
        return results

    def evaluate(self, eval_dataset=None, ignore_keys=None, metric_key_prefix="eval"):
        features = self.eval_dataset if eval_dataset is None else eval_dataset
        start_time = time.time()
        results = self.predict_answers(features)
        if self.args.world_size > 1:
            results = gather_object(results)
        metrics = {}
        buckets = {"": results}  # all, then by the number of windows (context length) and by the answer type
        for r in results:
            buckets.setdefault(f"_windows_{r['windows']}", []).append(r)
            buckets.setdefault(f"_{ANSWER_TYPES[r['answer_type']]}", []).append(r)
        for suffix, rows in sorted(buckets.items()):
            scores = self.answer_metric.compute(predictions=[r["prediction"] for r in rows],
                                                references=[r["answer"] for r in rows])
            metrics.update({f"{metric_key_prefix}_{k}{suffix}": v for k, v in scores.items()})
            metrics[f"{metric_key_prefix}_samples{suffix}"] = len(rows)
        metrics[f"{metric_key_prefix}_runtime"] = round(time.time() - start_time, 4)
        self.last_predictions = results
        self.log(metrics)
        self.control = self.callback_handler.on_evaluate(self.args, self.state, self.control, metrics)
        return metrics


def load_model(model_args: RecurrentQAArguments, tokenizer) -> RobertaWithRecurrenceForQuestionAnswering:
    """RoBERTa weights with the new heads, a roberta_recurrent checkpoint, or a new model from a config."""
    fields = recurrence_fields(model_args, RECURRENCE_FIELDS)
    if model_args.model_name_or_path:
        config = AutoConfig.from_pretrained(
            model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code)
        if config.model_type == "roberta_recurrent":
            return AutoModelForQuestionAnswering.from_pretrained(
                model_args.model_name_or_path, trust_remote_code=model_args.trust_remote_code, **fields)
        return RobertaWithRecurrenceForQuestionAnswering.from_pretrained_roberta(
            model_args.model_name_or_path, **fields)
    if not model_args.config_name:
        raise UsageError("Pass --model_name_or_path (fine-tune RoBERTa) or --config_name (train from scratch).")
    base = AutoConfig.from_pretrained(model_args.config_name, trust_remote_code=model_args.trust_remote_code)
    if model_args.config_overrides:
        base.update_from_string(model_args.config_overrides)
    special = dict(vocab_size=len(tokenizer), pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                   eos_token_id=tokenizer.eos_token_id)
    kept = {k: v for k, v in base.to_dict().items() if k not in ("model_type", "architectures", "auto_map")}
    return RobertaWithRecurrenceForQuestionAnswering(RobertaWithRecurrenceConfig(**{**kept, **fields, **special}))


def parse_args(argv: list[str]):
    """(model, data, training) arguments of a command line, or of one JSON or YAML file named alone."""
    return parse_command_line((RecurrentQAArguments, HotpotQAArguments, QATrainingArguments), argv)


def train_and_evaluate(model_args: RecurrentQAArguments, data_args: HotpotQAArguments,
                       training_args: QATrainingArguments) -> dict:
    """Fine-tune (`do_train`) and evaluate (`do_eval`) on HotpotQA; the metrics, also written to the output folder's
    all_results.json, predictions.json and model card."""
    if training_args.ddp_find_unused_parameters is None:  # the recurrence module is idle in one-window batches
        training_args.ddp_find_unused_parameters = True
    training_args.remove_unused_columns = False  # collate_windows picks the model's inputs itself

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if not training_args.should_log:
        transformers.utils.logging.set_verbosity_warning()
    set_seed(training_args.seed)

    if training_args.do_predict:
        raise UsageError("--do_predict: HotpotQA's test set has no answers to score; --do_eval scores the validation "
                         "split and writes its predictions.")
    if not (model_args.tokenizer_name or model_args.model_name_or_path):
        raise UsageError("A model trained from --config_name needs --tokenizer_name (a tokenizer folder or Hub id).")
    tokenizer = AutoTokenizer.from_pretrained(model_args.tokenizer_name or model_args.model_name_or_path)
    model = load_model(model_args, tokenizer)
    guard_recurrent_run(training_args, model_args, model, RECURRENCE_FIELDS, data_args,
                        ("dataset_name", "dataset_config_name", "train_file", "max_train_samples", "window_size",
                         "doc_stride"))
    data_files = {split: path for split, path in (("train", data_args.train_file),
                                                  ("validation", data_args.validation_file)) if path}
    with training_args.main_process_first(desc="loading HotpotQA"):
        splits = load_hotpotqa(data_args.dataset_name, data_args.dataset_config_name, data_files,
                               data_args.max_train_samples, training_args.seed)
    for split, wanted in (("train", training_args.do_train), ("validation", training_args.do_eval)):
        if wanted and split not in splits:
            raise UsageError(f"No {split!r} split: the data has {sorted(splits)}.")

    def featurize(dataset):
        return dataset.map(prepare_windows, batched=True, remove_columns=dataset.column_names, fn_kwargs={
            "tokenizer": tokenizer, "window_size": data_args.window_size, "doc_stride": data_args.doc_stride})

    with training_args.main_process_first(desc="windowing"):
        train_features = featurize(splits["train"]) if training_args.do_train else None
        eval_features = None
        if "validation" in splits:
            validation = splits["validation"]
            if data_args.max_eval_samples is not None:
                validation = validation.select(range(min(data_args.max_eval_samples, len(validation))))
            eval_features = featurize(validation)

    trainer = HotpotQATrainer(
        model=model,
        args=training_args,
        train_dataset=train_features.select_columns(list(MODEL_INPUTS)) if train_features is not None else None,
        eval_dataset=eval_features,
        processing_class=tokenizer,
        data_collator=partial(collate_windows, pad_token_id=tokenizer.pad_token_id),
        max_answer_length=data_args.max_answer_length,
        callbacks=time_budget(training_args),
    )
    log_under_output_dir(trainer)

    all_metrics = {}
    if training_args.do_train:
        result = train_and_save(trainer, log=True)
        all_metrics.update(result.metrics)
    if training_args.do_eval:
        metrics = trainer.evaluate()
        trainer.log_metrics("eval", metrics)
        trainer.save_metrics("eval", metrics)
        all_metrics.update(metrics)

    if training_args.should_save:
        os.makedirs(training_args.output_dir, exist_ok=True)
        with written_whole(os.path.join(training_args.output_dir, "all_results.json")) as f:
            json.dump(all_metrics, f, indent=2)
        if training_args.do_eval:
            with written_whole(os.path.join(training_args.output_dir, "predictions.json")) as f:
                json.dump({r["id"]: r["prediction"] for r in trainer.last_predictions}, f, indent=2)
        trainer.create_model_card(
            finetuned_from=model_args.model_name_or_path,
            tasks="question-answering",
            dataset=data_args.dataset_name or "HotpotQA (distractor)",
            tags=["lengthgen", "window-level-recurrence", model.config.model_type],
        )
        with open(os.path.join(training_args.output_dir, "README.md"), "a") as f:
            f.write(
                "\n## lengthgen\n\nRoBERTa with window-level recurrence (`roberta_recurrent`, recurrence "
                f"{'on' if model.config.use_recurrence else 'off'}): {RECURRENCE_PAPER}, §5.4.\n"
            )
            if "eval_f1" in all_metrics:
                f.write(f"\nHotpotQA distractor dev, answer only: F1 {all_metrics['eval_f1']:.2f}, "
                        f"EM {all_metrics['eval_exact_match']:.2f}.\n")
        if training_args.push_to_hub:
            upload_output_dir(trainer.hub_model_id, training_args.output_dir)
    return all_metrics

