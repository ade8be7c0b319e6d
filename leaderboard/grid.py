"""Every (model, task, seed) cell of a leaderboard, resumable, then its tables."""

import json
import os
import traceback

import torch

from lengthgen.cli import UsageError

from . import cell
from .models import model_section
from .tables import write_leaderboard
from .tasks import resolve_task, with_params


def run_grid(models, tasks, seeds: int, output_dir: str, training: dict | None = None, data_scale: str = "small",
             params: dict | None = None, threads: int | None = None) -> list[dict]:
    """Every (model, task, seed) cell not already finished in `output_dir/cells`, then the leaderboard from all the
    cells there. `training` changes the budget of presets/leaderboard.yaml (`{"max_steps": 600}`); `params` sets
    generating parameters of every task whose builder has them (`{"train_size": 1000}`).

    Names, and whether every model can take every task, are checked before any training (UsageError)."""
    from tqdm.auto import tqdm

    for model in models:
        model_section(model)
    resolved = with_params([resolve_task(t, data_scale) for t in tasks], params or {})
    if threads:
        torch.set_num_threads(threads)
    cells_dir = os.path.join(output_dir, "cells")
    os.makedirs(cells_dir, exist_ok=True)

    records, todo = {}, []
    for task in resolved:
        for model in models:
            for seed in range(seeds):
                path = os.path.join(cells_dir, cell.cell_name(model, task.name, seed) + ".json")
                if os.path.exists(path):
                    with open(path) as f:
                        record = json.load(f)
                    if record.get("status") == "ok":  # finished: skipped; a failed cell is tried again
                        records[path] = record
                        continue
                todo.append((model, task, seed, path))

    prepared = {}
    for model, task, _, _ in todo:  # every task generated and every pairing checked before any training
        if task.name not in prepared:
            prepared[task.name] = cell.prepare_task(task)
    problems = []
    for model, task_name in dict.fromkeys((m, t.name) for m, t, _, _ in todo):
        try:
            cell.check_model_takes_task(model, prepared[task_name])
        except UsageError as error:
            problems.append(str(error))
    if problems:
        raise UsageError("\n".join(problems))

    for model, task, seed, path in (progress := tqdm(todo, desc="lengthgen leaderboard", unit="cell")):
        progress.set_postfix_str(f"{model} {task.name} seed {seed}")
        try:
            record = cell.run_cell(model, prepared[task.name], seed, training or {})
        except Exception as error:  # recorded; the other cells go on
            record = {
                "model": model, "task": task.name, "seed": seed, "status": "failed",
                "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(),
            }
            progress.write(f"cell {model} / {task.name} / seed {seed} failed: {record['error']}")
        with open(path, "w") as f:
            json.dump(record, f, indent=2)
        records[path] = record
    write_leaderboard(output_dir)
    return list(records.values())
