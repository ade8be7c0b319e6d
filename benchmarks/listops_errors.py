#!/usr/bin/env python
"""Which ListOps problems does a model get wrong? Accuracy by the operation at the root and by dependency depth.

    python benchmarks/listops_errors.py outputs/reproduce/ndr-listops-128-binned-40k-decay-6k --num_steps 24
    python benchmarks/listops_errors.py MODEL --splits train validation test --max_examples 2000

A ListOps problem's root operation decides how much of the tree its answer depends on: MIN and MAX select one
argument, MED one or two, SM (sum modulo 10) all of them, so an SM-rooted problem of a given dependency depth holds
the most computation. This script scores a sequence classifier on splits of the `listops` builder (its default
parameters: the splits the presets train and test on) and prints the accuracy per root operation, per dependency
depth (the split's `difficulty`) and per both, with the number of problems in each group.
"""

import argparse
import collections
import json

import torch
from transformers import AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401  (registers the NDR with the Auto classes)
from lengthgen.cli import UsageError, check_positive, local_path_or_hub_id, run_command
from lengthgen.data.export import load_splits
from lengthgen.data.listops import OPERATIONS
from lengthgen.training.models import predict_classes
from lengthgen.training.results import written_whole


def root_operation(problem: str) -> str:
    """The operation at the root of a ListOps problem: `[SM [MIN 1 2 ] 3 ]` -> `SM`."""
    first = problem.split(maxsplit=1)[0]
    if not first.startswith("[") or first[1:] not in OPERATIONS:
        raise UsageError(f"not a ListOps problem (it should open with one of {OPERATIONS}): {problem[:40]!r}")
    return first[1:]


def accuracy_by_group(rows: list[dict], answers: list[str]) -> dict:
    """{"all": ..., "operation": {op: ...}, "depth": {d: ...}, "operation_depth": {"op/d": ...}}, each group as
    {"accuracy": right / count, "count": count}."""
    right, count = collections.Counter(), collections.Counter()
    for row, answer in zip(rows, answers):
        op, depth = root_operation(row["input"]), row["difficulty"]
        for key in ("all", ("operation", op), ("depth", depth), ("operation_depth", f"{op}/{depth}")):
            right[key] += answer == row["target"]
            count[key] += 1
    result = {"all": {"accuracy": right["all"] / count["all"], "count": count["all"]}}
    for kind in ("operation", "depth", "operation_depth"):
        keys = sorted(k[1] for k in count if k != "all" and k[0] == kind)
        result[kind] = {str(k): {"accuracy": right[kind, k] / count[kind, k], "count": count[kind, k]} for k in keys}
    return result


def main(argv=None):
    parser = argparse.ArgumentParser(prog="listops_errors.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("model", help="a ListOps sequence classifier (a local folder or a Hub id)")
    parser.add_argument("--splits", nargs="+", default=["test"],
                        help="splits of the listops builder (default: test, depths 7-8)")
    parser.add_argument("--num_steps", type=int, default=None, help="NDR steps (default: the model's)")
    parser.add_argument("--max_examples", type=int, default=None, help="each split's first N problems only")
    parser.add_argument("--batch_size", type=int, default=100)
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--json", default=None, help="write the results here")
    args = parser.parse_args(argv)
    check_positive({"--num_steps": args.num_steps, "--max_examples": args.max_examples,
                    "--batch_size": args.batch_size})
    if args.threads:
        torch.set_num_threads(args.threads)
    model_path = local_path_or_hub_id(args.model, "model")
    splits = load_splits("listops")
    missing = [name for name in args.splits if name not in splits]
    if missing:
        raise UsageError(f"--splits {' '.join(missing)}: the listops builder has {sorted(splits)}")
    model = AutoModelForSequenceClassification.from_pretrained(model_path).eval()
    tokenizer = AutoTokenizer.from_pretrained(model_path)
    results = []
    for name in args.splits:
        dataset = splits[name]
        if args.max_examples:
            dataset = dataset.select(range(min(args.max_examples, len(dataset))))
        rows = dataset.to_list()
        steps = {"num_steps": args.num_steps} if args.num_steps else {}
        predicted = predict_classes(model, tokenizer, [r["input"] for r in rows], args.batch_size, **steps)
        answers = [model.config.id2label[i] for i in predicted.tolist()]
        result = {"model": model_path, "split": name, "num_steps": args.num_steps, **accuracy_by_group(rows, answers)}
        results.append(result)
        print(f"{model_path} on listops {name} ({len(rows)} problems, {args.num_steps or 'its own'} steps): "
              f"accuracy {result['all']['accuracy']:.3f}")
        for kind in ("operation", "depth", "operation_depth"):
            groups = ", ".join(f"{k} {v['accuracy']:.3f} ({v['count']})" for k, v in result[kind].items())
            print(f"  by {kind}: {groups}")
    if args.json:
        with written_whole(args.json) as f:
            json.dump(results, f, indent=1)
    return results


if __name__ == "__main__":
    run_command(main, "listops_errors.py")  # a mistake: one line, exit status 2 (--debug: the traceback)
