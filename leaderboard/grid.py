"""Every (model, task, learning rate, seed) cell of a leaderboard, resumable and shardable, then its tables."""

import json
import os
import hashlib
import traceback

import torch

from lengthgen.cli import UsageError

from . import cell
from .models import model_section
from .tables import write_leaderboard
from .tasks import resolve_task, with_params


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether cell `name` belongs to shard (I, N): each cell to exactly one of the N, by a hash of its name (so adding
    models or tasks moves no cell to another shard)."""
    return shard is None or int(hashlib.sha256(name.encode()).hexdigest(), 16) % shard[1] == shard[0] - 1


def run_grid(models, tasks, seeds: int, output_dir: str, training: dict | None = None, data_scale: str = "small",
             params: dict | None = None, threads: int | None = None, learning_rates: list[float] | None = None,
             shard: tuple[int, int] | None = None, protocol: str | None = None,
             generalizes: float | None = None) -> list[dict]:
    """Every cell not already finished in `output_dir/cells`, then the leaderboard from all the cells there. A cell is
    (model, task, learning rate, seed): every seed at every rate of `learning_rates` (None: the budget's one rate).
    `training` changes the budget of presets/leaderboard.yaml (`{"max_steps": 600}`); `params` sets generating
    parameters of every task whose builder has them (`{"train_size": 1000}`). `shard` (I, N) runs only the cells of
    shard I of N (`in_shard`): N processes or machines with the same arguments and folder run the whole grid once.
    `protocol` and `generalizes` (the score at which a run counts as generalizing) are recorded in each cell.

    Names, and whether every model can take every task, are checked before any training (UsageError)."""
    from tqdm.auto import tqdm

    for model in models:
        model_section(model)
    resolved = with_params([resolve_task(t, data_scale) for t in tasks], params or {})
    if threads:
        torch.set_num_threads(threads)
    cells_dir = os.path.join(output_dir, "cells")
    os.makedirs(cells_dir, exist_ok=True)

    records, todo = {}, []  # run by run: every (task, model) gets its first run before any gets a second
    for rate in learning_rates or [None]:
        for seed in range(seeds):
            for task in resolved:
                for model in models:
                    name = cell.cell_name(model, task.name, seed, rate)
                    if not in_shard(name, shard):
                        continue
                    path = os.path.join(cells_dir, name + ".json")
                    if os.path.exists(path):
                        with open(path) as f:
                            record = json.load(f)
                        if record.get("status") == "ok":  # finished: skipped; a failed cell is tried again
                            records[path] = record
                            continue
                    todo.append((model, task, seed, rate, path))

    prepared = {}
    for model, task, *_ in todo:  # every task generated and every pairing checked before any training
        if task.name not in prepared:
            prepared[task.name] = cell.prepare_task(task)
    problems = []
    finished = {(r["model"], r["task"]) for r in records.values()}  # pairs a finished cell has shown to work
    for model, task_name in dict.fromkeys((m, t.name) for m, t, *_ in todo if (m, t.name) not in finished):
        try:
            cell.check_model_takes_task(model, prepared[task_name])
        except UsageError as error:
            problems.append(str(error))
    if problems:
        raise UsageError("\n".join(problems))

    for model, task, seed, rate, path in (progress := tqdm(todo, desc="lengthgen leaderboard", unit="cell")):
        run = f"seed {seed}" + (f", learning rate {rate:g}" if rate is not None else "")
        progress.set_postfix_str(f"{model} {task.name} {run}")
        budget = {**(training or {}), **({"learning_rate": rate} if rate is not None else {})}
        try:
            record = cell.run_cell(model, prepared[task.name], seed, budget)
        except Exception as error:  # recorded; the other cells go on
            record = {
                "model": model, "task": task.name, "seed": seed, "status": "failed",
                "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc(),
            }
            progress.write(f"cell {model} / {task.name} / {run} failed: {record['error']}")
        record.update(protocol=protocol, generalizes=generalizes)
        write_json(path, record)
        records[path] = record
    write_leaderboard(output_dir)
    return list(records.values())


def write_json(path: str, data) -> None:
    """Write `data` to `path` whole or not at all (a temporary file renamed over it): shards running side by side,
    or a run stopped midway, never leave a half-written cell."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(temporary, path)
