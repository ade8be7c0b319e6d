"""Geometric attention on CUDA: one Triton program per row of Eq. 5.7-5.8, the products on cuBLAS.

Forward: logits = scale * q k^T (cuBLAS), then per row one program makes the direction bias, log-sigmoids, the prefix
sum (`tl.cumsum`), the mirror-column differences (a gather from the row's own scratch in global memory) and the
weights; context = weights @ v. Backward recomputes a row's weights from its logits and runs the same steps in
reverse (a reversed `tl.cumsum`). It keeps the logits and the weights, two (..., N, N) tensors, and one more for their
gradient in backward, where the CPU kernel keeps none.

Its correctness is tested on the CPU with Triton's interpreter (`TRITON_INTERPRET=1`, tests/test_ndr_geometric_attention.py)
against the PyTorch path, and compiled on a CUDA GPU by tests/triton_interpreter_checks.py; its speed is in docs/results/speed.md.
Used by `geometric_attention` for CUDA tensors when Triton is installed.
"""

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: geometric_attention uses the C++ kernel or the PyTorch path
    triton = None


def available() -> bool:
    return triton is not None


if triton is not None:  # (TRITON_INTERPRET=1, for tests on a CPU, must be set before this module is imported)

    @triton.jit
    def row_weights(L, BIAS, REAL, scratch, row, n, HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr,
                    BLOCK: tl.constexpr):
        """Row i of Eq. 5.7-5.8: (A[i, :] unnormalised, log P[i, :], the mask of real sources). `scratch` (N
        entries of global memory) holds the row's prefix sums for the gather at the mirror columns."""
        b = row // n
        i = row % n
        j = tl.arange(0, BLOCK)
        inside = j < n
        x = tl.load(L + row * n + j, mask=inside, other=0.0)
        if HAS_BIAS:
            x = x + tl.where(j >= i, tl.load(BIAS + row * 2), tl.load(BIAS + row * 2 + 1))
        real = inside & (j != i)
        if HAS_MASK:
            real = real & (tl.load(REAL + b * n + j, mask=inside, other=0) != 0)
        softplus = tl.log(1.0 + tl.exp(-tl.abs(x)))
        log_p = tl.minimum(x, 0.0) - softplus
        log_not_p = tl.where(real, tl.minimum(-x, 0.0) - softplus, 0.0)
        inclusive = tl.cumsum(log_not_p, 0)  # prefix[j + 1]
        exclusive = inclusive - log_not_p  # prefix[j]
        tl.debug_barrier()
        tl.store(scratch + j, inclusive, mask=inside)
        tl.debug_barrier()
        mirror = tl.minimum(tl.maximum(2 * i + 1 - j, 0), n)
        at_mirror = tl.load(scratch + mirror - 1, mask=inside & (mirror > 0), other=0.0)  # prefix[mirror]
        closer = tl.where(j > i, exclusive - at_mirror, at_mirror - inclusive)
        w = tl.where(real, tl.exp(closer + log_p), 0.0)
        tl.debug_barrier()
        return w, log_p, real

    @triton.jit
    def forward_rows(L, W, BIAS, REAL, TOTALS, n, HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr,
                     NORMALIZE: tl.constexpr, BLOCK: tl.constexpr):
        row = tl.program_id(0)  # b * n + i
        j = tl.arange(0, BLOCK)
        out = W + row * n  # the output row is also the scratch
        w, _, _ = row_weights(L, BIAS, REAL, out, row, n, HAS_BIAS, HAS_MASK, BLOCK)
        total = tl.sum(w, 0)
        tl.store(TOTALS + row, total)
        if NORMALIZE:
            w = w / tl.maximum(total, 1e-12)
        tl.store(out + j, w, mask=j < n)

    @triton.jit
    def backward_rows(L, G, BIAS, REAL, TOTALS, GRAD_BIAS, n, HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr,
                      NORMALIZE: tl.constexpr, BLOCK: tl.constexpr):
        """G: the gradient of the returned weights on entry, the logits' gradient on exit (also the row's scratch)."""
        row = tl.program_id(0)
        i = row % n
        j = tl.arange(0, BLOCK)
        inside = j < n
        grad_row = G + row * n
        grad = tl.load(grad_row + j, mask=inside, other=0.0)
        w, log_p, real = row_weights(L, BIAS, REAL, grad_row, row, n, HAS_BIAS, HAS_MASK, BLOCK)
        if NORMALIZE:  # A_hat = A / T: dL/dA = (dL/dA_hat - sum_k dL/dA_hat_k A_hat_k) / T
            total = tl.load(TOTALS + row)
            t = tl.maximum(total, 1e-12)
            dot = tl.sum(grad * w, 0) / t
            dot = tl.where(total <= 1e-12, 0.0, dot)
            grad = (grad - dot) / t
        gz = grad * w  # gradient of z = log A
        tl.store(grad_row + j, gz, mask=inside)
        tl.debug_barrier()
        # gradient of prefix[c] at lane k = c - 1 (see the C++ kernel): direct term and mirror term m = 2i + 1 - c
        c = j + 1
        next_gz = tl.load(grad_row + c, mask=c < n, other=0.0)  # gz[c]
        m = 2 * i + 1 - c
        at_m = tl.load(grad_row + m, mask=inside & (m >= 0) & (m < n), other=0.0)
        grad_prefix = tl.where(c <= i, -gz - at_m, next_gz + at_m)
        beyond = tl.sum(tl.where((j <= 2 * i + 1 - n) & (j < i), gz, 0.0), 0)  # left sources reading prefix[N]
        grad_prefix = tl.where(c == n, beyond, grad_prefix)
        grad_prefix = tl.where(inside, grad_prefix, 0.0)
        grad_log_not_p = tl.where(real, tl.cumsum(grad_prefix, 0, reverse=True), 0.0)
        p = tl.exp(log_p)
        grad_x = gz * (1.0 - p) - grad_log_not_p * p
        tl.debug_barrier()
        tl.store(grad_row + j, grad_x, mask=inside)
        if HAS_BIAS:
            tl.store(GRAD_BIAS + row * 2, tl.sum(tl.where(inside & (j >= i), grad_x, 0.0), 0))
            tl.store(GRAD_BIAS + row * 2 + 1, tl.sum(tl.where(j < i, grad_x, 0.0), 0))



