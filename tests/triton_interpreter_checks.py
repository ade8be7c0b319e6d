"""The Triton kernels of geometric attention run by Triton's interpreter on the CPU (TRITON_INTERPRET=1 must be set
before triton is imported, hence a script of its own, run by test_ndr_geometric_attention.py in a subprocess), or
compiled on a CUDA GPU when run there without TRITON_INTERPRET (`python tests/triton_interpreter_checks.py`).

Checks values and the gradients of query, key, value and the direction bias against the PyTorch path in float64
(autograd through `geometric_attention_weights`), and the values against Eq. 5.7-5.8 written out with loops at the
smallest lengths: lengths of one position, of less than, exactly and several times the kernels' block of rows and
distances (with a short last block), with and without padding (a suffix, holes, a matrix all padding), normalised
and not, with and without direction bias, several heads, float64 (to rounding), float32 and bfloat16 inputs (as close
as their precision allows); tensors laid out as the NDR's heads and in other orders, read without copies, each
gradient laid out as its input; other leading shapes; and the NDR model itself through the kernels. The interpreter
runs blocks of 16; compiled, blocks of 32 or 64 run too, and longer sequences, and `geometric_attention` itself (which
picks the kernel on CUDA)."""

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
    """The kernel on `(B, H, N, D)` inputs as `geometric_attention` passes them (a mask broadcast over heads): the
    output in the inputs' dtype, and the one in the compute precision that backward keeps (the same tensor unless the
    inputs are bfloat16)."""
    real = mask.expand(*query.shape[:3]) if mask is not None else None
    out = TritonGeometricAttention.apply(query, key, value, scale, bias, real, normalize, block)
    return out, out.grad_fn.saved_tensors[5]


def heads_split(x):
    """`x` of shape (B, H, N, D) as the NDR's attention makes it: a (B, N, H, D) tensor seen through a transpose."""
    return x.transpose(1, 2).contiguous().transpose(1, 2)


def padding(kind, shape, n, g):
    if kind is None:
        return None
    if kind == "suffix":  # a length per batch row, the last one 0: a matrix with no source at all
        lengths = torch.tensor([n, max(1, n - 5), 0][: shape[0]])
        return (torch.arange(n)[None, :] < lengths[:, None])[:, None, :]
    return torch.rand(shape[0], 1, n, generator=g) > 0.3  # holes anywhere


def check(n, normalize, mask_kind, with_bias, dtype, block, batch=(2, 2), loops=False, split=False):
    """`split`: query, key, value and bias laid out as the model's heads are (`heads_split`), the bias in the inputs'
    dtype; the kernels read them without a copy and give each gradient its input's strides."""
    g = torch.Generator().manual_seed(n)
    d_k, d_v = 5, 3
    query, key = (torch.randn(*batch, n, d_k, generator=g, dtype=torch.float64) * 1.5 for _ in range(2))
    value = torch.randn(*batch, n, d_v, generator=g, dtype=torch.float64)
    bias = torch.randn(*batch, n, 2, generator=g, dtype=torch.float64) if with_bias else None
    mask = padding(mask_kind, batch, n, g)
    weights = torch.randn(*batch, n, d_v, generator=g, dtype=torch.float64)
    query, key, value = (t.to(dtype).to(torch.float64) for t in (query, key, value))  # the inputs as `dtype` holds them
    if with_bias and split:
        bias = bias.to(dtype).to(torch.float64)
    tensors = [t.to(DEVICE) if t is not None else None for t in (query, key, value, bias, weights)]
    mask = mask.to(DEVICE) if mask is not None else None
    results = []
    for run in ("triton", "reference"):
        inputs = [t.clone().to(dtype if run == "triton" and (i < 3 or split) else torch.float64)
                  if t is not None else None for i, t in enumerate(tensors[:4])]
        if run == "triton" and split:
            inputs = [heads_split(t) if t is not None else None for t in inputs]
        inputs = [t.requires_grad_() if t is not None else None for t in inputs]
        if run == "triton":
            out, accumulator = triton_attention(*inputs[:3], mask, normalize, inputs[3], 0.8, block)
            kept, laid_out, out_strides = out.grad_fn.saved_tensors, inputs, out.stride()
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
    if split:  # read where they lie (no copy kept for backward); output laid out as value, gradients as their inputs
        given = [t for t in laid_out if t is not None]
        assert all(t.data_ptr() == saved.data_ptr() for t, saved in zip(given, kept)), "an input was copied"
        assert out_strides == laid_out[2].stride(), "output layout"
        assert all(t.grad.stride() == t.stride() and t.grad.dtype == t.dtype for t in given), "gradient layout"
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
    q = torch.zeros(1, 1, 4, 8, device=DEVICE)
    for args, match in [((q, q, q.double()), "share one dtype"), ((q.half(), q.half(), q.half()), "share one dtype"),
                        ((q[0], q[0], q[0]), "must be (B, H, N, D_k)")]:
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
    q, k, v = (torch.randn(1, 1, 20, 8, generator=g).to(DEVICE) for _ in range(3))
    with torch.inference_mode():
        TritonGeometricAttention.apply(q, k, v, 0.3125, None, None, True)
    inputs = [t.clone().requires_grad_() for t in (q, k, v)]
    TritonGeometricAttention.apply(*inputs, 0.3125, None, None, True).sum().backward()
    assert all(t.grad is not None and t.grad.abs().sum() > 0 for t in inputs)


