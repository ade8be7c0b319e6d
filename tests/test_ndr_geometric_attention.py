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
