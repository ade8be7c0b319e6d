"""Pictures: a trained NDR's attention and copy gates per step (`ndr_steps`, for plot_ndr.py and the Space app) and
reliability diagrams of a classifier's calibration (`reliability`)."""

from .ndr_steps import ndr_step_figures
from .reliability import reliability_diagram

__all__ = ["ndr_step_figures", "reliability_diagram"]
