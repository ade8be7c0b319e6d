#!/usr/bin/env python
"""Fine-tune a causal LM with window-level recurrence (or the plain baseline, or memory tokens) on long documents, and
evaluate perplexity per word and per token at the window and overlap the model is used with (Yoshida et al. 2020
§4-5). GPT-2 checkpoints become `GPT2WithRecurrence`; any other causal LM family (Llama, Qwen2, Mistral, GPT-NeoX,
...) becomes `CausalLMWithRecurrence`, which also carries memory tokens (`--num_memory_tokens`, the RMT baseline).

    # WikiText-103, recurrent model: GPT-2 weights + the paper's recurrence settings (window 300, overlap 0, h_prev
    # at the second block)
    python examples/run_clm_recurrent.py --model_name_or_path gpt2 \\
        --config_name hub_configs/gpt2-recurrent-wikitext103 \\
        --corpus wikitext103 --dataset_name Salesforce/wikitext --dataset_config_name wikitext-103-raw-v1 \\
        --learning_rate 1e-4 --gradient_checkpointing --eval_every_tokens 2000000 \\
        --output_dir outputs/gpt2-recurrent-wikitext103 --do_train --do_eval --do_predict
    # the baseline: same script, same data, same windows, evaluated at several overlaps
    python examples/run_clm_recurrent.py ... --use_recurrence False --eval_overlaps 0 5 10 30 50 75 100 150 200 \\
        --output_dir outputs/gpt2-wikitext103
    # PG-19 (Table 2) from a parquet mirror, first 1,250 books, first 15,000 tokens of each validation book
    python examples/run_clm_recurrent.py --model_name_or_path gpt2 --config_name hub_configs/gpt2-recurrent-pg19 \\
        --corpus pg19 --dataset_name PARQUET_MIRROR --max_train_books 1250 --max_eval_tokens 15000 ...
    # any causal LM, e.g. a Qwen2 checkpoint with h_prev, or with 4 memory tokens instead (the RMT baseline)
    python examples/run_clm_recurrent.py --model_name_or_path Qwen/Qwen2-0.5B --window_size 512 --insertion_layer 2 ...
    python examples/run_clm_recurrent.py --model_name_or_path Qwen/Qwen2-0.5B --window_size 512 \\
        --num_memory_tokens 4 ...
    # a hybrid whose gated DeltaNet layers also carry their states from window to window
    python examples/run_clm_recurrent.py --model_name_or_path Qwen/Qwen3.5-0.8B --window_size 512 --insertion_layer 3 \\
        --carry_layer_states True ...
    accelerate launch examples/run_clm_recurrent.py ...        # same arguments, any number of processes

Local files instead of a Hub dataset: `--train_file/--validation_file/--test_file`, each a PG-19 folder of `<id>.txt`
books, a WikiText `wiki.*.raw` file, or parquet / JSON lines / CSV with a `text` column (lengthgen.data.long_documents).
The recipe, the evaluation of whole documents window by window and the metrics are described in
`lengthgen.training.causal_lm`, which does the work.
"""

from lengthgen.cli import run_command
from lengthgen.training.causal_lm import parse_args, train_and_evaluate

if __name__ == "__main__":
    run_command(lambda argv: train_and_evaluate(*parse_args(argv)), "run_clm_recurrent.py")
