"""What every lengthgen command shares: a mistake answered in one line (`errors`)."""

from .errors import UsageError, local_path_or_hub_id, run_command

__all__ = ["UsageError", "local_path_or_hub_id", "run_command"]
