"""Geometric attention weights (Csordás et al., the Neural Data Router; thesis §5.1.2, Eq. 5.6-5.8).

For target i and source j, P[i, j] = sigmoid(logits[i, j]) is the probability that source j matches target i, and

    A[i, j] = P[i, j] * prod_{k in S(i, j)} (1 - P[i, k])

where S(i, j) holds the sources closer to i than j (at equal distance the source to the right of i is the closer
one), so a match downweights every more distant match: attention goes to the closest matching element. A[i, i] = 0.

Computed in log space with one cumulative sum per row: O(N^2) time and memory, never the O(N^3) of the product.
"""

import torch
from torch.nn import functional as F


def geometric_attention_weights(
    logits: torch.Tensor, key_padding_mask: torch.Tensor | None = None, normalize: bool = False
) -> torch.Tensor:
    """Geometric attention weights A of Eq. 5.7-5.8 from pre-sigmoid scores.

    Args:
        logits: `(..., N, N)` scores before the sigmoid; rows are targets i, columns sources j.
        key_padding_mask: optional bool `(..., N)`, True at real tokens. Padded sources get zero weight and are left
            out of every product, so they do not scale down the weights of real sources.
        normalize: divide each row by its sum (L1), as the authors' code does by default (`normalize_score=True`
            there); the thesis's Eq. 5.7 has no normalisation, so the default here is False.

    Returns:
        weights of the shape and dtype of `logits` (computed in float32 for lower-precision inputs).
    """
    if logits.dim() < 2 or logits.shape[-1] != logits.shape[-2]:
        raise ValueError(f"logits must have shape (..., N, N), got {tuple(logits.shape)}")
    n = logits.shape[-1]
    if key_padding_mask is not None:
        if key_padding_mask.dtype != torch.bool:
            raise ValueError(f"key_padding_mask must be bool (True at real tokens), got {key_padding_mask.dtype}")
        if key_padding_mask.shape[-1] != n:
            raise ValueError(f"key_padding_mask has {key_padding_mask.shape[-1]} positions, logits have {n}")
    scores = logits.float()
    device = scores.device

    # sources left out of every product and given no weight: the target itself, and padding
    excluded = torch.eye(n, dtype=torch.bool, device=device)
    if key_padding_mask is not None:
        excluded = excluded | ~key_padding_mask[..., None, :]
    log_p = F.logsigmoid(scores)
    log_not_p = (log_p - scores).masked_fill(excluded, 0.0)  # log(1 - sigmoid(x)) = log sigmoid(x) - x
    # prefix[..., i, c] = sum_{k < c} log(1 - P[i, k]), for c = 0..N
    prefix = F.pad(log_not_p.cumsum(-1), (1, 0))

    # S(i, j) as a column range of row i (the excluded target i adds 0), with the mirror column m = 2i - j + 1:
    #   source to the right, j > i:  |k - i| < j - i            ->  [m, j)      = prefix[j] - prefix[m]
    #   source to the left,  j < i:  |k - i| <= i - j, k != j    ->  [j + 1, m)  = prefix[m] - prefix[j + 1]
    # (m is clipped to [0, N]: it only leaves that range where the sequence ends first)
    i = torch.arange(n, device=device)[:, None]
    j = torch.arange(n, device=device)[None, :]
    mirror = (2 * i - j + 1).clamp(0, n).view(*(1,) * (prefix.dim() - 2), n, n)
    at_mirror = torch.take_along_dim(prefix, mirror, dim=-1)
    closer = torch.where(j > i, prefix[..., :n] - at_mirror, at_mirror - prefix[..., 1:])

    weights = (log_p + closer).exp().masked_fill(excluded, 0.0)
    if normalize:
        weights = weights / weights.sum(-1, keepdim=True).clamp_min(1e-12)
    return weights.to(logits.dtype)