class TritonGeometricAttention(torch.autograd.Function):
    """A @ value on flattened `(M, N, D)` float32 inputs (bias `(M, N, 2)` or None, real `(M, N)` bool or None)."""

    @staticmethod
    def forward(ctx, query, key, value, scale, bias, real, normalize):
        m, n, _ = query.shape
        logits = torch.matmul(query, key.transpose(-1, -2)).mul_(scale)
        weights = torch.empty_like(logits)
        totals = logits.new_empty(m, n)
        block = triton.next_power_of_2(n)
        forward_rows[(m * n,)](
            logits, weights, bias if bias is not None else logits, real if real is not None else logits, totals, n,
            HAS_BIAS=bias is not None, HAS_MASK=real is not None, NORMALIZE=normalize, BLOCK=block,
        )
        ctx.save_for_backward(query, key, value, logits, weights, totals, bias, real)
        ctx.scale, ctx.normalize = scale, normalize
        return weights @ value

    @staticmethod
    def backward(ctx, grad_context):
        query, key, value, logits, weights, totals, bias, real = ctx.saved_tensors
        m, n, _ = query.shape
        grad_context = grad_context.contiguous()
        grad_value = weights.transpose(-1, -2) @ grad_context
        grad = grad_context @ value.transpose(-1, -2)  # of the weights; the logits' gradient after the kernel
        grad_bias = torch.empty_like(bias) if bias is not None else None
        backward_rows[(m * n,)](
            logits, grad, bias if bias is not None else logits, real if real is not None else logits, totals,
            grad_bias if grad_bias is not None else logits, n,
            HAS_BIAS=bias is not None, HAS_MASK=real is not None, NORMALIZE=ctx.normalize,
            BLOCK=triton.next_power_of_2(n),
        )
        grad_query = (grad @ key).mul_(ctx.scale)
        grad_key = (grad.transpose(-1, -2) @ query).mul_(ctx.scale)
        return grad_query, grad_key, grad_value, None, grad_bias, None, None
