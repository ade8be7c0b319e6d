"""`lengthgen reproduce`: the papers' length-generalization results, one command per result.

    lengthgen reproduce --list                          # the presets, with the paper's numbers
    lengthgen reproduce ndr-ctl-backward                # train (or resume), evaluate, write the results JSON and plot
    lengthgen reproduce ndr-ctl-backward --threads 1 --output_root /data/runs
    lengthgen reproduce ndr-ctl-backward --results_dir /tmp/results    # a trial: docs/results/ untouched
    lengthgen reproduce ndr-ctl-backward --print_spec   # the preset's spec, to edit and run with `lengthgen train`
    lengthgen reproduce --table                         # the results table, from docs/results/*.json
    lengthgen reproduce recurrent-bias-attractors       # a study: every model of presets/study.yaml over its seeds

A run writes its checkpoints and logs under OUTPUT_ROOT/NAME and its results JSON and plot in RESULTS_DIR; given
again, it resumes from its last checkpoint, or, once finished, evaluates the trained model again in fp32.

In pieces, on machines that do not outlive ten minutes (the first piece without --unpack_from):

    lengthgen reproduce ndr-listops-paper --max_train_seconds 480 --pack_to pieces/ndr-listops-paper
    lengthgen reproduce ndr-listops-paper --max_train_seconds 480 --unpack_from pieces/ndr-listops-paper \\
        --pack_to pieces/ndr-listops-paper

`--max_train_seconds` stops training before the budget with a checkpoint (weights, optimizer, scheduler, RNG, data
position); `--pack_to` writes that checkpoint as at most 8 files of at most 16 MiB; `--unpack_from` restores it on
the next machine, whose piece continues the same curve.
"""

import argparse
import glob
import json
import os

import torch

from lengthgen.cli import ArgumentParser, UsageError, check_positive, writable_folder
from lengthgen.reproduction.reproduce import (
    NUM_STEPS,
    PRESETS,
    WALL_FILE,
    check_piece,
    num_steps_table,
    reproduce,
    results_table,
)
from lengthgen.reproduction.study import STUDIES, run_study, study_spec
from lengthgen.training.pieces import (
    get_last_checkpoint_or_none,
    pack_checkpoint,
    unpack_unless_behind,
)
from lengthgen.training.results import RESULTS_FILE
from lengthgen.training.runner import SPEC_FILE

RESULTS_DIR = os.path.join("docs", "results")


