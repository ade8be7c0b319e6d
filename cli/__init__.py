"""What every lengthgen command shares: a mistake answered in one line (`errors`)."""

from .errors import (
    ArgumentParser,
    OneLineErrors,
    UsageError,
    check_hub_id,
    check_positive,
    launch_configuration,
    local_path_or_hub_id,
    run_command,
    writable_folder,
)

__all__ = ["ArgumentParser", "OneLineErrors", "UsageError", "check_hub_id", "check_positive", "launch_configuration",
           "local_path_or_hub_id", "run_command", "writable_folder"]