def check_leading_shapes():
    """`geometric_attention`'s Triton path on inputs of other leading shapes than (B, H, N, D), viewed as (M, 1, N, D):
    one matrix (N, D), a batch (M, N, D) and (A, B, C, N, D), a mask broadcast over some of them, float32 direction
    bias on float64 inputs; values and gradients as the PyTorch path's."""
    g = torch.Generator().manual_seed(11)
    n = 9
    for batch, mask_shape in [((), (n,)), ((3,), (3, n)), ((2, 1, 2), (2, 1, 1, n))]:
        tensors = [torch.randn(*batch, n, d, generator=g, dtype=torch.float64).to(DEVICE) for d in (4, 4, 3, 2)]
        tensors[3] = tensors[3].float()
        mask = (torch.rand(mask_shape, generator=g) > 0.3).to(DEVICE)
        results = []
        for run in (geometric_module._triton_attention, None):
            inputs = [t.clone().requires_grad_() for t in tensors]
            if run is None:
                out = geometric_attention(*inputs[:3], mask, True, inputs[3].double(), 0.7)
            else:
                out = run(*inputs[:3], mask, True, inputs[3], 0.7)
            (out * torch.arange(3, device=DEVICE)).sum().backward()
            results.append([out] + [t.grad for t in inputs])
        for got, exact in zip(*results):
            assert got.shape == exact.shape and got.dtype == exact.dtype, (batch, got.shape, exact.shape)
            assert (got - exact).abs().max() <= 1e-6 * exact.abs().max(), (batch, (got - exact).abs().max())


def check_other_layouts():
    """Each tensor laid out its own way: queries split off as the model's heads, keys with heads before batch,
    values contiguous, a float32 bias on float64 inputs with batch innermost of its leading dimensions, a mask of
    its own per head read every other element of a wider one (last stride 2) and a gradient of the output seen
    through a transpose; values and gradients as the PyTorch path's, each gradient laid out as its input."""
    g = torch.Generator().manual_seed(21)
    batch, heads, n, d = 2, 3, 21, 4
    tensors = [torch.randn(batch, heads, n, d, generator=g, dtype=torch.float64).to(DEVICE) for _ in range(3)]
    tensors.append(torch.randn(batch, heads, n, 2, generator=g).to(DEVICE))
    mask = (torch.rand(batch, heads, 2 * n, generator=g) > 0.3).to(DEVICE)[..., ::2]  # one per head
    weights = torch.randn(batch, n, heads, d, generator=g, dtype=torch.float64).to(DEVICE).transpose(1, 2)
    layouts = [heads_split, lambda x: x.transpose(0, 1).contiguous().transpose(0, 1), lambda x: x,
               lambda x: x.permute(1, 2, 0, 3).contiguous().permute(2, 0, 1, 3)]
    results = []
    for run in ("triton", "reference"):
        inputs = [(layout(t) if run == "triton" else t.double()).requires_grad_()
                  for layout, t in zip(layouts, tensors)]
        if run == "triton":
            out, _ = triton_attention(*inputs[:3], mask, True, inputs[3], 0.6)
        else:
            out = geometric_attention(*inputs[:3], mask, True, inputs[3], 0.6)
        out.backward(weights)
        results.append([out] + [t.grad for t in inputs])
        if run == "triton":
            assert all(t.grad.stride() == t.stride() for t in inputs), "gradient layout"
    for got, exact in zip(*results):
        assert (got.double() - exact).abs().max() <= 1e-6 * exact.abs().max(), (got - exact).abs().max()


