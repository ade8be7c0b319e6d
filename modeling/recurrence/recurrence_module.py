"""What the GPT-2 and RoBERTa models with window-level recurrence share (Yoshida et al. 2020, §3.1 and §5.4): the
recurrence module (a pooled summary z of one window and the feed-forward network that maps it to h_prev, the extra
key and value of the next window), whole-window gradient checkpointing and the recurrence module's initialisation
(`WindowRecurrenceMixin`), and the checks of the recurrence config fields and of the inputs."""

import os
from functools import partial

import torch
import torch.utils.checkpoint
from torch import nn
from transformers import initialization as init

POOLINGS = ("layer_weighted", "last_layer")


def check_recurrence_fields(insertion_layer: int, num_layers: int, layers_name: str, recurrence_hidden_size: int,
                            recurrence_num_hidden_layers: int, recurrence_pooling: str) -> None:
    """ValueError for a recurrence config field out of range; `layers_name` is the config's name for the number of
    layers (GPT-2: n_layer, RoBERTa: num_hidden_layers)."""
    if not 0 <= insertion_layer < num_layers:
        raise ValueError(f"insertion_layer must lie in [0, {layers_name}={num_layers}), got {insertion_layer}")
    if recurrence_num_hidden_layers < 0 or recurrence_hidden_size < 1:
        raise ValueError("recurrence_num_hidden_layers must be >= 0 and recurrence_hidden_size >= 1")
    if recurrence_pooling not in POOLINGS:
        raise ValueError(f"recurrence_pooling must be one of {POOLINGS}, got {recurrence_pooling!r}")


def values_are_free(tensor: torch.Tensor) -> bool:
    """Whether the checks that read a tensor's values (ids in the vocabulary, right padding) run: on the CPU they cost
    nothing; on an accelerator each would stall it with a host-device sync, so they run only with
    LENGTHGEN_CHECK_INPUTS=1 (the errors are the same); never while torch.compile traces. (The NDR and I-BERT files
    have the same rule: each model family's files load on their own with `trust_remote_code`.)"""
    if torch.compiler.is_compiling():
        return False
    return tensor.device.type == "cpu" or os.environ.get("LENGTHGEN_CHECK_INPUTS", "") == "1"


def check_input_ids(input_ids: torch.Tensor | None, axes: str, vocab_size: int) -> None:
    """ValueError unless `input_ids` has the named `axes` (e.g. "batch_size, sequence_length"), none of them empty,
    and every id in the vocabulary (that last where `values_are_free`)."""
    if input_ids is None or input_ids.dim() != len(axes.split(",")):
        shape = None if input_ids is None else tuple(input_ids.shape)
        raise ValueError(f"input_ids must have shape ({axes}), got {shape}")
    if 0 in input_ids.shape:
        raise ValueError(f"Empty input: input_ids has shape {tuple(input_ids.shape)}")
    if not values_are_free(input_ids):
        return
    low, high = int(input_ids.min()), int(input_ids.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise ValueError(f"Token id {bad} is outside the vocabulary [0, {vocab_size}).")


def check_attention_mask(attention_mask: torch.Tensor | None, input_ids: torch.Tensor) -> None:
    if attention_mask is not None and tuple(attention_mask.shape) != tuple(input_ids.shape):
        raise ValueError(f"attention_mask has shape {tuple(attention_mask.shape)}, expected {tuple(input_ids.shape)}")


class WindowRecurrenceMixin:
    """For a `PreTrainedModel` with a `recurrence` module that reads its input window by window: gradient
    checkpointing of whole windows (§3.2) instead of the backbone's layers, and the recurrence module's
    initialisation after the backbone's. Put it before the `PreTrainedModel` base."""

    def _set_gradient_checkpointing(self, enable: bool = True, gradient_checkpointing_func=None, **kwargs):
        """Checkpoint whole windows: only each window's inputs, h_prev and its small outputs stay in memory; the
        window is recomputed in the backward pass. Always non-reentrant, which handles the first window (no input
        needs a gradient) and h_prev. The backbone's own layers are left alone."""
        self.gradient_checkpointing = enable
        self._gradient_checkpointing_func = partial(torch.utils.checkpoint.checkpoint, use_reentrant=False)

    @torch.no_grad()
    def _init_weights(self, module):
        """The backbone's initialisation, then `RecurrenceModule.initialize` for the recurrence module's parameters."""
        super()._init_weights(module)
        self.recurrence.initialize(module)


class RecurrenceModule(nn.Module):
    """z -> h_prev.

    `recurrence_pooling`: "layer_weighted" is Eq. 1 (the hidden states of every layer, weighted by softmax-normalised
    learned weights w_l, averaged over positions; the GPT-2 experiments); "last_layer" averages the final layer only
    (the RoBERTa experiment of §5.4). The network has `recurrence_num_hidden_layers` ReLU layers of
    `recurrence_hidden_size` (GPT-2: 3 x 200; RoBERTa: 2 x 768)."""

    def __init__(self, config):
        super().__init__()
        self.pooling = config.recurrence_pooling
        if self.pooling == "layer_weighted":
            self.layer_logits = nn.Parameter(torch.zeros(config.num_hidden_layers))  # alpha_l
        layers, width = [], config.hidden_size
        for _ in range(config.recurrence_num_hidden_layers):
            layers += [nn.Linear(width, config.recurrence_hidden_size), nn.ReLU()]
            width = config.recurrence_hidden_size
        layers.append(nn.Linear(width, config.hidden_size))
        self.ffn = nn.Sequential(*layers)

    def pool(self, layer_states: list[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        """z: `(batch, hidden)`, the mean over the positions (those where `mask` is 1, if given) of the pooled layers."""
        if self.pooling == "last_layer":
            layer_states = layer_states[-1:]
        if mask is None:
            means = [s.mean(dim=1) for s in layer_states]
        else:
            weights = mask.to(layer_states[0].dtype)[..., None]
            means = [(s * weights).sum(dim=1) / weights.sum(dim=1).clamp(min=1) for s in layer_states]
        if self.pooling == "last_layer":
            return means[0]
        layer_weights = torch.softmax(self.layer_logits, dim=0)
        return torch.einsum("l,lbk->bk", layer_weights.to(means[0].dtype), torch.stack(means, dim=0))

    def forward(self, layer_states: list[torch.Tensor], mask: torch.Tensor | None = None) -> torch.Tensor:
        return self.ffn(self.pool(layer_states, mask))

    @torch.no_grad()
    def initialize(self, module: nn.Module):
        """Initialise `module` if it is this module or one of its layers (call it from the model's `_init_weights`,
        which transformers applies module by module): Xavier-uniform weights (ReLU gain in the hidden layers), zero
        biases, equal layer weights, so h_prev varies with its window from the start (with a pretrained model's std
        0.02 in every layer it would be nearly constant). The paper does not specify the initialisation. Through
        `transformers.initialization`, so weights loaded from a checkpoint are left alone."""
        if module is self and self.pooling == "layer_weighted":
            init.zeros_(self.layer_logits)
        linears = [m for m in self.ffn if isinstance(m, nn.Linear)]
        for index, linear in enumerate(linears):
            if module is linear:
                init.xavier_uniform_(linear.weight, gain=1.0 if index == len(linears) - 1 else 2**0.5)
                init.zeros_(linear.bias)


__all__ = [
    "POOLINGS",
    "RecurrenceModule",
    "WindowRecurrenceMixin",
    "check_attention_mask",
    "check_input_ids",
    "check_recurrence_fields",
]
