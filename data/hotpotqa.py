"""HotpotQA (distractor setting) for window-level recurrence (Yoshida et al. 2020, §5.4): a question and 10 paragraphs,
read as windows that each begin with the question and a separator.

Sources: the Hub (`hotpotqa/hotpot_qa`, config `distractor`; columns `id`, `question`, `answer`, `type`, `level`,
`supporting_facts` {title, sent_id}, `context` {title, sentences}) or a local JSON file in the official format (a list
of {`_id`, `question`, `answer`, `supporting_facts`: [[title, sentence index]], `context`: [[title, [sentences]]]}).
Both become the Hub's columns.

The context is the 10 paragraphs in the given order, each `title: sentences`, one per line. HotpotQA gives the answer
text, not its place: a span answer is located at its first occurrence in a supporting paragraph, else anywhere in the
context. Answer types: "yes" and "no" are their own classes, anything else is a span.
"""

import json
import os
import random

import datasets

from lengthgen.cli import UsageError

HOTPOTQA_ANSWER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "metrics", "hotpotqa_answer")  # evaluate

ANSWER_TYPES = ("span", "yes", "no")
HUB_COLUMNS = ("id", "question", "answer", "supporting_facts", "context")


def from_official_json(path: str) -> datasets.Dataset:
    """A local file in HotpotQA's official JSON format, with the Hub's columns."""
    with open(path, encoding="utf-8") as f:
        rows = json.load(f)
    return datasets.Dataset.from_list([
        {
            "id": row["_id"],
            "question": row["question"],
            "answer": row.get("answer", ""),
            "supporting_facts": {"title": [t for t, _ in row.get("supporting_facts", [])],
                                 "sent_id": [i for _, i in row.get("supporting_facts", [])]},
            "context": {"title": [t for t, _ in row["context"]], "sentences": [s for _, s in row["context"]]},
        }
        for row in rows
    ])


def load_hotpotqa(dataset_name: str | None = None, dataset_config_name: str | None = "distractor",
                  data_files: dict[str, str] | None = None, max_train_samples: int | None = None,
                  seed: int = 42) -> dict:
    """`{split: Dataset}` from the Hub or local official JSON files (`{split: path}`).

    `max_train_samples` keeps that many training questions drawn at random with `seed` (paper: 30,000)."""
    if (dataset_name is None) == (not data_files):
        raise UsageError("Give either a dataset name or local data files, not both and not neither.")
    if data_files:
        splits = {split: from_official_json(path) for split, path in data_files.items()}
    else:
        splits = dict(datasets.load_dataset(dataset_name, dataset_config_name))
    for split, dataset in splits.items():
        missing = [c for c in HUB_COLUMNS if c not in dataset.column_names]
        if missing:
            raise UsageError(f"The {split} split lacks the columns {missing} of HotpotQA.")
    if max_train_samples is not None and "train" in splits and max_train_samples < len(splits["train"]):
        chosen = sorted(random.Random(seed).sample(range(len(splits["train"])), max_train_samples))
        splits["train"] = splits["train"].select(chosen)
    return splits


def context_text(context: dict) -> tuple[str, list[tuple[str, int, int]]]:
    """The context as one string (`title: sentences` per paragraph, one per line) and each paragraph's
    (title, start, end) character range."""
    if not context["title"] or not any("".join(s).strip() for s in context["sentences"]):
        raise UsageError("The example's context is missing (no paragraph with text).")
    pieces, ranges, at = [], [], 0
    for title, sentences in zip(context["title"], context["sentences"]):
        paragraph = f"{title}: {''.join(sentences).strip()}"
        pieces.append(paragraph)
        ranges.append((title, at, at + len(paragraph)))
        at += len(paragraph) + 1
    return "\n".join(pieces), ranges


def answer_type(answer: str) -> int:
    """0 span, 1 yes, 2 no (HotpotQA writes the yes/no answers in lower case)."""
    return {"yes": 1, "no": 2}.get(answer.strip().lower(), 0)


def answer_start(answer: str, text: str, ranges, supporting_titles) -> int | None:
    """Character position of a span answer: its first occurrence in a supporting paragraph (in context order), else
    its first occurrence anywhere, else None (the answer is not in the text)."""
    if not answer.strip():
        return None
    for title, start, end in ranges:
        if title in supporting_titles:
            found = text.find(answer, start, end)
            if found >= 0:
                return found
    found = text.find(answer)
    return found if found >= 0 else None


