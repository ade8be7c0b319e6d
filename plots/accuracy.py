"""The one accuracy-against-difficulty plot of the library: every command that compares models by length or depth
draws it (a reproduction run beside its baseline and the paper, the leaderboard's models on a task, the quick-start
example's I-BERT and BERT, the recurrent-bias study's models over seeds).

    plot_accuracy([Curve("I-BERT", {7: 1.0, 8: 0.98}), Curve("BERT", {7: 0.0, 8: 0.0}, style="s--")],
                  "plot.png", train_range=(1, 6), title="NSP copy")

A curve's value at a difficulty is a number, or the values of several seeds: then the line is their median and a band
spans the worst to the best seed. The training range is shaded.
"""

import statistics
from dataclasses import dataclass
from typing import BinaryIO

from matplotlib import colormaps
from matplotlib.figure import Figure


@dataclass
class Curve:
    label: str
    values: dict  # {difficulty: value, or [value per seed]}
    style: str | None = None  # a matplotlib format string ("o-", "s--", "k^:"); default: markers where few points
    color: str | None = None


def plot_accuracy(curves: list[Curve], path: str | BinaryIO, train_range: tuple[int, int] | None = None,
                  title: str = "", xlabel: str = "difficulty (length, depth or digits)", ylabel: str = "accuracy",
                  size: tuple[float, float] = (6.4, 4.0)) -> None:
    """Draw `curves` against difficulty into `path` (PNG: a file name, or a binary file open for writing)."""
    many = len(curves) > 10  # beyond the default cycle's ten colours, and a legend that would cover the lines
    figure = Figure(figsize=(size[0] + 2.2, size[1]) if many else size)
    axes = figure.subplots()
    if many:
        axes.set_prop_cycle(color=colormaps["tab20"].colors)
    if train_range:
        low, high = train_range
        axes.axvspan(low - 0.5, high + 0.5, color="0.9", label=f"training range ({low}-{high})")
    for curve in curves:
        points = sorted((int(d), v if isinstance(v, list) else [v]) for d, v in curve.values.items() if d != "all")
        if not points:
            continue
        x = [d for d, _ in points]
        median = [statistics.median(v) for _, v in points]
        style = curve.style or ("." if len(x) >= 30 else "o") + "-"
        line = axes.plot(x, median, style, color=curve.color, label=curve.label)[0]
        if any(len(v) > 1 for _, v in points):
            axes.fill_between(x, [min(v) for _, v in points], [max(v) for _, v in points], alpha=0.15,
                              color=line.get_color())
    axes.set(xlabel=xlabel, ylabel=ylabel, ylim=(-0.02, 1.02), title=title)
    if many:
        axes.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=8)
    else:
        axes.legend(loc="best", fontsize=8)
    figure.tight_layout()
    figure.savefig(path, dpi=110)


__all__ = ["Curve", "plot_accuracy"]
