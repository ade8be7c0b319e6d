#!/usr/bin/env python
"""Pictures of one example's computation in an NDR-family model, like the thesis's Figures 5.3 and D.6-D.10.

    python examples/plot_ndr.py --model_name_or_path outputs/ndr-ctl --text "101 d a b c" --output ndr.png

Writes two PNGs: `{output}` with the attention map of every step (one panel per step, source tokens on the x axis,
target tokens on the y axis; the maximum over heads, or one `--head`), and `{output stem}_gates.png` with the copy-gate
activations of every step (one panel per step, tokens on the x axis, gate channels on the y axis).
"""

import argparse
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import torch  # noqa: E402
from transformers import AutoModelForSequenceClassification, AutoTokenizer  # noqa: E402

import lengthgen.modeling  # noqa: E402,F401


def _grid(n_panels: int, panel_size: float):
    columns = min(n_panels, 5)
    rows = math.ceil(n_panels / columns)
    fig, axes = plt.subplots(rows, columns, figsize=(panel_size * columns, panel_size * rows), squeeze=False)
    for ax in axes.flat[n_panels:]:
        ax.axis("off")
    return fig, axes.flat


def plot_ndr_steps(model, tokenizer, text: str, output: str, head: int | None = None, num_steps: int | None = None):
    """Run `text` through `model` and save the per-step attention and gate pictures. Returns the two paths."""
    inputs = tokenizer(text, return_tensors="pt")
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    model.eval()
    with torch.no_grad():
        out = model(**inputs, num_steps=num_steps, output_attentions=True, output_gates=True)
    heads = model.config.num_attention_heads
    if head is not None and not 0 <= head < heads:
        raise ValueError(f"--head must be in [0, {heads}), got {head}")
    predicted = model.config.id2label[int(out.logits[0].argmax())]

    fig, axes = _grid(len(out.attentions), 2.6)
    for step, (ax, attention) in enumerate(zip(axes, out.attentions)):
        weights = attention[0].max(0).values if head is None else attention[0, head]
        ax.imshow(weights.float().numpy(), cmap="viridis", vmin=0, vmax=1)
        ax.set_title(f"step {step + 1}", fontsize=9)
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
        ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
    which = "max over heads" if head is None else f"head {head}"
    fig.suptitle(f"attention ({which}); x: source, y: target. Input: {text} -> {predicted}", fontsize=10)
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)

    gates_path = None
    if out.gates:
        gates_path = os.path.splitext(output)[0] + "_gates.png"
        fig, axes = _grid(len(out.gates), 2.6)
        for step, (ax, gates) in enumerate(zip(axes, out.gates)):
            ax.imshow(gates[0].T.float().numpy(), cmap="magma", vmin=0, vmax=1, aspect="auto")
            ax.set_title(f"step {step + 1}", fontsize=9)
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
            ax.set_yticks([])
        fig.suptitle(f"copy-gate activations g (y: channels; 0 = copy, 1 = update). Input: {text}", fontsize=10)
        fig.tight_layout()
        fig.savefig(gates_path, dpi=120)
        plt.close(fig)
    return output, gates_path


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model_name_or_path", required=True)
    parser.add_argument("--text", required=True, help="the input, space-separated tokens as in the dataset")
    parser.add_argument("--output", default="ndr_steps.png")
    parser.add_argument("--head", type=int, default=None, help="one head instead of the maximum over heads")
    parser.add_argument("--num_steps", type=int, default=None)
    parser.add_argument("--trust_remote_code", action="store_true")
    args = parser.parse_args(argv)
    model = AutoModelForSequenceClassification.from_pretrained(args.model_name_or_path, trust_remote_code=args.trust_remote_code)
    tokenizer = AutoTokenizer.from_pretrained(args.model_name_or_path)
    for path in plot_ndr_steps(model, tokenizer, args.text, args.output, args.head, args.num_steps):
        if path:
            print(path)


if __name__ == "__main__":
    main()
