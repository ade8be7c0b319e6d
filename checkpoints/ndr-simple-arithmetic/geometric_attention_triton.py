"""Geometric attention on CUDA in linear memory: Triton kernels that walk each row outward by distance, as
FlashAttention walks key tiles (Dao, "FlashAttention-2", arXiv:2307.08691), and never hold an (N, N) tensor.

The weights (Csordás, Irie and Schmidhuber, "The Neural Data Router", arXiv:2110.07732; thesis Eq. 5.7-5.8), with
P = sigmoid(x) and x[i, j] = scale * q_i . k_j + direction_bias[i, 0 if j >= i else 1]:

    A[i, j] = P[i, j] * prod_{k in S(i, j)} (1 - P[i, k]),    A[i, i] = 0,

S(i, j) the sources closer to i than j, the right one first at equal distance. In distance coordinates of row i,
with the running sums of log(1 - P) = logsigmoid(-x) to the right and to the left (a source outside the sequence or
padded adds 0 and has P = 0)

    cR(d) = sum_{e=1..d} log(1 - P[i, i + e]),    cL(d) = sum_{e=1..d} log(1 - P[i, i - e]),

the order of closeness is i + 1, i - 1, i + 2, i - 2, ..., so

    log A[i, i + d] = logsigmoid(x[i, i + d]) + cR(d - 1) + cL(d - 1),
    log A[i, i - d] = logsigmoid(x[i, i - d]) + cR(d)     + cL(d - 1).

Forward. One program per (matrix, tile of BLOCK query rows i0 .. i0 + BLOCK - 1) walks distance blocks
d in [1 + t BLOCK, 1 + (t + 1) BLOCK), t = 0, 1, ..., carrying cR and cL per row (two numbers). The right sources of a
block lie in two key tiles, the near one starting at i0 + t BLOCK and the far one at i0 + (t + 1) BLOCK; the left ones
in the tiles starting at i0 - t BLOCK and i0 - (t + 1) BLOCK. The scores of those tiles come from `tl.dot`; a gather
along the key axis (`tl.gather`) skews them into distance coordinates (row r finds distance d at column r + d - t BLOCK
of the right tiles taken together, and at column r - (d - t BLOCK) of the left ones, counted from the near tile's
start), where `tl.cumsum` along the distance makes cR and cL; the weights are gathered back into key coordinates and
multiply the values' tiles. The far tile of step t is the near tile of step t + 1: its scores are kept for the next
step, already gathered into that step's distance coordinates, so each key tile is scored once per side and changes
layout for its gathers once, and its weights wait one step, so each is multiplied once per side.
Each side walks as far as the farthest source of the tile's rows on that side: both sides while each has sources,
then the one with sources left alone (the other's running sum holds all its sources by then); a tile near one end of
the sequence walks the other side for about N / BLOCK steps and this side for one. With `normalize` the row sums
T[i] = sum_j A[i, j] divide the output at the end (F.normalize's floor 1e-12). Memory beyond the inputs: the output
in the compute precision (kept for backward; rounded once more to bfloat16 for bfloat16 inputs) and T.

Backward. With g[i, j] = s_i (dO_i . v_j - c_i) the gradient of the unnormalised A (s = 1, c = 0 without
normalisation; s = 1 / T and c = dO_i . out_i with it) and G = g * A the gradient of log A, the logits' gradient is

    dx[i, k] = G[i, k] (1 - P[i, k]) - P[i, k] F[i, k],    F[i, k] = sum of G[i, j] over the sources j farther than k,

since log A[i, j] holds logsigmoid(x[i, j]) (derivative 1 - P) and log(1 - P[i, k]) (derivative -P) for every k
closer than j. With the tie rule F[i, i + d] = Σ - GR(<= d) - GL(< d) and F[i, i - d] = Σ - GR(<= d) - GL(<= d), where
GR, GL are the running sums of G over right and left distances and Σ = sum_j G[i, j] = dO_i . out_i - c_i (zero with
normalisation), known before the walk as FlashAttention's rowsum(dO * O) is. Backward therefore walks the distance
blocks in the forward's order, recomputing the logits, cR, cL and A exactly as forward does, and carries GR and GL.
Walking from far to near instead, to sum F directly, would need cR and cL at the far end and subtract from them:
their magnitude grows with N (thousands at N = 4,096) while log A needs them to about 1e-7, so the near weights, which
carry the gradient, would lose several digits. Subtracting in G instead costs at most about eps * sum_j |G[i, j]|
<= eps * max_j |g[i, j]| (A sums to at most 1 per row), FlashAttention's own bound.

The query gradient is made in the program; the key and value gradients, dK_j = scale * sum_i dx[i, j] q_i and
dV_j = sum_i s_i A[i, j] dO_i, gather contributions from every query tile, and a key-tile-major pass (FlashAttention-2's
choice) cannot make them: dx[i, j] and A[i, j] depend on row i's running sums at distance |i - j|, which only a walk of
row i from distance 1 has. So each program adds its contribution to one key tile per side and step with `tl.atomic_add`
(float32, or float64) once that tile is complete for its rows (the far tile's part waits one step, as in forward):
2 N / BLOCK additions of a (BLOCK, d_head) tile per key, not deterministic in the order of the sums. The program
makes c, s and Σ of its rows itself from dO, the kept output and T, and scales its dK contributions before adding
them, so around the launch run only the zeroing of the dK and dV sums and their rounding to the inputs' dtype (below
N = 1,024 a GPU spends most of the time launching). Memory beyond the inputs: float32 (float64) buffers for the key
and value gradients, O(N d_head) per matrix.

Layout. The kernels read every `(B, H, N, D)` tensor through its batch, head and row strides, as FlashAttention's
do: the NDR's heads, split off a `(B, N, H * D)` projection by a view and a transpose, its bfloat16 direction bias and
a padding mask broadcast over heads (stride 0) go in where they lie; the output is laid out as the values and each
gradient as its input, so that merging the heads again is a view. Copies around the launches would be launches too.
Queries, keys, values and bias must fill their memory without gaps (their gradients take their strides), in any
order of the dimensions with the last one contiguous; others are copied first (slices of a fused projection, say).

Precision. bfloat16 inputs go into the products as they are (their products are exact in float32, on tensor cores);
everything else is float32, and a float32 factor (the weights, dx) of a product with a bfloat16 tile enters as two
bfloat16 terms, hi = round(a) and lo = round(a - hi), which keeps about 16 bits of it. float32 and float64 inputs use
IEEE products in their own precision (float16 inputs are computed as float32 by `geometric_attention`).

Its correctness is tested on the CPU with Triton's interpreter (`TRITON_INTERPRET=1`,
tests/test_ndr_geometric_attention.py) against the PyTorch path in float64, and compiled on a CUDA GPU by
tests/triton_interpreter_checks.py; benchmarks/triton_resources.py compiles the kernels for a GPU on any machine and
reads their registers, stack and shared memory; benchmarks/ndr_attention.py measures time and memory against SDPA.
Used by `geometric_attention` for CUDA tensors when Triton (with `tl.gather`, 3.2 or later) is installed.
"""

