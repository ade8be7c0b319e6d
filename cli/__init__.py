"""What every lengthgen command shares: a mistake answered in one line (`errors`)."""

from .errors import UsageError, check_positive, local_path_or_hub_id, run_command

__all__ = ["UsageError", "check_positive", "local_path_or_hub_id", "run_command"]
