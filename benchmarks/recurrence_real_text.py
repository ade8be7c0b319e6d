#!/usr/bin/env python
"""Window-level recurrence on real prose: a small Llama pre-trained from scratch on the King James Bible, then
fine-tuned as disjoint windows, overlapped windows, with h_prev (Yoshida et al. 2020) and with memory tokens (RMT),
each with the same budget, and evaluated on held-out books read whole (per-word perplexity and FLOPs per token, the
columns of the paper's Tables 1-2).

The corpus is the 1611 King James Bible from Debian's `bible-kjv` package (public domain; `lengthgen.data.kjv`): 66
books, one document each, split by book (54 train, 6 validation, 6 test; about 690K / 68K / 35K words).

1. `--stage pretrain`: a byte-level BPE tokenizer (4,096 tokens) from the training books, and a 4-layer, 256-wide
   `LlamaForCausalLM` (rotary positions, SwiGLU, RMSNorm) trained from scratch on disjoint chunks of `--window_size`
   tokens of the training books: the "pretrained model", a plain transformers checkpoint.
2. `--stage finetune`: for every variant and seed, `examples/run_clm_recurrent.py` wraps that checkpoint with
   `CausalLMWithRecurrence` and fine-tunes it for `--finetune_steps` on runs of `--windows_per_example` windows with
   the same data order and learning rate, then evaluates the held-out books read whole, each at its own overlap.
3. `--stage report`: the table (markdown) and plot from the runs' results.

    python benchmarks/recurrence_real_text.py --stage pretrain --output_dir runs/real_text  # about 40 minutes, 1 core
    python benchmarks/recurrence_real_text.py --stage finetune --output_dir runs/real_text --seeds 0 1
    python benchmarks/recurrence_real_text.py --stage report --output_dir runs/real_text \\
        --json docs/recurrence_real_text_cpu.json --plot docs/recurrence_real_text.png

Every stage resumes: a finished run is skipped, an interrupted one continues from its last checkpoint.

A hybrid instead of the Llama (`--family qwen3_5`: gated DeltaNet and attention layers alternating, the same width
and depth), pre-trained on longer chunks (`--pretrain_length 512`) so that its DeltaNet layers learn to use a long
context; `--stage finetune` then also reads the pretrained hybrid as it is in windows of `--window_size` with its
DeltaNet states carried from window to window (`carry_layer_states`, no fine-tuning), and in windows of its
pre-training length, disjoint and carried:

    python benchmarks/recurrence_real_text.py --family qwen3_5 --pretrain_length 512 --pretrain_batch_size 8 \\
        --pretrain_steps 1000 --stage pretrain --output_dir runs/real_text_qwen3_5
    python benchmarks/recurrence_real_text.py --family qwen3_5 --pretrain_length 512 --variants --stage finetune \\
        --output_dir runs/real_text_qwen3_5
"""

import argparse
import json
import statistics
from pathlib import Path
from typing import NamedTuple

import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
from transformers import (
    DataCollatorForLanguageModeling,
    LlamaConfig,
    LlamaForCausalLM,
    PreTrainedTokenizerFast,
    Qwen3_5ForCausalLM,
    Qwen3_5TextConfig,
    Trainer,
    TrainingArguments,
    set_seed,
)

from lengthgen.data.long_documents import load_documents
from lengthgen.training.causal_lm import parse_args as causal_lm_arguments
from lengthgen.training.causal_lm import train_and_evaluate
from lengthgen.training.hardware import hardware
from lengthgen.training.pieces import get_last_checkpoint_or_none
from lengthgen.training.results import written_whole

BOS = "<|endoftext|>"


class Variant(NamedTuple):
    """One fine-tuned row: h_prev or not, the overlap it is trained at, memory tokens, the overlaps it is read at, and
    whether a hybrid's recurrent layers carry their states across windows (`carry_layer_states`)."""

    use_recurrence: bool
    overlap: int
    num_memory_tokens: int
    eval_overlaps: tuple[int, ...]
    carry_layer_states: bool = False


