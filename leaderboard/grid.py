"""Every (model, task, learning rate, seed) cell of a leaderboard, resumable and shardable, then its tables."""

import contextlib
import glob
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
from lengthgen.training.results import written_whole

from . import cell
from .models import model_section
from .tables import describe, learning_rate, read_cell, superseded, write_leaderboard
from .tasks import resolve_task, with_params


def in_shard(name: str, shard: tuple[int, int] | None) -> bool:
    """Whether cell `name` belongs to shard (I, N): each cell to exactly one of the N, by a hash of its name (so adding
    models or tasks moves no cell to another shard)."""
    return shard is None or int(hashlib.sha256(name.encode()).hexdigest(), 16) % shard[1] == shard[0] - 1


def run_grid(models, tasks, seeds: int, output_dir: str, training: dict | None = None, data_scale: str = "small",
             params: dict | None = None, threads: int | None = None, learning_rates: list[float] | None = None,
             shard: tuple[int, int] | None = None, protocol: str | None = None,
             generalizes: float | None = None, workers: int = 1, task_params: dict | None = None,
             rerun_superseded: bool = False) -> list[dict]:
    """Every cell not already finished in `output_dir/cells`, then the leaderboard from all the cells there. A cell is
    (model, task, learning rate, seed): every seed at every rate of `learning_rates` (None: the budget's one rate).
    `training` changes the budget of presets/leaderboard.yaml (`{"max_steps": 600}`); `params` sets generating
    parameters of every task whose builder has them (`{"train_size": 1000}`), and `task_params` those of one task
    over them (`{"chomsky_hierarchy/stack_manipulation": {"stack_code_layout": True}}`). `shard` (I, N) runs only the
    cells of shard I of N (`in_shard`): N processes or machines with the same arguments and folder run the whole grid
    once.
    `rerun_superseded` runs again, in their place, the finished cells that lengthgen no longer runs as they ran
    (`tables.superseded`): those whose numbers per difficulty are not their own strings' (evaluated in batches that
    `group_by_length` shuffled, before lengthgen kept the rows' order), whose curves come back with the same score on
    the same CPU and threads; those whose randomized positions were drawn over their batch's padded length.
    `protocol` and `generalizes` (the score at which a run counts as generalizing) are recorded in each cell.
    `workers` > 1 runs that many cells at a time, each in its own process with `threads` threads (default 1): the
    cores of a machine, or one GPU shared by several small models. Each cell is written as it finishes, so a run
    stopped midway keeps every finished cell.

    Names, and whether every model can take every task, are checked before any training (UsageError)."""
    from tqdm.auto import tqdm

    for model in models:
        model_section(model)
    resolved = with_params([resolve_task(t, data_scale) for t in tasks], params or {})
    for task in resolved:
        with_params([task], (task_params or {}).get(task.name, {}), f"task_params of {task.name}:")
    if threads:
        torch.set_num_threads(threads)
    cells_dir = os.path.join(output_dir, "cells")
    os.makedirs(cells_dir, exist_ok=True)

    # task by task, in the order given: a grid stopped midway has every run of the tasks it reached, so their best,
    # median and share generalizing are those of the whole sweep; within a task, every model's first run first
    records, todo, conflicts = {}, [], []
    for task in resolved:
        for rate in learning_rates or [None]:
            for seed in range(seeds):
                for model in models:
                    name = cell.cell_name(model, task.name, seed, rate)
                    if not in_shard(name, shard):
                        continue
                    budget = {**(training or {}), **({"learning_rate": rate} if rate is not None else {})}
                    asked = cell.recorded_budget(cell.cell_spec(model, task, seed, budget, cells_dir))
                    record, path = finished_run(cells_dir, model, task.name, seed, rate, asked["learning_rate"])
                    if record is None:  # a failed cell is tried again
                        todo.append((model, task, seed, budget, os.path.join(cells_dir, name + ".json")))
                        continue
                    if difference := differs(record, asked, task):
                        conflicts.append(f"{os.path.basename(path)}: {difference}")
                    if rerun_superseded and superseded(record):
                        todo.append((model, task, seed, budget, path))
                        continue
                    records[path] = record
    if conflicts:
        raise UsageError(
            f"{len(conflicts)} finished cell{'s' if len(conflicts) > 1 else ''} in {cells_dir} ran with another "
            f"budget or data than this run asks: {'; '.join(conflicts[:3])}{' ...' if len(conflicts) > 3 else ''}. "
            "Give another --output_dir, or delete those cells to run them again."
        )

    prepared = {}
    for model, task, *_ in todo:  # every task generated and every pairing checked before any training
        if task.name not in prepared:
            prepared[task.name] = cell.prepare_task(task)
    working = {(r["model"], r["task"]) for r in records.values()}  # pairs a finished cell has shown to work
    unchecked = list(dict.fromkeys((m, t.name) for m, t, *_ in todo if (m, t.name) not in working))
    stamp = {"protocol": protocol, "generalizes": generalizes, "cells_at_once": workers}  # recorded in each cell
    runs = [(model, task.name, seed, budget, path, stamp, rerun_superseded)
            for model, task, seed, budget, path in todo]
    lost = []  # (cell, the exception that kept its process from returning it)
    with contextlib.ExitStack() as stack:

        def new_pool():
            # spawned, not forked: a worker may initialise CUDA, and the cells share nothing but the generated data
            # (memory-mapped Arrow files, passed by path)
            pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("spawn"),
                                       initializer=start_worker, initargs=(threads or 1, prepared))
            stack.callback(pool.shutdown, cancel_futures=True)  # stopped midway: the queued cells are dropped
            return pool

        if workers > 1:
            pool = new_pool()
            problems = list(pool.map(check_in_worker, *zip(*unchecked))) if unchecked else []
        else:
            problems = [check_pair(model, prepared[task_name]) for model, task_name in unchecked]
        if any(problems):
            raise UsageError("\n".join(problem for problem in problems if problem))

        progress = stack.enter_context(tqdm(total=len(todo), desc="lengthgen leaderboard", unit="cell"))

        def finish(outcome, path):
            record, ran = outcome
            if ran and record["status"] != "ok":
                progress.write(f"cell {describe(record)} failed: {record['error']}")
            records[path] = record
            progress.update()

        queue = runs if workers > 1 else []
        if queue:
            progress.set_postfix_str(f"{workers} cells at a time")
        while queue:
            # a worker that dies (killed, out of memory) breaks the pool: every cell in flight or queued comes back
            # as an exception; they go to a fresh pool as long as the broken one finished a cell
            pending, lost, came_back = {pool.submit(run_in_worker, *run): run for run in queue}, [], 0
            for future in as_completed(pending):
                try:
                    outcome = future.result()
                except UsageError:
                    raise
                except Exception as error:
                    lost.append((pending[future], error))
                else:
                    finish(outcome, pending[future][4])
                    came_back += 1
            queue = [run for run, _ in lost] if lost and came_back else []
            if queue:
                progress.write(f"a worker process died ({type(lost[0][1]).__name__}: {lost[0][1]}): "
                               f"{len(queue)} cells go to a fresh pool")
                pool.shutdown(wait=True)
                pool = new_pool()
        if workers == 1:
            for model, task_name, seed, budget, path, stamp, rerun in runs:
                progress.set_postfix_str(describe({"model": model, "task": task_name, "seed": seed, **budget}))
                finish(run_unless_finished(model, prepared[task_name], seed, budget, path, stamp, rerun), path)
    if glob.glob(os.path.join(cells_dir, "*.json")):  # a shard may have no cell, and the folder none yet
        write_leaderboard(output_dir)
    if lost:  # a pool broke without finishing any cell
        names = ", ".join(describe({"model": model, "task": task_name, "seed": seed, **budget})
                          for (model, task_name, seed, budget, *_), _ in lost[:3]) + (" ..." if len(lost) > 3 else "")
        error = lost[0][1]
        raise RuntimeError(
            f"{len(lost)} cell{'s' if len(lost) > 1 else ''} did not come back from "
            f"{'their' if len(lost) > 1 else 'its'} process ({names}): {type(error).__name__}: {error}. Every finished "
            "cell is written; the same command runs the others."
        ) from error
    return list(records.values())


