#!/usr/bin/env python
"""Score a release folder again, with transformers alone, and compare with the accuracy its model card states.

    python benchmarks/verify_release.py checkpoints/ndr-ctl-backward --split test --without-lengthgen
    python benchmarks/verify_release.py release/ndr-ctl-backward --rows rows.jsonl --split validation

Without `--rows`, the split is generated again by the lengthgen builder the card names (its `model-index` dataset and
config, and its `dataset_params`); `rows.jsonl` holds a split's rows (`input`, `target`) as the builders write them.
The model loads with `AutoModel*.from_pretrained(folder, trust_remote_code=True)`; `--without-lengthgen` makes
`import lengthgen.modeling` (and, once the rows are generated, any `import lengthgen`) fail first, so only the code
shipped in the folder can run. A sequence classifier is scored on its class; a masked LM on
the whole masked span (sequence accuracy). Exits 1 when the score differs from the card's by more than the card's
rounding.
"""

import argparse
import json
import sys


def card_accuracy(card, folder: str, split: str) -> float:
    splits = sorted({r.dataset_split for r in card.data.eval_results or []})
    if split not in splits:
        raise SystemExit(f"The model card in {folder} has no results on split {split!r}; it has {', '.join(splits)}.")
    for result in card.data.eval_results or []:
        if result.dataset_split == split and result.metric_name in ("accuracy", "sequence accuracy"):
            return result.metric_value
    raise SystemExit(f"The model card in {folder} states no overall accuracy on split {split!r}.")


def generated_rows(card, split: str) -> list[dict]:
    """The split the card names, generated again by its lengthgen builder with the card's generating parameters."""
    from lengthgen.data.export import load_splits, parse_param

    data = card.data
    result = data.eval_results[0]
    params = dict(parse_param(p) for p in data.to_dict().get("dataset_params", []))
    rows = load_splits(result.dataset_type, result.dataset_config, params)[split]
    return [{"input": i, "target": t} for i, t in zip(rows["input"], rows["target"])]


def score(folder: str, rows: list[dict], batch_size: int = 256) -> float:
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    masked = any(a.endswith("ForMaskedLM") for a in config.architectures)
    auto = AutoModelForMaskedLM if masked else AutoModelForSequenceClassification
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    correct = 0
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        encoded = tokenizer([r["input"] for r in batch], padding=True, return_tensors="pt")
        with torch.no_grad():
            predicted = model(**encoded).logits.argmax(-1)
        if masked:
            targets = tokenizer([r["target"] for r in batch], padding=True, return_tensors="pt")["input_ids"]
            is_mask = encoded["input_ids"] == tokenizer.mask_token_id
            correct += int(((predicted == targets) | ~is_mask).all(-1).sum())
        else:
            correct += sum(config.id2label[int(p)] == r["target"] for p, r in zip(predicted, batch))
    return correct / len(rows)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("folder")
    parser.add_argument("--rows", help="JSON lines with input and target (default: generate the card's split)")
    parser.add_argument("--split", help="the card's split to score (default: its test split, else validation)")
    parser.add_argument("--without-lengthgen", action="store_true", help="make `import lengthgen` fail first")
    args = parser.parse_args(argv)
    if args.without_lengthgen:  # before anything is loaded: the Auto classes must not know lengthgen's models
        sys.modules["lengthgen.modeling"] = None
    from huggingface_hub import ModelCard

    card = ModelCard.load(f"{args.folder}/README.md")
    if args.split is None:
        splits = {r.dataset_split for r in card.data.eval_results or []}
        args.split = "test" if "test" in splits else "validation"
    stated = card_accuracy(card, args.folder, args.split)
    if args.rows:
        with open(args.rows) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    else:
        rows = generated_rows(card, args.split)
    if args.without_lengthgen:
        assert not any(m.startswith("lengthgen.modeling.") for m in sys.modules), "lengthgen's models were imported"
        sys.modules["lengthgen"] = None  # any further import of lengthgen now raises ImportError
    measured = score(args.folder, rows)
    print(json.dumps({"split": args.split, "rows": len(rows), "measured": measured, "card": stated}))
    if abs(measured - stated) > 5e-5 + 1e-9:
        raise SystemExit(f"measured {measured:.4f} differs from the card's {stated:.4f}")


if __name__ == "__main__":
    main()