def parse_args(argv):
    parser = ArgumentParser(prog="lengthgen reproduce", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", metavar="NAME", help="presets (--list shows them)")
    parser.add_argument("--list", action="store_true", help="list the presets")
    parser.add_argument("--table", action="store_true", help="print the Markdown table of RESULTS_DIR/*.json")
    parser.add_argument("--print_spec", action="store_true", help="print each preset's spec (YAML) and stop")
    parser.add_argument("--output_root", default=os.path.join("outputs", "reproduce"),
                        help="the runs' folders: checkpoints, logs (default outputs/reproduce)")
    parser.add_argument("--results_dir", default=RESULTS_DIR,
                        help="the results JSON and plots (default docs/results: the published ones; a scratch folder "
                             "for a trial run)")
    parser.add_argument("--precision", choices=["auto", "fp32", "bf16"],
                        help="default: the preset's (auto = bf16 where the device has native bf16, else fp32)")
    parser.add_argument("--num_steps_table", nargs="?", const="saved", choices=["saved", "last-checkpoint"],
                        help=f"after training, NDR accuracy on deeper problems at num_steps {NUM_STEPS} in fp32 (NDR "
                             "presets), of the model the run saved; 'last-checkpoint': of its last checkpoint, without "
                             "training (a piece restored with --unpack_from)")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (two runs at once: 1 each)")
    parser.add_argument("--verbose", action="store_true", help="print the Trainer's logs of every step")
    parser.add_argument("--max_train_seconds", type=float, default=None,
                        help="wall-clock budget of this piece of training: stop before it with a checkpoint")
    parser.add_argument("--pack_to", metavar="DIR",
                        help="afterwards, write the last checkpoint as at most 8 files of at most 16 MiB in DIR")
    parser.add_argument("--unpack_from", metavar="DIR",
                        help="first, restore the checkpoint --pack_to wrote in DIR (unless the run's own last "
                             "checkpoint is at its step or later)")
    args = parser.parse_args(argv)
    unknown = [name for name in args.names if name not in PRESETS and name not in STUDIES]
    if unknown:
        raise UsageError(f"Unknown preset {unknown[0]!r}; choose from {', '.join([*PRESETS, *STUDIES])} "
                         "(--list shows them with the papers' numbers)")
    if any(name in STUDIES for name in args.names) and (args.pack_to or args.unpack_from or args.num_steps_table or
                                                        args.max_train_seconds or args.precision):
        raise UsageError("a study (presets/study.yaml) takes none of --pack_to, --unpack_from, --num_steps_table, "
                         "--max_train_seconds, --precision (it trains as its spec says)")
    if args.num_steps_table and (shallow := [n for n in args.names if n in PRESETS and not PRESETS[n].deeper]):
        raise UsageError(f"--num_steps_table evaluates an NDR on deeper problems, which {shallow[0]} does not name "
                         "(NDR presets with a `deeper` section do)")
    if (args.pack_to or args.unpack_from) and len(args.names) != 1:
        raise UsageError("--pack_to and --unpack_from take exactly one preset name")
    if args.pack_to and args.names[0] in PRESETS:
        saving = PRESETS[args.names[0]].experiment().training.save_strategy
        if getattr(saving, "value", saving) == "no":
            raise UsageError(f"--pack_to packs the run's last checkpoint, and {args.names[0]} saves none "
                             "(save_strategy no).")
    if args.num_steps_table == "last-checkpoint" and (args.max_train_seconds or args.pack_to):
        raise UsageError("--num_steps_table last-checkpoint evaluates without training: it takes no "
                         "--max_train_seconds or --pack_to")
    check_positive({"--threads": args.threads, "--max_train_seconds": args.max_train_seconds})
    if args.unpack_from and not os.path.isdir(args.unpack_from):
        raise UsageError(f"--unpack_from: no such directory: {args.unpack_from}")
    if args.unpack_from and not glob.glob(os.path.join(args.unpack_from, "checkpoint-*.tar.part*")):
        raise UsageError(f"--unpack_from: {args.unpack_from} holds no packed checkpoint (checkpoint-N.tar.partNN); "
                         "the first piece of a run goes without --unpack_from.")
    if not (args.names or args.list or args.table):
        raise UsageError("name a preset (--list shows them), or ask for --list or --table")
    if args.names and not args.print_spec:  # a preset runs: its folder is made under --output_root
        try:
            args.output_root = writable_folder(args.output_root)
        except argparse.ArgumentTypeError as error:
            raise UsageError(f"--output_root: {error}") from None
    return args


def presets_table() -> str:
    """Every preset with its reference, the paper's accuracy and the target (or "baseline": a run the paper compares
    with, which has none), then the studies."""

    def accuracies(split, row):  # "test 1.00", or "validation 13: 0.92, 14: 0.81" per difficulty
        if list(row) == ["all"]:
            return f"{split} {row['all']:.2f}"
        return f"{split} " + ", ".join(f"{key}: {value:.2f}" for key, value in row.items())

    rows = [("preset", "reference", "paper's accuracy", "target")]
    for name, run in PRESETS.items():
        paper = "; ".join(accuracies(split, row) for split, row in run.paper.items()) or "(plotted only)"
        target = "baseline"
        if run.target:
            split, difficulty, goal = run.target
            target = f"{split}{'' if difficulty == 'all' else ' ' + difficulty} >= {goal:.2f}"
        rows.append((name, run.reference, paper, target))
    widths = [max(len(row[column]) for row in rows) for column in range(3)]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(row, widths)) + "  " + row[3] for row in rows]
    lines += [f"{name:<{widths[0]}}  a study of {len(study['models'])} models x {study['seeds']} seeds: "
              f"{study['reference']}" for name, study in STUDIES.items()]
    return "\n".join(lines)


def main(argv=None):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    if args.list:
        print(presets_table())
    if args.table:
        if not os.path.isdir(args.results_dir):
            raise UsageError(f"--results_dir: no such directory: {args.results_dir} (run from the repository root, or "
                             "name the folder of results JSONs)")
        print(results_table(args.results_dir))
    for name in args.names:
        if name in STUDIES and args.print_spec:
            for model in STUDIES[name]["models"]:
                print(f"# lengthgen reproduce {name}: {model} (seed 0 of {STUDIES[name]['seeds']})\n"
                      f"{study_spec(name, model, 0, os.path.join(args.output_root, name, model, 'seed0')).to_yaml()}")
            continue
        if name in STUDIES:
            run_study(name, args.output_root, args.results_dir, args.verbose)
            continue
        if args.print_spec:
            print(f"# lengthgen reproduce {name}\n{PRESETS[name].experiment().to_yaml()}")
            continue
        output_dir = os.path.join(args.output_root, name)
        if args.unpack_from:
            check_piece(name, args.unpack_from)
            restored = unpack_unless_behind(args.unpack_from, output_dir)
            print(f"restored {restored}" if restored else
                  f"kept {get_last_checkpoint_or_none(output_dir)}: not behind the piece in {args.unpack_from}")
        if args.num_steps_table == "last-checkpoint":
            num_steps_table(name, args.output_root, args.results_dir, last_checkpoint=True)
            continue
        result = reproduce(name, args.output_root, args.precision, args.results_dir,
                           max_train_seconds=args.max_train_seconds, verbose=args.verbose)
        if args.pack_to:
            # the run's record goes with the piece: the folder it is unpacked into evaluates and releases as this run
            records = [os.path.join(output_dir, record) for record in (WALL_FILE, RESULTS_FILE, SPEC_FILE)
                       if os.path.isfile(os.path.join(output_dir, record))]
            parts = pack_checkpoint(get_last_checkpoint_or_none(output_dir), args.pack_to, extra_files=records)
            print(f"packed into {len(parts)} file(s): {', '.join(parts)}")
        print(json.dumps({"name": name, "accuracy": result["accuracy"], "target": result["target"]}, indent=1))
        if args.num_steps_table:
            num_steps_table(name, args.output_root, args.results_dir)
