"""Geometric attention weights (Csordás et al., the Neural Data Router; thesis §5.1.2, Eq. 5.6-5.8).

For target i and source j, P[i, j] = sigmoid(logits[i, j]) is the probability that source j matches target i, and

    A[i, j] = P[i, j] * prod_{k in S(i, j)} (1 - P[i, k])

where S(i, j) holds the sources closer to i than j (at equal distance the source to the right of i is the closer
one), so a match downweights every more distant match: attention goes to the closest matching element. A[i, i] = 0.

Computed in log space with one cumulative sum per row: O(N^2) time, never the O(N^3) of the product.

Two entry points:
- `geometric_attention(query, key, value, ...)` returns A @ value, what the NDR's attention layer needs. On CPU it
  runs the fused C++ kernel of `geometric_attention_cpu.py` (built on first use; it makes the logits a block of
  rows at a time, and it keeps A for backward only when a gradient is needed); on CUDA the Triton kernels of
  `geometric_attention_triton.py` when Triton is installed (they walk each row outward by distance and keep no
  (N, N) tensor, in training either: linear memory, as FlashAttention); otherwise, or where the C++ kernel cannot be
  built, the PyTorch path below. All compute the same function.
- `geometric_attention_weights(logits, ...)` returns A itself (for `output_attentions` and plots): PyTorch, with a
  hand-written backward pass (`GeometricAttentionFunction`) and index tensors cached per (length, device).
"""

import functools

import torch
from torch.nn import functional as F

from .geometric_attention_cpu import load as load_cpu_kernel
from .geometric_attention_triton import DTYPES as TRITON_DTYPES
from .geometric_attention_triton import TritonGeometricAttention
from .geometric_attention_triton import available as triton_available


