"""The Triton kernels of geometric attention run by Triton's interpreter on the CPU (TRITON_INTERPRET=1 must be set
before triton is imported, hence a script of its own, run by test_ndr_geometric_attention.py in a subprocess), or
compiled on a CUDA GPU when run there without TRITON_INTERPRET (`python tests/triton_interpreter_checks.py`).

Checks values and the gradients of query, key, value and the direction bias against the PyTorch path in float64
(autograd through `geometric_attention_weights`), and the values against Eq. 5.7-5.8 written out with loops at the
smallest lengths: lengths of one position, of less than, exactly and several times the kernels' block of rows and
distances (with a short last block), with and without padding (a suffix, holes, a matrix all padding), normalised
and not, with and without direction bias, several heads, float64 (to rounding), float32 and bfloat16 inputs (as close
as their precision allows). The interpreter runs blocks of 16; compiled, blocks of 32 or 64 run too, and longer
sequences, and `geometric_attention` itself (which picks the kernel on CUDA)."""

import os
import sys
import time

import torch

DEVICE = "cpu" if os.environ.get("TRITON_INTERPRET") == "1" else "cuda"
assert DEVICE == "cpu" or torch.cuda.is_available(), "run with TRITON_INTERPRET=1 where there is no CUDA GPU"

# run as a script, Python reads its own folder first: the reference of the test file beside it
from test_ndr_geometric_attention import direct_geometric_attention_output  # noqa: E402

from lengthgen.modeling.ndr.geometric_attention import geometric_attention  # noqa: E402
from lengthgen.modeling.ndr.geometric_attention_triton import TritonGeometricAttention  # noqa: E402

geometric_module = sys.modules["lengthgen.modeling.ndr.geometric_attention"]
uses_triton = geometric_module.triton_available
geometric_module.load_cpu_kernel = geometric_module.triton_available = lambda: None  # the reference: the PyTorch path


def triton_attention(query, key, value, mask, normalize, bias, scale, block=None):
    """The kernel on `(..., N, D)` inputs flattened as `geometric_attention` flattens them: the output in the inputs'
    dtype, and the one in the compute precision that backward keeps (the same tensor unless the inputs are
    bfloat16)."""
    *batch, n, _ = query.shape
    flat = lambda x: x.reshape(-1, *x.shape[-2:]).contiguous()  # noqa: E731
    real = mask.expand(*batch, n).reshape(-1, n).contiguous() if mask is not None else None
    out = TritonGeometricAttention.apply(
        flat(query), flat(key), flat(value), scale, flat(bias) if bias is not None else None, real, normalize, block
    )
    accumulator = out.grad_fn.saved_tensors[5]
    return out.view(*batch, n, value.shape[-1]), accumulator.view(*batch, n, value.shape[-1])


def padding(kind, shape, n, g):
    if kind is None:
        return None
    if kind == "suffix":  # a length per batch row, the last one 0: a matrix with no source at all
        lengths = torch.tensor([n, max(1, n - 5), 0][: shape[0]])
        return (torch.arange(n)[None, :] < lengths[:, None])[:, None, :]
    return torch.rand(shape[0], 1, n, generator=g) > 0.3  # holes anywhere


def check(n, normalize, mask_kind, with_bias, dtype, block, batch=(2, 2), loops=False):
    g = torch.Generator().manual_seed(n)
    d_k, d_v = 5, 3
    query, key = (torch.randn(*batch, n, d_k, generator=g, dtype=torch.float64) * 1.5 for _ in range(2))
    value = torch.randn(*batch, n, d_v, generator=g, dtype=torch.float64)
    bias = torch.randn(*batch, n, 2, generator=g, dtype=torch.float64) if with_bias else None
    mask = padding(mask_kind, batch, n, g)
    weights = torch.randn(*batch, n, d_v, generator=g, dtype=torch.float64)
    query, key, value = (t.to(dtype).to(torch.float64) for t in (query, key, value))  # the inputs as `dtype` holds them
    tensors = [t.to(DEVICE) if t is not None else None for t in (query, key, value, bias, weights)]
    mask = mask.to(DEVICE) if mask is not None else None
    results = []
    for run in ("triton", "reference"):
        inputs = [t.clone().to(dtype if run == "triton" and i < 3 else torch.float64).requires_grad_()
                  if t is not None else None for i, t in enumerate(tensors[:4])]
        if run == "triton":
            out, accumulator = triton_attention(*inputs[:3], mask, normalize, inputs[3], 0.8, block)
        else:
            out = accumulator = geometric_attention(*inputs[:3], mask, normalize, inputs[3], 0.8)
        (out.to(dtype).double() * tensors[4]).sum().backward()
        results.append([accumulator.detach().double(), out.detach().double()]
                       + [t.grad.double() for t in inputs if t is not None])
    if loops:
        expected = direct_geometric_attention_output(query, key, value, mask, normalize, bias, scale=0.8)
        error = (results[1][0].cpu() - expected).abs().max().item()
        assert error <= 1e-10, ("PyTorch path against the loops", n, error)
    tolerance = {torch.float64: 1e-10, torch.float32: 2e-5, torch.bfloat16: 1e-2}[dtype]
    names = ["accumulator", "output", "query", "key", "value"] + (["direction_bias"] if with_bias else [])
    for name, got, exact in zip(names, *results):
        assert got.dtype == exact.dtype and got.shape == exact.shape
        error = ((got - exact).abs().max() / exact.abs().max().clamp_min(1e-30)).item()
        bound = tolerance
        if name == "accumulator" and dtype == torch.bfloat16:  # a bfloat16 input's output before its rounding
            bound = 1e-4
        if name == "direction_bias" and dtype == torch.float32:
            # the sum of a row's logit gradients over all N distances, which cancel: float32's rounding grows with N
            # (compiled, at N = 130: 3.1e-5)
            bound = tolerance * max(1, n / 32)
        assert error <= bound, (name, n, normalize, mask_kind, with_bias, dtype, block, error)