# The rows of the paper's Tables 1-2 (the baseline fine-tuned once and read at several overlaps; the recurrent model at
# its training overlap), the RMT baseline, and for a hybrid its DeltaNet states carried with and without h_prev
VARIANTS = {
    "baseline": Variant(False, 0, 0, (0, 16, 32, 64)),
    "h_prev": Variant(True, 0, 0, (0,)),
    "h_prev-overlap16": Variant(True, 16, 0, (16,)),
    "memory4": Variant(True, 0, 4, (0,)),
    "carried": Variant(False, 0, 0, (0,), carry_layer_states=True),
    "h_prev-carried": Variant(True, 0, 0, (0,), carry_layer_states=True),
    "carried-overlap16": Variant(False, 16, 0, (16,), carry_layer_states=True),
    "h_prev-overlap16-carried": Variant(True, 16, 0, (16,), carry_layer_states=True),
}
DEFAULT_VARIANTS = {"llama": ["baseline", "h_prev", "h_prev-overlap16", "memory4"],
                    "qwen3_5": ["baseline", "h_prev", "carried", "h_prev-carried", "h_prev-overlap16",
                                "carried-overlap16", "h_prev-overlap16-carried"]}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stage", choices=("pretrain", "finetune", "report"), required=True)
    parser.add_argument("--output_dir", required=True, help="corpus, tokenizer, pretrained model and runs")
    parser.add_argument("--family", choices=("llama", "qwen3_5"), default="llama", help="the pretrained model")
    parser.add_argument("--window_size", type=int, default=128)
    parser.add_argument("--pretrain_length", type=int, help="tokens per pre-training chunk (default: --window_size)")
    parser.add_argument("--vocab_size", type=int, default=4096)
    parser.add_argument("--hidden_size", type=int, default=256)
    parser.add_argument("--num_layers", type=int, default=4)
    parser.add_argument("--pretrain_steps", type=int, default=1500)
    parser.add_argument("--pretrain_batch_size", type=int, default=32)
    parser.add_argument("--pretrain_learning_rate", type=float, default=1e-3)
    parser.add_argument("--variants", nargs="*", choices=list(VARIANTS),
                        help="the fine-tuned variants (default: " + "; ".join(
                            f"{family}: {' '.join(names)}" for family, names in DEFAULT_VARIANTS.items())
                        + "; none: only the pretrained model as it is)")
    parser.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    parser.add_argument("--finetune_steps", type=int, default=200)
    parser.add_argument("--finetune_batch_size", type=int, default=4)
    parser.add_argument("--windows_per_example", type=int, default=8)
    parser.add_argument("--finetune_learning_rate", type=float, default=2e-4)
    parser.add_argument("--insertion_layer", type=int,
                        help="l_ins, counted from 0 (default: 2 of 4 for the Llama, the third layer; 1 for the hybrid, "
                             "whose h_prev must enter a softmax-attention layer: 1 or 3)")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per run")
    parser.add_argument("--json", help="report: write the results here")
    parser.add_argument("--plot", help="report: write the plot here")
    args = parser.parse_args(argv)
    if args.insertion_layer is None:
        args.insertion_layer = {"llama": 2, "qwen3_5": 1}[args.family]
    if args.variants is None:
        args.variants = DEFAULT_VARIANTS[args.family]
    carried = [name for name in args.variants if VARIANTS[name].carry_layer_states]
    if carried and args.family != "qwen3_5":
        parser.error(f"--variants {' '.join(carried)} carry recurrent layers' states, which --family {args.family} "
                     "does not have (use --family qwen3_5)")
    return args


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


# the flags that make the pre-trained model, recorded with it
PRETRAINING = ("family", "window_size", "pretrain_length", "vocab_size", "hidden_size", "num_layers", "pretrain_steps",
               "pretrain_batch_size", "pretrain_learning_rate")


