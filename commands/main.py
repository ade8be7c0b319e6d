"""`lengthgen SUBCOMMAND ...`: every tool of the library under one command.

    lengthgen train ...          train and evaluate a model on a length-split task (a spec file, a preset, or flags)
    lengthgen reproduce NAME     a paper's result, from a preset: train, evaluate, write its results JSON and plot
    lengthgen verify FOLDER      score a released model folder again and compare with its card
    lengthgen release DIR        turn a trained output folder into a Hub-ready model folder (and push it)
    lengthgen leaderboard ...    every model on every task with one budget, scored on the longer inputs
    lengthgen data export NAME   write a length-split dataset as a Hub-style parquet folder (and push it)

`lengthgen SUBCOMMAND --help` gives each one's flags. Flags are written `--snake_case` everywhere (as transformers'
TrainingArguments are), generating parameters of a dataset `--dataset_param KEY=VALUE`. A mistake in what you ask for
is answered in one line naming the flag, path or value, with exit status 2; anything else keeps its traceback.
"""

import importlib
import os
import sys

from lengthgen.cli import run_command

# imported when asked for: `lengthgen verify --without_lengthgen` must start before any model code is imported
SUBCOMMANDS = ("train", "reproduce", "verify", "release", "leaderboard", "data")


def quiet_progress_bars():
    """No progress bars of weight loading, dataset caching or Hub transfers in a command's output (the training
    progress bar and lengthgen's own generation bars stay)."""
    import datasets
    import huggingface_hub
    import transformers

    transformers.utils.logging.disable_progress_bar()
    datasets.disable_progress_bars()
    huggingface_hub.utils.disable_progress_bars()


def main(argv: list[str] | None = None):
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return
    name, rest = argv[0], argv[1:]
    if name not in SUBCOMMANDS:
        print(f"lengthgen: error: unknown subcommand {name!r}; choose from {', '.join(SUBCOMMANDS)}", file=sys.stderr)
        raise SystemExit(2)
    quiet_progress_bars()
    module = importlib.import_module(f"lengthgen.commands.{name}")
    try:
        run_command(module.main, f"lengthgen {name}", rest)
    except BrokenPipeError:  # the output piped into a reader that stopped early (`| head`): nothing went wrong
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        raise SystemExit(0) from None


if __name__ == "__main__":
    main()
