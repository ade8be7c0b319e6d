"""`lengthgen release`: a trained output folder -> a Hub-ready model folder, and its upload.

    lengthgen release outputs/reproduce/ndr-ctl-backward --repo_id you/ndr-ctl-backward     # -> ./ndr-ctl-backward
    lengthgen release outputs/reproduce/ndr-ctl-backward --repo_id you/ndr-ctl-backward \\
        --target outputs/release/ndr-ctl-backward --push
    lengthgen release checkpoints/ndr-ctl-backward --repo_id you/ndr-ctl-backward --push     # a release folder, as is

The output folder is what lengthgen's experiment runner wrote (`lengthgen train`, the example scripts, `lengthgen
reproduce`): `config.json` with its `auto_map`, `model.safetensors` (or, sharded, its index and shards), the model
code that `save_pretrained` copied, tokenizer files and `lengthgen_results.json` (the spec, the command and the
accuracy per split and difficulty). The release folder holds the model, its code, the tokenizer, the plot
(`accuracy.png`, which `lengthgen reproduce` puts there) and a model card whose YAML carries `model-index` results
(task, dataset and config, split, accuracy overall and per depth or length) so the Hub displays them, with the
command and the spec that trained it. `--push` uploads it with huggingface_hub.

A release folder goes up as it is, but for the repo id its card loads from, set to `--repo_id`. Bad input stops
before anything is written or uploaded, with one line naming the problem: an output folder with no trained model or
no results, a target folder that exists and is not empty, a repo id the Hub would refuse, `--push` without a Hub
token.
"""

import argparse
import os

from lengthgen.cli import ArgumentParser, writable_folder
from lengthgen.release.folder import is_release_folder, publish, release
from lengthgen.release.hub import ReleaseError


def main(argv=None):
    parser = ArgumentParser(prog="lengthgen release", description=__doc__,
                            formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("output_dir",
                        help="a trained output folder, or a release folder to upload unchanged with --push")
    parser.add_argument("--repo_id", required=True, help="ORG/NAME of the model repository on the Hub")
    parser.add_argument("--target", type=writable_folder,
                        help="folder to write (default: ./NAME); must not exist or be empty")
    parser.add_argument("--push", action="store_true", help="upload the folder to --repo_id")
    args = parser.parse_args(argv)
    if os.path.isdir(args.output_dir) and is_release_folder(args.output_dir):
        if not args.push or args.target:
            raise ReleaseError(f"{args.output_dir} is already a release folder: upload it as it is with --push "
                               "(and no --target).")
        folder = publish(args.output_dir, args.repo_id)
    else:
        folder = release(args.output_dir, args.repo_id, args.target, args.push)
    print(folder)
