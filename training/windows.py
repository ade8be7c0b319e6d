"""Training examples for window-level recurrence: tokenized documents cut into runs of the model's windows."""

from lengthgen.modeling import check_overlap


def document_runs(batch: dict, window: int, overlap: int, windows_per_example: int) -> dict:
    """Split tokenized documents into training examples of up to K = `windows_per_example` windows each (§5: 20 of
    300 tokens), for `Dataset.map(batched=True, remove_columns=...)`.

    With stride s = T - o, K windows cover K s + o tokens; consecutive runs of a document start K s tokens apart, so a
    run's first o tokens repeat the end of the previous run. They are context only (label -100), so no token is
    trained on twice. A run's first token has nothing before it in the run: with o = 0 it is not predicted (the
    windows inside a run are the document's own windows; each run starts without h_prev). A one-token tail is
    dropped."""
    check_overlap(window, overlap)
    if windows_per_example < 1:
        raise ValueError(f"windows_per_example must be >= 1, got {windows_per_example}")
    span = windows_per_example * (window - overlap)
    input_ids, labels = [], []
    for ids in batch["input_ids"]:
        for start in range(0, max(len(ids) - overlap, 1), span):
            run = ids[start:start + span + overlap]
            if len(run) < 2:
                continue
            context = overlap if start > 0 else 0
            input_ids.append(run)
            labels.append([-100] * context + run[context:])
    return {"input_ids": input_ids, "labels": labels}


__all__ = ["document_runs"]