def pretrain(args, root: Path):
    documents = load_documents("kjv")
    train_texts = list(documents["train"]["text"])
    tokenizer_dir = root / "tokenizer"
    if not (tokenizer_dir / "tokenizer.json").exists():
        train_tokenizer(train_texts, args.vocab_size).save_pretrained(tokenizer_dir)
    tokenizer = PreTrainedTokenizerFast.from_pretrained(tokenizer_dir)
    set_seed(0)
    length = args.pretrain_length or args.window_size
    heads = args.hidden_size // 64
    shape = dict(vocab_size=len(tokenizer), hidden_size=args.hidden_size, intermediate_size=688,
                 num_hidden_layers=args.num_layers, num_attention_heads=heads, num_key_value_heads=heads,
                 max_position_embeddings=4 * max(args.window_size, length), tie_word_embeddings=True,
                 bos_token_id=tokenizer.bos_token_id, eos_token_id=tokenizer.eos_token_id,
                 pad_token_id=tokenizer.pad_token_id)
    if args.family == "llama":
        model = LlamaForCausalLM(LlamaConfig(**shape))
    else:  # the same width and depth, gated DeltaNet layers (as many heads of 64) between the attention layers
        model = Qwen3_5ForCausalLM(Qwen3_5TextConfig(
            **shape, head_dim=64, linear_num_key_heads=heads, linear_num_value_heads=heads, linear_key_head_dim=64,
            linear_value_head_dim=64, layer_types=["full_attention" if i % 2 else "linear_attention"
                                                   for i in range(args.num_layers)]))
    train = chunks(train_texts, tokenizer, length)
    validation = chunks(list(documents["validation"]["text"]), tokenizer, length)
    output_dir = root / "pretrain_run"
    training_args = TrainingArguments(
        output_dir=str(output_dir), max_steps=args.pretrain_steps, per_device_train_batch_size=args.pretrain_batch_size,
        per_device_eval_batch_size=64, learning_rate=args.pretrain_learning_rate, lr_scheduler_type="cosine",
        warmup_steps=100, weight_decay=0.1, eval_strategy="steps", eval_steps=250, save_steps=250,
        save_total_limit=2, load_best_model_at_end=True, metric_for_best_model="loss", logging_steps=50,
        report_to="none", seed=0, use_cpu=True, disable_tqdm=True,
    )
    trainer = Trainer(model=model, args=training_args, train_dataset=train, eval_dataset=validation,
                      data_collator=DataCollatorForLanguageModeling(tokenizer, mlm=False))
    last = get_last_checkpoint_or_none(str(output_dir))
    trainer.train(resume_from_checkpoint=last)
    metrics = trainer.evaluate()
    trainer.save_model(str(root / "pretrained"))
    tokenizer.save_pretrained(root / "pretrained")
    settings = {key: getattr(args, key) for key in PRETRAINING}
    with written_whole(root / "pretrained" / "pretrain_results.json") as f:
        json.dump({"eval": metrics, "train_chunks": len(train), "log_history": trainer.state.log_history,
                   "settings": settings, "hardware": hardware()}, f, indent=2)
    print(f"pretrained: validation loss per token {metrics['eval_loss']:.3f} on disjoint {length}-token chunks")


def finetune(args, root: Path):
    """Each variant and seed through lengthgen's recurrent LM training (what examples/run_clm_recurrent.py runs), one
    after the other (a finished run is skipped,
    an interrupted one resumes from its checkpoint); with seed 0, first the pretrained model itself, read in disjoint
    windows. Two processes with different `--seeds` run side by side."""
    pretrained = str(root / "pretrained")
    common = ["--model_name_or_path", pretrained, "--tokenizer_name", pretrained, "--corpus", "kjv",
              "--window_size", str(args.window_size), "--insertion_layer", str(args.insertion_layer),
              "--per_device_eval_batch_size", "8", "--eval_chunk_windows", "4", "--do_predict",
              "--report_to", "none", "--use_cpu", "--disable_tqdm", "true"]
    as_is = {"pretrained-as-is": []}  # read once (with seed 0), not fine-tuned
    if args.family == "qwen3_5":  # its DeltaNet states carried across the windows; its pre-training length's windows
        length = args.pretrain_length or args.window_size  # as pretrain() chunked the corpus
        as_is["pretrained-as-is-carried"] = ["--carry_layer_states", "True"]
        as_is[f"pretrained-as-is-window{length}"] = ["--window_size", str(length)]
        as_is[f"pretrained-as-is-window{length}-carried"] = ["--window_size", str(length),
                                                             "--carry_layer_states", "True"]
    for name, flags in as_is.items():
        if 0 in args.seeds and not (root / name / "all_results.json").exists():
            train_and_evaluate(*causal_lm_arguments([*common, "--use_recurrence", "False", "--overlap", "0", *flags,
                                                     "--output_dir", str(root / name)]))
    for seed in args.seeds:
        for name in args.variants:
            variant = VARIANTS[name]
            output_dir = root / f"{name}-seed{seed}"
            if (output_dir / "all_results.json").exists():
                continue
            train_and_evaluate(*causal_lm_arguments([
                *common, "--use_recurrence", str(variant.use_recurrence), "--overlap", str(variant.overlap),
                "--num_memory_tokens", str(variant.num_memory_tokens),
                *(["--carry_layer_states", "True"] if variant.carry_layer_states else []),
                "--windows_per_example", str(args.windows_per_example),
                "--per_device_train_batch_size", str(args.finetune_batch_size), "--max_steps", str(args.finetune_steps),
                "--learning_rate", str(args.finetune_learning_rate), "--warmup_steps", "20", "--seed", str(seed),
                "--save_strategy", "steps", "--save_steps", "50", "--save_total_limit", "1", "--logging_steps", "25",
                "--eval_overlaps", *map(str, variant.eval_overlaps), "--do_train", "--output_dir", str(output_dir),
            ]))
            print(f"{name} seed {seed}: done")


