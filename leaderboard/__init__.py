"""`lengthgen leaderboard`: every model trained on every length-split task with one budget and scored on the longer
inputs. Read top-down: `models`, `tasks`, `cell` (one cell through the experiment runner), `grid`, `tables`."""

from .cell import PreparedTask, check_model_takes_task, prepare_task, run_cell
from .grid import run_grid
from .models import MODELS, PRESETS, model_section
from .tables import write_leaderboard
from .tasks import Task, resolve_task

__all__ = ["MODELS", "PRESETS", "PreparedTask", "Task", "check_model_takes_task",
           "model_section", "prepare_task", "resolve_task", "run_cell", "run_grid", "write_leaderboard"]
