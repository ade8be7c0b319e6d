"""Turn a trained output directory into a Hub-ready model folder, and push it: the `lengthgen-release` command.

    lengthgen-release outputs/reproduce/ndr-ctl-backward --repo-id you/ndr-ctl-backward            # -> ./ndr-ctl-backward
    lengthgen-release outputs/reproduce/ndr-ctl-backward --repo-id you/ndr-ctl-backward --target release/ndr --push
    lengthgen-release checkpoints/ndr-ctl-backward --repo-id you/ndr-ctl-backward --push     # a release folder, as is

The output directory is what `examples/run_classification.py` or `examples/run_mlm.py` wrote (with `--do_eval`):
`config.json` with its `auto_map`, `model.safetensors`, the model code that `save_pretrained` copied, tokenizer files,
`all_results.json` (the evaluation) and `lengthgen_run.json` (the command and the dataset, see `record_run`);
`benchmarks/reproduce.py` adds `accuracy.png`. The release folder holds the model, its code, the tokenizer, the plot
and a model card whose YAML carries `model-index` results (task, dataset and config, split, accuracy overall and per
depth or length) so the Hub displays them, plus the exact training command. `--push` uploads it with huggingface_hub.

Bad input stops before anything is written or uploaded, with one line naming the problem: an output directory with no
trained model or no evaluation results, a target folder that exists and is not empty, `--push` without a Hub token.
"""

import argparse
import os

from lengthgen.cli import run_command

from .folder import is_release_folder, publish, release
from .hub import ReleaseError


def parse_and_release(argv=None):
    parser = argparse.ArgumentParser(prog="lengthgen-release", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir", help="a trained output directory of run_classification.py or run_mlm.py, or a "
                        "release folder to upload unchanged with --push")
    parser.add_argument("--repo-id", required=True, help="ORG/NAME of the model repository on the Hub")
    parser.add_argument("--target", help="folder to write (default: ./NAME); must not exist or be empty")
    parser.add_argument("--push", action="store_true", help="upload the folder to --repo-id")
    args = parser.parse_args(argv)
    if os.path.isdir(args.output_dir) and is_release_folder(args.output_dir):
        if not args.push or args.target:
            raise ReleaseError(f"{args.output_dir} is already a release folder: upload it as it is with --push "
                               "(and no --target).")
        folder = publish(args.output_dir, args.repo_id)
    else:
        folder = release(args.output_dir, args.repo_id, args.target, args.push)
    print(folder)


def main(argv=None):
    """The console script: a mistake is one line and exit status 2; no return value (sys.exit would print it)."""
    run_command(parse_and_release, "lengthgen-release", argv)


if __name__ == "__main__":
    main()
