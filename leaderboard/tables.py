"""The leaderboard of a `lengthgen leaderboard` output folder, from its cell JSONs alone.

`leaderboard.md` and `leaderboard.csv`: per task and model, the score (mean accuracy over the difficulties above the
training range, as Delétang et al. score) of the best and the median seed, the fit (accuracy on a sample of training
examples, median seed), the expected calibration error of the answer tokens over the same difficulties as the score
(median seed), and the cells that failed with their error. `accuracy_by_length.csv`: every cell's accuracy and ECE
at every difficulty.
`plots/<task>.png`: accuracy against difficulty, a line per model (median over seeds, the band from the worst to
the best seed), the training range shaded.
"""

import csv
import glob
import json
import os
import statistics

from lengthgen.cli import UsageError
from lengthgen.plots import Curve, plot_accuracy


def load_cells(output_dir: str) -> list[dict]:
    cells = []
    for path in sorted(glob.glob(os.path.join(output_dir, "cells", "*.json"))):
        with open(path) as f:
            cells.append(json.load(f))
    return cells


def fit(cell: dict) -> float:
    """Accuracy on the sample of training examples (all of them, not per difficulty)."""
    values = cell["accuracy"]["train"].values()
    return sum(v[cell["metric"]] * v["examples"] for v in values) / sum(v["examples"] for v in values)


def curve(cell: dict) -> dict[int, float]:
    """The cell's accuracy at each difficulty of the held-out splits (its score's metric)."""
    return {
        int(d): v[cell["metric"]] for split, values in cell["accuracy"].items() if split != "train"
        for d, v in values.items()
    }


def calibration(cell: dict) -> float | None:
    """Mean expected calibration error over the scored difficulties (None for cells written before ECE was kept)."""
    scored = {str(d) for d in cell["score_difficulties"]}
    values = [v["ece"] for split, table in cell["accuracy"].items() if split != "train"
              for d, v in table.items() if d in scored and "ece" in v]
    return statistics.fmean(values) if values else None


def summarize(cells: list[dict]) -> list[dict]:
    """One row per (task, model): best and median seed score, seeds, failures, in that order of tasks and models."""
    rows = {}
    for cell in cells:
        row = rows.setdefault(
            (cell["task"], cell["model"]),
            {"task": cell["task"], "model": cell["model"], "scores": [], "fit": [], "ece": [], "failed": [],
             "metric": None},
        )
        if cell["status"] == "ok":
            row["scores"].append(cell["score"])
            row["fit"].append(fit(cell))
            if calibration(cell) is not None:
                row["ece"].append(calibration(cell))
            row["metric"] = cell["metric"]
        else:
            row["failed"].append(f"seed {cell['seed']}: {cell['error']}")
    summary = []
    for row in rows.values():
        scores = [s for s in row["scores"] if s is not None]
        summary.append(
            {
                **row,
                "best": max(scores) if scores else None,
                "median": statistics.median(scores) if scores else None,
                "fit_median": statistics.median(row["fit"]) if row["fit"] else None,
                "ece_median": statistics.median(row["ece"]) if row["ece"] else None,
                "seeds": len(row["scores"]),
            }
        )
    return sorted(summary, key=lambda r: (r["task"], -(r["median"] if r["median"] is not None else -1)))


def _format(value) -> str:
    return "" if value is None else f"{value:.3f}"


def plot_task(task: str, cells: list[dict], path: str) -> None:
    """Accuracy against difficulty, a line per model: the median over its seeds, the band from the worst to the best."""
    curves = []
    for model in sorted({c["model"] for c in cells}):
        runs = [curve(c) for c in cells if c["model"] == model]
        values = {d: [run[d] for run in runs if d in run] for d in sorted(set().union(*runs))}
        curves.append(Curve(f"{model} ({len(runs)} seed{'s' if len(runs) > 1 else ''})", values))
    plot_accuracy(curves, path, train_range=tuple(cells[0]["train_difficulties"]), title=task, size=(7, 4),
                  ylabel=cells[0]["metric"].replace("_", " "))


