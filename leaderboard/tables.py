"""The leaderboard of a `lengthgen leaderboard` output folder, from its cell JSONs alone.

`leaderboard.md` opens with how much of a protocol's board has finished and a table of the best run of each model on
each task. `leaderboard.md` and `leaderboard.csv`: per task and model, over its runs (every seed at every learning
rate), the score (mean accuracy over the difficulties above the training range, as Delétang et al. score) of the best
and the median run, the share of runs that generalize (score at or above the protocol's threshold), the fit
(accuracy on a sample of training examples) and the expected calibration error of the answer tokens over the same
difficulties as the score, both of the median run, the published scores of the same architecture on the same task
(presets/published.yaml), and the cells that failed with their error; then what one cell cost, per model, from the
cells' own records. `accuracy_by_length.csv`: every cell's accuracy and ECE at every difficulty.
`plots/<task>.png`: accuracy against difficulty, a line per model (median over runs, the band from the worst to
the best run), the training range shaded.
"""

import csv
import functools
import glob
import json
import os
import statistics

from lengthgen.cli import UsageError
from lengthgen.plots import Curve, plot_accuracy
from lengthgen.presets import load_table
from lengthgen.training.results import written_whole

from .models import PRESETS
from .protocol import PROTOCOLS


@functools.cache
def published_table() -> dict:
    """presets/published.yaml: {source: {short, citation, aggregate, protocol, scores: {task: {their model: %}}}}."""
    return load_table("published")


def read_cell(path: str) -> dict:
    """A cell's record; a UsageError naming the file when it is not a readable JSON object."""
    try:
        with open(path) as f:
            record = json.load(f)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise UsageError(f"{path} is not a readable cell result ({error}): delete it to run the cell again.") from error
    if not isinstance(record, dict) or "status" not in record:
        raise UsageError(f"{path} is not a cell result (no 'status'): delete it to run the cell again.")
    return record


def load_cells(output_dir: str) -> list[dict]:
    return [read_cell(path) for path in sorted(glob.glob(os.path.join(output_dir, "cells", "*.json")))]


def chomsky_config(task: str) -> str | None:
    """`parity_check` of the task `chomsky_hierarchy/parity_check`; None for a task of another builder."""
    return task.split("/", 1)[1] if task.startswith("chomsky_hierarchy/") else None


def task_label(task: str) -> str:
    """A task as the page's tables name it: a Chomsky-hierarchy task by its config in words (`parity check`)."""
    config = chomsky_config(task)
    return config.replace("_", " ") if config else task


def file_safe(name: str) -> str:
    """A task's or model's name as part of a file name (cells, plots): `hf:`, `/` and `:` become `-`."""
    return name.replace("hf:", "hf-").replace("/", "-").replace(":", "-")


def learning_rate(cell: dict) -> float | None:
    """The cell's peak learning rate (its budget's, for cells recorded without the field)."""
    return cell["learning_rate"] if cell.get("learning_rate") is not None else (cell.get("budget") or {}).get(
        "learning_rate")


def run_label(record: dict) -> str:
    """`seed S, learning rate R` (the rate where the cell's name has one): one run of a (model, task) pair."""
    rate = record.get("learning_rate")
    return f"seed {record['seed']}" + (f", learning rate {rate:g}" if rate is not None else "")


def describe(record: dict) -> str:
    """`model / task / seed S, learning rate R`: a cell as the progress bar and the failure messages name it."""
    return f"{record['model']} / {record['task']} / {run_label(record)}"


def fit_sample(cell: dict) -> int:
    """How many training examples the fit was measured on."""
    return sum(v["examples"] for v in cell["accuracy"]["train"].values())


def fit(cell: dict) -> float:
    """Accuracy on the sample of training examples (all of them, not per difficulty)."""
    return sum(v[cell["metric"]] * v["examples"] for v in cell["accuracy"]["train"].values()) / fit_sample(cell)