import contextlib
import functools

import torch

try:
    import triton
    import triton.language as tl
except ImportError:  # CPU-only installs: geometric_attention uses the C++ kernel or the PyTorch path
    triton = None

# Query rows per program, distances per step and keys per tile: the fastest launch measured (docs/results/speed.md,
# benchmarks/ndr_attention.py --triton_configs).
BLOCK = 16
NUM_WARPS = 4  # warps per program


@contextlib.contextmanager
def launch_configuration(block: int, warps: int):
    """Launch the kernels with `block` rows per program (and distances per step) and `warps` warps, forward and
    backward, in place of the module's defaults while the context holds (the benchmarks compare configurations)."""
    global BLOCK, NUM_WARPS
    saved = BLOCK, NUM_WARPS
    BLOCK, NUM_WARPS = block, warps
    try:
        yield
    finally:
        BLOCK, NUM_WARPS = saved
DTYPES = (torch.bfloat16, torch.float32, torch.float64)


def available() -> bool:
    return triton is not None and hasattr(tl, "gather")


if triton is not None:  # (TRITON_INTERPRET=1, for tests on a CPU, must be set before this module is imported)

    @triton.jit
    def _softplus_neg_abs(x):
        """log(1 + exp(-|x|)), accurate where exp(-|x|) is below the resolution of 1 (log1p by Goldberg's trick)."""
        u = tl.exp(-tl.abs(x))
        w = 1.0 + u
        one = w == 1.0
        return tl.where(one, u, tl.log(w) * (u / tl.where(one, 1.0, w - 1.0)))

    @triton.jit
    def _tile(X, start, n, stride, width, c, w):
        """Rows start .. start + BLOCK - 1 of an (n, width) matrix at X whose rows lie `stride` elements apart; zeros
        outside it."""
        rows = start + c
        inside = ((rows >= 0) & (rows < n))[:, None] & (w < width)[None, :]
        return tl.load(X + rows[:, None] * stride + w[None, :], mask=inside, other=0.0)

    @triton.jit
    def _add_tile(X, start, n, stride, width, c, w, value):
        rows = start + c
        inside = ((rows >= 0) & (rows < n))[:, None] & (w < width)[None, :]
        tl.atomic_add(X + rows[:, None] * stride + w[None, :], value, mask=inside, sem="relaxed")

    @triton.jit
    def _dot16(a, b, WIDEN: tl.constexpr):
        """a @ b of bfloat16 tiles, accumulated in float32. WIDEN: as float32 tiles, which gives the same sums (the
        products of bfloat16 numbers are exact in float32) where bfloat16 products are not available."""
        if WIDEN:
            return tl.dot(a.to(tl.float32), b.to(tl.float32), input_precision="ieee")
        else:
            return tl.dot(a, b)

    @triton.jit
    def _product(a, b, SPLIT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
        """a @ b, a in the compute precision, b in the inputs' dtype. SPLIT (bfloat16 inputs): a as hi + lo."""
        if SPLIT:
            hi = a.to(b.dtype)
            lo = (a - hi.to(a.dtype)).to(b.dtype)
            return _dot16(hi, b, WIDEN) + _dot16(lo, b, WIDEN)
        else:
            return tl.dot(a.to(b.dtype), b, input_precision=PRECISION)

    @triton.jit
    def _inputs_product(a, b, SPLIT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr):
        """a @ b^T, both in the inputs' dtype (exact products for bfloat16, accumulated in float32)."""
        if SPLIT:
            return _dot16(a, tl.trans(b), WIDEN)
        else:
            return tl.dot(a, tl.trans(b), input_precision=PRECISION)

    @triton.jit
    def _near_part(near, r, e, SIGMA: tl.constexpr, BLOCK: tl.constexpr):
        """The near key tile's share of `_to_distance`: out[r, e] = near[r, r + SIGMA (e + 1)] where that column lies
        in the tile (anything elsewhere). A far tile's is made when it is scored and carried to the next step, where
        that tile is the near one: the scores go through one change of layout and gather per step, not two."""
        col = r[:, None] + SIGMA * (e[None, :] + 1)
        return tl.gather(near, tl.minimum(tl.maximum(col, 0), BLOCK - 1), 1)

    @triton.jit
    def _to_distance(near_part, far, r, e, SIGMA: tl.constexpr, BLOCK: tl.constexpr):
        """out[r, e]: the entry of row r at distance 1 + t BLOCK + e on side SIGMA (+1 right, -1 left), found at
        column r + SIGMA (e + 1) of the near key tile (`near_part`, from `_near_part`), or of the far one shifted by
        SIGMA BLOCK."""
        col = r[:, None] + SIGMA * (e[None, :] + 1)
        in_near = (col >= 0) & (col < BLOCK)
        from_far = tl.gather(far, tl.minimum(tl.maximum(col - SIGMA * BLOCK, 0), BLOCK - 1), 1)
        return tl.where(in_near, near_part, from_far)

    @triton.jit
    def _to_keys(x, r, c, SIGMA: tl.constexpr, BLOCK: tl.constexpr, FAR: tl.constexpr):
        """The inverse of `_to_distance` for one key tile (the near or the far one): zero at the keys whose
        distance from row r falls outside this block of distances."""
        e = SIGMA * (c[None, :] - r[:, None]) - 1
        if FAR:
            e = e + BLOCK
        inside = (e >= 0) & (e < BLOCK)
        return tl.where(inside, tl.gather(x, tl.minimum(tl.maximum(e, 0), BLOCK - 1), 1), 0.0)

    @triton.jit
    def _side(q, K, stride_k, REAL, stride_m, i0, t, n, d_k, scale, bias, s_near, r, kw, SIGMA: tl.constexpr,
              HAS_MASK: tl.constexpr, SPLIT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr,
              BLOCK: tl.constexpr):
        """Distance block t on side SIGMA of the query tile, in distance coordinates: log P, log(1 - P) (0 at
        non-sources) and whether each entry is a real source; and the near part (`_near_part`) of the far key tile's
        scores, for the next step, where it is the near tile (`s_near`, this step's, was made by the last step)."""
        s_far = _inputs_product(q, _tile(K, i0 + SIGMA * (t + 1) * BLOCK, n, stride_k, d_k, r, kw), SPLIT,
                                PRECISION, WIDEN)
        x = _to_distance(s_near, s_far, r, r, SIGMA, BLOCK) * scale + bias[:, None]
        j = (i0 + r)[:, None] + SIGMA * (1 + t * BLOCK + r)[None, :]
        real = ((i0 + r) < n)[:, None] & (j >= 0) & (j < n)
        if HAS_MASK:
            real = real & (tl.load(REAL + j * stride_m, mask=real, other=0) != 0)
        softplus = _softplus_neg_abs(x)
        log_q = tl.where(real, tl.minimum(-x, 0.0) - softplus, 0.0)
        return tl.minimum(x, 0.0) - softplus, log_q, real, _near_part(s_far, r, r, SIGMA, BLOCK)

    @triton.jit
    def _step(q, K, stride_k, REAL, stride_m, i0, t, n, d_k, scale, bias_r, bias_l, c_right, c_left, s_r, s_l, r,
              kw, RIGHT: tl.constexpr, LEFT: tl.constexpr, HAS_MASK: tl.constexpr, SPLIT: tl.constexpr,
              PRECISION: tl.constexpr, WIDEN: tl.constexpr, BLOCK: tl.constexpr):
        """Distance block t of the sides still walking (RIGHT, LEFT): A there (unnormalised), log P, log(1 - P), which
        entries are sources, the running sums cR, cL carried past the block and the far tiles' scores. A side that
        has run out of sources is not computed (zeros): its running sum already holds all its sources."""
        zeros = tl.zeros([BLOCK, BLOCK], c_right.dtype)
        a_r, log_p_r, log_q_r, real_r = zeros, zeros, zeros, zeros != 0.0
        a_l, log_p_l, log_q_l, real_l = zeros, zeros, zeros, zeros != 0.0
        right = c_right[:, None] + zeros  # cR(d)
        left_before = c_left[:, None] + zeros  # cL(d - 1)
        if RIGHT:
            log_p_r, log_q_r, real_r, s_r = _side(q, K, stride_k, REAL, stride_m, i0, t, n, d_k, scale, bias_r, s_r,
                                                  r, kw, 1, HAS_MASK, SPLIT, PRECISION, WIDEN, BLOCK)
            right += tl.cumsum(log_q_r, 1)
            c_right += tl.sum(log_q_r, 1)
        if LEFT:
            log_p_l, log_q_l, real_l, s_l = _side(q, K, stride_k, REAL, stride_m, i0, t, n, d_k, scale, bias_l, s_l,
                                                  r, kw, -1, HAS_MASK, SPLIT, PRECISION, WIDEN, BLOCK)
            left_before += tl.cumsum(log_q_l, 1) - log_q_l
            c_left += tl.sum(log_q_l, 1)
        if RIGHT:
            a_r = tl.where(real_r, tl.exp(log_p_r + (right - log_q_r) + left_before), 0.0)
        if LEFT:
            a_l = tl.where(real_l, tl.exp(log_p_l + right + left_before), 0.0)
        return a_r, a_l, log_p_r, log_q_r, log_p_l, log_q_l, real_r, real_l, c_right, c_left, s_r, s_l

    @triton.jit
    def _program(heads, tiles, BLOCK: tl.constexpr):
        """The program's matrix m = b * heads + h (as batch row b and head h) and its first query row i0."""
        pid = tl.program_id(0)
        m = (pid // tiles).to(tl.int64)
        return m, m // heads, m % heads, (pid % tiles) * BLOCK

    @triton.jit
    def _query_tile(Q, stride_q, BIAS, stride_bias, SCALE, i0, n, d_k, HAS_BIAS: tl.constexpr, COMPUTE: tl.constexpr,
                    BLOCK: tl.constexpr, BLOCK_K: tl.constexpr):
        """The program's rows (as offsets r and indices), their queries and direction biases (0 without); the scale
        (in the compute precision: a Python float argument would be float32); the distance blocks to the right and
        to the left up to the farthest source of any of its rows on that side."""
        r = tl.arange(0, BLOCK)
        rows = i0 + r
        q = _tile(Q, i0, n, stride_q, d_k, r, tl.arange(0, BLOCK_K))
        bias_r = tl.zeros([BLOCK], COMPUTE)
        bias_l = tl.zeros([BLOCK], COMPUTE)
        if HAS_BIAS:
            bias_r = tl.load(BIAS + rows * stride_bias, mask=rows < n, other=0.0).to(COMPUTE)
            bias_l = tl.load(BIAS + rows * stride_bias + 1, mask=rows < n, other=0.0).to(COMPUTE)
        steps_r = tl.cdiv(n - 1 - i0, BLOCK)
        steps_l = tl.cdiv(tl.minimum(i0 + BLOCK, n) - 1, BLOCK)
        return r, rows, q, bias_r, bias_l, tl.load(SCALE), steps_r, steps_l

    @triton.jit
    def _walk(PART: tl.constexpr, steps_r, steps_l):
        """The steps [first, last) of part PART of a walk: 0, both sides while each has sources; 1, then the right
        side alone; 2, or the left side alone (one of the two is empty)."""
        both = tl.minimum(steps_r, steps_l)
        first = both
        last = steps_l
        if PART == 0:
            first = both * 0
            last = both
        if PART == 1:
            last = steps_r
        return first, last

    @triton.jit
    def _forward_step(q, K, stride_k, V, stride_v, REAL, stride_m, i0, t, n, d_k, d_v, scale, bias_r, bias_l, r, kw,
                      vw, c_right, c_left, s_r, s_l, wait_r, wait_l, acc, total, RIGHT: tl.constexpr,
                      LEFT: tl.constexpr, HAS_MASK: tl.constexpr, SPLIT: tl.constexpr, PRECISION: tl.constexpr,
                      WIDEN: tl.constexpr, BLOCK: tl.constexpr):
        """Distance block t of forward: the weights' row sums, and their products with the near value tiles, which
        are complete for these rows with this step's part and the far part of the last step (which waited)."""
        a_r, a_l, _, _, _, _, _, _, c_right, c_left, s_r, s_l = _step(
            q, K, stride_k, REAL, stride_m, i0, t, n, d_k, scale, bias_r, bias_l, c_right, c_left, s_r, s_l, r, kw,
            RIGHT, LEFT, HAS_MASK, SPLIT, PRECISION, WIDEN, BLOCK)
        if RIGHT:
            total += tl.sum(a_r, 1)
            v_r = _tile(V, i0 + t * BLOCK, n, stride_v, d_v, r, vw)
            acc += _product(wait_r + _to_keys(a_r, r, r, 1, BLOCK, False), v_r, SPLIT, PRECISION, WIDEN)
            wait_r = _to_keys(a_r, r, r, 1, BLOCK, True)
        if LEFT:
            total += tl.sum(a_l, 1)
            v_l = _tile(V, i0 - t * BLOCK, n, stride_v, d_v, r, vw)
            acc += _product(wait_l + _to_keys(a_l, r, r, -1, BLOCK, False), v_l, SPLIT, PRECISION, WIDEN)
            wait_l = _to_keys(a_l, r, r, -1, BLOCK, True)
        return c_right, c_left, s_r, s_l, wait_r, wait_l, acc, total

    @triton.jit
    def _forward_kernel(Q, K, V, BIAS, REAL, OUT, RESULT, TOTALS, SCALE,
                        stride_qb, stride_qh, stride_q, stride_kb, stride_kh, stride_k, stride_vb, stride_vh, stride_v,
                        stride_biasb, stride_biash, stride_bias, stride_mb, stride_mh, stride_m,
                        stride_ob, stride_oh, stride_o, n, d_k, d_v, heads, tiles,
                        HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, NORMALIZE: tl.constexpr, CAST: tl.constexpr,
                        SPLIT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr, COMPUTE: tl.constexpr,
                        BLOCK: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr):
        """OUT: the output in the compute precision; RESULT, with CAST, the same in the inputs' dtype (both laid out
        by the `stride_o*`)."""
        m, b, h, i0 = _program(heads, tiles, BLOCK)
        Q += b * stride_qb + h * stride_qh
        K += b * stride_kb + h * stride_kh
        V += b * stride_vb + h * stride_vh
        BIAS += b * stride_biasb + h * stride_biash
        REAL += b * stride_mb + h * stride_mh
        r, rows, q, bias_r, bias_l, scale, steps_r, steps_l = _query_tile(
            Q, stride_q, BIAS, stride_bias, SCALE, i0, n, d_k, HAS_BIAS, COMPUTE, BLOCK, BLOCK_K)
        live = rows < n
        kw = tl.arange(0, BLOCK_K)
        vw = tl.arange(0, BLOCK_V)
        c_right = tl.zeros([BLOCK], COMPUTE)
        c_left = tl.zeros([BLOCK], COMPUTE)
        total = tl.zeros([BLOCK], COMPUTE)
        acc = tl.zeros([BLOCK, BLOCK_V], COMPUTE)
        wait_r = tl.zeros([BLOCK, BLOCK], COMPUTE)  # weights on the far tiles, multiplied at the next step
        wait_l = tl.zeros([BLOCK, BLOCK], COMPUTE)
        s_own = _inputs_product(q, _tile(K, i0, n, stride_k, d_k, r, kw), SPLIT, PRECISION, WIDEN)  # both sides'
        s_r = _near_part(s_own, r, r, 1, BLOCK)  # first near tile: the query tile's own keys
        s_l = _near_part(s_own, r, r, -1, BLOCK)
        for part in tl.static_range(3):
            first, last = _walk(part, steps_r, steps_l)
            for t in range(first, last):
                c_right, c_left, s_r, s_l, wait_r, wait_l, acc, total = _forward_step(
                    q, K, stride_k, V, stride_v, REAL, stride_m, i0, t, n, d_k, d_v, scale, bias_r, bias_l, r, kw, vw,
                    c_right, c_left, s_r, s_l, wait_r, wait_l, acc, total, part != 2, part != 1,
                    HAS_MASK, SPLIT, PRECISION, WIDEN, BLOCK)
        acc += _product(wait_r, _tile(V, i0 + steps_r * BLOCK, n, stride_v, d_v, r, vw), SPLIT, PRECISION, WIDEN)
        acc += _product(wait_l, _tile(V, i0 - steps_l * BLOCK, n, stride_v, d_v, r, vw), SPLIT, PRECISION, WIDEN)
        if NORMALIZE:
            acc = acc / tl.maximum(total, 1e-12)[:, None]  # F.normalize's floor on the L1 norm
        where = b * stride_ob + h * stride_oh + rows[:, None] * stride_o + vw[None, :]
        inside = live[:, None] & (vw < d_v)[None, :]
        tl.store(OUT + where, acc, mask=inside)
        if CAST:
            tl.store(RESULT + where, acc, mask=inside)  # rounded to RESULT's dtype
        tl.store(TOTALS + m * n + rows, total, mask=live)

    @triton.jit
    def _backward_step(q, K, stride_k, V, stride_v, REAL, stride_m, DK, DV, i0, t, n, d_k, d_v, scale, bias_r, bias_l,
                       r, kw, vw, do, coef, row_scale, sigma_g, c_right, c_left, s_r, s_l, u_r, u_l, g_right, g_left,
                       grad_bias_r, grad_bias_l, dq, wait_dx_r, wait_dx_l, wait_a_r, wait_a_l,
                       RIGHT: tl.constexpr, LEFT: tl.constexpr, HAS_MASK: tl.constexpr, SPLIT: tl.constexpr,
                       PRECISION: tl.constexpr, WIDEN: tl.constexpr, BLOCK: tl.constexpr):
        """Distance block t of backward: recomputes forward's step, makes G and dx there, and adds the products of
        the near key tiles (complete for these rows, as in forward) to dQ, and to dK (scaled) and dV in memory. u_r,
        u_l: dO . v of the near value tiles (the last step's far ones), kept in distance coordinates as the scores
        are."""
        a_r, a_l, log_p_r, log_q_r, log_p_l, log_q_l, real_r, real_l, c_right, c_left, s_r, s_l = _step(
            q, K, stride_k, REAL, stride_m, i0, t, n, d_k, scale, bias_r, bias_l, c_right, c_left, s_r, s_l, r, kw,
            RIGHT, LEFT, HAS_MASK, SPLIT, PRECISION, WIDEN, BLOCK)
        zeros = tl.zeros([BLOCK, BLOCK], c_right.dtype)
        big_g_r = zeros
        big_g_l = zeros
        through_r = g_right[:, None] + zeros  # GR(<= d)
        through_l = g_left[:, None] + zeros  # GL(<= d)
        if RIGHT:
            u_far = _inputs_product(do, _tile(V, i0 + (t + 1) * BLOCK, n, stride_v, d_v, r, vw), SPLIT, PRECISION,
                                    WIDEN)
            big_g_r = a_r * ((_to_distance(u_r, u_far, r, r, 1, BLOCK) - coef[:, None]) * row_scale[:, None])
            u_r = _near_part(u_far, r, r, 1, BLOCK)
            through_r += tl.cumsum(big_g_r, 1)
        if LEFT:
            u_far = _inputs_product(do, _tile(V, i0 - (t + 1) * BLOCK, n, stride_v, d_v, r, vw), SPLIT, PRECISION,
                                    WIDEN)
            big_g_l = a_l * ((_to_distance(u_l, u_far, r, r, -1, BLOCK) - coef[:, None]) * row_scale[:, None])
            u_l = _near_part(u_far, r, r, -1, BLOCK)
            through_l += tl.cumsum(big_g_l, 1)
        if RIGHT:
            farther_r = sigma_g[:, None] - through_r - (through_l - big_g_l)
            dx_r = big_g_r * tl.exp(log_q_r) - tl.where(real_r, tl.exp(log_p_r), 0.0) * farther_r
            g_right += tl.sum(big_g_r, 1)
            grad_bias_r += tl.sum(dx_r, 1)
            a_r = a_r * row_scale[:, None]
            start = i0 + t * BLOCK
            tile_dx = wait_dx_r + _to_keys(dx_r, r, r, 1, BLOCK, False)
            tile_a = wait_a_r + _to_keys(a_r, r, r, 1, BLOCK, False)
            dq += _product(tile_dx, _tile(K, start, n, stride_k, d_k, r, kw), SPLIT, PRECISION, WIDEN)
            _add_tile(DK, start, n, stride_k, d_k, r, kw,
                      _product(tl.trans(tile_dx), q, SPLIT, PRECISION, WIDEN) * scale)
            _add_tile(DV, start, n, stride_v, d_v, r, vw, _product(tl.trans(tile_a), do, SPLIT, PRECISION, WIDEN))
            wait_dx_r = _to_keys(dx_r, r, r, 1, BLOCK, True)
            wait_a_r = _to_keys(a_r, r, r, 1, BLOCK, True)
        if LEFT:
            farther_l = sigma_g[:, None] - through_r - through_l
            dx_l = big_g_l * tl.exp(log_q_l) - tl.where(real_l, tl.exp(log_p_l), 0.0) * farther_l
            g_left += tl.sum(big_g_l, 1)
            grad_bias_l += tl.sum(dx_l, 1)
            a_l = a_l * row_scale[:, None]
            start = i0 - t * BLOCK
            tile_dx = wait_dx_l + _to_keys(dx_l, r, r, -1, BLOCK, False)
            tile_a = wait_a_l + _to_keys(a_l, r, r, -1, BLOCK, False)
            dq += _product(tile_dx, _tile(K, start, n, stride_k, d_k, r, kw), SPLIT, PRECISION, WIDEN)
            _add_tile(DK, start, n, stride_k, d_k, r, kw,
                      _product(tl.trans(tile_dx), q, SPLIT, PRECISION, WIDEN) * scale)
            _add_tile(DV, start, n, stride_v, d_v, r, vw, _product(tl.trans(tile_a), do, SPLIT, PRECISION, WIDEN))
            wait_dx_l = _to_keys(dx_l, r, r, -1, BLOCK, True)
            wait_a_l = _to_keys(a_l, r, r, -1, BLOCK, True)
        return (c_right, c_left, s_r, s_l, u_r, u_l, g_right, g_left, grad_bias_r, grad_bias_l, dq,
                wait_dx_r, wait_dx_l, wait_a_r, wait_a_l)

    @triton.jit
    def _backward_kernel(Q, K, V, DO, BIAS, REAL, OUT, TOTALS, DQ, DK, DV, DBIAS, SCALE,
                         stride_qb, stride_qh, stride_q, stride_kb, stride_kh, stride_k, stride_vb, stride_vh, stride_v,
                         stride_biasb, stride_biash, stride_bias, stride_mb, stride_mh, stride_m,
                         stride_ob, stride_oh, stride_o, stride_dob, stride_doh, stride_do, n, d_k, d_v, heads, tiles,
                         HAS_BIAS: tl.constexpr, HAS_MASK: tl.constexpr, NORMALIZE: tl.constexpr,
                         SPLIT: tl.constexpr, PRECISION: tl.constexpr, WIDEN: tl.constexpr, COMPUTE: tl.constexpr,
                         BLOCK: tl.constexpr, BLOCK_K: tl.constexpr, BLOCK_V: tl.constexpr):
        """OUT, TOTALS: forward's output (compute precision) and row sums. DQ (in the inputs' dtype) and DBIAS (in the
        bias's) are written, DK and DV (compute precision) added to; each gradient is laid out as its input."""
        m, b, h, i0 = _program(heads, tiles, BLOCK)
        Q += b * stride_qb + h * stride_qh
        DQ += b * stride_qb + h * stride_qh
        K += b * stride_kb + h * stride_kh
        DK += b * stride_kb + h * stride_kh
        V += b * stride_vb + h * stride_vh
        DV += b * stride_vb + h * stride_vh
        BIAS += b * stride_biasb + h * stride_biash
        DBIAS += b * stride_biasb + h * stride_biash
        REAL += b * stride_mb + h * stride_mh
        OUT += b * stride_ob + h * stride_oh
        DO += b * stride_dob + h * stride_doh
        r, rows, q, bias_r, bias_l, scale, steps_r, steps_l = _query_tile(
            Q, stride_q, BIAS, stride_bias, SCALE, i0, n, d_k, HAS_BIAS, COMPUTE, BLOCK, BLOCK_K)
        live = rows < n
        kw = tl.arange(0, BLOCK_K)
        vw = tl.arange(0, BLOCK_V)
        do = _tile(DO, i0, n, stride_do, d_v, r, vw)
        row_dot = tl.sum(do.to(COMPUTE) * _tile(OUT, i0, n, stride_o, d_v, r, vw), 1)  # dO_i . out_i
        # c_i and s_i of g[i, j] = s_i (dO_i . v_j - c_i), and sigma_g = sum_j G[i, j]
        if NORMALIZE:  # out = A V / T: g = (dO . v_j - dO . out_i) / T, and sum_j G[i, j] = 0 where T > eps
            totals = tl.load(TOTALS + m * n + rows, mask=live, other=0.0)
            alive = totals > 1e-12
            coef = tl.where(alive, row_dot, 0.0)
            row_scale = 1.0 / tl.maximum(totals, 1e-12)
            sigma_g = tl.where(alive, 0.0, row_dot)
        else:
            coef = tl.zeros([BLOCK], COMPUTE)
            row_scale = coef + 1.0
            sigma_g = row_dot
        c_right = tl.zeros([BLOCK], COMPUTE)
        c_left = tl.zeros([BLOCK], COMPUTE)
        g_right = tl.zeros([BLOCK], COMPUTE)  # GR, GL: the running sums of G
        g_left = tl.zeros([BLOCK], COMPUTE)
        grad_bias_r = tl.zeros([BLOCK], COMPUTE)
        grad_bias_l = tl.zeros([BLOCK], COMPUTE)
        dq = tl.zeros([BLOCK, BLOCK_K], COMPUTE)
        wait_dx_r = tl.zeros([BLOCK, BLOCK], COMPUTE)  # the far tiles' parts, added at the next step
        wait_dx_l = tl.zeros([BLOCK, BLOCK], COMPUTE)
        wait_a_r = tl.zeros([BLOCK, BLOCK], COMPUTE)
        wait_a_l = tl.zeros([BLOCK, BLOCK], COMPUTE)
        s_own = _inputs_product(q, _tile(K, i0, n, stride_k, d_k, r, kw), SPLIT, PRECISION, WIDEN)
        s_r = _near_part(s_own, r, r, 1, BLOCK)
        s_l = _near_part(s_own, r, r, -1, BLOCK)
        u_own = _inputs_product(do, _tile(V, i0, n, stride_v, d_v, r, vw), SPLIT, PRECISION, WIDEN)
        u_r = _near_part(u_own, r, r, 1, BLOCK)
        u_l = _near_part(u_own, r, r, -1, BLOCK)
        for part in tl.static_range(3):
            first, last = _walk(part, steps_r, steps_l)
            for t in range(first, last):
                (c_right, c_left, s_r, s_l, u_r, u_l, g_right, g_left, grad_bias_r, grad_bias_l, dq,
                 wait_dx_r, wait_dx_l, wait_a_r, wait_a_l) = _backward_step(
                    q, K, stride_k, V, stride_v, REAL, stride_m, DK, DV, i0, t, n, d_k, d_v, scale, bias_r, bias_l, r,
                    kw, vw, do, coef, row_scale, sigma_g, c_right, c_left, s_r, s_l, u_r, u_l, g_right, g_left,
                    grad_bias_r, grad_bias_l, dq, wait_dx_r, wait_dx_l, wait_a_r, wait_a_l, part != 2, part != 1,
                    HAS_MASK, SPLIT, PRECISION, WIDEN, BLOCK)
        start_r = i0 + steps_r * BLOCK
        start_l = i0 - steps_l * BLOCK
        dq += _product(wait_dx_r, _tile(K, start_r, n, stride_k, d_k, r, kw), SPLIT, PRECISION, WIDEN)
        dq += _product(wait_dx_l, _tile(K, start_l, n, stride_k, d_k, r, kw), SPLIT, PRECISION, WIDEN)
        _add_tile(DK, start_r, n, stride_k, d_k, r, kw,
                  _product(tl.trans(wait_dx_r), q, SPLIT, PRECISION, WIDEN) * scale)
        _add_tile(DK, start_l, n, stride_k, d_k, r, kw,
                  _product(tl.trans(wait_dx_l), q, SPLIT, PRECISION, WIDEN) * scale)
        _add_tile(DV, start_r, n, stride_v, d_v, r, vw, _product(tl.trans(wait_a_r), do, SPLIT, PRECISION, WIDEN))
        _add_tile(DV, start_l, n, stride_v, d_v, r, vw, _product(tl.trans(wait_a_l), do, SPLIT, PRECISION, WIDEN))
        tl.store(DQ + rows[:, None] * stride_q + kw[None, :], dq * scale, mask=live[:, None] & (kw < d_k)[None, :])
        if HAS_BIAS:  # rounded to the bias's dtype
            tl.store(DBIAS + rows * stride_bias, grad_bias_r, mask=live)
            tl.store(DBIAS + rows * stride_bias + 1, grad_bias_l, mask=live)

    # Triton's interpreter (3.9) multiplies bfloat16 tiles as their raw bits: there they are widened first (WIDEN)
    _INTERPRETED = type(_forward_kernel).__name__ == "InterpretedFunction"


def _block(block: int | None) -> int:
    if block is None:
        return BLOCK
    if block < 16 or block & (block - 1):
        raise ValueError(f"block must be a power of two of at least 16 (tl.dot's smallest tile), got {block}")
    return block


def _feature_block(d: int) -> int:
    return max(16, triton.next_power_of_2(d))


class TritonGeometricAttention(torch.autograd.Function):
    """A @ value on `(B, H, N, D)` inputs of one dtype (bfloat16, float32 or float64), in that dtype; bias
    `(B, H, N, 2)` of any floating dtype or None, real `(B, H, N)` bool or None (a mask broadcast over heads, stride
    0, is read as it lies). Computed in float32 (float64 for float64 inputs), as the gradients are. `block`: rows per
    program, distances per step (a power of two, at least 16; the default suits a GPU, the tests use smaller ones).

    The kernels read every tensor through its strides, so heads split off a `(B, N, H * D)` projection by a view and
    a transpose go in without a copy (a layout with gaps, or whose last dimension is not contiguous, is copied
    first: the gradients take the inputs' strides); the output is laid out as `value` and each gradient as its input
    (the transpose back to `(B, N, H, D)` is then a view too), and the bias's gradient is written in the bias's
    dtype. Each pass is one kernel launch and little else (on a GPU below N = 1,024 the launches are most of the
    time): forward writes the output in the compute precision, which backward keeps for dO . out, and, for bfloat16
    inputs, rounded to bfloat16; backward makes c, s and Σ per row itself and scales dK as it adds to it, so around
    it run only the zeroing of the dK and dV sums and their rounding to the inputs' dtype."""

    @staticmethod
    def forward(ctx, query, key, value, scale, bias, real, normalize, block=None):
        if not (query.dtype == key.dtype == value.dtype) or query.dtype not in DTYPES:
            raise ValueError(f"query, key and value must share one dtype of {', '.join(map(str, DTYPES))}; got "
                             f"{query.dtype}, {key.dtype}, {value.dtype}")
        if query.dim() != 4 or key.shape != query.shape or value.dim() != 4 or value.shape[:3] != query.shape[:3]:
            raise ValueError(f"query and key must be (B, H, N, D_k) and value (B, H, N, D); got "
                             f"{tuple(query.shape)}, {tuple(key.shape)}, {tuple(value.shape)}")
        batch, heads, n, d_k = query.shape
        if bias is not None and (tuple(bias.shape) != (batch, heads, n, 2) or not bias.is_floating_point()):
            raise ValueError(f"bias must be floating point of shape {(batch, heads, n, 2)}, got {bias.dtype} "
                             f"{tuple(bias.shape)}")
        if real is not None and (real.dtype != torch.bool or tuple(real.shape) != (batch, heads, n)):
            raise ValueError(f"real must be bool of shape {(batch, heads, n)}, got {real.dtype} {tuple(real.shape)}")
        d_v = value.shape[-1]
        compute = torch.float64 if query.dtype == torch.float64 else torch.float32
        block = _block(block)
        query, key, value = _dense(query), _dense(key), _dense(value)
        bias = _dense(bias) if bias is not None else None
        real = _rows_addressable(real) if real is not None else None  # read through its strides, any of them
        scale_ = _scalar(float(scale), compute, query.device)
        out = torch.empty_like(value, dtype=compute)
        result = out if query.dtype == compute else torch.empty_like(value)
        totals = query.new_empty(batch * heads, n, dtype=compute)
        tiles = triton.cdiv(n, block)
        if n > 0 and batch * heads > 0:
            _forward_kernel[(batch * heads * tiles,)](
                query, key, value, bias if bias is not None else out, real if real is not None else out, out, result,
                totals, scale_, *_strides(query, key, value, bias, real, out), n, d_k, d_v, heads, tiles,
                NORMALIZE=normalize, CAST=result is not out, **_options(query.dtype, bias, real, block, d_k, d_v),
            )
        ctx.save_for_backward(query, key, value, bias, real, out, totals, scale_)
        ctx.normalize, ctx.block = normalize, block
        return result

    @staticmethod
    def backward(ctx, grad_result):
        query, key, value, bias, real, out, totals, scale_ = ctx.saved_tensors
        batch, heads, n, d_k = query.shape
        d_v = value.shape[-1]
        grad_result = grad_result.to(query.dtype)
        if grad_result.stride(-1) != 1:
            grad_result = grad_result.contiguous()
        grad_result = _rows_addressable(grad_result)
        grad_query = torch.empty_like(query)
        grad_key = torch.zeros_like(key, dtype=out.dtype)  # sums of atomic additions, in the compute precision
        grad_value = torch.zeros_like(value, dtype=out.dtype)
        grad_bias = torch.empty_like(bias) if bias is not None else None
        tiles = triton.cdiv(n, ctx.block)
        if n > 0 and batch * heads > 0:
            _backward_kernel[(batch * heads * tiles,)](
                query, key, value, grad_result, bias if bias is not None else out, real if real is not None else out,
                out, totals, grad_query, grad_key, grad_value, grad_bias if grad_bias is not None else out, scale_,
                *_strides(query, key, value, bias, real, out, grad_result), n, d_k, d_v, heads, tiles,
                NORMALIZE=ctx.normalize, **_options(query.dtype, bias, real, ctx.block, d_k, d_v),
            )
        else:
            grad_query.zero_()
            if grad_bias is not None:
                grad_bias.zero_()
        return grad_query, grad_key.to(key.dtype), grad_value.to(value.dtype), None, grad_bias, None, None, None


def _dense(x: torch.Tensor) -> torch.Tensor:
    """`x` as it lies when its last dimension is contiguous and its elements fill its memory without gaps or overlaps,
    in any order of the other dimensions (then `empty_like` gives its gradient the same strides, which the kernels
    assume), else a contiguous copy."""
    dense, expected = x.shape[-1] == 1 or x.stride(-1) == 1, 1
    for size, stride in sorted((p for p in zip(x.shape, x.stride()) if p[0] != 1), key=lambda p: p[1]):
        dense = dense and stride == expected
        expected *= size
    return _rows_addressable(x if dense else x.contiguous())


def _rows_addressable(x: torch.Tensor) -> torch.Tensor:
    """`x` where the kernels' 32-bit row offsets (row index x row stride, within one batch row and head) reach every
    row, else a contiguous copy, whose row stride is the feature width."""
    if x.shape[2] > 1 and x.stride(2) * (x.shape[2] - 1) >= 2**31:
        return x.contiguous()
    return x


def _strides(*tensors) -> list[int]:
    """Batch, head and row strides of each `(B, H, N, ...)` tensor, zeros for a missing one."""
    return [stride for x in tensors for stride in (x.stride()[:3] if x is not None else (0, 0, 0))]


def _scalar(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    """`value` as a one-element tensor on `device`, made once per value (a fill at every call would be one more
    launch); not while a CUDA graph is being captured, where the fill would run only when the graph replays."""
    if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
        return torch.full((1,), value, dtype=dtype, device=device)
    return _kept_scalar(value, dtype, device)


@functools.lru_cache(maxsize=16)
def _kept_scalar(value: float, dtype: torch.dtype, device: torch.device) -> torch.Tensor:
    with torch.inference_mode(False):  # an inference tensor could not be saved for backward by a later training call
        return torch.full((1,), value, dtype=dtype, device=device)


def _options(dtype, bias, real, block, d_k, d_v) -> dict:
    return dict(
        HAS_BIAS=bias is not None, HAS_MASK=real is not None, SPLIT=dtype == torch.bfloat16, PRECISION="ieee",
        WIDEN=_INTERPRETED, COMPUTE=tl.float64 if dtype == torch.float64 else tl.float32,
        BLOCK=block, BLOCK_K=_feature_block(d_k), BLOCK_V=_feature_block(d_v), num_warps=NUM_WARPS,
    )
