#!/usr/bin/env python
"""Train and evaluate a sequence classifier (the NDR or its baselines, the Universal Transformer, the LSTM, any Auto
classifier) on a depth- or length-split task, alone or distilled from a teacher.

    python examples/run_classification.py --config_name hub_configs/ndr-ctl \\
        --dataset_name ctl --dataset_config_name forward --output_dir outputs/ndr-ctl --do_train --do_eval
    accelerate launch examples/run_classification.py ...        # same arguments, any number of processes
    python examples/run_classification.py spec.yaml             # the arguments as a spec file

Any dataset with `input` (space-separated tokens), `target` (the class) and `difficulty` columns works: lengthgen's
builders (`ctl`, `simple_arithmetic`, `listops`, `subject_verb_agreement`, the one-token-answer tasks of
`chomsky_hierarchy`; generating parameters with `--dataset_param KEY=VALUE`), an exported folder or a Hub
repository. From scratch, the tokenizer is a word-level one over the training inputs that frames every sequence with
[CLS] and [SEP], and the classes are the training targets.

Every split other than `train` is evaluated: accuracy and expected calibration error (ECE), overall and per
difficulty. `--num_steps` runs the NDR's shared layer for more steps at evaluation than in training. Distillation:
`--teacher_model_name_or_path` a trained classifier of the same classes (`--distillation_weight` r, default 0.9;
`--distillation_temperature` T, default 1). The work is lengthgen's experiment runner (`lengthgen train` runs the
same with `--head classification`).
"""

from lengthgen.cli import run_command
from lengthgen.commands.train import main

if __name__ == "__main__":
    run_command(lambda argv: main(argv, head="classification", program="python examples/run_classification.py",
                                  train_and_evaluate=False), "run_classification.py")