def held_out(accuracy: dict, metric: str) -> dict[int, float]:
    """`metric` at each difficulty of the held-out splits of `accuracy` ({split: {difficulty: {metric, "examples"}}},
    the "train" sample left out), in order of difficulty; a difficulty that several splits hold gets their mean
    weighted by examples."""
    sums = {}
    for split, table in accuracy.items():
        if split != "train":
            for difficulty, entry in table.items():
                total, count = sums.get(int(difficulty), (0.0, 0))
                sums[int(difficulty)] = (total + entry[metric] * entry["examples"], count + entry["examples"])
    return {difficulty: total / count for difficulty, (total, count) in sorted(sums.items())}


def per_length(cell: dict) -> bool:
    """Whether the cell's numbers per difficulty are its own strings': evaluated in the rows' order (`evaluation_order`
    "rows"), or trained without batches grouped by length. Under `group_by_length` transformers' Trainer also
    shuffles the evaluation batches; a cell recorded before lengthgen kept their order paired its answers with other
    strings' difficulties. Its score (a mean over difficulties that hold equally many strings) and fit (over all
    sampled strings) stand; its curve, its numbers per difficulty and its ECE do not."""
    return cell.get("evaluation_order") == "rows" or cell["budget"].get("train_sampling_strategy") != "group_by_length"


def positions_per_row(cell: dict) -> bool:
    """Whether the cell's randomized positions (a model of presets/leaderboard.yaml with `randomized_positions`) were
    drawn per row over its own tokens (`position_draws` "per_row"), as Ruoss et al. draw them; a cell recorded before
    lengthgen did so drew a short row's positions over its batch's padded length, crowding them towards the start of
    the range (its score does not stand). True for a model without randomized positions."""
    from .models import model_section

    try:
        randomized = model_section(cell["model"]).get("randomized_positions")
    except UsageError:  # a model the presets no longer name
        randomized = None
    return not randomized or cell.get("position_draws") == "per_row"


def superseded(cell: dict) -> bool:
    """Whether the board runs the finished cell again in its place (`--rerun_superseded`): its numbers per difficulty
    are not its own strings' (`per_length`), or its randomized positions were drawn over padding
    (`positions_per_row`)."""
    return not per_length(cell) or not positions_per_row(cell)


def curve(cell: dict) -> dict[int, float]:
    """The cell's accuracy at each difficulty of the held-out splits (its score's metric)."""
    return held_out(cell["accuracy"], cell["metric"])


def calibration(cell: dict) -> float | None:
    """Mean expected calibration error over the scored difficulties (None for cells written before ECE was kept, or
    without their own numbers per difficulty: `per_length`)."""
    if not per_length(cell):
        return None
    scored = {str(d) for d in cell["score_difficulties"]}
    values = [v["ece"] for split, table in cell["accuracy"].items() if split != "train"
              for d, v in table.items() if d in scored and "ece" in v]
    return statistics.fmean(values) if values else None


def published(task: str, model: str, protocol: str | None) -> list[tuple[str, str, float]]:
    """(source, the score's label, score in [0, 1]) of every published score of `model`'s architecture on `task` from
    the sources that measured as `protocol` does (its `published` list): the model's preset names its counterpart in
    each source (`published: {deletang2023: lstm}`). None without a protocol: a board of its own scale has nothing to
    compare."""
    sources = PROTOCOLS[protocol].published if protocol in PROTOCOLS else []
    counterparts = PRESETS.get(model, {}).get("published", {})
    config = chomsky_config(task)
    found = []
    for source, theirs in counterparts.items():
        if source not in sources:
            continue
        entry = published_table().get(source, {})
        score = entry.get("scores", {}).get(config, {}).get(theirs)
        if score is not None:
            found.append((source, f"{entry.get('short', source)} {theirs.replace('_', '-')}", score / 100))
    return found


def run_key(cell: dict) -> tuple:
    """What names a run: model, task, seed and learning rate (its cell's file has it in its name or not)."""
    return cell["model"], cell["task"], cell["seed"], learning_rate(cell)