def check_ndr_model():
    """The NDR itself through the kernels, as its attention hands them its tensors (heads split off by a view, the
    direction bias as it makes it, a padding mask of shape (B, 1, N)): logits, loss and every parameter's gradient as
    on the PyTorch path, in float32 and under bfloat16 autocast (then the kernels take bfloat16 queries, keys, values
    and bias)."""
    import lengthgen.modeling.ndr.modeling_ndr as modeling_ndr
    from lengthgen.modeling import NDRConfig, NDRForSequenceClassification

    config = NDRConfig(vocab_size=20, hidden_size=32, num_attention_heads=4, intermediate_size=64, num_layers=3,
                       num_labels=5, hidden_dropout_prob=0.0, attention_query_dropout=0.0, attention_key_dropout=0.0,
                       gate_dropout=0.0)
    torch.manual_seed(0)
    model = NDRForSequenceClassification(config).to(DEVICE).train()
    g = torch.Generator().manual_seed(1)
    mask = (torch.arange(23)[None, :] < torch.tensor([23, 17])[:, None]).long()
    input_ids = (torch.randint(1, 20, (2, 23), generator=g) * mask).to(DEVICE)
    labels = torch.tensor([1, 3], device=DEVICE)

    for dtype in (torch.float32, torch.bfloat16):
        results = []
        for attention in (geometric_module._triton_attention, geometric_attention):  # the first: what CUDA runs
            modeling_ndr.geometric_attention = attention
            model.zero_grad()
            with torch.autocast(DEVICE, dtype=dtype, enabled=dtype != torch.float32):
                out = model(input_ids=input_ids, attention_mask=mask.to(DEVICE), labels=labels)
            out.loss.backward()
            results.append([out.logits.float(), out.loss.float()] + [p.grad.clone() for p in model.parameters()])
        modeling_ndr.geometric_attention = geometric_attention
        for got, exact in zip(*results):
            error = ((got - exact).abs().max() / exact.abs().max().clamp_min(1e-12)).item()
            assert error <= (1e-4 if dtype == torch.float32 else 3e-2), (dtype, error)


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
check_leading_shapes()
check_other_layouts()
check_ndr_model()
cases = [  # n, normalize, padding, direction bias, dtype, block, (batch, heads), loops, heads split off as the model's
    (1, True, None, True, torch.float64, 16, (2, 2), True, False),
    (7, True, "suffix", True, torch.float64, 16, (3, 2), True, False),
    (16, False, "holes", False, torch.float64, 16, (2, 2), False, False),
    (33, True, "suffix", True, torch.float64, 16, (3, 1), False, False),
    (70, False, "holes", True, torch.float64, 16, (1, 2), False, False),
    (45, True, "holes", True, torch.float32, 16, (2, 3), False, True),
    (38, False, "suffix", True, torch.bfloat16, 16, (2, 2), False, True),
    (29, True, None, False, torch.bfloat16, 16, (1, 2), False, False),
]
phases = [("interpreter-sized cases", cases)]
if DEVICE == "cuda":  # compiled: lengths the interpreter is too slow for, at the default block, then at a larger one
    longer = [(n, normalize, mask, True, dtype, None, (2, 3), False, dtype == torch.bfloat16)
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
