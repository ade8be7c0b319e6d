"""One-line answers to a user's mistakes, for every command.

A command raises `UsageError` for a mistake in what the user asked for (a flag, a path, a value), and `run_command`
prints `PROG: error: MESSAGE` on stderr and exits with status 2; the commands' argument parsers (`OneLineErrors`) turn
argparse's own mistakes (an unknown flag, a bad value) into UsageErrors too, without the usage block. Any other
exception is not the user's mistake and keeps its traceback (a bug to report). `--debug` on the command line, or
`LENGTHGEN_DEBUG=1`, shows a UsageError's traceback too.
"""

import argparse
import difflib
import os
import re
import sys
from collections.abc import Callable


class UsageError(ValueError):
    """A mistake in what the user asked for; its message is one line naming the argument, path or value."""


def debugging(argv: list[str] | None = None) -> bool:
    argv = sys.argv[1:] if argv is None else argv
    return "--debug" in argv or os.environ.get("LENGTHGEN_DEBUG", "") not in ("", "0")


def run_command(main: Callable, prog: str, argv: list[str] | None = None):
    """`main(argv)` with `--debug` removed from `argv`; a UsageError becomes one line on stderr and exit status 2
    (unless debugging, when it propagates with its traceback)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = debugging(argv)
    argv = [a for a in argv if a != "--debug"]
    try:
        return main(argv)
    except UsageError as error:
        if debug:
            raise
        message = " ".join(str(error).split()) or type(error).__name__
        print(f"{prog}: error: {message} (--debug shows the traceback)", file=sys.stderr)
        raise SystemExit(2) from None


class OneLineErrors:
    """For an argparse parser (put it first among the bases): a mistake on the command line (an unknown flag, a
    missing or bad value) raises a UsageError, which `run_command` prints as one line, instead of argparse's usage
    block and message; an unknown flag is answered with the nearest known one. A negative number in exponent form
    (`--learning_rate -1e-3`) is read as a value, as argparse reads `-0.001`."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._negative_number_matcher = re.compile(r"^-(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$")

    def error(self, message: str):
        unknown = re.match(r"unrecognized arguments: (.*)", message)
        flags = [a.split("=")[0] for a in unknown.group(1).split() if a.startswith("--")] if unknown else []
        known = list(self._option_string_actions)  # and a subcommand's, whose unknown flags its parent reports
        for action in self._actions:
            if isinstance(action, argparse._SubParsersAction):
                known += [flag for parser in action.choices.values() for flag in parser._option_string_actions]
        near = difflib.get_close_matches(flags[0], known, n=1) if flags else []
        raise UsageError(message + (f" (did you mean {near[0]}?)" if near else "") + "; --help lists the flags.") \
            from None


class ArgumentParser(OneLineErrors, argparse.ArgumentParser):
    """argparse's parser with one-line errors (`OneLineErrors`)."""


def check_positive(values: dict[str, int | float | None]) -> None:
    """A UsageError naming the first flag in `values` ({"--seeds": args.seeds, ...}) that is given (not None) and out
    of range: an integer below 1 ("must be at least 1"), a float at or below 0 ("must be positive")."""
    for flag, value in values.items():
        if value is None:
            continue
        if isinstance(value, int) and value < 1:
            raise UsageError(f"{flag} must be at least 1, got {value}.")
        if value <= 0:
            raise UsageError(f"{flag} must be positive, got {value}.")


def writable_folder(path: str) -> str:
    """`path` (`~` expanded) where it can be made a folder to write in (argparse's `type=` of an output folder flag): an
    ArgumentTypeError, which the parser answers in one line, where it or a folder above it is a file, or where the
    nearest existing folder above it cannot be written in."""
    path = os.path.expanduser(path)
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise argparse.ArgumentTypeError(f"{path}: {existing} is a file, not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise argparse.ArgumentTypeError(f"{path}: cannot write in {existing}")
    return path


def launch_configuration(text: str) -> tuple[int, int]:
    """'64x8' -> (64, 8): a Triton launch configuration, rows per program (a power of two, at least 16) x warps (a
    power of two) (argparse's `type=` of the benchmarks' launch flags): an ArgumentTypeError, answered in one line,
    otherwise."""
    block, _, warps = text.partition("x")
    if not (block.isdigit() and warps.isdigit()) or int(block) < 16 or int(block) & (int(block) - 1) \
            or int(warps) < 1 or int(warps) & (int(warps) - 1):
        raise argparse.ArgumentTypeError(f"expected BLOCKxWARPS with powers of two, BLOCK at least 16 (e.g. 64x8), "
                                         f"got {text!r}")
    return int(block), int(warps)


def local_path_or_hub_id(value: str, flag: str) -> str:
    """`value` unchanged when it exists on disk or can only be a Hub id (`name` or `org/name`); a UsageError naming
    the missing path when it is meant as a local one (`./x`, `/x`, `~/x`, `a/b/c`, or `dir/x` with `dir` here), so
    a mistyped folder is reported as missing before any Hub lookup."""
    if os.path.exists(os.path.expanduser(value)):
        return value
    parts = value.split("/")
    if value.startswith((".", "/", "~")) or len(parts) > 2 or (len(parts) == 2 and os.path.isdir(parts[0])):
        raise UsageError(f"{flag}: no such file or directory: {value}")
    return value


def check_hub_id(value: str, flag: str, what: str = "repo id") -> None:
    """A UsageError naming `flag` where `value` breaks the Hub's rules for a repo id (`what="namespace"`: for a user
    or organisation, to which each upload adds /NAME)."""
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    if what == "namespace" and "/" in value:
        raise UsageError(f"{flag} {value!r} is not a Hub {what}: a user or organisation name, without '/' (each "
                         f"upload goes to {value.split('/')[0]}/NAME)")
    try:
        validate_repo_id(f"{value}/x" if what == "namespace" else value)
    except HFValidationError as error:
        reason = str(error).splitlines()[0].replace(f"'{value}/x'", repr(value))  # the name as the user typed it
        raise UsageError(f"{flag} {value!r} is not a Hub {what}: {reason}") from None
