"""Score a release folder again, with transformers alone, and compare with the accuracy its model card states
(`lengthgen verify`).

Without `rows`, the split is generated again by the lengthgen builder the card names (its `model-index` dataset and
config, and its `dataset_params`). The model loads with `AutoModel*.from_pretrained(folder, trust_remote_code=True)`;
`without_lengthgen` makes `import lengthgen.modeling` (and, once the rows are generated, any new import of
lengthgen) fail first, so only the code shipped in the folder can run. A sequence classifier is scored on its class, a
masked LM on the whole masked span, an answer-slots reader on its whole answer (`lengthgen.data.answer_slots`' layout),
all by `lengthgen.data.scoring`. This module imports no model code of lengthgen.
"""

import sys

from lengthgen.cli import UsageError
from lengthgen.data.answer_slots import answer_end_token, answer_slot_ids
from lengthgen.data.scoring import scored_rows, scores_by_difficulty

CARD_ROUNDING = 5e-5  # cards state accuracies to 4 decimals


def card_accuracy(card, folder: str, split: str) -> float:
    """The overall accuracy the card states on `split`."""
    splits = sorted({r.dataset_split for r in card.data.eval_results or []})
    if not splits:
        raise UsageError(f"The model card in {folder} states no results (a card of `lengthgen release` does): not a "
                         "release folder?")
    if split not in splits:
        raise UsageError(f"The model card in {folder} has no results on split {split!r}; it has {', '.join(splits)}.")
    for result in card.data.eval_results or []:  # "sequence accuracy": cards of masked LMs released before
        if result.dataset_split == split and result.metric_name in ("accuracy", "sequence accuracy"):
            return result.metric_value
    raise UsageError(f"The model card in {folder} states no overall accuracy on split {split!r}.")


def generated_rows(card, split: str) -> list[dict]:
    """The split the card names, generated again by its lengthgen builder with the card's generating parameters;
    the rows its results were measured on: the first `eval_rows` of an evaluation split, `eval_train_rows` training
    rows drawn with seed 0 from the first `train_rows`, where the card names them (`scored_rows`, as the training run
    draws them)."""
    from lengthgen.data.export import load_splits, parse_params

    result = card.data.eval_results[0]
    metadata = card.data.to_dict()
    params = parse_params(metadata.get("dataset_params", []))
    rows = scored_rows(split, load_splits(result.dataset_type, result.dataset_config, params)[split],
                       metadata.get("eval_rows"), metadata.get("eval_train_rows"), metadata.get("train_rows"))
    return [{"input": i, "target": t} for i, t in zip(rows["input"], rows["target"])]


def answer_slot_batch(tokenizer, batch: list[dict], end_token: str | None):
    """The padded input_ids and attention_mask of `batch`'s answer layouts, and their labels."""
    import torch

    pairs = [answer_slot_ids(tokenizer, r["input"], r["target"], end_token) for r in batch]
    width = max(len(ids) for ids, _ in pairs)
    ids = torch.full((len(pairs), width), tokenizer.pad_token_id)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for row, (row_ids, _) in enumerate(pairs):
        ids[row, : len(row_ids)], mask[row, : len(row_ids)] = torch.tensor(row_ids), 1
    return {"input_ids": ids, "attention_mask": mask}, [labels + [-100] * (width - len(labels)) for _, labels in pairs]


