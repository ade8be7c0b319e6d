"""`lengthgen-leaderboard`: every model trained on every length-split task with one budget and scored on the longer
inputs (the command's help: `cli.py`). Read top-down: `models`, `tasks`, `encoding`, `cell`, `grid`, `tables`, `cli`."""

from .cell import Budget, PreparedTask, check_model_takes_task, prepare_task, run_cell
from .cli import main
from .encoding import accuracy_by_difficulty, answer_layout, encode
from .grid import run_grid
from .models import HEADS, LAYERS, MODELS, PRESETS, WIDTH, build_model, resolve_model_config
from .tables import write_leaderboard
from .tasks import LEADERBOARD_BUILDERS, Task, resolve_task

__all__ = [
    "Budget", "LEADERBOARD_BUILDERS", "HEADS", "LAYERS", "MODELS", "PRESETS", "PreparedTask", "Task", "WIDTH",
    "accuracy_by_difficulty", "answer_layout", "build_model", "check_model_takes_task", "encode", "main",
    "prepare_task", "resolve_model_config", "resolve_task", "run_cell", "run_grid", "write_leaderboard",
]
