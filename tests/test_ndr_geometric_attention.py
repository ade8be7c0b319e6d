import itertools

import pytest
import torch

from lengthgen.modeling.ndr import geometric_attention_weights


def direct_geometric_attention(logits, key_padding_mask=None, normalize=False):
    """Eq. 5.7-5.8 written out with explicit loops over targets i, sources j and the closer sources k (float64)."""
    logits = logits.double()
    *batch, n, _ = logits.shape
    p = torch.sigmoid(logits)
    out = torch.zeros_like(p)
    for b in itertools.product(*[range(s) for s in batch]):
        real = key_padding_mask[b].tolist() if key_padding_mask is not None else [True] * n
        for i in range(n):
            for j in range(n):
                if j == i or not real[j]:
                    continue
                value = p[b][i, j]
                for k in range(n):
                    if k in (i, j) or not real[k]:
                        continue
                    closer = abs(i - k) < abs(i - j) if i < j else abs(i - k) <= abs(i - j)
                    if closer:
                        value = value * (1 - p[b][i, k])
                out[b][i, j] = value
            if normalize:
                total = out[b][i].sum()
                out[b][i] = out[b][i] / max(total, 1e-12)
    return out


def test_hand_worked_three_positions():
    # every P = 1/2: the nearest source gets 1/2, the next one 1/2 * (1 - 1/2); ties go to the right
    weights = geometric_attention_weights(torch.zeros(3, 3))
    expected = torch.tensor([[0.0, 0.5, 0.25], [0.25, 0.0, 0.5], [0.25, 0.5, 0.0]])
    torch.testing.assert_close(weights, expected)


