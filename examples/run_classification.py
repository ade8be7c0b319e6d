#!/usr/bin/env python
"""Train and evaluate a sequence classifier (the NDR or its baselines, the Universal Transformer, the LSTM, any
Auto classifier) on a depth- or length-split task, alone or distilled from a teacher.

    python examples/run_classification.py --config_name hub_configs/ndr-ctl \
        --dataset_name ctl --dataset_config_name forward --output_dir outputs/ndr-ctl --do_train --do_eval
    accelerate launch examples/run_classification.py ...        # same arguments, any number of processes

Any dataset with `input` (space-separated tokens), `target` (the class) and `difficulty` columns works: lengthgen's
builders (`ctl`, `simple_arithmetic`, `listops`, the one-token-answer tasks of `chomsky_hierarchy`; override
generating parameters with `--dataset_param KEY=VALUE`), an exported folder or a Hub repository. The tokenizer is a
word-level one over the training inputs that frames every sequence with begin ([CLS]) and end ([SEP]) tokens; the
classes are the training targets.

Every split other than `train` is evaluated, with accuracy and expected calibration error (ECE) overall and per
difficulty (depth). `--num_steps` runs the shared layer for more steps at evaluation than in training (the thesis
trains ListOps with 20, tests with 24).

Distillation (`lengthgen.training.distillation`): `--teacher_model_name_or_path` a trained classifier of the same
classes; the loss is r T^2 KL(teacher_T || student_T) + (1 - r) CE (`--distillation_weight` r, default 0.9;
`--distillation_temperature` T, default 1: Abnar et al.'s LSTM -> Transformer setting). The teacher's logits on the
training inputs are computed once (`--teacher_logits_cache FILE.npy` keeps them between runs).
"""

import inspect
import json
import logging
import os
import sys
from dataclasses import dataclass, field

import evaluate
import lengthgen.modeling  # noqa: F401  (registers the NDR with the Auto classes)
import transformers
from lengthgen.cli import UsageError, check_positive, run_command
from lengthgen.data.calibration import calibration_metrics
from lengthgen.data.export import load_splits, parse_param
from lengthgen.data.masked_lm import MASKED_SPAN_ACCURACY, flatten_metrics
from lengthgen.release import record_evaluation, record_run
from lengthgen.training.models import (
    ModelArguments,
    classifier_tokenizer_and_labels,
    encode_classification,
    load_classifier,
    record_training_hyperparameters,
)
from lengthgen.training.distillation import ClassificationTrainer, DistillationArguments, teacher_logits
from lengthgen.training.arguments import TrainingArguments, log_under_output_dir, script_callbacks
from lengthgen.training.scripts import upload_output_dir
from transformers import DataCollatorWithPadding, HfArgumentParser, set_seed
from transformers.trainer_utils import get_last_checkpoint

logger = logging.getLogger(__name__)


@dataclass
class DataArguments:
    dataset_name: str = field(default="ctl", metadata={"help": "A lengthgen builder or a load_dataset path."})
    dataset_config_name: str | None = field(default=None, metadata={"help": "Config of the dataset."})
    dataset_param: list[str] = field(
        default_factory=list, metadata={"help": "Generating parameters of a lengthgen builder: KEY=VALUE [KEY=VALUE ...]."}
    )
    max_train_samples: int | None = field(default=None, metadata={"help": "Truncate the training set."})
    max_eval_samples: int | None = field(default=None, metadata={"help": "Truncate every evaluation set."})
    num_steps: int | None = field(
        default=None,
        metadata={"help": "NDR: steps of the shared layer in the final evaluation, passed to the model's forward as "
                  "`num_steps` (default: the model's, `num_layers`); training and the evaluations during it use the model's."},
    )
    eval_split: str | None = field(
        default=None,
        metadata={
            "help": "Split evaluated during training, whose accuracy --metric_for_best_model reads (default: "
            "'validation', the thesis's model-selection split, else the first split other than 'train')."
        },
    )


