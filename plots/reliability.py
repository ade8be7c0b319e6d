"""Reliability diagram (DeGroot and Fienberg 1983; Guo et al., ICML 2017, Figure 1): per equal-width bin of the
top-label confidence, the accuracy of its examples against the bin's mean confidence; a calibrated model lies on the
diagonal. Draws what `lengthgen.data.scoring.calibration_bins` returns (accuracy, mean confidence and count per bin)."""

import numpy as np
from matplotlib.figure import Figure


def reliability_diagram(bin_accuracy, bin_confidence, bin_count, title: str = "",
                        expected_calibration_error: float | None = None) -> Figure:
    """One figure: accuracy bars per bin (empty bins left blank), the gap to each bin's mean confidence hatched, the
    diagonal, and the examples per bin below."""
    accuracy, confidence = np.asarray(bin_accuracy, dtype=float), np.asarray(bin_confidence, dtype=float)
    count = np.asarray(bin_count)
    if not len(accuracy) == len(confidence) == len(count):
        raise ValueError("bin_accuracy, bin_confidence and bin_count must have one entry per bin.")
    bins = len(count)
    centres, width = (np.arange(bins) + 0.5) / bins, 1.0 / bins
    filled = count > 0
    figure = Figure(figsize=(4.2, 5.0))
    top, bottom = figure.subplots(2, 1, sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    top.bar(centres[filled], accuracy[filled], width=width, edgecolor="black", color="tab:blue", label="accuracy")
    top.bar(centres[filled], confidence[filled] - accuracy[filled], bottom=accuracy[filled], width=width,
            edgecolor="tab:red", color="none", hatch="//", label="gap to confidence")
    top.plot([0, 1], [0, 1], linestyle="--", color="gray")
    top.set(xlim=(0, 1), ylim=(0, 1), ylabel="accuracy")
    label = title + (f"  ECE {expected_calibration_error:.3f}" if expected_calibration_error is not None else "")
    top.set_title(label.strip(), fontsize=10)
    top.legend(loc="upper left", fontsize=8)
    bottom.bar(centres, count, width=width, edgecolor="black", color="lightgray")
    bottom.set(xlabel="confidence (top-label probability)", ylabel="examples")
    figure.tight_layout()
    return figure


__all__ = ["reliability_diagram"]