def finished_run(cells_dir: str, model: str, task: str, seed: int, rate: float | None,
                 effective_rate: float) -> tuple[dict | None, str | None]:
    """(record, path) of the run's finished cell, or (None, None): under its name, or under the name the same run has
    with its rate in it or without (`--learning_rate 1e-3` and `--learning_rates 1e-3` run the same cell)."""
    path = os.path.join(cells_dir, cell.cell_name(model, task, seed, rate) + ".json")
    if (record := finished(path)) is not None:
        return record, path
    path = os.path.join(cells_dir, cell.cell_name(model, task, seed, None if rate is not None else effective_rate)
                        + ".json")
    if (record := finished(path)) is not None and learning_rate(record) == effective_rate:
        return record, path
    return None, None


def differs(record: dict, budget: dict, task) -> str | None:
    """What a finished cell's budget and generating parameters have that differs from a run's, e.g.
    `max_steps 600 (asked: 3000)`; None when nothing does. A cell records the parameters its data scale and the
    command set: the builder's defaults stand for the others. Budget fields are compared where both name them, and a
    field that only one names beyond the common budget (`train_sampling_strategy`, ...) against the Trainer's default,
    which the other run had."""
    defaults = cell.data_parameters(task.defaults())
    had_budget = cell.current_names(record.get("budget") or {})
    named_once = (set(budget) ^ set(had_budget)) - set(cell.TRAINING)
    asked = {**{key: cell.budget_value(budget, key) for key in named_once}, **budget, **defaults,
             **cell.data_parameters(task.params)}
    had = {**{key: cell.budget_value(had_budget, key) for key in named_once}, **had_budget, **defaults,
           **(record.get("data_parameters") or {})}
    found = [f"{key} {had[key]!r} (asked: {value!r})" for key, value in asked.items()
             if key in had and had[key] != value]
    return ", ".join(found) or None


