"""Every (model, task, learning rate, seed) cell of a leaderboard, resumable and shardable, then its tables."""

import contextlib
import hashlib
import json
import multiprocessing
import os
import threading
import time
import traceback
from concurrent.futures import ProcessPoolExecutor, as_completed

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
             generalizes: float | None = None, workers: int = 1) -> list[dict]:
    """Every cell not already finished in `output_dir/cells`, then the leaderboard from all the cells there. A cell is
    (model, task, learning rate, seed): every seed at every rate of `learning_rates` (None: the budget's one rate).
    `training` changes the budget of presets/leaderboard.yaml (`{"max_steps": 600}`); `params` sets generating
    parameters of every task whose builder has them (`{"train_size": 1000}`). `shard` (I, N) runs only the cells of
    shard I of N (`in_shard`): N processes or machines with the same arguments and folder run the whole grid once.
    `protocol` and `generalizes` (the score at which a run counts as generalizing) are recorded in each cell.
    `workers` > 1 runs that many cells at a time, each in its own process with `threads` threads (default 1): the
    cores of a machine, or one GPU shared by several small models. Each cell is written as it finishes, so a run
    stopped midway keeps every finished cell.

    Names, and whether every model can take every task, are checked before any training (UsageError)."""
    from tqdm.auto import tqdm

    for model in models:
        model_section(model)
    resolved = with_params([resolve_task(t, data_scale) for t in tasks], params or {})
    if threads:
        torch.set_num_threads(threads)
    cells_dir = os.path.join(output_dir, "cells")
    os.makedirs(cells_dir, exist_ok=True)

    # task by task, in the order given: a grid stopped midway has every run of the tasks it reached, so their best,
    # median and share generalizing are those of the whole sweep; within a task, every model's first run first
    records, todo = {}, []
    for task in resolved:
        for rate in learning_rates or [None]:
            for seed in range(seeds):
                for model in models:
                    name = cell.cell_name(model, task.name, seed, rate)
                    if not in_shard(name, shard):
                        continue
                    path = os.path.join(cells_dir, name + ".json")
                    if (record := finished(path)) is not None:  # skipped; a failed cell is tried again
                        records[path] = record
                        continue
                    todo.append((model, task, seed, rate, path))

    prepared = {}
    for model, task, *_ in todo:  # every task generated and every pairing checked before any training
        if task.name not in prepared:
            prepared[task.name] = cell.prepare_task(task)
    working = {(r["model"], r["task"]) for r in records.values()}  # pairs a finished cell has shown to work
    unchecked = list(dict.fromkeys((m, t.name) for m, t, *_ in todo if (m, t.name) not in working))
    runs = [(model, task.name, seed, {**(training or {}), **({"learning_rate": rate} if rate is not None else {})},
             path) for model, task, seed, rate, path in todo]
    with contextlib.ExitStack() as stack:
        if workers > 1:
            # spawned, not forked: a worker may initialise CUDA, and the cells share nothing but the generated data
            # (memory-mapped Arrow files, passed by path)
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=start_worker, initargs=(threads or 1, prepared))
            stack.callback(pool.shutdown, cancel_futures=True)  # stopped midway: the queued cells are dropped
            problems = list(pool.map(check_in_worker, *zip(*unchecked))) if unchecked else []
        else:
            problems = [check_pair(model, prepared[task_name]) for model, task_name in unchecked]
        if any(problems):
            raise UsageError("\n".join(problem for problem in problems if problem))

        progress = stack.enter_context(tqdm(total=len(todo), desc="lengthgen leaderboard", unit="cell"))

        def finish(outcome, path):
            record, ran = outcome
            if ran:  # not finished meanwhile by another shard or run in the same folder
                record.update(protocol=protocol, generalizes=generalizes, cells_at_once=workers)
                write_json(path, record)
                if record["status"] != "ok":
                    progress.write(f"cell {describe(record)} failed: {record['error']}")
            records[path] = record
            progress.update()

        if workers > 1:
            pending = {pool.submit(run_in_worker, model, task_name, seed, budget, path): path
                       for model, task_name, seed, budget, path in runs}
            progress.set_postfix_str(f"{workers} cells at a time")
            for future in as_completed(pending):
                finish(future.result(), pending[future])
        else:
            for model, task_name, seed, budget, path in runs:
                progress.set_postfix_str(describe({"model": model, "task": task_name, "seed": seed, **budget}))
                finish(run_unless_finished(model, prepared[task_name], seed, budget, path), path)
    write_leaderboard(output_dir)
    return list(records.values())


def describe(record: dict) -> str:
    """`model / task / seed S, learning rate R`: a cell as the progress bar and the failure messages name it."""
    rate = record.get("learning_rate")
    return (f"{record['model']} / {record['task']} / seed {record['seed']}"
            + (f", learning rate {rate:g}" if rate is not None else ""))


def finished(path: str) -> dict | None:
    """The record of the cell at `path` if it finished (a failed one is run again), else None."""
    if not os.path.exists(path):
        return None
    with open(path) as f:
        record = json.load(f)
    return record if record.get("status") == "ok" else None


def run_unless_finished(model: str, prepared: "cell.PreparedTask", seed: int, budget: dict,
                        path: str) -> tuple[dict, bool]:
    """(record, whether this call ran the cell): the record another process in the same folder (a shard, a GPU run
    whose cells were collected there) wrote since this run listed its cells, or the cell's results, or, when it
    fails, a record of the failure with its traceback (the other cells go on)."""
    if (record := finished(path)) is not None:
        return record, False
    try:
        return cell.run_cell(model, prepared, seed, budget), True
    except Exception as error:
        return {"model": model, "task": prepared.task.name, "seed": seed, "learning_rate": budget.get("learning_rate"),
                "status": "failed", "error": f"{type(error).__name__}: {error}",
                "traceback": traceback.format_exc()}, True


def check_pair(model: str, prepared: "cell.PreparedTask") -> str | None:
    """Why `model` cannot take the task (`cell.check_model_takes_task`'s message), or None when it can."""
    try:
        cell.check_model_takes_task(model, prepared)
    except UsageError as error:
        return str(error)
    return None


_WORKER_TASKS = {}  # in a worker process: the prepared tasks, by name


def start_worker(threads: int, prepared: dict) -> None:
    torch.set_num_threads(threads)
    _WORKER_TASKS.update(prepared)
    threading.Thread(target=exit_with_parent, args=(os.getppid(),), daemon=True).start()


def exit_with_parent(parent: int, every: float = 1.0) -> None:
    """End this worker once its parent is gone (a `kill` of the command, not only Ctrl-C, stops every cell)."""
    while os.getppid() == parent:
        time.sleep(every)
    os._exit(1)


def check_in_worker(model: str, task_name: str) -> str | None:
    return check_pair(model, _WORKER_TASKS[task_name])


def run_in_worker(model: str, task_name: str, seed: int, budget: dict, path: str) -> tuple[dict, bool]:
    return run_unless_finished(model, _WORKER_TASKS[task_name], seed, budget, path)


def write_json(path: str, data) -> None:
    """Write `data` to `path` whole or not at all (a temporary file renamed over it): shards running side by side,
    or a run stopped midway, never leave a half-written cell."""
    temporary = f"{path}.{os.getpid()}.tmp"
    with open(temporary, "w") as f:
        json.dump(data, f, indent=2)
    os.replace(temporary, path)
