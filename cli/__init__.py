"""What every lengthgen command shares: a mistake answered in one line (`errors`)."""

from .errors import UsageError, run_command

__all__ = ["UsageError", "run_command"]
