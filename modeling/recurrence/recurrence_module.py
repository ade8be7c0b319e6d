"""The recurrence module shared by the GPT-2 and RoBERTa models with window-level recurrence (Hutchins et al., §3.1
and §5.4): a pooled summary z of one window and the feed-forward network that maps it to h_prev, the extra key and
value of the next window."""

import torch
from torch import nn
from transformers import initialization as init

POOLINGS = ("layer_weighted", "last_layer")


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


__all__ = ["POOLINGS", "RecurrenceModule"]
