#!/usr/bin/env python
"""Pictures of one example's computation in an NDR-family model, like the thesis's Figures 5.3 and D.6-D.10.

    python examples/plot_ndr.py --model_name_or_path outputs/ndr-ctl --text "101 d a b c" --output ndr.png

Writes two PNGs: `{output}` with the attention map of every step (one panel per step, source tokens on the x axis,
target tokens on the y axis; the maximum over heads, or one `--head`), and `{output stem}_gates.png` with the copy-gate
activations of every step (one panel per step, tokens on the x axis, gate channels on the y axis).
"""

import argparse
import os

from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer

import lengthgen.modeling  # noqa: F401
from lengthgen.cli import ArgumentParser, UsageError, check_positive, local_path_or_hub_id, run_command
from lengthgen.plots import ndr_step_figures


def plot_ndr_steps(model, tokenizer, text: str, output: str, head: int | None = None, num_steps: int | None = None):
    """Run `text` through `model` and save the per-step attention and gate pictures. Returns the two paths."""
    _, attention_figure, gate_figure = ndr_step_figures(model, tokenizer, text, head, num_steps)
    attention_figure.savefig(output, dpi=120)
    gates_path = None
    if gate_figure is not None:
        gates_path = os.path.splitext(output)[0] + "_gates.png"
        gate_figure.savefig(gates_path, dpi=120)
    return output, gates_path


def main(argv=None):
    parser = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", required=True)
    parser.add_argument("--text", required=True, help="the input, space-separated tokens as in the dataset")
    parser.add_argument("--output", default="ndr_steps.png")
    parser.add_argument("--head", type=int, default=None, help="one head instead of the maximum over heads")
    parser.add_argument("--num_steps", type=int, default=None)
    parser.add_argument("--trust_remote_code", action="store_true")
    args = parser.parse_args(argv)
    local_path_or_hub_id(args.model_name_or_path, "--model_name_or_path")
    check_positive({"--num_steps": args.num_steps})
    if not args.text.split():
        raise UsageError("--text is empty: give the input as space-separated tokens, e.g. \"101 d a b\".")
    config = AutoConfig.from_pretrained(args.model_name_or_path, trust_remote_code=args.trust_remote_code)
    if config.model_type != "ndr":
        raise UsageError(f"--model_name_or_path {args.model_name_or_path} holds a model of type {config.model_type}: "
                         "the pictures are of a Neural Data Router's attention and gates (model type ndr).")
    folder = os.path.dirname(os.path.abspath(args.output))
    if not os.path.isdir(folder):
        raise UsageError(f"--output {args.output}: no folder {folder} to write it in.")
    heads = config.num_attention_heads
    if args.head is not None and not 0 <= args.head < heads:
        raise UsageError(f"--head must be in [0, {heads}), got {args.head}.")
    model = AutoModelForSequenceClassification.from_pretrained(
        args.model_name_or_path, trust_remote_code=args.trust_remote_code
    )
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    for path in plot_ndr_steps(model, tokenizer, args.text, args.output, args.head, args.num_steps):
        if path:
            print(path)


if __name__ == "__main__":
    run_command(main, "plot_ndr.py")
