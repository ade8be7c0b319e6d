#!/usr/bin/env python
"""Train and evaluate a masked LM (I-BERT or the BERT baseline) on a length-split masked task.

    python examples/run_mlm.py --config_name hub_configs/ibert-nsp --dataset_name nsp_inductive \
        --dataset_config_name add --output_dir outputs/ibert-nsp-add --do_train --do_eval
    accelerate launch examples/run_mlm.py ...            # same arguments, any number of processes

The model is built from `--config_name` (a hub_configs/ folder: config.json plus tokenizer files) or loaded from
`--model_name_or_path` (a checkpoint folder or Hub id). `--dataset_name` is one of lengthgen's builders
(`nsp_inductive`, `ptb_inductive`; override generating parameters with `--dataset_param KEY=VALUE`), or anything
`datasets.load_dataset` reads (an exported folder, a Hub repository) with `input`, `target` and `difficulty` columns.

Evaluation reports, per evaluation set, sequence accuracy (exact match on the masked span) overall and per
difficulty, masked-token accuracy, and over the masked tokens the NLL, bits per token (bits per character on character
tasks) and perplexity; training reports sequences per second (`train_samples_per_second`). Metrics are written to
`{output_dir}/all_results.json` and logged to TensorBoard.
"""

import json
import logging
import math
import os
import sys
from dataclasses import dataclass, field

