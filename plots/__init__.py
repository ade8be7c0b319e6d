"""Pictures of a trained NDR: attention and copy gates per step (`ndr_steps`), for plot_ndr.py and the Space app."""

from .ndr_steps import ndr_step_figures

__all__ = ["ndr_step_figures"]
