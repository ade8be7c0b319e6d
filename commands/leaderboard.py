"""`lengthgen leaderboard`: train every model on every length-split task with one budget and score it on the longer
inputs.

    lengthgen leaderboard --models ibert ndr bert rope alibi lstm \\
        --tasks ctl/backward listops nsp_inductive/copy chomsky_hierarchy/parity_check \\
        --seeds 3 --output_dir outputs/leaderboard
    lengthgen leaderboard --list        # the models, tasks and protocols it knows by name

One *cell* is (model, task, learning rate, seed): the model is built from scratch for the task's vocabulary,
trained on the `train` split with the same budget as every other model (presets/leaderboard.yaml; `--max_steps`,
`--per_device_train_batch_size`, `--learning_rate` change it), and evaluated on every other split. Its results go to
OUTPUT_DIR/cells/<model>__<builder>-<config>[__lr<rate>]__seed<n>.json (accuracy per difficulty, the score, the
training time). A re-run skips the finished cells (and stops, naming them, where they ran with another budget or
data than it asks); a cell that fails is recorded with its error, the others go on, and a re-run tries it again. At
the end OUTPUT_DIR/leaderboard.md, leaderboard.csv, accuracy_by_length.csv and one plot per task are written from
all the cells there.

Where the answer is read: every model gets the same input and is read the same way (the answer-slots head of
lengthgen.training.models): the input, a separator and one [MASK] slot per answer token; a linear layer over the
model's last hidden states predicts the answer's tokens at the slots. Inputs that carry their own [MASK] tokens
(NSP) are read there. A causal model sees the whole input before its first slot.

Score: the mean, over the difficulties above the training range, of the accuracy at each: token accuracy on the
Chomsky-hierarchy tasks (as Delétang et al. score them), accuracy of the whole answer elsewhere.

A protocol (`--protocol chomsky`: Delétang et al.'s 15 tasks, lengths and score) sets the tasks, their data, the
budget, the runs (every seed at every learning rate of `--learning_rates`) and its board's models; flags given win
over it:

    lengthgen leaderboard --protocol chomsky --output_dir outputs/chomsky                # the whole board
    lengthgen leaderboard --protocol chomsky --models lstm stack_rnn rope nope --output_dir outputs/chomsky

`--shard I/N` runs only the cells of shard I of N (each cell belongs to exactly one): N processes or machines given
the same arguments and output folder run the whole grid once, and each writes the tables from all the cells there.
`--workers K` runs K cells at a time in K processes of one machine (`--threads` each): its cores, or one GPU.
`--rerun_superseded` runs again, in their place, the finished cells lengthgen no longer runs as they ran: those
whose numbers per length were scrambled (evaluated under `group_by_length` before lengthgen read evaluation batches
in the rows' order; same seed, so the same score on the same CPU and threads) and those whose randomized positions
were drawn over their batch's padded length.
"""

import argparse
import os
import textwrap

from lengthgen.cli import ArgumentParser, UsageError, check_positive, writable_folder
from lengthgen.data.export import parse_params
from lengthgen.leaderboard.grid import run_grid
from lengthgen.leaderboard.models import MODELS, model_names_help
from lengthgen.leaderboard.protocol import PROTOCOLS, parse_shard, protocol
from lengthgen.leaderboard.tables import write_leaderboard
from lengthgen.leaderboard.tasks import DATA_SCALES, task_names


