#!/usr/bin/env python
"""Distill a teacher into a student and compare: the teacher, the distilled student and the same student trained
alone (same spec, same seeds), each with accuracy and expected calibration error per difficulty.

    python examples/run_distillation.py \\
        --teacher_model_name_or_path outputs/reproduce/recurrent-bias-attractors/lstm/seed0 \\
        --model_type bert --config_overrides hidden_size=128,num_hidden_layers=4,num_attention_heads=4 \\
        --dataset_name subject_verb_agreement --dataset_config_name attractors --output_dir outputs/distill \\
        --max_steps 1000 --per_device_train_batch_size 64 --learning_rate 5e-4 --seeds 3

The flags are those of `lengthgen train` (the student's spec, with the distillation section:
`--teacher_model_name_or_path`, `--distillation_weight` r, default 0.9, `--distillation_temperature` T, default 1;
Abnar, Dehghani and Zuidema use T = 1, r = 0.9 for LSTM -> Transformer), plus `--seeds N` (students with seeds
0 .. N-1; default 1). The loss is r T^2 KL(teacher_T || student_T) + (1 - r) CE (Hinton et al. 2015). Each run goes to
OUTPUT_DIR/seed<n>/{teacher,distilled,alone}; a finished run is kept, so an interrupted command resumes; the teacher's
training-set logits are computed once (OUTPUT_DIR/teacher_logits.npy). The comparison (mean and standard deviation
over the seeds of every number) goes to OUTPUT_DIR/distillation.json and distillation.md.
"""

import sys

from lengthgen.cli import UsageError, check_positive, run_command
from lengthgen.reproduction.study import compare_distillation
from lengthgen.training.results import command_line
from lengthgen.training.spec import ExperimentSpec


def main(argv):
    seeds = 1
    if "--seeds" in argv:
        index = argv.index("--seeds")
        try:
            seeds = int(argv[index + 1])
        except (IndexError, ValueError):
            raise UsageError("--seeds takes a number of seeds") from None
        argv = argv[:index] + argv[index + 2:]
    check_positive({"--seeds": seeds})
    spec = ExperimentSpec.from_args(argv, {"training": {"do_train": True, "do_eval": True}, "model": {
        "head": "classification"}})
    if spec.training.output_dir in (None, "trainer_output"):
        raise UsageError("--output_dir is required")
    if spec.training.max_train_seconds:
        raise UsageError("--max_train_seconds: each run of the comparison trains to its end (an interrupted command "
                         "resumes from the runs it finished)")
    return compare_distillation(spec, list(range(seeds)), spec.training.output_dir,
                                command_line("python examples/run_distillation.py", sys.argv[1:]))


if __name__ == "__main__":
    run_command(main, "run_distillation.py")