def summarize(cells: list[dict]) -> list[dict]:
    """One row per (task, model) over its runs: best and median score, the share of runs that generalize, the fit and
    ECE of the median run, runs, failures, the published scores; in order of tasks, then of median score. The median
    run of an even number of runs is the lower of the two middle ones, so that its three numbers are one run's. A
    failure of a run that has since finished (under its other file name) is not listed."""
    finished = {run_key(cell) for cell in cells if cell["status"] == "ok"}
    rows = {}
    for cell in cells:
        row = rows.setdefault(
            (cell["task"], cell["model"]),
            {"task": cell["task"], "model": cell["model"], "runs": [], "failed": [], "metric": None,
             "generalizes": cell.get("generalizes"), "protocol": cell.get("protocol")},
        )
        if cell["status"] == "ok":
            if cell.get("protocol") in PROTOCOLS and not on_protocol_data(PROTOCOLS[cell["protocol"]], cell, True):
                row["protocol"] = None  # another answer layout or lengths than the published scores': none beside it
            row["runs"].append(cell)
            row["metric"] = cell["metric"]
        elif run_key(cell) not in finished:
            row["failed"].append(f"{run_label(cell)}: {cell['error']}")
    summary = []
    for row in rows.values():
        runs = row.pop("runs")
        scored = sorted((run for run in runs if run["score"] is not None), key=lambda run: run["score"])
        scores = [run["score"] for run in scored]
        middle = scored or sorted(runs, key=fit)  # runs without a difficulty above training: the median fit's
        median_run = middle[(len(middle) - 1) // 2] if middle else None
        threshold = row["generalizes"]
        summary.append(
            {
                **row,
                "best": max(scores) if scores else None,
                "median": median_run["score"] if median_run else None,
                "generalizing": (sum(s >= threshold for s in scores) / len(scores)
                                 if scores and threshold is not None else None),
                "fit_median": fit(median_run) if median_run else None,
                "ece_median": calibration(median_run) if median_run else None,
                "seeds": len(runs),
                "published": published(row["task"], row["model"], row["protocol"]),
            }
        )
    return sorted(summary, key=lambda r: (r["task"], -(r["median"] if r["median"] is not None else -1)))


def cost(cells: list[dict]) -> list[dict]:
    """Per model and machine, what one finished cell took: median parameters (they follow each task's vocabulary),
    training steps and seconds, evaluation seconds, processor seconds of the whole cell (None for cells recorded
    without them)."""
    groups = {}
    for c in cells:
        if c["status"] == "ok":
            groups.setdefault((c["model"], machine(c)), []).append(c)
    rows = []
    for (model, where), done in sorted(groups.items()):
        rows.append({"model": model, "machine": where, "cells": len(done),
                     "parameters": statistics.median(n) if (n := [c["parameters"] for c in done
                                                                   if "parameters" in c]) else None,
                     "steps": statistics.median(c["train_steps"] for c in done),
                     "train_seconds": statistics.median(c["train_seconds"] for c in done),
                     "eval_seconds": statistics.median(c["eval_seconds"] for c in done),
                     "cpu_seconds": statistics.median(cpu) if (cpu := [c["cpu_seconds"] for c in done
                                                                       if "cpu_seconds" in c]) else None})
    return rows


def machine(cell: dict) -> str:
    """The device a cell ran on: the CPU and its threads (each cell's processor seconds are its cost), or the GPU and
    how many cells shared it (`--workers`)."""
    hardware = cell.get("hardware") or {}
    if hardware.get("gpu"):
        at_once = cell.get("cells_at_once") or 1
        return hardware["gpu"] + (f", {at_once} cells at once" if at_once > 1 else "")
    threads = cell.get("threads")
    return (f"{hardware.get('cpu', 'CPU')} ({hardware.get('cpu_capability', '?')})"
            + (f", {threads} thread{'s' if threads != 1 else ''}" if threads else ""))


def overview(summary: list[dict], board, threshold: float | None) -> list[str]:
    """The page's first table: a row per task (its level of the Chomsky hierarchy where it has one), a column per
    model, the best run's score, in bold where it reaches `threshold`; in the protocol's order of tasks and models."""
    from lengthgen.data.chomsky_hierarchy import TASKS as CHOMSKY_TASKS

    best = {(r["task"], r["model"]): r["best"] for r in summary}
    runs = {}
    for r in summary:
        runs[r["task"]] = runs.get(r["task"], 0) + r["seeds"]

    def order(names, given):  # as `given` lists them, then the others by name
        return sorted(names, key=lambda name: (given.index(name) if name in given else len(given), name))

    tasks = order({r["task"] for r in summary}, board.tasks if board else [])
    models = order({r["model"] for r in summary}, board.models if board else [])

    def shown(score):
        if score is None:
            return "-"
        return f"**{score:.3f}**" if threshold is not None and score >= threshold else f"{score:.3f}"

    lines = ["## Best run of each model", "",
             "The score of each model's best run on each task"
             + (f", in bold from {threshold:g} (a run that generalizes)" if threshold is not None else "")
             + "; the runs finished on the task in brackets; -: no finished run yet. Each task's table below has "
             "the median, the fit and the published scores.", "",
             "| task | level | " + " | ".join(models) + " |",
             "| --- | --- | " + " | ".join("---" for _ in models) + " |"]
    levels = {}  # level -> its tasks, in the table's order
    for task in tasks:
        level = CHOMSKY_TASKS[config].level if (config := chomsky_config(task)) in CHOMSKY_TASKS else ""
        lines.append(f"| {task_label(task)} ({runs[task]}) | {level} | "
                     + " | ".join(shown(best.get((task, m))) for m in models) + " |")
        if level:
            levels.setdefault(level, []).append(task)
    lines.append("")
    if threshold is None or not levels:
        return lines

    def generalizes(task, model):
        return best.get((task, model)) is not None and best[(task, model)] >= threshold

    lines += ["By level of the Chomsky hierarchy, the models with a run that generalizes (on which tasks), and the "
              "tasks on which none does:", ""]
    for level, names in levels.items():
        solved = {m: [task_label(t) for t in names if generalizes(t, m)] for m in models}
        text = "; ".join(f"{m} ({', '.join(on)})" for m, on in solved.items() if on)
        unsolved = ", ".join(task_label(t) for t in names if not any(generalizes(t, m) for m in models))
        text = f"{text}; none on {unsolved}" if text and unsolved else text or f"no model, on {unsolved}"
        lines.append(f"- **{level}**: {text}.")
    return lines + [""]


@functools.cache
def _builder_defaults(task: str) -> dict:
    from .tasks import resolve_task

    return resolve_task(task, "paper").defaults() if not task.startswith("hf:") else {}


def on_protocol_data(board, cell: dict, task_only: bool = False) -> bool:
    """Whether `cell` ran on the protocol's data, as the cell recorded it (a parameter it did not record at its
    builder's default): every parameter that a data scale sets for the task's builder, at the protocol's scale (the
    lengths, the sizes), the generating parameters the protocol sets for every task, and those it sets for the cell's
    task (an answer layout). With `task_only`, what decides what a score measures: the same without the parameters the
    protocol sets for every task (the sample sizes of the chomsky protocol)."""
    from .cell import data_parameters  # (cell imports this module)
    from .tasks import DATA_SCALES

    defaults = _builder_defaults(cell["task"])
    builder = cell["task"].partition("/")[0]
    scale_keys = {key for scale in DATA_SCALES.values() for key in ((scale or {}).get(builder) or {})}
    at_scale = (DATA_SCALES[board.data_scale] or {}).get(builder) or {}
    scale = {key: at_scale.get(key, defaults.get(key)) for key in scale_keys
             if not (task_only and key in board.dataset_param)}
    wanted = data_parameters({**scale, **({} if task_only else board.dataset_param),
                              **board.task_params.get(cell["task"], {})})
    had = {**data_parameters(defaults), **(cell.get("data_parameters") or {})}
    return all(had.get(key) == value for key, value in wanted.items())


def board_status(board, ok: list[dict]) -> str:
    """How much of a protocol's board the finished cells cover: its models x tasks x learning rates x seeds (a cell
    at another rate or seed is not one of them), and the tasks that have every run of every model."""
    from .cell import TRAINING  # (cell imports this module)

    rates = board.learning_rates or [board.training.get("learning_rate", TRAINING["learning_rate"])]
    runs = len(rates) * board.seeds
    done = {(c["model"], c["task"], learning_rate(c), c["seed"]) for c in ok
            if c["model"] in board.models and c["task"] in board.tasks and learning_rate(c) in rates
            and c["seed"] < board.seeds}
    per_task = {task: sum(1 for cell in done if cell[1] == task) for task in board.tasks}
    whole = [task_label(task) for task, count in per_task.items() if count == len(board.models) * runs]
    started = sum(1 for count in per_task.values() if count)
    waiting = [task_label(task) for task, count in per_task.items() if not count]
    total = len(board.models) * len(board.tasks) * runs
    shape = f"{len(board.models)} models x {len(board.tasks)} tasks x {runs} runs"
    if len(done) == total:
        return f"Board: all {total} of the protocol's cells ({shape}) have finished."
    return (f"Board: {len(done)} of the protocol's {total} cells ({shape}) have finished; "
            f"{len(whole)} task{'s' if len(whole) != 1 else ''} complete ({', '.join(whole) or 'none'}), "
            f"{started - len(whole)} begun"
            + (f", {len(waiting)} not begun ({', '.join(waiting)}: not shown below)." if waiting else "."))


QUIET_BUDGET_KEYS = ("threads", "learning_rate", "save_strategy", "report_to", "disable_tqdm")  # not the budget's


def _budget_entry(key: str, value) -> str:
    """`key value`, a warm-up given as a fraction of the steps as a share (transformers reads warmup_steps < 1 so)."""
    if key == "warmup_steps" and isinstance(value, float) and value < 1:
        return f"warm-up {value:.0%} of the steps"
    return f"{key} {value}"


def _format(value) -> str:
    return "" if value is None else f"{value:.3f}"


def _rate(value) -> str:
    return "" if value is None else f"{value:g}"


def plot_task(task: str, cells: list[dict], path: str) -> None:
    """Accuracy against difficulty, a line per model: the median over its runs, the band from the worst to the best."""
    curves = []
    for model in sorted({c["model"] for c in cells}):
        runs = [curve(c) for c in cells if c["model"] == model]
        values = {d: [run[d] for run in runs if d in run] for d in sorted(set().union(*runs))}
        curves.append(Curve(f"{model} ({len(runs)} run{'s' if len(runs) > 1 else ''})", values))
    with written_whole(path, "wb") as f:
        plot_accuracy(curves, f, train_range=tuple(cells[0]["train_difficulties"]), title=task, size=(7, 4),
                      ylabel=cells[0]["metric"].replace("_", " "))


def write_leaderboard(output_dir: str) -> str:
    """Write leaderboard.md, leaderboard.csv, accuracy_by_length.csv and plots/ from the cells; return the .md path."""
    from .cell import budget_value  # (cell imports this module)

    cells = load_cells(output_dir)
    if not cells:
        raise UsageError(f"No cell results in {os.path.join(output_dir, 'cells')}: "
                         "run lengthgen leaderboard there first.")
    summary = summarize(cells)
    with written_whole(os.path.join(output_dir, "leaderboard.csv")) as f:
        writer = csv.writer(f)
        writer.writerow(["task", "model", "metric", "score_best_run", "score_median_run", "generalizing",
                         "fit_median_run", "ece_median_run", "runs", "published", "failed"])
        for r in summary:
            writer.writerow([r["task"], r["model"], r["metric"], _format(r["best"]), _format(r["median"]),
                             _format(r["generalizing"]), _format(r["fit_median"]), _format(r["ece_median"]),
                             r["seeds"], " | ".join(f"{label} {score:.3f}" for _, label, score in r["published"]),
                             " | ".join(r["failed"])])
    with written_whole(os.path.join(output_dir, "accuracy_by_length.csv")) as f:
        writer = csv.writer(f)
        writer.writerow(["task", "model", "seed", "learning_rate", "split", "difficulty", "accuracy", "token_accuracy",
                         "ece", "examples"])
        for c in cells:
            if c["status"] != "ok" or not per_length(c):
                continue
            for split, values in c["accuracy"].items():
                for d, v in sorted(values.items(), key=lambda item: int(item[0])):
                    writer.writerow([c["task"], c["model"], c["seed"], _rate(learning_rate(c)), split, d,
                                     f"{v['accuracy']:.4f}", f"{v['token_accuracy']:.4f}", _format(v.get("ece")),
                                     v["examples"]])

    os.makedirs(os.path.join(output_dir, "plots"), exist_ok=True)
    ok = [c for c in cells if c["status"] == "ok"]
    protocols = sorted({c["protocol"] for c in cells if c.get("protocol")})
    thresholds = sorted({c["generalizes"] for c in cells if c.get("generalizes") is not None})
    sample = round(statistics.median(fit_sample(c) for c in ok)) if ok else 0
    lines = [
        "# Length-generalization leaderboard",
        "",
        "A run: one model trained once, at one seed and one learning rate. Difficulty: what a task's splits count (the "
        "input's length on the Chomsky-hierarchy tasks; digits, depth or steps on the others): a run trains on the "
        "lower difficulties and is scored on the higher ones. Score: the run's accuracy (per answer token on the "
        "Chomsky-hierarchy tasks, as Delétang et al. score them; of the whole answer elsewhere) averaged over the "
        "difficulties above the training range; the tables give each model's median run (of an even number, the "
        "lower middle one) and best run, and how many runs finished. Fit: the same accuracy on "
        f"{sample} training examples, all lengths together (median run): a "
        "low fit means the model did not learn the task at all, a high fit and a low score that it learnt it "
        "without extrapolating. ECE: the expected calibration error of the answer tokens (10 equal-width bins of "
        "the top-label probability) over the score's difficulties (median run).",
        "",
    ]
    shuffled = [c for c in ok if not per_length(c)]
    if shuffled:
        lines += [(f"{len(shuffled)} of the {len(ok)} runs have their score and fit only: they were evaluated in "
                   "batches that transformers' group_by_length shuffled, so their numbers per difficulty paired "
                   "answers with other strings' lengths (the score, a mean over difficulties that hold equally many "
                   "strings, and the fit stand). Their curves, rows of accuracy_by_length.csv and ECE are left out; "
                   "the board's command with --rerun_superseded runs them again."), ""]
    crowded = [c for c in ok if not positions_per_row(c)]
    if crowded:
        lines += [(f"{len(crowded)} of the {len(ok)} runs drew their randomized positions over their batch's padded "
                   "length, so a row shorter than its batch had its positions crowded towards the start of the range "
                   "(Ruoss et al. draw each sequence's over its own tokens): their scores are provisional until the "
                   "board's command with --rerun_superseded runs them again."), ""]
    if protocols:
        lines += [f"Protocol: {', '.join(protocols)}" + (
            f"; a run generalizes when its score reaches {', '.join(f'{t:g}' for t in thresholds)} (Delétang "
            "et al.'s threshold for a solved task); generalizing: the share of a model's runs that do."
            if thresholds else "."), ""]
    board = PROTOCOLS.get(protocols[0]) if len(protocols) == 1 else None
    if board and board.models and all(budget_value(c["budget"], key) == value for c in ok
                                      for key, value in board.training.items()) \
            and all(on_protocol_data(board, c) for c in ok):  # the protocol's own budget and data
        lines += [board_status(board, ok), ""]
    lines += overview(summary, board, thresholds[0] if len(thresholds) == 1 else None)
    if any(r["published"] for r in summary):
        lines += [("Published, in each task's table: the score a paper reports for its counterpart of the model "
                   "(named in the cell) on the same task, an aggregate over its runs stated at the end of the page "
                   "(a maximum: compare it with the best run)."), ""]
    budgets = {json.dumps({k: v for k, v in c["budget"].items() if k != "learning_rate"}, sort_keys=True): c["budget"]
               for c in ok}
    if len(budgets) > 1:
        lines += [f"Cells were trained with {len(budgets)} different budgets (see each cell's JSON).", ""]
    elif budgets:
        rates = sorted({learning_rate(c) for c in ok if learning_rate(c) is not None})
        budget = ", ".join(_budget_entry(k, v) for k, v in next(iter(budgets.values())).items()
                           if k not in QUIET_BUDGET_KEYS)
        budget += f"; learning rate{'s' if len(rates) > 1 else ''} of the finished runs {', '.join(map(_rate, rates))}"
        lines += [f"Training budget of every cell: {budget}.", ""]
    for task in sorted({r["task"] for r in summary}):
        rows = [r for r in summary if r["task"] == task]
        ok_cells = [c for c in ok if c["task"] == task]
        lines.append(f"## {task}")
        lines.append("")
        if ok_cells:
            plot_name = file_safe(task) + ".png"
            curves = [c for c in ok_cells if per_length(c)]
            if curves:
                plot_task(task, curves, os.path.join(output_dir, "plots", plot_name))
            elif os.path.exists(os.path.join(output_dir, "plots", plot_name)):
                os.remove(os.path.join(output_dir, "plots", plot_name))
            low, high = ok_cells[0]["train_difficulties"]
            scored = ok_cells[0]["score_difficulties"]
            data = ", ".join(f"{k}={v}" for k, v in ok_cells[0]["data_parameters"].items()) or (
                "the dataset's rows as they are" if task.startswith("hf:") else "the builder's defaults")
            lines += [
                f"Trained on difficulties {low}-{high}; score = mean {ok_cells[0]['metric'].replace('_', ' ')} over "
                f"{scored[0]}-{scored[-1]} ({len(scored)} difficulties)." if scored
                else "No difficulty above training.",
                f"Data: {data}.",
                "",
                *([(f"The task's runs ran on {len(datas)} different data (lengths or generating parameters: each "
                    "cell's JSON has its own); the two lines above are its first run's."), ""]
                  if len(datas := {json.dumps([c["train_difficulties"], c["score_difficulties"], c["data_parameters"]],
                                              sort_keys=True) for c in ok_cells}) > 1 else []),
                *([f"![{task}](plots/{plot_name})", ""] if curves else []),
                *([(f"Curves from {len(curves)} of the task's {len(ok_cells)} runs; the other "
                    f"{len(ok_cells) - len(curves)} have their score and fit only."), ""]
                  if len(curves) < len(ok_cells) else []),
            ]
        lines += ["| model | score, median run | score, best run | generalizing | fit, median run | ECE, median run "
                  "| runs | published | failed |",
                  "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            failed = "; ".join(f.replace("|", "/") for f in r["failed"])
            shown = "; ".join(f"{label} {score:.3f}" for _, label, score in r["published"])
            lines.append(f"| {r['model']} | {_format(r['median'])} | {_format(r['best'])} | "
                         f"{_format(r['generalizing'])} | {_format(r['fit_median'])} | {_format(r['ece_median'])} | "
                         f"{r['seeds']} | {shown} | {failed} |")
        lines.append("")
    shown = {source for r in summary for source, _, _ in r["published"]}
    if shown:
        lines += ["## Published scores", ""]
        for source, entry in published_table().items():
            if source in shown:
                lines.append(f"- {entry['short']}: {entry['citation']}. Score: {entry['aggregate']}."
                             + (f" Read from: {entry['read_from']}." if entry.get("read_from") else ""))
        lines.append("")
    if ok:
        lines += ["## What a cell cost", "",
                  "Median over each model's finished cells on each machine, from the cells' own records: wall-clock "
                  "seconds of training and of evaluation, and the processor seconds of the whole cell (on a CPU the "
                  "cost when the cell has its threads to itself; wall-clock seconds grow when other work shares the "
                  "machine). On a GPU the wall-clock seconds are the cost, shared by the cells that ran at once.", "",
                  ("| model | parameters | cells | training steps | training seconds | evaluation seconds | "
                   "processor seconds | machine |"),
                  "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for r in cost(cells):
            cpu = "" if r["cpu_seconds"] is None else f"{r['cpu_seconds']:.1f}"
            size = "" if r["parameters"] is None else f"{r['parameters']:,.0f}"
            lines.append(f"| {r['model']} | {size} | {r['cells']} | {r['steps']:g} | {r['train_seconds']:.1f} | "
                         f"{r['eval_seconds']:.1f} | {cpu} | {r['machine']} |")
        lines.append("")
    path = os.path.join(output_dir, "leaderboard.md")
    with written_whole(path) as f:
        f.write("\n".join(lines))
    return path