def main(argv=None):
    parser = ArgumentParser(prog="lengthgen leaderboard", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", nargs="+", help=f"models (default: the protocol's board): {model_names_help()}")
    parser.add_argument("--tasks", nargs="+",
                        help="tasks: builder/config (e.g. ctl/backward, chomsky_hierarchy/parity_check) or "
                             "hf:PATH_OR_HUB_ID[:CONFIG]")
    parser.add_argument("--protocol", choices=sorted(PROTOCOLS),
                        help="a named protocol (presets/leaderboard.yaml): its tasks, data, budget, runs and "
                             "its board's models")
    parser.add_argument("--seeds", type=int, help="seeds 0 .. N-1 per (model, task, learning rate) (default 3, or "
                                                  "the protocol's)")
    parser.add_argument("--learning_rates", type=float, nargs="+",
                        help="a run at each of these peak rates (default: the budget's one rate, or the protocol's)")
    parser.add_argument("--shard", help="I/N: run only the cells of shard I of N")
    parser.add_argument("--output_dir", type=writable_folder, help="where the cells and tables go (required)")
    parser.add_argument("--data_scale", choices=sorted(DATA_SCALES),
                        help="small (the default): a CPU leaderboard's generating parameters (Chomsky train <= 20, "
                             "test 21-100); paper: the builders' defaults (Chomsky train <= 40, test 41-500)")
    parser.add_argument("--max_steps", type=int, help="training steps of every cell (default 2000)")
    parser.add_argument("--per_device_train_batch_size", type=int, help="batch size (default 32)")
    parser.add_argument("--learning_rate", type=float, help="AdamW's peak rate (default 5e-4)")
    parser.add_argument("--dataset_param", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                        help="generating parameters, set on every task whose builder has them, e.g. "
                             "test_lengths=[21,60] (JSON values)")
    parser.add_argument("--threads", type=int, help="torch threads of each cell (two runs side by side: 1 each)")
    parser.add_argument("--workers", type=int, default=1,
                        help="cells run at a time, each in its own process (default 1): a machine's cores, or one GPU "
                             "shared by several of these small models")
    parser.add_argument("--rerun_superseded", action="store_true",
                        help="run again, in their place, the finished cells lengthgen no longer runs as they ran: "
                             "evaluated in batches that group_by_length shuffled (their numbers per length come back, "
                             "their scores the same on the same CPU and threads), or with randomized positions drawn "
                             "over a batch's padded length")
    parser.add_argument("--leaderboard_only", action="store_true", help="rewrite the leaderboard from the cells")
    parser.add_argument("--list", action="store_true", help="list the models, tasks and protocols by name, and exit")
    args = parser.parse_args(argv)
    if args.list:
        print(names_table())
        return
    if args.output_dir is None:
        raise UsageError("--output_dir is required: the folder of the cells and tables.")
    check_positive({"--seeds": args.seeds, "--max_steps": args.max_steps, "--threads": args.threads,
                    "--workers": args.workers,
                    "--per_device_train_batch_size": args.per_device_train_batch_size,
                    "--learning_rate": args.learning_rate})
    for rate in args.learning_rates or []:
        check_positive({"--learning_rates": rate})
    shard = parse_shard(args.shard) if args.shard else None
    if args.learning_rate is not None and args.learning_rates:
        raise UsageError("Give --learning_rate (one rate) or --learning_rates (a sweep), not both.")
    if args.leaderboard_only:
        write_leaderboard(args.output_dir)
        return
    chosen = protocol(args.protocol) if args.protocol else None
    tasks = args.tasks or (chosen.tasks if chosen else None)
    models = args.models or (chosen.models if chosen else None)
    if not (models and tasks):
        raise UsageError("--models and --tasks are required (a --protocol brings its tasks and its board's models; "
                         "--leaderboard_only rewrites the tables from the cells).")
    builders = sorted({name.split("/")[0] for name in chosen.tasks}) if chosen else []
    if chosen and (other := [name for name in tasks if name.split("/")[0] not in builders]):
        raise UsageError(f"--tasks {other[0]}: --protocol {chosen.name} sets the data of its own tasks' builders "
                         f"({', '.join(builders)}) only; run other tasks without --protocol.")
    training = {**(chosen.training if chosen else {}),
                **{key: getattr(args, key) for key in ("max_steps", "per_device_train_batch_size", "learning_rate")
                   if getattr(args, key) is not None}}
    given = parse_params(args.dataset_param)
    params = {**(chosen.dataset_param if chosen else {}), **given}
    task_params = {task: {key: value for key, value in own.items() if key not in given}  # a flag wins over them too
                   for task, own in (chosen.task_params if chosen else {}).items()}
    learning_rates = args.learning_rates or (chosen.learning_rates if chosen and args.learning_rate is None else None)
    seeds = args.seeds or (chosen.seeds if chosen else 3)
    data_scale = args.data_scale or (chosen.data_scale if chosen else "small")
    records = run_grid(models, tasks, seeds, args.output_dir, training, data_scale, params, args.threads,
                       learning_rates=learning_rates, shard=shard, protocol=chosen.name if chosen else None,
                       generalizes=chosen.generalizes if chosen else None, workers=args.workers,
                       task_params=task_params, rerun_superseded=args.rerun_superseded)
    failed = [r for r in records if r["status"] != "ok"]
    print(f"{len(records) - len(failed)} cells done, {len(failed)} failed; "
          f"{os.path.join(args.output_dir, 'leaderboard.md')}")


def names_table() -> str:
    """The models of presets/leaderboard.yaml with their descriptions, the generated tasks, the protocols."""
    width = max(map(len, [*MODELS, *PROTOCOLS]))

    def entry(name, text):
        return textwrap.fill(text, 118, initial_indent=f"  {name:<{width}}  ", subsequent_indent=" " * (width + 4))

    lines = ["models (--models; also hf:PATH_OR_HUB_ID or a transformers model type):"]
    lines += [entry(name, description) for name, description in MODELS.items()]
    lines += ["tasks (--tasks; also hf:PATH_OR_HUB_ID[:CONFIG]):",
              textwrap.fill(" ".join(task_names()), 118, initial_indent="  ", subsequent_indent="  ")]
    lines += ["protocols (--protocol):"] + [entry(name, PROTOCOLS[name].description) for name in sorted(PROTOCOLS)]
    return "\n".join(lines)