@pytest.mark.parametrize("n", [1, 2, 7, 12])
@pytest.mark.parametrize("normalize", [False, True])
def test_matches_direct_equations(n, normalize):
    g = torch.Generator().manual_seed(n)
    logits = torch.rand(2, 3, n, n, generator=g) * 8 - 4
    expected = direct_geometric_attention(logits, normalize=normalize)
    got = geometric_attention_weights(logits, normalize=normalize)
    assert got.dtype == logits.dtype and got.shape == logits.shape
    assert (got.double() - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("normalize", [False, True])
def test_matches_direct_equations_with_padding(normalize):
    g = torch.Generator().manual_seed(0)
    logits = torch.rand(3, 2, 9, 9, generator=g) * 8 - 4
    lengths = torch.tensor([9, 5, 2])
    mask = (torch.arange(9)[None, :] < lengths[:, None])[:, None, :].expand(3, 2, 9)
    expected = direct_geometric_attention(logits, mask, normalize=normalize)
    got = geometric_attention_weights(logits, mask, normalize=normalize)
    assert (got.double() - expected).abs().max() <= 1e-5
    for b, length in enumerate(lengths.tolist()):
        assert torch.all(got[b, :, :, length:] == 0)  # padded sources get nothing
        # and do not scale down the real ones: the same as the unpadded problem of that length
        alone = geometric_attention_weights(logits[b, :, :length, :length], normalize=normalize)
        assert (got[b, :, :length, :length] - alone).abs().max() <= 1e-6


def test_padding_mask_in_any_position():
    """A mask need not be a suffix: masked sources anywhere are skipped by the products."""
    g = torch.Generator().manual_seed(1)
    logits = torch.rand(6, 6, generator=g) * 6 - 3
    mask = torch.tensor([True, False, True, True, False, True])
    expected = direct_geometric_attention(logits[None], mask[None])[0]
    assert (geometric_attention_weights(logits, mask).double() - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_long_sequences_give_finite_values_and_gradients(dtype):
    n = 4096
    g = torch.Generator().manual_seed(0)
    logits = (torch.rand(1, n, n, generator=g) * 100 - 50).to(dtype).requires_grad_()
    mask = torch.ones(1, n, dtype=torch.bool)
    mask[0, -100:] = False
    weights = geometric_attention_weights(logits, mask, normalize=False)
    assert weights.dtype == dtype and torch.isfinite(weights).all()
    assert float(weights.detach().float().sum(-1).max()) <= 1.0 + 1e-2  # P(some match) is at most 1
    (weights.float() * torch.linspace(-1, 1, n)).sum().backward()
    assert torch.isfinite(logits.grad.float()).all() and logits.grad.abs().sum() > 0


@pytest.mark.parametrize("normalize", [False, True])
def test_hand_written_backward_matches_finite_differences(normalize):
    """The custom backward pass against numerical gradients (float64), with and without padding, including a row
    whose sources are all padding and lengths where the mirror column is clipped at both ends."""
    g = torch.Generator().manual_seed(0)
    for n in (1, 2, 5, 8):
        logits = (torch.randn(2, 2, n, n, generator=g, dtype=torch.float64) * 3).requires_grad_()
        mask = torch.ones(2, 1, n, dtype=torch.bool)
        mask[0, :, n // 2:] = False
        for key_padding_mask in (None, mask):
            torch.autograd.gradcheck(
                lambda x: geometric_attention_weights(x, key_padding_mask, normalize=normalize), (logits,)
            )


def test_bad_shapes_raise():
    with pytest.raises(ValueError, match=r"\(\.\.\., N, N\)"):
        geometric_attention_weights(torch.zeros(3, 4))
    with pytest.raises(ValueError, match="bool"):
        geometric_attention_weights(torch.zeros(3, 3), torch.ones(3))
    with pytest.raises(ValueError, match="positions"):
        geometric_attention_weights(torch.zeros(3, 3), torch.ones(4, dtype=torch.bool))


# ---- geometric_attention: A @ value from queries and keys, fused C++ kernel on CPU or the PyTorch path ----

import sys  # noqa: E402

from lengthgen.modeling.ndr import geometric_attention_cpu  # noqa: E402
from lengthgen.modeling.ndr.geometric_attention import geometric_attention  # noqa: E402

geometric_module = sys.modules["lengthgen.modeling.ndr.geometric_attention"]  # the package's name is the function


def direct_geometric_attention_output(query, key, value, mask=None, normalize=False, bias=None, scale=1.0):
    """Logits written out (scale q.k plus the direction bias by side), then the loops above, then A @ value."""
    logits = scale * query.double() @ key.double().transpose(-1, -2)
    if bias is not None:
        n = logits.shape[-1]
        for i in range(n):
            for j in range(n):
                logits[..., i, j] += bias[..., i, 0 if j >= i else 1].double()
    if mask is not None:
        mask = mask.expand(*logits.shape[:-2], logits.shape[-1])
    return direct_geometric_attention(logits, mask, normalize) @ value.double()


@pytest.fixture(params=["fused", "pytorch"])
def path(request, monkeypatch):
    """Run a test on the fused kernel and on the PyTorch fallback (as with no compiler, or
    LENGTHGEN_FUSED_GEOMETRIC=0)."""
    if request.param == "pytorch":
        monkeypatch.setattr(geometric_module, "load_cpu_kernel", lambda: None)
    elif geometric_attention_cpu.load() is None:
        pytest.skip("the fused kernel could not be built here (no compiler); the PyTorch path is tested")
    return request.param


def test_fused_kernel_is_built_where_a_compiler_exists():
    """Guards against every 'fused' test silently running the fallback."""
    import os
    import shutil

    if os.environ.get("LENGTHGEN_FUSED_GEOMETRIC") == "0" or shutil.which(os.environ.get("CXX", "c++")) is None:
        pytest.skip("fast path switched off or no compiler")
    assert geometric_attention_cpu.load() is not None


@pytest.mark.parametrize("n", [1, 2, 7, 12])
@pytest.mark.parametrize("normalize", [False, True])
def test_attention_matches_direct_equations(path, n, normalize):
    g = torch.Generator().manual_seed(n)
    query, key = (torch.randn(3, 2, n, 4, generator=g) for _ in range(2))
    value = torch.randn(3, 2, n, 5, generator=g)
    bias = torch.randn(3, 2, n, 2, generator=g)
    mask = (torch.arange(n)[None, :] < torch.tensor([n, max(1, n // 2), 0])[:, None])[:, None, :]  # a row all padding
    for m, b in itertools.product((None, mask), (None, bias)):
        expected = direct_geometric_attention_output(query, key, value, m, normalize, b, scale=0.7)
        got = geometric_attention(query, key, value, m, normalize, b, scale=0.7)
        assert got.dtype == value.dtype and got.shape == value.shape
        assert (got.double() - expected).abs().max() <= 1e-5


@pytest.mark.parametrize("normalize", [False, True])
def test_attention_gradcheck(path, normalize):
    """Gradients of query, key, value and the direction bias against finite differences (float64), with padding,
    at lengths where the mirror column is clipped at both ends and (70, fused) where a matrix spans two blocks of 64
    rows."""
    g = torch.Generator().manual_seed(1)
    for n in (1, 2, 5, 8) + ((70,) if path == "fused" else ()):
        inputs = [
            (torch.randn(2, 2, n, 3, generator=g, dtype=torch.float64) * s).requires_grad_() for s in (1.5, 1.5, 1)
        ]
        bias = torch.randn(2, 2, n, 2, generator=g, dtype=torch.float64).requires_grad_()
        mask = torch.ones(2, 1, n, dtype=torch.bool)
        mask[0, :, n // 2:] = False
        for m in (None, mask) if n < 70 else (mask,):
            torch.autograd.gradcheck(
                lambda q, k, v, b: geometric_attention(q, k, v, m, normalize, b, 0.9), (*inputs, bias)
            )


@pytest.mark.parametrize("normalize", [False, True])
def test_fused_equals_pytorch_path_on_long_sequences(monkeypatch, normalize):
    """Beyond the lengths the loops can check: the fused kernel (from 256 positions: a product per block of rows and no
    (N, N) logits) against the
    PyTorch path, values and every gradient: equal to rounding in float64, and in float32 as close to float64 as the
    PyTorch path is."""
    if geometric_attention_cpu.load() is None:
        pytest.skip("no compiler: only the PyTorch path exists")
    g = torch.Generator().manual_seed(2)
    n = 300
    tensors = [torch.randn(2, 3, n, 16, generator=g) for _ in range(3)] + [torch.randn(2, 3, n, 2, generator=g)]
    mask = (torch.arange(n)[None, :] < torch.tensor([n, 211])[:, None])[:, None, :]

    def run(kernel, dtype):
        monkeypatch.setattr(geometric_module, "load_cpu_kernel", lambda: kernel)
        inputs = [t.to(dtype).requires_grad_() for t in tensors]
        out = geometric_attention(*inputs[:3], mask, normalize, inputs[3])
        (out * torch.linspace(-1, 1, 16, dtype=dtype)).sum().backward()
        return [out.detach().double()] + [t.grad.double() for t in inputs]

    kernel = geometric_attention_cpu.load()
    reference = run(None, torch.float64)
    for fused, exact in zip(run(kernel, torch.float64), reference):
        torch.testing.assert_close(fused, exact, atol=1e-10, rtol=1e-10)
    for fused, pytorch, exact in zip(run(kernel, torch.float32), run(None, torch.float32), reference):
        assert (fused - exact).abs().max() <= max(2 * (pytorch - exact).abs().max(), 1e-5)


@pytest.mark.parametrize("n", [12, 300])
def test_attention_under_bf16_autocast_computes_in_float32(path, n):
    """Trainer's --bf16 on CPU runs the model under autocast: the attention still computes in float32, so values and
    gradients equal those without autocast (both the batched products below 256 positions and the blocked ones)."""
    g = torch.Generator().manual_seed(3)
    tensors = [torch.randn(2, 2, n, 8, generator=g) for _ in range(3)] + [torch.randn(2, 2, n, 2, generator=g)]

    def run(autocast):
        inputs = [t.clone().requires_grad_() for t in tensors]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = geometric_attention(*inputs[:3], None, True, inputs[3])
        (out * torch.linspace(-1, 1, 8)).sum().backward()
        return [out] + [t.grad for t in inputs]

    for with_autocast, without in zip(run(True), run(False)):
        assert with_autocast.dtype == torch.float32
        torch.testing.assert_close(with_autocast, without, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_attention_long_sequences_give_finite_values_and_gradients(path, dtype):
    n = 4096 if path == "fused" else 1024  # the PyTorch path holds a dozen N x N tensors
    g = torch.Generator().manual_seed(0)
    query, key, value = ((torch.randn(1, 1, n, 8, generator=g) * 4).to(dtype).requires_grad_() for _ in range(3))
    mask = torch.ones(1, 1, n, dtype=torch.bool)
    mask[..., -100:] = False
    out = geometric_attention(query, key, value, mask)
    assert out.dtype == dtype and torch.isfinite(out.float()).all()
    out.float().sum().backward()
    for t in (query, key, value):
        assert torch.isfinite(t.grad.float()).all() and t.grad.abs().sum() > 0


def test_attention_bad_input_raises():
    q = torch.zeros(2, 5, 4)
    with pytest.raises(ValueError, match="one shape"):
        geometric_attention(q, torch.zeros(2, 6, 4), torch.zeros(2, 5, 4))
    with pytest.raises(ValueError, match="one shape"):
        geometric_attention(q, q, torch.zeros(2, 4, 4))
    with pytest.raises(ValueError, match="direction_bias"):
        geometric_attention(q, q, q, direction_bias=torch.zeros(2, 5, 3))
    with pytest.raises(ValueError, match="positions"):
        geometric_attention(q, q, q, torch.ones(2, 4, dtype=torch.bool))


def test_triton_kernel_under_the_interpreter():
    """The CUDA (Triton) kernels' values and gradients against the PyTorch path in float64, run on this CPU by Triton's
    interpreter in a subprocess (tests/triton_interpreter_checks.py): lengths below, at and past several blocks of 16
    rows, padding, normalisation, direction bias, several heads, float64, float32 and bfloat16 inputs. Their speed and
    memory need a GPU and are not measured here."""
    import os
    import subprocess

    pytest.importorskip("triton")
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "triton_interpreter_checks.py")
    result = subprocess.run(
        [sys.executable, script], env={**os.environ, "TRITON_INTERPRET": "1"}, capture_output=True, text=True,
        timeout=600,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert "agree" in result.stdout


def test_triton_path_reads_the_models_heads_without_copies(monkeypatch):
    """Around the two Triton kernels the NDR's attention runs nothing but the dK and dV sums' zeroing and rounding:
    heads split off a (B, N, H * D) projection by a view and a transpose, the bfloat16 direction bias and the padding
    mask broadcast over heads go in as they lie, the output comes back laid out so that the transpose back to
    (B, N, H * D) is a view, and each gradient is laid out as its input. Counted with a TorchDispatchMode, the kernels'
    launches stubbed (what they compute is checked under the interpreter)."""
    pytest.importorskip("triton")
    from torch.utils._python_dispatch import TorchDispatchMode

    triton_module = sys.modules["lengthgen.modeling.ndr.geometric_attention_triton"]
    if not triton_module.available():
        pytest.skip("Triton without tl.gather")

    class Launch:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: None

    monkeypatch.setattr(triton_module, "_forward_kernel", Launch())
    monkeypatch.setattr(triton_module, "_backward_kernel", Launch())
    free = {"empty", "empty_like", "empty_strided", "new_empty", "new_empty_strided", "view", "_unsafe_view",
            "expand", "transpose", "permute", "detach"}  # no work on a GPU

    class Operations(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.seen = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            if func.overloadpacket.__name__ not in free:
                self.seen.append(func.overloadpacket.__name__)
            return func(*args, **(kwargs or {}))

    batch, heads, n, d = 2, 4, 40, 8
    projections = [torch.randn(batch, n, heads * d).to(torch.bfloat16) for _ in range(3)]
    query, key, value = (x.view(batch, n, heads, d).transpose(1, 2).requires_grad_() for x in projections)
    bias = torch.randn(batch, n, heads, 2).to(torch.bfloat16).permute(0, 2, 1, 3).requires_grad_()
    mask = (torch.arange(n)[None] < torch.tensor([n, n - 7])[:, None])[:, None, :]
    context = geometric_module._triton_attention(query, key, value, mask, True, bias, 0.3)  # the scale
    grad = torch.randn(batch, n, heads * d).to(torch.bfloat16)  # tensor is made once, in this first call
    with Operations() as forward:
        context = geometric_module._triton_attention(query, key, value, mask, True, bias, 0.3)
        merged = context.transpose(1, 2).reshape(batch, n, heads * d)
    with Operations() as backward:
        merged.backward(grad)
    assert forward.seen == []
    assert sorted(backward.seen) == ["_to_copy", "_to_copy", "zeros_like", "zeros_like"]
    for x in (query, key, value, bias):
        assert x.grad.stride() == x.stride() and x.grad.dtype == x.dtype



def test_triton_path_multiplies_in_bfloat16_under_autocast(monkeypatch):
    """Under autocast to bfloat16 the Triton kernels take bfloat16 queries, keys and values, as autocast gives matrix
    products and SDPA theirs. The NDR's attention adds a float32 parameter (its query bias) to its bfloat16 query,
    which comes out float32: that query is rounded to bfloat16 once and the keys and values go in as they lie, where
    mixed dtypes would take all three to float32 (products off the tensor cores). Without autocast mixed dtypes are
    computed in float32; float64 stays float64 under autocast too. The forward kernel's launch is stubbed and records
    the tensors it is given."""
    pytest.importorskip("triton")
    from lengthgen.modeling import NDRConfig
    from lengthgen.modeling.ndr import modeling_ndr

    triton_module = sys.modules["lengthgen.modeling.ndr.geometric_attention_triton"]
    if not triton_module.available():
        pytest.skip("Triton without tl.gather")
    launched = []

    class Launch:
        def __getitem__(self, grid):
            return lambda *args, **kwargs: launched.append(args[:3])

    monkeypatch.setattr(triton_module, "_forward_kernel", Launch())
    given = []

    def triton_path(*args, **kwargs):  # what geometric_attention runs for CUDA tensors
        given.append(args[:3])
        return geometric_module._triton_attention(*args, **kwargs)

    monkeypatch.setattr(modeling_ndr, "geometric_attention", triton_path)
    attention = modeling_ndr.NDRAttention(NDRConfig(vocab_size=8, hidden_size=32, num_attention_heads=4))
    with torch.autocast("cpu", dtype=torch.bfloat16):
        attention(torch.randn(2, 12, 32), torch.ones(2, 12, dtype=torch.bool))
        query, key, value = given[-1]
        assert query.dtype == torch.float32 and key.dtype == value.dtype == torch.bfloat16
        assert [x.dtype for x in launched[-1]] == [torch.bfloat16] * 3
        assert torch.equal(launched[-1][0], query.to(torch.bfloat16))
        assert launched[-1][1].data_ptr() == key.data_ptr() and launched[-1][2].data_ptr() == value.data_ptr()
    context = geometric_module._triton_attention(query, key, value, None, True, None, 1.0)
    assert [x.dtype for x in launched[-1]] == [torch.float32] * 3 and context.dtype == torch.bfloat16
    with torch.autocast("cpu", dtype=torch.bfloat16):  # autocast leaves float64 alone, as in its matrix products
        context = geometric_module._triton_attention(*(x.double() for x in (query, key, value)), None, True, None, 1.0)
    assert [x.dtype for x in launched[-1]] == [torch.float64] * 3 and context.dtype == torch.float64

@pytest.mark.parametrize("n", [70, 300])
def test_fused_kernel_at_one_and_two_threads_and_in_every_instruction_set(monkeypatch, n):
    """The kernel split over threads (batch x heads x blocks of rows) and built for the portable baseline as well as
    for this CPU's vector width, its products through BLAS and through ATen (a torch without a Fortran BLAS): values
    and gradients as close to float64 as the float32 PyTorch path is, at two and at five blocks of rows (the last one
    short); and under bf16 autocast as the PyTorch path under it. The kernel flushes denormal floats while it runs:
    afterwards every thread of the pool computes with them again."""
    builds = {isa: geometric_attention_cpu.load(isa) for isa in ("portable", geometric_attention_cpu.native_isa())}
    if any(kernel is None for kernel in builds.values()):
        pytest.skip("no compiler: only the PyTorch path exists")
    g = torch.Generator().manual_seed(n)
    tensors = [torch.randn(2, 3, n, 16, generator=g) for _ in range(3)] + [torch.randn(2, 3, n, 2, generator=g)]
    mask = (torch.arange(n)[None, :] < torch.tensor([n, n - 37])[:, None])[:, None, :]

    def run(kernel, dtype=torch.float32, autocast=False):
        monkeypatch.setattr(geometric_module, "load_cpu_kernel", lambda: kernel)
        inputs = [t.to(dtype).clone().requires_grad_() for t in tensors]
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = geometric_attention(*inputs[:3], mask, True, inputs[3])
        (out.to(dtype) * torch.linspace(-1, 1, 16, dtype=dtype)).sum().backward()
        return [out.detach().double()] + [t.grad.double() for t in inputs]

    threads = torch.get_num_threads()
    try:
        reference = run(None, torch.float64)
        pytorch = [(got - exact).abs().max() for got, exact in zip(run(None), reference)]
        for isa, kernel in builds.items():
            for count in (1, 2):
                for blas in (True, False):
                    torch.set_num_threads(count)
                    kernel.use_blas(blas)
                    try:
                        results = run(kernel)
                    finally:
                        kernel.use_blas(True)
                    for got, exact, bound in zip(results, reference, pytorch):
                        assert (got - exact).abs().max() <= 2 * bound + 1e-6, (isa, count, blas)
        denormal = torch.full((2**20,), 1e-39)  # large enough for torch to split the product over the pool
        assert bool(((denormal * 1.0) == denormal).all()) and float(denormal[0]) > 0
        torch.set_num_threads(2)
        bf16 = [(got - exact).abs().max() for got, exact in zip(run(None, autocast=True), reference)]
        for got, exact, bound in zip(run(builds[geometric_attention_cpu.native_isa()], autocast=True), reference, bf16):
            assert (got - exact).abs().max() <= 2 * bound + 1e-6
    finally:
        torch.set_num_threads(threads)