def score(folder: str, rows: list[dict], batch_size: int = 256, end_token: str | None = None) -> float:
    """Accuracy of the model in `folder` on `rows` ({input, target}), loaded with the code the folder carries; an
    answer-slots reader's answers scored up to `end_token` (`answer_end_token` of the card's dataset)."""
    import torch
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoModelForSequenceClassification, AutoTokenizer

    config = AutoConfig.from_pretrained(folder, trust_remote_code=True)
    slots = "AnswerReader" in config.architectures
    masked = slots or any(a.endswith("ForMaskedLM") for a in config.architectures)
    auto = AutoModelForMaskedLM if masked else AutoModelForSequenceClassification
    model = auto.from_pretrained(folder, trust_remote_code=True).eval()
    tokenizer = AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
    predicted, labels = [], []
    for start in range(0, len(rows), batch_size):
        batch = rows[start : start + batch_size]
        if slots:
            encoded, batch_labels = answer_slot_batch(tokenizer, batch, end_token)
        else:
            encoded = tokenizer([r["input"] for r in batch], padding=True, return_tensors="pt")
        with torch.no_grad():
            answers = model(**encoded).logits.argmax(-1)
        if slots:
            predicted += answers.tolist()
            labels += batch_labels
        elif masked:  # the answer is the tokens at the [MASK] positions
            encoded_targets = tokenizer([r["target"] for r in batch], padding=True, return_tensors="pt")
            lengths = encoded["attention_mask"].sum(-1), encoded_targets["attention_mask"].sum(-1)
            differ = (lengths[0] != lengths[1]).nonzero().flatten().tolist()
            if differ:
                row = differ[0]
                raise UsageError(
                    f"{folder}: row {start + row + 1} has an input of {int(lengths[0][row])} tokens and a target of "
                    f"{int(lengths[1][row])}: a masked LM's target is its input with the masks filled in"
                )
            targets = encoded_targets["input_ids"]
            targets[encoded["input_ids"] != tokenizer.mask_token_id] = -100
            predicted += answers.tolist()
            labels += targets.tolist()
        else:
            unknown = sorted({r["target"] for r in batch} - set(config.label2id))
            if unknown:
                raise UsageError(f"{folder}: rows with targets {unknown[:5]} that are not among the model's classes "
                                 f"{sorted(config.label2id)[:10]}: rows of another task?")
            predicted += answers.tolist()
            labels += [config.label2id[r["target"]] for r in batch]
    return scores_by_difficulty(predicted, labels, [0] * len(rows))["all"]["accuracy"]


def verify(folders: list[str], rows: list[dict] | None = None, split: str | None = None,
           without_lengthgen: bool = False) -> list[dict]:
    """One report per folder: {"folder", "split", "rows", "measured", "card", "agrees"}, where `agrees` says the
    measured accuracy is the card's to its rounding. `rows` (one split's rows) serve every folder; without them each
    card's own split is generated first, so that with `without_lengthgen` lengthgen is unimportable for all the
    scoring (for the call's duration: the process imports lengthgen again afterwards)."""
    blocked = ("lengthgen.modeling", "lengthgen")
    before = {name: sys.modules[name] for name in blocked if name in sys.modules}
    try:
        return _verify(folders, rows, split, without_lengthgen)
    finally:
        if without_lengthgen:
            for name in blocked:
                if name in before:
                    sys.modules[name] = before[name]
                elif sys.modules.get(name, ...) is None:
                    del sys.modules[name]


def _verify(folders, rows, split, without_lengthgen):
    if without_lengthgen:  # before anything is loaded: the Auto classes must not know lengthgen's models
        if "lengthgen.modeling" in sys.modules and sys.modules["lengthgen.modeling"] is not None:
            raise RuntimeError("lengthgen.modeling was imported before the check without lengthgen could start.")
        sys.modules["lengthgen.modeling"] = None
    from huggingface_hub import ModelCard

    plans = []
    for folder in folders:
        card = ModelCard.load(f"{folder}/README.md")
        folder_split = split
        if folder_split is None:
            splits = {r.dataset_split for r in card.data.eval_results or []}
            folder_split = "test" if "test" in splits else "validation"
        stated = card_accuracy(card, folder, folder_split)
        end_token = answer_end_token(card.data.eval_results[0].dataset_type)
        plans.append((folder, folder_split, stated, rows if rows is not None else generated_rows(card, folder_split),
                      end_token))
    if without_lengthgen:
        assert not any(m.startswith("lengthgen.modeling.") for m in sys.modules), "lengthgen's models were imported"
        sys.modules["lengthgen"] = None  # any further import of lengthgen now raises ImportError
    reports = []
    for folder, folder_split, stated, folder_rows, end_token in plans:
        measured = score(folder, folder_rows, end_token=end_token)
        reports.append({"folder": folder, "split": folder_split, "rows": len(folder_rows), "measured": measured,
                        "card": stated, "agrees": abs(measured - stated) <= CARD_ROUNDING + 1e-9})
    return reports


__all__ = ["answer_slot_batch", "card_accuracy", "generated_rows", "score", "verify"]