def finished(path: str, current: bool = False) -> dict | None:
    """The record of the cell at `path` if it finished (a failed one is run again), else None; with `current`, only
    if lengthgen runs it as it ran (`tables.superseded`)."""
    if not os.path.exists(path):
        return None
    record = read_cell(path)
    return record if record["status"] == "ok" and (not current or not superseded(record)) else None


def run_unless_finished(model: str, prepared: "cell.PreparedTask", seed: int, budget: dict, path: str,
                        stamp: dict, rerun_superseded: bool = False) -> tuple[dict, bool]:
    """Run the cell and write its record to `path` (with `stamp`'s fields), or, when it fails, a record of the failure
    with its traceback (the other cells go on); unless another process in the same folder (a shard, a GPU run whose
    cells were collected there) finished it since this run listed its cells, or while this one trained: then its
    record stands. `rerun_superseded`: a finished record lengthgen no longer runs as it ran does not count
    (`run_grid`), and stays when its run again fails (the failure is returned, not written). Returns (record,
    whether this call ran the cell)."""
    if (record := finished(path, rerun_superseded)) is not None:
        return record, False
    try:
        record = cell.run_cell(model, prepared, seed, budget)
    except Exception as error:
        record = {"model": model, "task": prepared.task.name, "seed": seed,
                  "learning_rate": budget.get("learning_rate"), "status": "failed",
                  "error": f"{type(error).__name__}: {error}", "traceback": traceback.format_exc()}
    if (other := finished(path, rerun_superseded)) is not None:
        return other, False
    record.update(stamp)
    if record["status"] == "ok" or finished(path) is None:  # a failure never replaces a finished score
        write_json(path, record)
    return record, True


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


def run_in_worker(model: str, task_name: str, seed: int, budget: dict, path: str, stamp: dict,
                  rerun_superseded: bool = False) -> tuple[dict, bool]:
    return run_unless_finished(model, _WORKER_TASKS[task_name], seed, budget, path, stamp, rerun_superseded)


def write_json(path: str, data) -> None:
    """Write `data` to `path` whole or not at all: shards running side by side, or a run stopped midway, never leave
    a half-written cell."""
    with written_whole(path) as f:
        json.dump(data, f, indent=2)
