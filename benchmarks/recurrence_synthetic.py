#!/usr/bin/env python
"""Does h_prev carry information? A tiny GPT-2 (or a tiny hybrid, Qwen3.5 with gated DeltaNet layers between its
attention layers) on a generated corpus whose later windows need a fact stated earlier.

Each document draws one secret from `--num_secrets` and is cut into windows of T tokens. Every window holds, at a
random place, the phrase `key <secret> <secret> <secret> <secret>`; the rest is filler that counts through the filler
words (w0 w1 w2 ..., continuing across windows). The first secret token after `key` needs the previous window, which
no window of a disjoint GPT-2 sees: it can only guess (log num_secrets nats); the recurrent model can read it from
h_prev, the summary of the previous window. (With random filler words instead, the secret is drowned in the mean
over the window's positions that h_prev is pooled from: in 1,200 steps the recurrent model did not learn to carry it,
neither with the secret once nor four times. That is a property of the paper's mean pooling, not a failure of the
gradient path; the counting filler keeps the benchmark within minutes.)

1. Pre-train a tiny GPT-2 from scratch on the corpus, window by window without recurrence (the "pretrained" model).
2. Fine-tune two copies of it with the same budget, data order and learning rate through
   examples/run_clm_recurrent.py: with recurrence (the module added, as in the paper) and without (the baseline, the
   same windows and overlap).
3. Evaluate both on held-out documents read whole: perplexity per token, and the loss on the secret tokens alone.

    python benchmarks/recurrence_synthetic.py --json docs/recurrence_synthetic_cpu.json   # about 5 minutes on 2 cores
    python benchmarks/recurrence_synthetic.py --family qwen3_5 --json docs/recurrence_synthetic_qwen3_5_cpu.json

With `--family qwen3_5` the model's odd layers are softmax attention and its even ones gated DeltaNet (linear
attention, which reads each window afresh as the attention does); h_prev enters the last attention layer at or
below index 2. `--carry_layer_states` adds two fine-tuned copies whose DeltaNet layers carry their
states from window to window (`carry_layer_states`, not in the paper): without h_prev and with it.

    python benchmarks/recurrence_synthetic.py --family qwen3_5 --carry_layer_states --finetune_seeds 3 \\
        --output_dir outputs/synthetic-carried --json docs/recurrence_synthetic_qwen3_5_carried_cpu.json

`--finetune_seeds N` fine-tunes every copy N times (seeds --seed .. --seed + N - 1, same corpus and pre-trained
model) and reports the mean (each seed's figures under `per_seed`). With `--output_dir`, a run that already finished
there (its `all_results.json` written) is read instead of run again, so an interrupted benchmark goes on where it
stopped.
"""

import argparse
import json
import math
import random
import statistics
import tempfile
from pathlib import Path

import torch
from transformers import AutoModelForCausalLM, GPT2Config, Qwen3_5TextConfig

from lengthgen.data.tokenization import word_tokenizer
from lengthgen.modeling.recurrence.flops import meta_model
from lengthgen.modeling.recurrence.modeling_causal_lm_recurrent import softmax_attention_layers
from lengthgen.training.causal_lm import parse_args as causal_lm_arguments
from lengthgen.training.causal_lm import train_and_evaluate
from lengthgen.training.hardware import hardware
from lengthgen.training.results import written_whole

KEY = "key"
# the model pre-trained from scratch, by family: the paper's GPT-2, or a hybrid (linear attention, then attention)
FAMILIES = {
    "gpt2": lambda args: GPT2Config(n_positions=args.window_size, n_embd=args.n_embd, n_layer=args.n_layer, n_head=4),
    "qwen3_5": lambda args: Qwen3_5TextConfig(
        hidden_size=args.n_embd, intermediate_size=4 * args.n_embd, num_hidden_layers=args.n_layer,
        num_attention_heads=4, num_key_value_heads=2, head_dim=args.n_embd // 4, linear_num_key_heads=2,
        linear_num_value_heads=4, linear_key_head_dim=args.n_embd // 4, linear_value_head_dim=args.n_embd // 4,
        max_position_embeddings=args.window_size + 1,
        layer_types=["full_attention" if i % 2 else "linear_attention" for i in range(args.n_layer)]),
}


# the fine-tuned copies: name -> run_clm_recurrent.py flags (the carried ones with --carry_layer_states)
VARIANTS = {
    "disjoint": ["--use_recurrence", "False"],
    "recurrent": ["--use_recurrence", "True"],
    "carried": ["--use_recurrence", "False", "--carry_layer_states", "True"],
    "recurrent_carried": ["--use_recurrence", "True", "--carry_layer_states", "True"],
}