def check_errors():
    q = torch.zeros(1, 4, 8, device=DEVICE)
    for args, match in [((q, q, q.double()), "share one dtype"), ((q.half(), q.half(), q.half()), "share one dtype")]:
        try:
            TritonGeometricAttention.apply(*args, 1.0, None, None, False)
        except ValueError as error:
            assert match in str(error), error
        else:
            raise AssertionError(f"no error for {match}")
    try:
        TritonGeometricAttention.apply(q, q, q, 1.0, None, None, False, 24)
    except ValueError as error:
        assert "power of two" in str(error)
    else:
        raise AssertionError("no error for block 24")


def check_inference_then_training():
    """A first call under inference mode (evaluation) leaves nothing that a later training call with the same scale
    could not save for backward."""
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 20, 8, generator=g).to(DEVICE) for _ in range(3))
    with torch.inference_mode():
        TritonGeometricAttention.apply(q, k, v, 0.3125, None, None, True)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    TritonGeometricAttention.apply(*inputs, 0.3125, None, None, True).sum().backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in inputs)


def check_geometric_attention_on_cuda():
    """geometric_attention itself takes the kernel on CUDA (with the default block)."""
    geometric_module.triton_available = uses_triton
    g = torch.Generator().manual_seed(5)
    tensors = [torch.randn(2, 4, 300, 32, generator=g).to(DEVICE) for _ in range(3)]
    for dtype in (torch.float32, torch.bfloat16):
        inputs = [t.to(dtype).requires_grad_() for t in tensors]
        out = geometric_attention(*inputs, None, True)
        assert out.dtype == dtype
        out.float().sum().backward()
        reference = [t.detach().double().requires_grad_() for t in inputs]
        geometric_module.triton_available = lambda: None
        exact = geometric_attention(*reference, None, True)
        exact.sum().backward()
        geometric_module.triton_available = uses_triton
        for got, want in zip([out] + [t.grad for t in inputs], [exact] + [t.grad for t in reference]):
            error = ((got.double() - want).abs().max() / want.abs().max()).item()
            assert error <= (2e-5 if dtype == torch.float32 else 1e-2), (dtype, error)


start = time.perf_counter()
check_errors()
check_inference_then_training()
cases = [  # n, normalize, padding, direction bias, dtype, block, (batch, heads), loops
    (1, True, None, True, torch.float64, 16, (2, 2), True),
    (7, True, "suffix", True, torch.float64, 16, (3, 2), True),
    (16, False, "holes", False, torch.float64, 16, (2, 2), False),
    (33, True, "suffix", True, torch.float64, 16, (3, 1), False),
    (70, False, "holes", True, torch.float64, 16, (1, 2), False),
    (45, True, "holes", True, torch.float32, 16, (2, 1), False),
    (38, False, "suffix", True, torch.bfloat16, 16, (2, 1), False),
    (29, True, None, False, torch.bfloat16, 16, (1, 2), False),
]
phases = [("interpreter-sized cases", cases)]
if DEVICE == "cuda":  # compiled: lengths the interpreter is too slow for, at the default block, then at a larger one
    longer = [(n, normalize, mask, True, dtype, None, (2, 3), False)
              for n in (130, 1000) for normalize, mask in ((True, "suffix"), (False, "holes"))
              for dtype in (torch.float64, torch.float32, torch.bfloat16)]
    larger = [(*case[:5], 32 if case[4] == torch.float64 else 64, *case[6:])  # float64 at 64: past shared memory
              for case in longer]
    phases += [("N = 130 and 1,000 at the default block", longer), ("geometric_attention", None),
               ("N = 130 and 1,000 at blocks of 32 (float64) and 64", larger)]
checked = 0
for phase, phase_cases in phases:  # each phase named as it passes: a run stopped at a time limit shows how far it got
    if phase_cases is None:
        check_geometric_attention_on_cuda()
    else:
        for case in phase_cases:
            check(*case)
        checked += len(phase_cases)
    print(f"{phase}: agree ({time.perf_counter() - start:.0f} s)", flush=True)
print(f"triton kernel ({DEVICE}): values and gradients agree ({checked} cases, {time.perf_counter() - start:.0f} s)")
