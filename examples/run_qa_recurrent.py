#!/usr/bin/env python
"""Fine-tune RoBERTa with window-level recurrence (or the disjoint baseline) on HotpotQA, distractor setting, and
report answer-only F1 / exact match (Yoshida et al. 2020 §5.4, Table 3).

    python examples/run_qa_recurrent.py --model_name_or_path roberta-base \\
        --config_name hub_configs/roberta-recurrent-hotpotqa --dataset_name hotpotqa/hotpot_qa \\
        --dataset_config_name distractor --max_train_samples 30000 --gradient_checkpointing \\
        --output_dir outputs/roberta-recurrent-hotpotqa --do_train --do_eval
    # the disjoint baseline: the same windows, each read on its own
    python examples/run_qa_recurrent.py ... --use_recurrence False --output_dir outputs/roberta-hotpotqa
    accelerate launch examples/run_qa_recurrent.py ...        # same arguments, any number of processes

Local files in HotpotQA's official JSON format instead of the Hub: `--train_file hotpot_train_v1.1.json
--validation_file hotpot_dev_distractor_v1.json`. The windows, the recipe (§5.4's is the default) and the metrics are
described in `lengthgen.training.question_answering`, which does the work.
"""

from lengthgen.cli import run_command
from lengthgen.training.question_answering import parse_args, train_and_evaluate

if __name__ == "__main__":
    run_command(lambda argv: train_and_evaluate(*parse_args(argv)), "run_qa_recurrent.py")