def insertion_layer(config) -> int:
    """Index 2, the third layer (one past the paper's second, as the published runs have it; the last layer of a
    shallower model), in a hybrid the last softmax-attention layer at or below it."""
    below = [i for i in softmax_attention_layers(meta_model(config)) if i <= 2]
    if not below:
        raise ValueError(f"no softmax-attention layer among the first three of this {config.model_type} model")
    return below[-1]


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--window_size", type=int, default=32)
    parser.add_argument("--overlap", type=int, default=0)
    parser.add_argument("--windows_per_document", type=int, default=8)
    parser.add_argument("--windows_per_example", type=int, default=4)
    parser.add_argument("--num_secrets", type=int, default=16)
    parser.add_argument("--num_filler_words", type=int, default=32)
    parser.add_argument("--secret_repeats", type=int, default=4, help="secret tokens after each `key`")
    parser.add_argument("--train_documents", type=int, default=2000)
    parser.add_argument("--eval_documents", type=int, default=200)
    parser.add_argument("--family", choices=sorted(FAMILIES), default="gpt2", help="the model (default: gpt2)")
    parser.add_argument("--carry_layer_states", action="store_true",
                        help="also fine-tune copies whose recurrent layers carry their states (a hybrid family)")
    parser.add_argument("--n_layer", type=int, default=4)
    parser.add_argument("--n_embd", type=int, default=64)
    parser.add_argument("--pretrain_steps", type=int, default=400)
    parser.add_argument("--finetune_steps", type=int, default=800)
    parser.add_argument("--batch_size", type=int, default=16)
    parser.add_argument("--learning_rate", type=float, default=1e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--finetune_seeds", type=int, default=1, help="fine-tune every copy this many times")
    parser.add_argument("--output_dir", help="keep the models and corpus here (default: a temporary folder)")
    parser.add_argument("--json", help="also write the results here")
    args = parser.parse_args(argv)
    if args.finetune_seeds < 1:
        parser.error(f"--finetune_seeds must be at least 1, got {args.finetune_seeds}")
    if args.carry_layer_states and args.family == "gpt2":
        parser.error("--carry_layer_states needs a hybrid family (--family qwen3_5): GPT-2 has no recurrent layers")
    return args


def secret_document(rng: random.Random, args) -> str:
    """One document: per stride of T - o tokens, counting filler with `key <secret> x R` at a random place."""
    secret = f"s{rng.randrange(args.num_secrets)}"
    stride = args.window_size - args.overlap
    words, count = [], rng.randrange(args.num_filler_words)
    for _ in range(args.windows_per_document):
        chunk = []
        for _ in range(stride - 1 - args.secret_repeats):
            chunk.append(f"w{count}")
            count = (count + 1) % args.num_filler_words
        at = rng.randrange(len(chunk) + 1)
        words += chunk[:at] + [KEY] + [secret] * args.secret_repeats + chunk[at:]
    return " ".join(words)


def write_corpus(folder: Path, args) -> dict[str, list[str]]:
    """PG-19's layout: a folder of <id>.txt documents per split."""
    rng = random.Random(args.seed)
    corpus = {}
    for split, count in (("train", args.train_documents), ("validation", args.eval_documents)):
        (folder / split).mkdir(parents=True, exist_ok=True)
        corpus[split] = [secret_document(rng, args) for _ in range(count)]
        for index, text in enumerate(corpus[split]):
            (folder / split / f"{index:06d}.txt").write_text(text)
    return corpus


def common_arguments(args, root: Path, steps: int) -> list[str]:
    return [
        "--corpus", "pg19", "--train_file", str(root / "corpus" / "train"),
        "--validation_file", str(root / "corpus" / "validation"), "--tokenizer_name", str(root / "tokenizer"),
        "--windows_per_example", str(args.windows_per_example), "--max_steps", str(steps),
        "--per_device_train_batch_size", str(args.batch_size), "--per_device_eval_batch_size", "32",
        "--learning_rate", str(args.learning_rate), "--warmup_steps", "100", "--save_strategy", "no",
        "--report_to", "none", "--seed", str(args.seed), "--do_train", "--do_eval", "--disable_tqdm", "true",
    ]


@torch.no_grad()
def secret_token_loss(model, tokenizer, documents: list[str], first_mention: bool) -> float:
    """Mean negative log-likelihood of the first secret token after each `key`, documents read whole: after the
    document's first `key` (where no model can know the secret), or after the later ones (where the secret was stated
    before: in an earlier window, or, with an overlap, earlier in the same window)."""
    key_id, total, count = tokenizer.convert_tokens_to_ids(KEY), 0.0, 0
    for text in documents:
        ids = torch.tensor([[tokenizer.bos_token_id] + tokenizer(text, add_special_tokens=False)["input_ids"]])
        log_probs = torch.log_softmax(model(ids).logits[0, :-1].float(), dim=-1)
        after_key = (ids[0, :-1] == key_id).nonzero().flatten()
        after_key = after_key[:1] if first_mention else after_key[1:]
        total -= log_probs[after_key, ids[0, after_key + 1]].sum().item()
        count += len(after_key)
    return total / count


def finished_or_run(argv: list[str]) -> dict:
    """The recurrent LM training's metrics (lengthgen.training.causal_lm, what examples/run_clm_recurrent.py runs):
    read from its output folder if a run there finished, else from running it."""
    results = Path(argv[argv.index("--output_dir") + 1]) / "all_results.json"
    if results.exists():
        return json.loads(results.read_text())
    return train_and_evaluate(*causal_lm_arguments(argv))


def mean_over_seeds(per_seed: list[dict]) -> dict:
    """Each figure's mean over the seeds, its standard deviation (`*_std`, with more than one seed) and the seeds'
    own figures (`per_seed`)."""
    summary = {}
    for key in per_seed[0]:
        values = [run[key] for run in per_seed]
        summary[key] = statistics.mean(values)
        if len(values) > 1:
            summary[f"{key}_std"] = statistics.stdev(values)
    return {**summary, "per_seed": per_seed}


def main(argv=None):
    args = parse_args(argv)
    names = list(VARIANTS) if args.carry_layer_states else ["disjoint", "recurrent"]
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(args.output_dir or scratch)
        corpus = write_corpus(root / "corpus", args)
        tokenizer = word_tokenizer([KEY] + [f"s{i}" for i in range(args.num_secrets)]
                                   + [f"w{i}" for i in range(args.num_filler_words)])
        tokenizer.save_pretrained(root / "tokenizer")
        config = FAMILIES[args.family](args)
        config.save_pretrained(root / "config")

        finished_or_run([
            "--config_name", str(root / "config"), "--use_recurrence", "False", "--window_size", str(args.window_size),
            "--overlap", str(args.overlap), "--insertion_layer", str(insertion_layer(config)),
            "--output_dir", str(root / "pretrained"), *common_arguments(args, root, args.pretrain_steps),
        ])
        results = {"settings": {k: v for k, v in vars(args).items() if k not in ("json", "output_dir")},
                   "chance_secret_loss": math.log(args.num_secrets)}
        for name in names:
            per_seed = []
            for offset in range(args.finetune_seeds):
                folder = root / (name if offset == 0 else f"{name}-s{offset}")
                arguments = common_arguments(args, root, args.finetune_steps)
                arguments[arguments.index("--seed") + 1] = str(args.seed + offset)
                metrics = finished_or_run(["--model_name_or_path", str(root / "pretrained"), *VARIANTS[name],
                                           "--output_dir", str(folder), *arguments])
                model = AutoModelForCausalLM.from_pretrained(folder).eval()
                prefix = f"eval_overlap{args.overlap}"
                per_seed.append({
                    "perplexity_per_token": metrics[f"{prefix}_perplexity"],
                    "loss": metrics[f"{prefix}_loss"],
                    "secret_loss_first_mention": secret_token_loss(model, tokenizer, corpus["validation"], True),
                    "secret_loss_later_mentions": secret_token_loss(model, tokenizer, corpus["validation"], False),
                    "train_loss": metrics["train_loss"],
                })
            results[name] = mean_over_seeds(per_seed)
    results["perplexity_ratio_recurrent_over_disjoint"] = (
        results["recurrent"]["perplexity_per_token"] / results["disjoint"]["perplexity_per_token"]
    )
    print(f"\n{args.family}, windows of {args.window_size}, overlap {args.overlap}; chance loss on the secret "
          f"{results['chance_secret_loss']:.3f} nats")
    print("| model | perplexity per token | secret loss, first mention | secret loss, later mentions |\n"
          "| --- | --- | --- | --- |")
    for name in names:
        r = results[name]
        spread = {key: f" +- {r[key + '_std']:.3f}" if key + "_std" in r else ""
                  for key in ("perplexity_per_token", "secret_loss_first_mention", "secret_loss_later_mentions")}
        print(f"| {name} | {r['perplexity_per_token']:.3f}{spread['perplexity_per_token']} | "
              f"{r['secret_loss_first_mention']:.3f}{spread['secret_loss_first_mention']} | "
              f"{r['secret_loss_later_mentions']:.3f}{spread['secret_loss_later_mentions']} |")
    print(f"recurrent / disjoint perplexity: {results['perplexity_ratio_recurrent_over_disjoint']:.3f}")
    results["hardware"] = hardware()
    if args.json:
        with written_whole(args.json) as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
