"""Pictures of a model's computation, shared by `examples/plot_ndr.py` and the Space app (`examples/space/app.py`).

`ndr_step_figures` draws what the NDR thesis's Figures 5.3 and D.6-D.10 show for one example: the attention map of
every step (source tokens on the x axis, target tokens on the y axis; the maximum over heads, or one head) and the
copy-gate activations of every step (tokens on the x axis, gate channels on the y axis). The steps are panels of one
image in a grid, so a figure has one pair of axes whatever the number of steps (a figure of separate axes per step
takes seconds to build; this one a fraction of a second).
"""

import math

import matplotlib
import numpy as np
import torch
from matplotlib.figure import Figure

COLUMNS = 5


def _gaps(height: int, width: int) -> tuple[int, int]:
    """Blank cells between panels: rows (room for a "step k" title), columns."""
    return max(2, math.ceil(0.15 * height)), max(1, math.ceil(0.08 * width))


def _montage(panels: list[np.ndarray], columns: int) -> np.ndarray:
    """Panels of one shape in a grid, row by row, separated by NaN cells (drawn blank)."""
    rows = math.ceil(len(panels) / columns)
    height, width = panels[0].shape
    gap_y, gap_x = _gaps(height, width)
    grid = np.full((rows * (height + gap_y) - gap_y, columns * (width + gap_x) - gap_x), np.nan)
    for index, panel in enumerate(panels):
        top, left = (index // columns) * (height + gap_y), (index % columns) * (width + gap_x)
        grid[top : top + height, left : left + width] = panel
    return grid


def _steps_figure(panels, tokens, cmap: str, title: str, label_rows: bool, panel_inches: tuple[float, float]) -> Figure:
    """One image of all steps' panels; token labels on the x axis of every column (and the y axis of every row when
    `label_rows`), "step k" above each panel."""
    columns = min(len(panels), COLUMNS)
    rows = math.ceil(len(panels) / columns)
    height, width = panels[0].shape
    gap_y, gap_x = _gaps(height, width)
    figure = Figure(figsize=(panel_inches[0] * columns + 0.8, panel_inches[1] * rows + 0.9))
    ax = figure.add_axes((0.08, 0.1, 0.9, 0.8))
    colormap = matplotlib.colormaps[cmap].with_extremes(bad="white")
    ax.imshow(_montage(panels, columns), cmap=colormap, vmin=0, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xticks([c * (width + gap_x) + i for c in range(columns) for i in range(width)],
                  tokens * columns, rotation=90, fontsize=6)
    if label_rows:
        ax.set_yticks([r * (height + gap_y) + i for r in range(rows) for i in range(height)], tokens * rows, fontsize=6)
    else:
        ax.set_yticks([])
    ax.tick_params(length=0)
    for side in ax.spines.values():
        side.set_visible(False)
    for index in range(len(panels)):
        row, column = divmod(index, columns)
        ax.text(column * (width + gap_x) + (width - 1) / 2, row * (height + gap_y) - 0.6, f"step {index + 1}",
                ha="center", va="bottom", fontsize=8)
    figure.suptitle(title, fontsize=9)
    return figure


def ndr_step_figures(model, tokenizer, text: str, head: int | None = None, num_steps: int | None = None):
    """Run `text` (space-separated tokens) through an NDR-family sequence classifier.

    Returns (predicted label, attention figure, gate figure or None when the model has no copy gate), as
    `matplotlib.figure.Figure`s (no pyplot state: save them with `savefig`, nothing to close)."""
    inputs = tokenizer(text, return_tensors="pt")
    tokens = tokenizer.convert_ids_to_tokens(inputs["input_ids"][0])
    heads = model.config.num_attention_heads
    if head is not None and not 0 <= head < heads:
        raise ValueError(f"head must be in [0, {heads}), got {head}")
    model.eval()
    with torch.no_grad():
        out = model(**inputs, num_steps=num_steps, output_attentions=True, output_gates=True)
    predicted = model.config.id2label[int(out.logits[0].argmax())]
    size = max(1.2, 0.16 * len(tokens))

    maps = [(a[0].max(0).values if head is None else a[0, head]).float().numpy() for a in out.attentions]
    which = "max over heads" if head is None else f"head {head}"
    attention_figure = _steps_figure(
        maps, tokens, "viridis", f"attention ({which}); x: source, y: target. Input: {text} -> {predicted}",
        label_rows=True, panel_inches=(size, size),
    )
    gate_figure = None
    if out.gates:
        gates = [g[0].T.float().numpy() for g in out.gates]
        gate_figure = _steps_figure(
            gates, tokens, "magma", f"copy-gate activations g (y: channels; 0 = copy, 1 = update). Input: {text}",
            label_rows=False, panel_inches=(size, 1.6),
        )
    return predicted, attention_figure, gate_figure