def prepare_windows(examples: dict, tokenizer, window_size: int, doc_stride: int) -> dict:
    """Windows of each question for `Dataset.map(batched=True, remove_columns=...)`.

    Each window is `<s> question </s></s> context piece </s>` (the tokenizer's pair template), `window_size` tokens
    with padding; consecutive pieces share `doc_stride` tokens. Per example: `input_ids` and `attention_mask`
    (windows x tokens), `answer_window`, `start_positions`, `end_positions` (the first window holding the whole gold
    span and its tokens there; -100 for yes/no or an answer not found), `answer_types`, and for decoding
    `offsets` (each token's context character range, [-1, -1] outside the context) and `context`."""
    contexts, ranges = zip(*(context_text(c) for c in examples["context"]))
    for example_id, question in zip(examples["id"], examples["question"]):
        question_tokens = len(tokenizer(question, add_special_tokens=False)["input_ids"])
        if question_tokens + 4 + doc_stride >= window_size:  # <s> q </s></s> ... </s>, room for new context
            raise UsageError(f"Question {example_id} has {question_tokens} tokens: with the separators and a stride "
                             f"of {doc_stride} it leaves no room for context in a window of {window_size}.")
    encoded = tokenizer(list(examples["question"]), list(contexts), truncation="only_second", max_length=window_size,
                        stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                        padding="max_length")
    columns = ("input_ids", "attention_mask", "answer_window", "start_positions", "end_positions", "answer_types",
               "offsets", "context", "id", "answer")
    out = {name: [[] for _ in examples["id"]] if name in ("input_ids", "attention_mask", "offsets") else []
           for name in columns}
    for window, example in enumerate(encoded["overflow_to_sample_mapping"]):
        sequence_ids = encoded.sequence_ids(window)
        offsets = [list(o) if s == 1 else [-1, -1] for o, s in zip(encoded["offset_mapping"][window], sequence_ids)]
        out["input_ids"][example].append(encoded["input_ids"][window])
        out["attention_mask"][example].append(encoded["attention_mask"][window])
        out["offsets"][example].append(offsets)
    for index, (answer, context, supporting) in enumerate(
        zip(examples["answer"], contexts, (f["title"] for f in examples["supporting_facts"]))
    ):
        kind = answer_type(answer)
        span = None
        if kind == 0:
            start = answer_start(answer, context, ranges[index], set(supporting))
            if start is not None:
                span = token_span(out["offsets"][index], start, start + len(answer))
        window, first, last = span if span else (-100, -100, -100)
        out["answer_window"].append(window)
        out["start_positions"].append(first)
        out["end_positions"].append(last)
        out["answer_types"].append(kind)
        out["context"].append(context)
        out["id"].append(examples["id"][index])
        out["answer"].append(answer)
    return out


def token_span(window_offsets, start: int, end: int):
    """(window, first token, last token) of the first window whose context tokens cover characters [start, end)."""
    for window, offsets in enumerate(window_offsets):
        first = next((i for i, (s, e) in enumerate(offsets) if s != -1 and s <= start < e), None)
        last = next((i for i, (s, e) in enumerate(offsets) if s != -1 and s < end <= e), None)
        if first is not None and last is not None and first <= last:
            return window, first, last
    return None


def decode_answer(start_logits, end_logits, answer_type_logits, offsets, context: str, max_answer_length: int = 30):
    """The answer string: "yes" / "no" when the answer-type classifier says so, else the best span over all windows
    (highest start + end score, end >= start, at most `max_answer_length` tokens, context tokens only).

    Arguments are tensors for one example: `(windows, length)`, `(windows, length)`, `(num_answer_types,)`, and the
    offsets `(windows, length, 2)` of `prepare_windows` (windows beyond the example's own are ignored)."""
    import torch

    kind = int(answer_type_logits.argmax())
    if kind:
        return ANSWER_TYPES[kind]
    offsets = torch.as_tensor(offsets)
    windows = min(len(offsets), start_logits.shape[0])
    best, answer = None, ""
    for window in range(windows):
        in_context = offsets[window, :, 0] >= 0
        length = in_context.shape[0]
        scores = start_logits[window, :length, None] + end_logits[window, None, :length]
        band = torch.ones(length, length, dtype=torch.bool).triu().tril(max_answer_length - 1)
        allowed = band & in_context[:, None] & in_context[None, :]
        if not allowed.any():
            continue
        scores = scores.masked_fill(~allowed, float("-inf"))
        flat = int(scores.argmax())
        score = float(scores.flatten()[flat])
        if best is None or score > best:
            first, last = divmod(flat, length)
            best, answer = score, context[int(offsets[window, first, 0]):int(offsets[window, last, 1])]
    return answer


__all__ = [
    "ANSWER_TYPES",
    "HOTPOTQA_ANSWER",
    "answer_start",
    "answer_type",
    "context_text",
    "decode_answer",
    "from_official_json",
    "load_hotpotqa",
    "prepare_windows",
    "token_span",
]
