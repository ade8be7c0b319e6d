"""`lengthgen-leaderboard`: train every model on every length-split task and score it on the longer inputs.

    lengthgen-leaderboard --models ibert ndr bert rope alibi lstm \
        --tasks ctl/backward listops nsp_inductive/copy chomsky_hierarchy/parity_check \
        --seeds 3 --output-dir outputs/leaderboard

One *cell* is (model, task, seed): the model is built from scratch for the task's vocabulary, trained on the `train`
split with the same budget as every other model, and evaluated on every other split. Its results go to
`OUTPUT_DIR/cells/<model>__<task>__seed<n>.json` (accuracy per difficulty, the score, the training time); a cell
whose JSON exists is skipped on a re-run, a cell that fails is recorded with its error and the others go on. At the
end `OUTPUT_DIR/leaderboard.md`, `leaderboard.csv`, `accuracy_by_length.csv` and one plot per task are written from
all the JSONs there (`lengthgen.leaderboard.tables`).

**Where the answer is read.** Every model gets the same input and is read the same way, so no model needs a
task-specific head: the tokens of the input, then a separator and one `[MASK]` slot per answer token (the answer's
length is given, as Delétang et al. give it); a linear layer over the model's last hidden states predicts the
answer's tokens at the slots. Inputs that carry their own `[MASK]` tokens (NSP) are read at those. A causal model
(RoPE, ALiBi, the LSTM) sees the whole input before its first slot, so a one-token answer is read at its last token.

**Score.** The mean, over the difficulties (lengths, depths) above the training range, of the accuracy at each:
token accuracy (the fraction of an answer's tokens predicted right, averaged over examples) for the
Chomsky-hierarchy tasks, as Delétang et al. score them, and sequence accuracy (every answer token right) for the
others, as their papers score them. Both are in every JSON.

**Models.** `MODELS` are presets with one budget (width 64, 4 heads, feed-forward 256, 4 layers; the NDR runs its
one shared layer for 12 steps, the LSTM is one layer of 64 units), dropout off. `hf:PATH_OR_HUB_ID` takes any
transformers config as it is; a bare transformers model type (`gpt2`, `roberta`, ...) gets the preset budget.
"""

import argparse
import os

from lengthgen.cli import UsageError, check_positive, run_command
from lengthgen.data.export import parse_param

from .cell import Budget
from .grid import run_grid
from .models import model_names_help
from .tables import write_leaderboard
from .tasks import LEADERBOARD_BUILDERS


def parse_and_run(argv=None):
    parser = argparse.ArgumentParser(
        prog="lengthgen-leaderboard", description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--models", nargs="+", help=f"models: {model_names_help()}")
    parser.add_argument(
        "--tasks", nargs="+",
        help="tasks: builder/config (e.g. ctl/backward, chomsky_hierarchy/parity_check) or hf:PATH_OR_HUB_ID[:CONFIG]",
    )
    parser.add_argument("--seeds", type=int, default=3, help="seeds 0 .. N-1 per (model, task)")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument(
        "--data-scale", choices=["small", "paper"], default="small",
        help="small: the CPU leaderboard's generating parameters (Chomsky train <= 20, test 21-100); paper: the "
        "builders' defaults (Chomsky train <= 40, test 41-500)",
    )
    parser.add_argument("--max-steps", type=int, default=Budget.max_steps)
    parser.add_argument("--batch-size", type=int, default=Budget.batch_size)
    parser.add_argument("--learning-rate", type=float, default=Budget.learning_rate)
    parser.add_argument(
        "--param", action="append", default=[], metavar="BUILDER.KEY=VALUE",
        help="override a generating parameter of one builder, e.g. chomsky_hierarchy.test_lengths=[21,60] (JSON values)",
    )
    parser.add_argument("--threads", type=int, help="torch threads (two runs side by side: 1 each)")
    parser.add_argument("--leaderboard-only", action="store_true", help="rewrite the leaderboard from the cells")
    args = parser.parse_args(argv)
    check_positive({"--seeds": args.seeds, "--max-steps": args.max_steps, "--batch-size": args.batch_size,
                    "--threads": args.threads, "--learning-rate": args.learning_rate})
    if not args.leaderboard_only and not (args.models and args.tasks):
        raise UsageError("--models and --tasks are required (or --leaderboard-only to rewrite the tables from the cells).")
    if args.leaderboard_only:
        write_leaderboard(args.output_dir)
        return
    budget = Budget(args.max_steps, args.batch_size, args.learning_rate, threads=args.threads)
    params = {}
    for text in args.param:
        builder, dot, assignment = text.partition(".")
        if not dot or builder not in LEADERBOARD_BUILDERS:
            raise UsageError(f"--param takes BUILDER.KEY=VALUE with BUILDER one of {', '.join(LEADERBOARD_BUILDERS)}; "
                             f"got {text!r}.")
        key, value = parse_param(assignment)
        params.setdefault(builder, {})[key] = value
    records = run_grid(args.models, args.tasks, args.seeds, args.output_dir, budget, args.data_scale, params)
    failed = [r for r in records if r["status"] != "ok"]
    print(f"{len(records) - len(failed)} cells done, {len(failed)} failed; {os.path.join(args.output_dir, 'leaderboard.md')}")



def main(argv=None):
    """The console script: a mistake is one line and exit status 2."""
    run_command(parse_and_run, "lengthgen-leaderboard", argv)


if __name__ == "__main__":
    main()
