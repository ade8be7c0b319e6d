"""`lengthgen-release`: a trained output directory -> a Hub-ready model folder, and its upload (the command's help:
`cli.py`). Read top-down: `records` (what the example scripts leave), `card`, `hub`, `folder`, `cli`."""

from .card import model_card
from .cli import main
from .folder import is_release_folder, publish, read_output_dir, release
from .hub import ReleaseError, check_push, hub_token, upload
from .records import (PLOT, RUN_RECORD, accuracy_tables, calibration_tables, record_evaluation, record_run,
                      spread_over_seeds)

__all__ = [
    "PLOT", "RUN_RECORD", "ReleaseError", "accuracy_tables", "calibration_tables", "check_push", "hub_token", "is_release_folder", "main",
    "model_card", "publish", "read_output_dir", "record_evaluation", "record_run", "release", "spread_over_seeds",
    "upload",
]