def report(args, root: Path):
    """The table (per-word perplexity on the test books, mean and sample std over seeds; FLOPs/token) and the plot of
    perplexity against FLOPs per token, as the paper's Figure 2 shows its Tables 1-2."""
    rows = {}
    as_is = {name.name: Variant(False, 0, 0, (0,), carry_layer_states=name.name.endswith("-carried"))
             for name in sorted(root.glob("pretrained-as-is*"))}
    for name, variant in {**as_is, **VARIANTS}.items():
        runs = sorted(root.glob(f"{name}-seed*")) if name not in as_is else [root / name]
        results = [json.loads((run / "all_results.json").read_text()) for run in runs
                   if (run / "all_results.json").exists()]
        for overlap in variant.eval_overlaps if results else ():
            prefix = f"test_overlap{overlap}"
            per_word = [r[f"{prefix}_perplexity_per_word"] for r in results]
            rows[f"{name} @ {overlap}"] = {
                "model": name, "use_recurrence": variant.use_recurrence, "overlap": overlap,
                "num_memory_tokens": variant.num_memory_tokens, "carry_layer_states": variant.carry_layer_states,
                "seeds": len(results), "perplexity_per_word": statistics.mean(per_word),
                "perplexity_per_word_std": statistics.stdev(per_word) if len(per_word) > 1 else None,
                "perplexity_per_word_runs": per_word,
                "perplexity_per_token": statistics.mean(r[f"{prefix}_perplexity"] for r in results),
                "flops_per_token": results[0][f"{prefix}_flops_per_token"], "test_words": results[0][f"{prefix}_words"],
                "test_tokens": results[0][f"{prefix}_tokens"],
            }
    print("| model | overlap (read at) | memory tokens | seeds | perplexity per word (test books) | per token "
          "| FLOPs/token |\n"
          "| --- | --- | --- | --- | --- | --- | --- |")
    for name, row in rows.items():
        spread = f" ± {row['perplexity_per_word_std']:.2f}" if row["perplexity_per_word_std"] is not None else ""
        print(f"| {row['model']} | {row['overlap']} | {row['num_memory_tokens']} | {row['seeds']} | "
              f"{row['perplexity_per_word']:.2f}{spread} | {row['perplexity_per_token']:.2f} | "
              f"{row['flops_per_token'] / 1e6:.2f}M |")
    pretrain = json.loads((root / "pretrained" / "pretrain_results.json").read_text())
    # the pre-training's settings as its stage recorded them (this call's flags where it recorded none); the
    # fine-tuning's as this call gives them, and the seeds each row found (`seeds` of the rows), not this call's
    settings = {k: v for k, v in vars(args).items() if k not in ("json", "plot", "output_dir", "stage", "seeds")}
    settings.update(pretrain.get("settings", {}))
    results = {"settings": settings, "rows": rows, "pretrain_eval_loss": pretrain["eval"]["eval_loss"],
               "hardware": hardware()}
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2) + "\n")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        figure, axes = plt.subplots(figsize=(6, 4))
        for name, row in rows.items():
            marker = ("s" if row["num_memory_tokens"] else "*" if row["use_recurrence"] else "o")
            if row["carry_layer_states"]:  # filled for h_prev, hollow without
                marker = "P" if row["use_recurrence"] else "D"
            axes.errorbar(row["flops_per_token"] / 1e6, row["perplexity_per_word"],
                          yerr=row["perplexity_per_word_std"] or 0, fmt=marker, capsize=3, markersize=9, label=name)
        axes.set_xlabel("forward FLOPs per token (millions)")
        axes.set_ylabel("perplexity per word, held-out books")
        family = {"llama": "Llama", "qwen3_5": "Qwen3.5 (hybrid)"}[args.family]
        axes.set_title(f"{family} {args.num_layers}x{args.hidden_size} on the King James Bible, windows of "
                       f"{args.window_size}")
        axes.legend(fontsize=8)
        figure.tight_layout()
        figure.savefig(args.plot, dpi=120)
    return results


def main(argv=None):
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    root = Path(args.output_dir)
    root.mkdir(parents=True, exist_ok=True)
    if args.stage == "pretrain":
        pretrain(args, root)
    elif args.stage == "finetune":
        finetune(args, root)
    else:
        return report(args, root)


if __name__ == "__main__":
    main()
