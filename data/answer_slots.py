"""The answer-slots layout: how a model reads a task's answer (`--head answer_slots`, the leaderboard's way).

A model reads the input, a separator and one `[MASK]` slot per answer token, framed by `[CLS] ... [SEP]`; the answer
token expected at each slot is its label. An input with its own `[MASK]` tokens is read there instead. On the
Chomsky-hierarchy tasks an answer is scored up to its END (`answer_end_token`).
"""

from lengthgen.cli import UsageError

from .chomsky_hierarchy import END, is_chomsky_hierarchy
from .nsp import MASK


def answer_layout(input_text: str, target_text: str,
                  end_token: str | None = None) -> tuple[list[str], list[str | None]]:
    """The tokens a model reads and, per token, the answer token expected there (None: not an answer slot, or, with
    `end_token`, a slot after the answer's first `end_token`: read, neither scored nor trained on, as Delétang et al.'s
    code scores an answer up to its termination token; their code also trains on what follows it). An input with its
    own [MASK] slots is read there, the target restoring the whole sequence."""
    tokens, target = input_text.split(), target_text.split()
    if MASK in tokens:  # the input marks its own answer slots; the target restores the whole sequence
        if len(target) != len(tokens):
            raise UsageError(f"Masked input of {len(tokens)} tokens but target of {len(target)}: {input_text!r}")
        return tokens, [t if i == MASK else None for i, t in zip(tokens, target)]
    if not target:
        raise UsageError(f"Empty target for input {input_text!r}")
    answers = list(target)
    if end_token is not None and end_token in answers:
        scored = answers.index(end_token) + 1
        answers[scored:] = [None] * (len(answers) - scored)
    return tokens + ["[SEP]"] + [MASK] * len(target), [None] * (len(tokens) + 1) + answers


def answer_end_token(dataset_name: str | None) -> str | None:
    """The token after which an answer is neither scored nor trained on: END in the Chomsky-hierarchy tasks (their
    stack manipulation and the binary tasks' code layout pad an answer after it), generated here or read from the
    folder or Hub repository `lengthgen data export` writes them to (named `chomsky_hierarchy`); none elsewhere."""
    return END if is_chomsky_hierarchy(dataset_name) else None


def answer_slot_ids(tokenizer, input_text: str, target_text: str,
                    end_token: str | None = None) -> tuple[list[int], list[int]]:
    """input_ids of one example's answer layout framed by [CLS] ... [SEP], and its labels (-100 off the answer slots,
    and after the answer's `end_token`: `answer_layout`)."""
    tokens, answers = answer_layout(input_text, target_text, end_token)
    ids = tokenizer.convert_tokens_to_ids([tokenizer.cls_token, *tokens, tokenizer.sep_token])
    return ids, [-100] + [-100 if a is None else tokenizer.convert_tokens_to_ids(a) for a in answers] + [-100]


def encode_answer_slots(dataset, tokenizer, keep_columns=(), end_token: str | None = None):
    """input_ids and labels of every row's answer layout (`answer_slot_ids`)."""

    def encode(batch):
        pairs = [answer_slot_ids(tokenizer, i, t, end_token) for i, t in zip(batch["input"], batch["target"])]
        return {"input_ids": [ids for ids, _ in pairs], "labels": [labels for _, labels in pairs]}

    return dataset.map(encode, batched=True, remove_columns=[c for c in dataset.column_names if c not in keep_columns])


__all__ = ["answer_end_token", "answer_layout", "answer_slot_ids", "encode_answer_slots"]
