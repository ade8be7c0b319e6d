#!/usr/bin/env python
"""Train and evaluate a masked LM (I-BERT or the BERT baseline) on a length-split masked task.

    python examples/run_mlm.py --config_name hub_configs/ibert-nsp --dataset_name nsp_inductive \\
        --dataset_config_name add --output_dir outputs/ibert-nsp-add --do_train --do_eval
    accelerate launch examples/run_mlm.py ...            # same arguments, any number of processes
    python examples/run_mlm.py spec.yaml                 # the arguments as a spec file

The model is built from `--config_name` (a hub_configs/ folder: config.json and tokenizer files) or loaded from
`--model_name_or_path` (a checkpoint folder or Hub id). `--dataset_name` is one of lengthgen's builders
(`nsp_inductive`, `ptb_inductive`; generating parameters with `--dataset_param KEY=VALUE`), or anything
`datasets.load_dataset` reads with `input`, `target` and `difficulty` columns.

Evaluation reports, per evaluation set, accuracy (the whole masked span right: the paper's sequence accuracy) and
token accuracy overall and per difficulty (`--difficulty_bucket 16` groups PTB's character lengths), and over the
masked tokens the NLL, bits per token (bits per character on character tasks) and perplexity. `--lr_decay_per_epoch
0.97` is the paper's Adam schedule. The work is lengthgen's experiment runner (`lengthgen train` runs the same with
`--head masked_lm`).
"""

from lengthgen.cli import run_command
from lengthgen.commands.train import main

if __name__ == "__main__":
    run_command(lambda argv: main(argv, head="masked_lm", program="python examples/run_mlm.py",
                                  train_and_evaluate=False), "run_mlm.py")
