"""Pictures: accuracy against difficulty (`plot_accuracy`, the one plot every comparison draws), a trained NDR's
attention and copy gates per step (`ndr_step_figures`, for plot_ndr.py and the Space app) and reliability diagrams
of a classifier's calibration (`reliability_diagram`)."""

from .accuracy import Curve, plot_accuracy
from .ndr_steps import ndr_step_figures
from .reliability import reliability_diagram

__all__ = ["Curve", "ndr_step_figures", "plot_accuracy", "reliability_diagram"]
