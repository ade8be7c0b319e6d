"""`lengthgen data export`: a length-split dataset written as a Hub-style parquet folder.

    lengthgen data export nsp_inductive --output_dir datasets_out                       # every config
    lengthgen data export nsp_inductive --dataset_config_name add --output_dir datasets_out \\
        --dataset_param train_size=1000
    lengthgen data export ptb_inductive --dataset_config_name char --output_dir datasets_out \\
        --dataset_param source=/data/ptb
    lengthgen data export nsp_inductive --output_dir datasets_out --push_to_hub you/nsp_inductive
    lengthgen data export --all --output_dir datasets_out --push_to_hub you     # every generated task family

writes DIR/NAME/{config}/{split}-FINGERPRINT.parquet, {config}/generation.json (the generating parameters and a
fingerprint) and a README.md dataset card whose `configs:` header lets `datasets.load_dataset("DIR/NAME", "add")`
read it, locally or once pushed to the Hub. `--all` writes every task family generated here (all but the PTB tasks,
which read a corpus), each with all its configs; `--dataset_param` then sets the parameters of every family that has
them, and `--push_to_hub ORG` uploads each family to ORG/NAME.
"""

import argparse

from lengthgen.cli import ArgumentParser, UsageError, check_hub_id, writable_folder
from lengthgen.data.export import BUILDERS, export, export_suite, parse_params


def main(argv=None):
    parser = ArgumentParser(prog="lengthgen data", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    export_parser = commands.add_parser("export", help="write a Hub-style parquet dataset folder")
    export_parser.add_argument("name", nargs="?", choices=sorted(BUILDERS), help="the dataset (or --all)")
    export_parser.add_argument("--all", action="store_true", help="every generated task family, all configs")
    export_parser.add_argument("--dataset_config_name", action="append",
                               help="config to export (repeatable; default: all)")
    export_parser.add_argument("--output_dir", required=True, type=writable_folder)
    export_parser.add_argument("--push_to_hub", metavar="REPO", help="also upload the folder to this dataset repo")
    export_parser.add_argument("--dataset_param", nargs="+", action="extend", default=[], metavar="KEY=VALUE",
                               help="generating parameters, e.g. train_size=1000 train_difficulties=[2,4] "
                                    "(JSON values)")
    args = parser.parse_args(argv)
    if args.push_to_hub:  # checked before anything is generated
        check_hub_id(args.push_to_hub, "--push_to_hub", "namespace" if args.all else "repo id")
    if args.all == bool(args.name):
        raise UsageError("Give a dataset name or --all, not both." if args.all else "Give a dataset name or --all.")
    if args.all:
        if args.dataset_config_name:
            raise UsageError("--dataset_config_name picks configs of one dataset; --all exports every config.")
        for folder in export_suite(args.output_dir, args.push_to_hub, **parse_params(args.dataset_param)):
            print(folder)
        return
    print(export(args.name, args.output_dir, args.dataset_config_name, args.push_to_hub,
                 **parse_params(args.dataset_param)))