def geometric_attention(
    query: torch.Tensor,
    key: torch.Tensor,
    value: torch.Tensor,
    key_padding_mask: torch.Tensor | None = None,
    normalize: bool = False,
    direction_bias: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """A @ value, with A the geometric attention weights (see `geometric_attention_weights`) of the logits

        logits[..., i, j] = scale * query[..., i, :] . key[..., j, :] + direction_bias[..., i, 0 if j >= i else 1]

    Args:
        query, key: `(..., N, D_k)`.
        value: `(..., N, D)` values of the sources.
        key_padding_mask: optional bool `(..., N)`, True at real tokens (broadcast over the leading dimensions).
        normalize: L1-normalise each row of A (the authors' code's default); the thesis's Eq. 5.7 has none.
        direction_bias: optional `(..., N, 2)`: the NDR's directional encoding (Eq. 5.9) and any constant, added to
            row i of the logits, `[..., i, 0]` at the sources j >= i and `[..., i, 1]` at j < i.
        scale: multiplies the dot products; defaults to `D_k ** -0.5`.

    Returns:
        `(..., N, D)` in the dtype of `value` (computed in float32 for lower-precision inputs); on CUDA under autocast
        to bfloat16, in bfloat16 (see `_triton_attention`).
    """
    if query.dim() < 2 or key.shape != query.shape or value.shape[:-1] != query.shape[:-1]:
        raise ValueError(f"query and key must have one shape (..., N, D_k) and value (..., N, D) with the same "
                         f"(..., N); got {tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
    *batch, n, d_k = query.shape
    _check_mask(key_padding_mask, n)
    if direction_bias is not None and tuple(direction_bias.shape) != (*batch, n, 2):
        raise ValueError(f"direction_bias must have shape {(*batch, n, 2)}, got {tuple(direction_bias.shape)}")
    scale = d_k**-0.5 if scale is None else float(scale)
    compute = torch.float64 if value.dtype == torch.float64 else torch.float32
    kernel = load_cpu_kernel() if value.device.type == "cpu" and n > 0 else None
    if value.device.type == "cuda" and n > 0 and triton_available():
        return _triton_attention(query, key, value, key_padding_mask, normalize, direction_bias, scale)
    with torch.autocast(value.device.type, enabled=False):  # `compute` precision under autocast too (Trainer's --bf16)
        if kernel is None:
            bias = direction_bias.to(compute) if direction_bias is not None else None
            logits = geometric_logits(query.to(compute), key.to(compute), bias, scale)
            weights = geometric_attention_weights(logits, key_padding_mask, normalize)
            return (weights @ value.to(compute)).to(value.dtype)
        flat = lambda x: x.to(compute).reshape(-1, *x.shape[-2:]).contiguous()  # noqa: E731
        real = None
        if key_padding_mask is not None:
            real = key_padding_mask.expand(*batch, n).reshape(-1, n).contiguous()
        bias = flat(direction_bias) if direction_bias is not None else None
        context = FusedGeometricAttention.apply(
            flat(query), flat(key), flat(value), scale, bias, real, normalize, kernel
        )
        return context.view(*batch, n, value.shape[-1]).to(value.dtype)


def _triton_attention(query, key, value, key_padding_mask, normalize, direction_bias, scale):
    """`geometric_attention` through the Triton kernels, which read `(B, H, N, D)` tensors through their strides:
    heads split off by a view and a transpose, a padding mask broadcast over heads and a bfloat16 direction bias go in
    as they lie. Other leading shapes are viewed as `(M, 1, N, D)`. bfloat16 inputs are computed as they are (in
    float32 inside the kernels), float16 or mixed dtypes in `geometric_attention`'s compute precision (float64 for
    float64 values, else float32). Under autocast to bfloat16 query, key and value enter in bfloat16 (float64 ones
    stay float64), as autocast gives matrix products and SDPA theirs: a layer's query made float32 by a float32
    parameter added to it (the NDR's query bias) would otherwise take every input to float32 and the products off the
    tensor cores."""
    device = value.device.type
    autocast = torch.is_autocast_enabled(device) and torch.get_autocast_dtype(device) == torch.bfloat16
    if autocast and torch.float64 not in (query.dtype, key.dtype, value.dtype):  # autocast leaves float64 alone
        query, key, value = (x.to(torch.bfloat16) for x in (query, key, value))
    *batch, n, _ = query.shape
    kept = query.dtype == key.dtype == value.dtype and value.dtype in TRITON_DTYPES
    dtype = value.dtype if kept else torch.float64 if value.dtype == torch.float64 else torch.float32

    def four_d(x, *tail):
        return x if x.dim() == 3 + len(tail) else x.reshape(-1, 1, n, *tail)

    real = four_d(key_padding_mask.expand(*batch, n)) if key_padding_mask is not None else None
    bias = four_d(direction_bias, 2) if direction_bias is not None else None
    inputs = [four_d(x.to(dtype), x.shape[-1]) for x in (query, key, value)]
    with torch.autocast(device, enabled=False):
        context = TritonGeometricAttention.apply(*inputs, scale, bias, real, normalize)
    return context.reshape(*batch, n, value.shape[-1]).to(value.dtype)


def geometric_logits(
    query: torch.Tensor, key: torch.Tensor, direction_bias: torch.Tensor | None = None, scale: float = 1.0
) -> torch.Tensor:
    """The `(..., N, N)` logits that `geometric_attention` never materialises (for the PyTorch path and for
    `output_attentions`): scale * q_i . k_j plus `direction_bias[..., i, 0]` at j >= i, `[..., i, 1]` at j < i."""
    logits = (query * scale) @ key.transpose(-1, -2)
    if direction_bias is not None:
        at_or_right = _at_or_right(logits.shape[-1], logits.device)
        logits = logits + torch.where(at_or_right, direction_bias[..., :1], direction_bias[..., 1:])
    return logits


class FusedGeometricAttention(torch.autograd.Function):
    """A @ value on flattened `(M, N, D)` inputs through the C++ kernel. When a gradient is needed, forward keeps A
    (one `(M, N, N)` tensor, as much as the scores) so that backward only recomputes the logits' sigmoids."""

    @staticmethod
    def forward(ctx, query, key, value, scale, bias, real, normalize, kernel):
        bias_ = bias if bias is not None else value.new_empty(0)
        real_ = real if real is not None else torch.empty(0, dtype=torch.bool)
        keep = any(ctx.needs_input_grad[:3]) or ctx.needs_input_grad[4]
        context, totals, weights = kernel.forward(query, key, value, scale, bias_, real_, normalize, keep)
        ctx.save_for_backward(query, key, value, bias_, real_, totals, weights)
        ctx.scale, ctx.normalize, ctx.kernel, ctx.has_bias = scale, normalize, kernel, bias is not None
        return context

    @staticmethod
    def backward(ctx, grad_context):
        query, key, value, bias, real, totals, weights = ctx.saved_tensors
        with torch.autocast("cpu", enabled=False):  # a backward called under autocast: the kernel's bmm stays fp32
            grad_query, grad_key, grad_value, grad_bias = ctx.kernel.backward(
                grad_context.contiguous(), query, key, value, ctx.scale, bias, real, totals, weights, ctx.normalize
            )
        return grad_query, grad_key, grad_value, None, (grad_bias if ctx.has_bias else None), None, None, None


def _check_mask(key_padding_mask, n):
    if key_padding_mask is not None:
        if key_padding_mask.dtype != torch.bool:
            raise ValueError(f"key_padding_mask must be bool (True at real tokens), got {key_padding_mask.dtype}")
        if key_padding_mask.shape[-1] != n:
            raise ValueError(f"key_padding_mask has {key_padding_mask.shape[-1]} positions, the sequence has {n}")


@functools.lru_cache(maxsize=64)
def _eye(n: int, device: torch.device) -> torch.Tensor:
    return torch.eye(n, dtype=torch.bool, device=device)


@functools.lru_cache(maxsize=64)
def _at_or_right(n: int, device: torch.device) -> torch.Tensor:
    """(N, N) bool, True at the sources j >= i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu()


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
    _check_mask(key_padding_mask, n)
    # sources left out of every product and given no weight: the target itself, and padding
    excluded = _eye(n, logits.device)
    if key_padding_mask is not None:
        excluded = excluded | ~key_padding_mask[..., None, :]
    scores = logits if logits.dtype == torch.float64 else logits.float()
    weights = GeometricAttentionFunction.apply(scores, excluded, normalize)
    return weights.to(logits.dtype)


@functools.lru_cache(maxsize=64)
def _mirror_index(n: int, device: torch.device) -> torch.Tensor:
    """m[i, c] = 2i + 1 - c: for target i, the column mirrored across i (shifted by one)."""
    i = torch.arange(n, device=device)[:, None]
    c = torch.arange(n + 1, device=device)[None, :]
    return 2 * i + 1 - c


@functools.lru_cache(maxsize=64)
def _right(n: int, device: torch.device) -> torch.Tensor:
    """(N, N) bool, True at the sources j > i."""
    return torch.ones(n, n, dtype=torch.bool, device=device).triu(1)


class GeometricAttentionFunction(torch.autograd.Function):
    """Eq. 5.7-5.8 with a hand-written backward pass.

    Forward, per row i: prefix[c] = sum_{k < c} log(1 - P[i, k]) (one cumsum), and S(i, j) is a column range of row
    i (the excluded target i adds 0), with the mirror column m = 2i - j + 1 clipped to [0, N] (it only leaves that
    range where the sequence ends first):
        source to the right, j > i:  |k - i| < j - i          ->  [m, j)      = prefix[j] - prefix[m]
        source to the left,  j < i:  |k - i| <= i - j, k != j  ->  [j + 1, m)  = prefix[m] - prefix[j + 1]
    Backward runs the same steps in reverse: the gather at the mirror columns is its own transpose up to the
    clipping (j = 2i + 1 - m), and the cumsum's transpose is a reversed cumsum. Compared with autograd through the
    forward, this skips the zero-filled buffers and the scatter, which dominate the time on CPU.
    """

    @staticmethod
    def forward(ctx, scores, excluded, normalize):
        n = scores.shape[-1]
        mirror = _mirror_index(n, scores.device)[:, :n].clamp(0, n).expand(*scores.shape[:-2], n, n)
        right = _right(n, scores.device)

        log_p = F.logsigmoid(scores)
        log_not_p = (log_p - scores).masked_fill_(excluded, 0.0)  # log(1 - sigmoid(x)) = log sigmoid(x) - x
        prefix = F.pad(log_not_p.cumsum(-1), (1, 0))
        at_mirror = prefix.gather(-1, mirror)
        closer = torch.where(right, prefix[..., :n] - at_mirror, at_mirror.sub_(prefix[..., 1:]))
        weights = closer.add_(log_p).exp_().masked_fill_(excluded, 0.0)
        total = None
        if normalize:
            total = weights.sum(-1, keepdim=True)
            weights = weights / total.clamp_min(_EPS)
        ctx.save_for_backward(scores, excluded, weights, total)
        ctx.normalize = normalize
        return weights

    @staticmethod
    def backward(ctx, grad_weights):
        scores, excluded, weights, total = ctx.saved_tensors
        n = scores.shape[-1]
        if ctx.normalize:
            row = (grad_weights * weights).sum(-1, keepdim=True).masked_fill_(total <= _EPS, 0.0)
            grad_weights = (grad_weights - row) / total.clamp_min(_EPS)
            weights = weights * total.clamp_min(_EPS)  # back to the unnormalised A
        grad_exponent = grad_weights * weights  # d exp(z) = exp(z) dz; zero where excluded
        right = _right(n, scores.device)
        grad_right = grad_exponent.masked_fill(~right, 0.0)  # j > i
        grad_left = grad_exponent - grad_right  # j < i (the diagonal is excluded)

        # gradient of prefix[c], c = 0..N: direct terms, then the mirror terms gathered back through j = 2i + 1 - c
        grad_prefix = F.pad(grad_right, (0, 1)) - F.pad(grad_left, (1, 0))
        mirrored = grad_left - grad_right
        source = _mirror_index(n, scores.device)  # (N, N + 1)
        inside = (source >= 0) & (source < n)
        taken = mirrored.gather(-1, source.clamp(0, n - 1).expand(*scores.shape[:-2], n, n + 1))
        grad_prefix += taken.masked_fill_(~inside, 0.0)
        # columns whose mirror was clipped to N (left sources whose mirror lies past the end) all read prefix[N]
        beyond = source[:, :n] >= n  # 2i + 1 - j >= N
        grad_prefix[..., n] += mirrored.masked_fill(~beyond, 0.0).sum(-1) - taken[..., n]
        # prefix[c] = sum_{k < c} log_not_p[k]  ->  grad log_not_p[k] = sum_{c > k} grad_prefix[c]
        grad_log_not_p = grad_prefix[..., 1:].flip(-1).cumsum(-1).flip(-1).masked_fill_(excluded, 0.0)
        # log_not_p = log_p - x and log_p = logsigmoid(x), with d logsigmoid(x) / dx = sigmoid(-x)
        grad_scores = (grad_exponent + grad_log_not_p).mul_(torch.sigmoid(-scores)).sub_(grad_log_not_p)
        return grad_scores, None, None


_EPS = 1e-12  # F.normalize's floor on the L1 norm