def write_leaderboard(output_dir: str) -> str:
    """Write leaderboard.md, leaderboard.csv, accuracy_by_length.csv and plots/ from the cells; return the .md path."""
    cells = load_cells(output_dir)
    if not cells:
        raise UsageError(f"No cell results in {os.path.join(output_dir, 'cells')}: run lengthgen leaderboard there first.")
    summary = summarize(cells)
    with open(os.path.join(output_dir, "leaderboard.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "model", "metric", "score_best_seed", "score_median_seed", "fit_median_seed",
                         "ece_median_seed", "seeds", "failed"])
        for r in summary:
            writer.writerow([r["task"], r["model"], r["metric"], _format(r["best"]), _format(r["median"]),
                             _format(r["fit_median"]), _format(r["ece_median"]), r["seeds"], " | ".join(r["failed"])])
    with open(os.path.join(output_dir, "accuracy_by_length.csv"), "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["task", "model", "seed", "split", "difficulty", "accuracy", "token_accuracy", "ece",
                         "examples"])
        for c in cells:
            if c["status"] != "ok":
                continue
            for split, values in c["accuracy"].items():
                for d, v in sorted(values.items(), key=lambda item: int(item[0])):
                    writer.writerow([c["task"], c["model"], c["seed"], split, d, f"{v['accuracy']:.4f}",
                                     f"{v['token_accuracy']:.4f}", _format(v.get("ece")), v["examples"]])

    os.makedirs(os.path.join(output_dir, "plots"), exist_ok=True)
    lines = [
        "# Length-generalization leaderboard",
        "",
        "Score: the mean accuracy over the difficulties above the training range (Delétang et al.'s score). Fit: the",
        "accuracy on a sample of training examples. ECE: the expected calibration error of the answer tokens (10",
        "equal-width bins of the top-label probability) over the score's difficulties. Median and best over the seeds.",
        "",
    ]
    budgets = {json.dumps(c["budget"], sort_keys=True): c["budget"] for c in cells if c["status"] == "ok"}
    if budgets:
        budget = ", ".join(f"{k} {v}" for k, v in next(iter(budgets.values())).items() if k != "threads")
        lines += [f"Training budget of every cell: {budget}." if len(budgets) == 1 else
                  f"Cells were trained with {len(budgets)} different budgets (see each cell's JSON).", ""]
    for task in sorted({r["task"] for r in summary}):
        rows = [r for r in summary if r["task"] == task]
        ok_cells = [c for c in cells if c["task"] == task and c["status"] == "ok"]
        lines.append(f"## {task}")
        lines.append("")
        if ok_cells:
            plot_name = task.replace("/", "-").replace(":", "-") + ".png"
            plot_task(task, ok_cells, os.path.join(output_dir, "plots", plot_name))
            low, high = ok_cells[0]["train_difficulties"]
            scored = ok_cells[0]["score_difficulties"]
            data = ", ".join(f"{k}={v}" for k, v in ok_cells[0]["data_parameters"].items()) or "the builder's defaults"
            lines += [
                f"Trained on difficulties {low}-{high}; score = mean {ok_cells[0]['metric'].replace('_', ' ')} over "
                f"{scored[0]}-{scored[-1]} ({len(scored)} difficulties)." if scored else "No difficulty above training.",
                f"Data: {data}.",
                "",
                f"![{task}](plots/{plot_name})",
                "",
            ]
        lines += ["| model | score, median seed | score, best seed | fit, median seed | ECE, median seed | seeds | failed |",
                  "| --- | --- | --- | --- | --- | --- | --- |"]
        for r in rows:
            failed = "; ".join(f.replace("|", "/") for f in r["failed"])
            lines.append(f"| {r['model']} | {_format(r['median'])} | {_format(r['best'])} | "
                         f"{_format(r['fit_median'])} | {_format(r['ece_median'])} | {r['seeds']} | {failed} |")
        lines.append("")
    path = os.path.join(output_dir, "leaderboard.md")
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path