def make_compute_metrics(difficulties):
    """Accuracy overall and per difficulty (a one-token 'span' per example in the masked-span metric), and the
    expected calibration error of the softmax probabilities overall and per difficulty (`ece`, `ece_d<depth>`)."""
    metric = evaluate.load(MASKED_SPAN_ACCURACY)

    def compute_metrics(eval_prediction):
        predicted = eval_prediction.predictions.argmax(-1).tolist()
        references = eval_prediction.label_ids.tolist()
        result = metric.compute(
            predictions=[[p] for p in predicted],
            references=[[r] for r in references],
            difficulties=difficulties[: len(predicted)],
        )
        metrics = flatten_metrics(result)
        metrics = {k.replace("sequence_accuracy", "accuracy"): v for k, v in metrics.items() if "token_" not in k}
        return {**metrics, **calibration_metrics(eval_prediction.predictions, references,
                                                 difficulties[: len(predicted)])}

    return compute_metrics


def main(argv=None):
    parser = HfArgumentParser((ModelArguments, DataArguments, DistillationArguments, TrainingArguments))
    if argv is None and len(sys.argv) == 2 and sys.argv[1].endswith(".json"):
        model_args, data_args, distill_args, training_args = parser.parse_json_file(os.path.abspath(sys.argv[1]))
    else:
        model_args, data_args, distill_args, training_args = parser.parse_args_into_dataclasses(args=argv)
    if training_args.ddp_find_unused_parameters is None:
        training_args.ddp_find_unused_parameters = False

    logging.basicConfig(format="%(asctime)s %(levelname)s %(name)s: %(message)s", level=logging.INFO)
    if not training_args.should_log:
        transformers.utils.logging.set_verbosity_warning()
    set_seed(training_args.seed)

    last_checkpoint = None
    if training_args.do_train and os.path.isdir(training_args.output_dir):
        last_checkpoint = get_last_checkpoint(training_args.output_dir)

    with training_args.main_process_first(desc="dataset generation"):
        params = dict(parse_param(p) for p in data_args.dataset_param)
        splits = load_splits(data_args.dataset_name, data_args.dataset_config_name, params)
    if training_args.do_train and "train" not in splits:
        raise ValueError(f"{data_args.dataset_name} has no 'train' split; it has {sorted(splits)}.")
    tokenizer, labels = classifier_tokenizer_and_labels(model_args, splits)
    model = load_classifier(model_args, tokenizer, labels)
    if training_args.do_train:
        record_training_hyperparameters(model.config, training_args)
    if data_args.num_steps is not None:
        check_positive({"--num_steps": data_args.num_steps})
        if "num_steps" not in inspect.signature(model.forward).parameters:
            raise UsageError(f"--num_steps applies to the NDR family; {model.config.model_type} has no steps to set.")

    def featurize(dataset, limit=None):
        if limit is not None:
            dataset = dataset.select(range(min(limit, len(dataset))))
        return encode_classification(dataset, tokenizer, labels, keep_columns=("difficulty",))

    eval_sets = {name: dataset for name, dataset in splits.items() if name != "train"}
    if data_args.max_eval_samples is not None:
        eval_sets = {n: d.select(range(min(data_args.max_eval_samples, len(d)))) for n, d in eval_sets.items()}
    with training_args.main_process_first(desc="tokenization"):
        train_dataset = featurize(splits["train"], data_args.max_train_samples) if training_args.do_train else None
        if train_dataset is not None and distill_args.teacher_model_name_or_path:  # the teacher's logits, once
            inputs = splits["train"]["input"][: len(train_dataset)]
            logits = teacher_logits(distill_args.teacher_model_name_or_path, inputs, labels,
                                    distill_args.teacher_logits_cache, trust_remote_code=model_args.trust_remote_code)
            train_dataset = train_dataset.add_column("teacher_logits", logits.tolist())
        eval_features = {name: featurize(dataset) for name, dataset in eval_sets.items()}
    first_eval = data_args.eval_split or ("validation" if "validation" in eval_sets else next(iter(eval_sets), None))
    if first_eval is not None and first_eval not in eval_sets:
        raise ValueError(f"--eval_split {first_eval!r} is not an evaluation split; the dataset has {sorted(eval_sets)}.")

    trainer = ClassificationTrainer(
        model=model,
        args=training_args,
        train_dataset=train_dataset,
        eval_dataset=eval_features.get(first_eval),
        processing_class=tokenizer,
        data_collator=DataCollatorWithPadding(tokenizer),
        compute_metrics=make_compute_metrics(eval_sets[first_eval]["difficulty"]) if first_eval else None,
        callbacks=script_callbacks(training_args),
        temperature=distill_args.distillation_temperature,
        distillation_weight=distill_args.distillation_weight,
    )
    log_under_output_dir(trainer)

    all_metrics = {}
    if training_args.do_train:
        result = trainer.train(resume_from_checkpoint=training_args.resume_from_checkpoint or last_checkpoint)
        trainer.save_model()
        trainer.log_metrics("train", result.metrics)
        trainer.save_metrics("train", result.metrics)
        trainer.save_state()
        all_metrics.update({f"train_{k}": v for k, v in result.metrics.items()})

    if training_args.do_eval:
        trainer.num_steps = data_args.num_steps
        for name, dataset in eval_sets.items():
            trainer.compute_metrics = make_compute_metrics(dataset["difficulty"])
            metrics = trainer.evaluate(eval_dataset=eval_features[name], metric_key_prefix=f"eval_{name}")
            trainer.log_metrics(f"eval_{name}", metrics)
            trainer.save_metrics(f"eval_{name}", metrics)
            all_metrics.update(metrics)
        if training_args.should_save:
            with open(os.path.join(training_args.output_dir, "all_results.json"), "w") as f:
                json.dump(all_metrics, f, indent=2)

    if training_args.should_save:
        if training_args.do_train:  # how the model was trained, for lengthgen-release's model card
            record_run(training_args.output_dir, "examples/run_classification.py", argv, data_args,
                       task="text-classification", trainer=trainer)
        elif training_args.do_eval and model_args.model_name_or_path and os.path.isdir(model_args.model_name_or_path):
            # an evaluation of a trained folder (e.g. with --num_steps): the output becomes a copy of that model
            # with these numbers, which lengthgen-release can publish
            trainer.save_model()
            record_evaluation(training_args.output_dir, model_args.model_name_or_path, "examples/run_classification.py",
                              argv, data_args)
        trainer.create_model_card(
            finetuned_from=model_args.model_name_or_path,
            tasks="text-classification",
            dataset=f"{data_args.dataset_name} ({data_args.dataset_config_name})",
            tags=["lengthgen", "length-generalization", model.config.model_type],
        )
        rows = sorted(
            (k.split("_accuracy_d")[0].replace("eval_", ""), int(k.rsplit("_d", 1)[1]), v)
            for k, v in all_metrics.items()
            if "_accuracy_d" in k
        )
        with open(os.path.join(training_args.output_dir, "README.md"), "a") as f:
            f.write(
                "\n## lengthgen\n\nNeural Data Router family (`ndr`): Csordás, Irie, Schmidhuber, *The Neural Data Router: "
                "Adaptive Control Flow in Transformers Improves Systematic Generalization*, ICLR 2022.\n"
            )
            if rows:
                f.write("\n| evaluation set | depth | accuracy |\n| --- | --- | --- |\n")
                f.writelines(f"| {n} | {d} | {v:.4f} |\n" for n, d, v in rows)
        if training_args.push_to_hub:
            upload_output_dir(trainer.hub_model_id, training_args.output_dir, "run_classification.py")
    return all_metrics


if __name__ == "__main__":
    run_command(main, "run_classification.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
