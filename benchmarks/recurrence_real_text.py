#!/usr/bin/env python
"""Window-level recurrence on real prose: a small Llama pre-trained from scratch on the King James Bible, then
fine-tuned as disjoint windows, overlapped windows, with h_prev (Yoshida et al. 2020) and with memory tokens (RMT),
each with the same budget, and evaluated on held-out books read whole (per-word perplexity and FLOPs per token, the
columns of the paper's Tables 1-2).

The corpus is the 1611 King James Bible from Debian's `bible-kjv` package (public domain; `lengthgen.data.kjv`): 66
books, one document each, split by book (54 train, 6 validation, 6 test; about 690K / 68K / 35K words).

1. `--stage pretrain`: a byte-level BPE tokenizer (4,096 tokens) from the training books, and a 4-layer, 256-wide
   `LlamaForCausalLM` (rotary positions, SwiGLU, RMSNorm) trained from scratch on disjoint chunks of `--window-size`
   tokens of the training books: the "pretrained model", a plain transformers checkpoint.
2. `--stage finetune`: for every variant and seed, `examples/run_clm_recurrent.py` wraps that checkpoint with
   `CausalLMWithRecurrence` and fine-tunes it for `--finetune-steps` on runs of `--windows-per-example` windows with
   the same data order and learning rate, then evaluates the held-out books read whole, each at its own overlap.
3. `--stage report`: the table (markdown) and plot from the runs' results.

    python benchmarks/recurrence_real_text.py --stage pretrain --output-dir runs/real_text      # about 40 minutes, 1 core
    python benchmarks/recurrence_real_text.py --stage finetune --output-dir runs/real_text --seeds 0 1
    python benchmarks/recurrence_real_text.py --stage report --output-dir runs/real_text \\
        --json docs/recurrence_real_text_cpu.json --plot docs/recurrence_real_text.png

Every stage resumes: a finished run is skipped, an interrupted one continues from its last checkpoint.
"""

import argparse
import json
import os
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    DataCollatorForLanguageModeling,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Trainer,
    TrainingArguments,
    set_seed,
)
from transformers.trainer_utils import get_last_checkpoint

from lengthgen.data.long_documents import load_documents
from lengthgen.training.hardware import hardware

ROOT = Path(__file__).resolve().parents[1]
RUN_CLM_RECURRENT = str(ROOT / "examples" / "run_clm_recurrent.py")
BOS = "<|endoftext|>"


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=("pretrain", "finetune", "report"), required=True)
    parser.add_argument("--output-dir", required=True, help="corpus, tokenizer, pretrained model and runs")
    parser.add_argument("--window-size", type=int, default=128)
    parser.add_argument("--vocab-size", type=int, default=4096)
    parser.add_argument("--hidden-size", type=int, default=256)
    parser.add_argument("--num-layers", type=int, default=4)
    parser.add_argument("--pretrain-steps", type=int, default=1500)
    parser.add_argument("--pretrain-batch-size", type=int, default=32)
    parser.add_argument("--pretrain-learning-rate", type=float, default=1e-3)
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--json", help="report: write the results here")
    parser.add_argument("--plot", help="report: write the plot here")
    return parser.parse_args(argv)


def train_tokenizer(texts: list[str], vocab_size: int) -> PreTrainedTokenizerFast:
    """Byte-level BPE (GPT-2's scheme) learned from `texts`, with one special token that starts every document."""
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=vocab_size, special_tokens=[BOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tokenizer.train_from_iterator(texts, trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token=BOS, eos_token=BOS, pad_token=BOS,
                                   model_max_length=int(1e30))


def chunks(texts: list[str], tokenizer, length: int) -> list[dict]:
    """Disjoint `length`-token chunks of every document (bos first); a document's last, shorter chunk is kept."""
    rows = []
    for ids in tokenizer(texts, add_special_tokens=False)["input_ids"]:
        ids = [tokenizer.bos_token_id] + ids
        rows += [{"input_ids": ids[i:i + length]} for i in range(0, len(ids) - 1, length)]
    return rows


def pretrain(args, root: Path):
    documents = load_documents("kjv")
    train_texts = list(documents["train"]["text"])
    tokenizer_dir = root / "tokenizer"
    if not (tokenizer_dir / "tokenizer.json").exists():
        train_tokenizer(train_texts, args.vocab_size).save_pretrained(tokenizer_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    set_seed(0)
    heads = args.hidden_size // 64
    config = LlamaConfig(vocab_size=len(tokenizer), hidden_size=args.hidden_size, intermediate_size=688,
                         num_hidden_layers=args.num_layers, num_attention_heads=heads, num_key_value_heads=heads,
                         max_position_embeddings=4 * args.window_size, tie_word_embeddings=True,
                         bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                         pad_token_id=tokenizer.pad_token_id)
    model = LlamaForCausalLM(config)
    train = chunks(train_texts, tokenizer, args.window_size)
    validation = chunks(list(documents["validation"]["text"]), tokenizer, args.window_size)
    output_dir = root / "pretrain_run"
    training_args = TrainingArguments(
        output_dir=str(output_dir), max_steps=args.pretrain_steps, per_device_train_batch_size=args.pretrain_batch_size,
        per_device_eval_batch_size=64, learning_rate=args.pretrain_learning_rate, lr_scheduler_type="cosine",
        warmup_steps=100, weight_decay=0.1, eval_strategy="steps", eval_steps=250, save_steps=250,
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="loss", logging_steps=50, report_to="none", seed=0, use_cpu=True, disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train, eval_dataset=validation,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    last = get_last_checkpoint(str(output_dir)) if output_dir.is_dir() else None
    trainer.train(resume_from_checkpoint=last)
    metrics = trainer.evaluate()
    trainer.save_model(str(root / "pretrained"))
    tokenizer.save_pretrained(root / "pretrained")
    with open(root / "pretrained" / "pretrain_results.json", "w") as f:
        json.dump({"eval": metrics, "train_chunks": len(train), "log_history": trainer.state.log_history,
                   "hardware": hardware()}, f, indent=2)
    print(f"pretrained: validation loss per token {metrics['eval_loss']:.3f} on disjoint {args.window_size}-token chunks")


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(args.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    if args.stage == "pretrain":
        pretrain(args, root)


if __name__ == "__main__":
    main()
