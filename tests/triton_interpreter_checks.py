"""The Triton kernel of geometric attention run by Triton's interpreter on the CPU (TRITON_INTERPRET=1 must be set
before triton is imported, hence a script of its own, run by test_ndr_geometric_attention.py in a subprocess), or
compiled on a CUDA GPU when run there without TRITON_INTERPRET (`python tests/triton_interpreter_checks.py`).

Checks forward values against Eq. 5.7-5.8 written out with loops, and every gradient against autograd through the
PyTorch path in float64, with padding, direction bias, normalised and not."""

import os
import sys

import torch  # noqa: E402

DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
assert DEVICE == "cpu" or torch.cuda.is_available(), "run with TRITON_INTERPRET=1 where there is no CUDA GPU"

# run as a script, Python reads its own folder first: the reference of the test file beside it
from test_ndr_geometric_attention import direct_geometric_attention_output  # noqa: E402

from lengthgen.modeling.ndr.geometric_attention import geometric_attention  # noqa: E402
from lengthgen.modeling.ndr.geometric_attention_triton import TritonGeometricAttention  # noqa: E402

geometric_module = sys.modules["lengthgen.modeling.ndr.geometric_attention"]
geometric_module.load_cpu_kernel = geometric_module.triton_available = lambda: None  # the reference: the PyTorch path


def triton_attention(query, key, value, mask, normalize, bias, scale):
    *batch, n, _ = query.shape
    flat = lambda x: x.reshape(-1, *x.shape[-2:]).contiguous()  # noqa: E731
    real = mask.expand(*batch, n).reshape(-1, n).contiguous() if mask is not None else None
    out = TritonGeometricAttention.apply(
        flat(query), flat(key), flat(value), scale, flat(bias) if bias is not None else None, real, normalize
    )
    return out.view(*batch, n, value.shape[-1])


g = torch.Generator().manual_seed(0)
cases = [(7, True, True), (6, False, False), (1, True, False)] + ([(130, True, True)] if DEVICE == "cuda" else [])
for n, normalize, padded in cases:
    query, key = (torch.randn(1, 2, n, 4, generator=g, dtype=torch.float64) * 1.5 for _ in range(2))
    value = torch.randn(1, 2, n, 3, generator=g, dtype=torch.float64)
    bias = torch.randn(1, 2, n, 2, generator=g, dtype=torch.float64)
    mask = (torch.arange(n) < max(1, n - 3))[None, None, :] if padded else None
    expected = direct_geometric_attention_output(query, key, value, mask, normalize, bias, scale=0.8)
    weights = torch.randn(1, 2, n, 3, generator=g, dtype=torch.float64)
    query, key, value, bias, weights, expected = (t.to(DEVICE) for t in (query, key, value, bias, weights, expected))
    mask = mask.to(DEVICE) if mask is not None else None
    grads = []
    for fn in (triton_attention, geometric_attention):
        inputs = [t.clone().requires_grad_() for t in (query, key, value, bias)]
        out = fn(*inputs[:3], mask, normalize, inputs[3], 0.8)
        (out * weights).sum().backward()
        grads.append([t.grad for t in inputs])
        error = (out.detach() - expected).abs().max().item()
        assert error <= 1e-10, (fn.__name__, n, error)
    for name, a, b in zip(("query", "key", "value", "direction_bias"), *grads):
        assert (a - b).abs().max().item() <= 1e-10, (name, n, (a - b).abs().max().item())
print(f"triton kernel ({DEVICE}): values and gradients agree")