import evaluate
import lengthgen.modeling  # noqa: F401  (registers I-BERT with the Auto classes)
import torch
import transformers
from lengthgen.cli import run_command
from lengthgen.data.export import load_splits, parse_param
from lengthgen.data.masked_lm import (
    MASKED_SPAN_ACCURACY,
    flatten_metrics,
    masked_spans,
    predictions_and_label_log_probs,
    tokenize_masked_examples,
)
from lengthgen.release import record_run
from lengthgen.training.models import (
    ModelArguments,
    load_masked_lm,
    masked_lm_tokenizer,
    record_training_hyperparameters,
)
from lengthgen.training.arguments import TrainingArguments, log_under_output_dir, script_callbacks
from lengthgen.training.scripts import upload_output_dir
from transformers import (
    DataCollatorForTokenClassification,
    HfArgumentParser,
    Trainer,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class DataArguments:
    dataset_name: str = field(default="nsp_inductive", metadata={"help": "A lengthgen builder or a load_dataset path."})
    dataset_config_name: str | None = field(default="add", metadata={"help": "Config of the dataset (e.g. add, char)."})
    dataset_param: list[str] = field(
        default_factory=list, metadata={"help": "Generating parameters of a lengthgen builder: KEY=VALUE [KEY=VALUE ...], JSON values."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Truncate the training set."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Truncate the validation set."})
    difficulty_bucket: int = field(
        default=1,
        metadata={"help": "Report per-difficulty metrics in buckets of this width (e.g. 16 for PTB char lengths)."},
    )
    eval_train_samples: int = field(
        default=0, metadata={"help": "Also evaluate on this many training rows (accuracy at the trained lengths)."}
    )


@dataclass
class MLMTrainingArguments(TrainingArguments):
    lr_decay_per_epoch: float | None = field(
        default=None,
        metadata={
            "help": "Multiply the learning rate by this factor after every epoch (paper: 0.97, with Adam), "
            "instead of --lr_scheduler_type."
        },
    )


def exponential_decay_optimizer(model, args: MLMTrainingArguments, num_train_rows: int):
    """Adam(W) whose learning rate is multiplied by `lr_decay_per_epoch` after every epoch (I-BERT paper §6.1)."""
    optimizer = torch.optim.AdamW(
        model.parameters(),
        lr=args.learning_rate,
        betas=(args.adam_beta1, args.adam_beta2),
        eps=args.adam_epsilon,
        weight_decay=args.weight_decay,
    )
    rows_per_step = args.per_device_train_batch_size * args.world_size * args.gradient_accumulation_steps
    steps_per_epoch = max(1, math.ceil(num_train_rows / rows_per_step))
    gamma = args.lr_decay_per_epoch
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: gamma ** (step // steps_per_epoch))
    return optimizer, scheduler


def write_model_card_section(output_dir: str, model, data_args: DataArguments, metrics: dict):
    """Append the paper, the task and the per-difficulty results to the Trainer's model card."""
    rows = sorted(
        (name.split("_sequence_accuracy_d")[0].replace("eval_", ""), int(name.rsplit("_d", 1)[1]), value)
        for name, value in metrics.items()
        if "_sequence_accuracy_d" in name
    )
    lines = [
        "",
        "## lengthgen",
        "",
        f"Architecture `{model.config.model_type}` trained with lengthgen's `examples/run_mlm.py` on "
        f"`{data_args.dataset_name}` / `{data_args.dataset_config_name}`, a task split by length: the validation "
        "difficulties are never seen in training.",
        "",
        "I-BERT: H. Nam, S. B. Seo, V. S. Mailthody, N. Michael, L. Li. *I-BERT: Inductive Generalization of "
        "Transformer to Arbitrary Context Lengths*, 2020.",
    ]
    if rows:
        lines += ["", "| evaluation set | difficulty | sequence accuracy |", "| --- | --- | --- |"]
        lines += [f"| {name} | {d} | {value:.4f} |" for name, d, value in rows]
    with open(os.path.join(output_dir, "README.md"), "a") as f:
        f.write("\n".join(lines) + "\n")


def make_compute_metrics(difficulties, bucket: int = 1):
    """compute_metrics for one evaluation set, whose rows have these difficulties (evaluation keeps row order).
    With `bucket` > 1, difficulties are reported by the lower end of their bucket (16, 32, ... for bucket 16)."""
    metric = evaluate.load(MASKED_SPAN_ACCURACY)
    difficulties = [d // bucket * bucket for d in difficulties]

    def compute_metrics(eval_prediction):
        (predicted_ids, label_log_probs), label_ids = eval_prediction.predictions, eval_prediction.label_ids
        predictions, references, log_probs = masked_spans(predicted_ids, label_log_probs, label_ids)
        result = metric.compute(
            predictions=predictions,
            references=references,
            difficulties=difficulties[: len(predictions)],
            target_log_probs=log_probs,
        )
        return flatten_metrics(result)

    return compute_metrics


def main(argv=None):
    parser = HfArgumentParser((ModelArguments, DataArguments, MLMTrainingArguments))
    if argv is None and len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        model_args, data_args, training_args = parser.parse_json_file(os.path.abspath(sys.argv[1]))
    else:
        model_args, data_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    if training_args.ddp_find_unused_parameters is None:
        training_args.ddp_find_unused_parameters = False  # every parameter takes part in the MLM loss

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if not training_args.should_log:
        transformers.utils.logging.set_verbosity_warning()
    set_seed(training_args.seed)

    last_checkpoint = None
    if training_args.do_train and os.path.isdir(training_args.output_dir):
        last_checkpoint = get_last_checkpoint(training_args.output_dir)
        if last_checkpoint is not None and training_args.resume_from_checkpoint is None:
            logger.info("Resuming from %s", last_checkpoint)

    with training_args.main_process_first(desc="dataset generation"):
        params = dict(parse_param(p) for p in data_args.dataset_param)
        splits = load_splits(data_args.dataset_name, data_args.dataset_config_name, params)
    for split, needed in (("train", training_args.do_train), ("validation", True)):
        if needed and split not in splits:
            raise ValueError(f"{data_args.dataset_name} has no {split!r} split; it has {sorted(splits)}.")
    tokenizer = masked_lm_tokenizer(model_args, data_args.dataset_name, data_args.dataset_config_name, splits)
    model = load_masked_lm(model_args, tokenizer)
    if training_args.do_train:
        record_training_hyperparameters(model.config, training_args)

    if data_args.max_train_samples is not None and "train" in splits:
        splits["train"] = splits["train"].select(range(min(data_args.max_train_samples, len(splits["train"]))))
    if data_args.max_eval_samples is not None:
        splits["validation"] = splits["validation"].select(range(min(data_args.max_eval_samples, len(splits["validation"]))))
    eval_sets = {"validation": splits["validation"]}
    if data_args.eval_train_samples and "train" in splits:
        eval_sets["train"] = splits["train"].select(range(min(data_args.eval_train_samples, len(splits["train"]))))

    def featurize(dataset):
        columns = [c for c in dataset.column_names if c != "difficulty"]
        return dataset.map(
            tokenize_masked_examples, batched=True, fn_kwargs={"tokenizer": tokenizer}, remove_columns=columns
        )

    with training_args.main_process_first(desc="tokenization"):
        train_dataset = featurize(splits["train"]) if training_args.do_train else None
        eval_features = {name: featurize(dataset) for name, dataset in eval_sets.items()}

    trainer = Trainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_features["validation"],
        processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer),
        compute_metrics=make_compute_metrics(eval_sets["validation"]["difficulty"], data_args.difficulty_bucket),
        preprocess_logits_for_metrics=predictions_and_label_log_probs,
        optimizers=(
            exponential_decay_optimizer(model, training_args, len(train_dataset))
            if training_args.lr_decay_per_epoch and train_dataset is not None
            else (None, None)
        ),
        callbacks=script_callbacks(training_args),
    )
    log_under_output_dir(trainer)

    all_metrics = {}
    if training_args.do_train:
        train_result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint or last_checkpoint)
        trainer.save_model()
        trainer.log_metrics("train", train_result.metrics)
        trainer.save_metrics("train", train_result.metrics)
        trainer.save_state()
        all_metrics.update({f"train_{k}": v for k, v in train_result.metrics.items()})

    if training_args.do_eval:
        for name, dataset in eval_sets.items():
            trainer.compute_metrics = make_compute_metrics(dataset["difficulty"], data_args.difficulty_bucket)
            metrics = trainer.evaluate(eval_dataset=eval_features[name], metric_key_prefix=f"eval_{name}")
            trainer.log_metrics(f"eval_{name}", metrics)
            trainer.save_metrics(f"eval_{name}", metrics)
            all_metrics.update(metrics)
        if training_args.should_save:
            with open(os.path.join(training_args.output_dir, "all_results.json"), "w") as f:
                json.dump(all_metrics, f, indent=2)

    if training_args.should_save:
        if training_args.do_train:  # how the model was trained, for lengthgen-release's model card
            record_run(training_args.output_dir, "examples/run_mlm.py", argv, data_args, task="fill-mask",
                       trainer=trainer)
        trainer.create_model_card(
            finetuned_from=model_args.model_name_or_path,
            tasks="fill-mask",
            dataset=f"{data_args.dataset_name} ({data_args.dataset_config_name})",
            tags=["lengthgen", "length-generalization", model.config.model_type],
        )
        write_model_card_section(training_args.output_dir, model, data_args, all_metrics)
        if training_args.push_to_hub:
            upload_output_dir(trainer.hub_model_id, training_args.output_dir, "run_mlm.py")
    return all_metrics


if __name__ == "__main__":
    run_command(main, "run_mlm.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
