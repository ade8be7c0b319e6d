#!/usr/bin/env python
"""NDR vs. the softmax transformer on compositional table lookup, scaled to a CPU (thesis Table 5.1, "backward").

Both models are trained on CTL problems of 1-5 function applications and tested on 9-10; the checkpoint with the
best accuracy on the depth-validation split (6-8) is reported, as in appendix D.3.3. The thesis (d_model 256, 14
steps, 30K iterations of 512 on a GPU) reports test accuracy 1.00 for the NDR and 0.12 for the transformer. Here
the models and the budget are scaled down (defaults below; the training set is the thesis's); the models run `--eval-num-steps`
steps at evaluation so that 10 applications fit.

    python benchmarks/ndr_ctl_generalization.py --output docs/ndr_ctl_backward_cpu.json   # ~40 min
    python benchmarks/ndr_ctl_generalization.py --models ndr --threads 1   # one model per process, one core each
"""

import argparse
import json
import random
import time

import torch

from lengthgen.data.ctl import generate_ctl_splits
from lengthgen.data.tokenization import word_tokenizer
from lengthgen.modeling import NDRConfig, NDRForSequenceClassification

# the two rows of Table 5.1 compared here, as NDRConfig fields (sizes come from the command line)
MODELS = {
    "ndr": dict(attention_type="geometric", position_encoding="none", copy_gate=True, num_attention_heads=1),
    "transformer": dict(attention_type="softmax", position_encoding="absolute", copy_gate=False, num_attention_heads=4),
}


def parse_args(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--direction", default="backward", choices=["forward", "backward"])
    parser.add_argument("--train-size", type=int, default=53_704, help="as the thesis")
    parser.add_argument("--hidden-size", type=int, default=64, help="thesis: 256 (NDR), 128 (transformer)")
    parser.add_argument("--num-layers", type=int, default=8, help="steps in training; thesis: 14 (NDR), 11")
    parser.add_argument("--eval-num-steps", type=int, default=14, help="steps at evaluation")
    parser.add_argument("--steps", type=int, default=8_000, help="optimizer steps; thesis: 30K")
    parser.add_argument("--batch-size", type=int, default=256, help="thesis: 512")
    parser.add_argument("--learning-rate", type=float, default=1e-3, help="thesis: 1.5e-4")
    parser.add_argument("--eval-every", type=int, default=1_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--output", default=None, help="JSON file for the results")
    return parser.parse_args(argv)


def encode(tokenizer, labels, rows):
    batch = tokenizer([r["input"] for r in rows], padding=True, return_tensors="pt")
    batch["labels"] = torch.tensor([labels.index(r["target"]) for r in rows])
    return batch


@torch.no_grad()
def accuracy_by_depth(model, tokenizer, labels, rows, num_steps) -> dict:
    model.eval()
    batch = encode(tokenizer, labels, rows)
    correct = model(**batch, num_steps=num_steps).logits.argmax(-1) == batch.pop("labels")
    model.train()
    depths = torch.tensor([r["difficulty"] for r in rows])
    result = {"all": correct.float().mean().item()}
    result.update({str(int(d)): correct[depths == d].float().mean().item() for d in depths.unique()})
    return result


def train_and_test(name, args, splits, tokenizer, labels) -> dict:
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    config = NDRConfig(
        vocab_size=len(tokenizer), hidden_size=args.hidden_size, intermediate_size=2 * args.hidden_size,
        num_layers=args.num_layers, num_labels=len(labels), hidden_dropout_prob=0.0, attention_query_dropout=0.0,
        gate_dropout=0.0, **MODELS[name],
    )
    model = NDRForSequenceClassification(config)
    optimizer = torch.optim.AdamW(model.parameters(), lr=args.learning_rate, weight_decay=0.01)
    best = {"validation": {"all": -1.0}}
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        loss = model(**encode(tokenizer, labels, rng.sample(splits["train"], args.batch_size))).loss
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 5.0)  # CTL's clipping (appendix D.3.3)
        optimizer.step()
        optimizer.zero_grad()
        if step % args.eval_every == 0 or step == args.steps:
            scores = {
                split: accuracy_by_depth(model, tokenizer, labels, splits[split], steps)
                for split, steps in (("validation_iid", None), ("validation", args.eval_num_steps),
                                     ("test", args.eval_num_steps))
            }
            print(f"{name} step {step} loss {loss.item():.3f} "
                  + " ".join(f"{s} {v['all']:.3f}" for s, v in scores.items()), flush=True)
            if scores["validation"]["all"] > best["validation"]["all"]:
                best = {**scores, "step": step}
    best["train_seconds"] = time.perf_counter() - start
    return best


def main(argv=None) -> dict:
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    splits = generate_ctl_splits(args.direction, train_size=args.train_size, seed=args.seed)
    tokenizer = word_tokenizer([r["input"] for r in splits["train"]])
    labels = sorted({r["target"] for r in splits["train"]})
    results = {"arguments": vars(args)}
    for name in args.models:
        results[name] = train_and_test(name, args, splits, tokenizer, labels)
    print(f"\nCTL {args.direction}, trained on 1-5 applications, best checkpoint by depth-validation (6-8):")
    print(f"{'model':<12} {'step':>6} {'IID':>6} {'6-8':>6} {'9-10':>6}   per test depth")
    for name in args.models:
        r = results[name]
        per_depth = " ".join(f"{d}:{v:.2f}" for d, v in r["test"].items() if d != "all")
        print(f"{name:<12} {r['step']:>6} {r['validation_iid']['all']:>6.3f} {r['validation']['all']:>6.3f} "
              f"{r['test']['all']:>6.3f}   {per_depth}")
    if args.output:
        with open(args.output, "w") as f:
            json.dump(results, f, indent=2)
    return results


if __name__ == "__main__":
    main()
