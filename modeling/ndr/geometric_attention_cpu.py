"""Fused CPU kernel for geometric attention (thesis Eq. 5.7-5.8) followed by the weighted sum of values.

C++ built with `torch.utils.cpp_extension.load_inline` on first use (about a minute, then cached in
`TORCH_EXTENSIONS_DIR`). `load()` returns None, with a warning, when it cannot be built (no compiler, no ninja), or
when `LENGTHGEN_FUSED_GEOMETRIC=0`; the caller then uses the pure PyTorch path of `geometric_attention.py`.

What it saves over the PyTorch path: per row, one pass computes the log-sigmoids, the prefix sum, the mirror-column
differences and the exponentials in a few arrays of length N that stay in L1 cache, instead of about a dozen passes
over (..., N, N) tensors; weights @ values runs on blocks of rows, so no (..., N, N) tensor other than the logits
and their gradient ever exists. Backward recomputes the weights from the logits (as flash attention does) and holds
one block of rows at a time. Rows are independent, so work is split over (batch x head) matrices with ATen's
thread pool (`torch.set_num_threads` applies).
"""

import hashlib
import os
import warnings

import torch

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <algorithm>
#include <cmath>
#include <vector>

// exp() of arguments below this is kept off the vector library's slow path for underflow (where it calls the scalar
// function lane by lane): arguments are clamped to it, and results that would underflow are set to 0 explicitly.
template <typename T> static constexpr T kLowest = T(-87);
template <> constexpr double kLowest<double> = -700.0;
static constexpr double kEps = 1e-12;  // F.normalize's floor on the L1 norm

// Rows per block: a block's buffers (a few rows x N) stay in L2 cache. The running sums along a row are serial;
// kChains rows are summed side by side so that their adds overlap (buffers are padded to whole groups of rows).
static constexpr int64_t kChains = 8;
static int64_t block_rows(int64_t n) { return std::max<int64_t>(1, std::min<int64_t>(n, 8192 / std::max<int64_t>(n, 1))); }
static int64_t padded(int64_t rows) { return (rows + kChains - 1) / kChains * kChains; }

// Buffers for one block of rows (row r of the block is target i = r0 + r), each rows x N unless said otherwise.
template <typename T>
struct Block {
  int64_t n, rows;
  std::vector<T> log_p;   // log P[i, j] = log sigmoid(x_ij)
  std::vector<T> w;       // A[i, j], unnormalised
  std::vector<T> prefix;  // rows x (N + 1): prefix[c] = sum_{k < c} log(1 - P[i, k]), excluded k adding 0
  std::vector<T> scratch;
  Block(int64_t n, int64_t rows)
      : n(n), rows(rows), log_p(padded(rows) * n), w(padded(rows) * n), prefix(padded(rows) * (n + 1)),
        scratch(padded(rows) * (n + 1)) {}
};

// Eq. 5.7-5.8 for targets r0..r1 of one (N, N) matrix, in log space. logits: the block's rows (r1 - r0, N); bias:
// the matrix's (N, 2) direction bias or null; real: its (N) padding mask or null. Fills the block's log_p, prefix
// and w; writes the row sums of w to totals[i].
template <typename T>
static void block_forward(Block<T>& blk, const T* logits, const T* bias, const bool* real, int64_t r0, int64_t r1,
                          T* totals) {
  const int64_t n = blk.n;
  // the loops below are simple enough for gcc to vectorize, exp and log1p included (glibc's libmvec)
  for (int64_t i = r0; i < r1; ++i) {
    const T* l = logits + (i - r0) * n;
    T* x = blk.scratch.data() + (i - r0) * (n + 1);
    T* log_p = blk.log_p.data() + (i - r0) * n;
    T* log_not_p = blk.w.data() + (i - r0) * n;  // w holds log(1 - P) until the exponentials
    if (bias) {
      const T left = bias[2 * i + 1], right = bias[2 * i];
      for (int64_t j = 0; j < i; ++j) x[j] = l[j] + left;
      for (int64_t j = i; j < n; ++j) x[j] = l[j] + right;
    } else {
      for (int64_t j = 0; j < n; ++j) x[j] = l[j];
    }
    for (int64_t j = 0; j < n; ++j) {
      // log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)); log(1 - sigmoid(x)) = min(-x, 0) - log1p(exp(-|x|))
      const T softplus = std::log1p(std::exp(std::max(-std::abs(x[j]), kLowest<T>)));
      log_p[j] = std::min(x[j], T(0)) - softplus;
      log_not_p[j] = std::min(-x[j], T(0)) - softplus;
    }
    log_not_p[i] = T(0);  // the target and padding are left out of every product
    if (real)
      for (int64_t j = 0; j < n; ++j) log_not_p[j] = real[j] ? log_not_p[j] : T(0);
  }
  for (int64_t r = 0; r < r1 - r0; r += kChains) {  // running sums, kChains rows at a time
    T run[kChains] = {};
    for (int64_t c = 0; c < n; ++c)
      for (int64_t q = 0; q < kChains; ++q) {
        blk.prefix[(r + q) * (n + 1) + c] = run[q];
        run[q] += blk.w[(r + q) * n + c];
      }
    for (int64_t q = 0; q < kChains; ++q) blk.prefix[(r + q) * (n + 1) + n] = run[q];
  }
  for (int64_t i = r0; i < r1; ++i) {
    const T* prefix = blk.prefix.data() + (i - r0) * (n + 1);
    const T* log_p = blk.log_p.data() + (i - r0) * n;
    T* x = blk.scratch.data() + (i - r0) * (n + 1);
    T* w = blk.w.data() + (i - r0) * n;
    // x[j] = sum of log(1 - P_k) over the sources k closer to i than j, with the mirror column m = 2i + 1 - j:
    // right of i (j > i) the columns [m, j) (from 0 once m < 0); left of i the columns [j + 1, m) (to N once m > N)
    const int64_t right_end = std::min(n, 2 * i + 2), left_begin = std::max<int64_t>(0, 2 * i + 1 - n);
    for (int64_t j = 0; j < left_begin; ++j) x[j] = prefix[n] - prefix[j + 1];
    for (int64_t j = left_begin; j < i; ++j) x[j] = prefix[2 * i + 1 - j] - prefix[j + 1];
    x[i] = T(0);
    for (int64_t j = i + 1; j < right_end; ++j) x[j] = prefix[j] - prefix[2 * i + 1 - j];
    for (int64_t j = right_end; j < n; ++j) x[j] = prefix[j];
    for (int64_t j = 0; j < n; ++j) x[j] = std::max(x[j] + log_p[j], kLowest<T>);
    for (int64_t j = 0; j < n; ++j) w[j] = std::exp(x[j]);
    for (int64_t j = 0; j < n; ++j) w[j] = x[j] > kLowest<T> ? w[j] : T(0);
    w[i] = T(0);
    if (real)
      for (int64_t j = 0; j < n; ++j) w[j] = real[j] ? w[j] : T(0);
    T total = 0;
    for (int64_t j = 0; j < n; ++j) total += w[j];
    totals[i] = total;
  }
}

// Small products written out: for short sequences ATen's per-call cost outweighs the arithmetic, so below
// kSmall positions the kernel uses these loops (vectorized along the contiguous rows) instead of at::mm.
static constexpr int64_t kSmall = 64;

// out (rows, width) += coeff (rows, inner) @ b (inner, width), or with transpose out (inner, width) += coeff^T @ b
template <typename T>
static void accumulate(T* out, const T* coeff, const T* b, int64_t rows, int64_t inner, int64_t width,
                       bool transpose, T scale) {
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t k = 0; k < inner; ++k) {
      const T c = coeff[r * inner + k] * scale;
      T* o = transpose ? out + k * width : out + r * width;
      const T* x = transpose ? b + r * width : b + k * width;
      for (int64_t e = 0; e < width; ++e) o[e] += c * x[e];
    }
}

// out (rows, cols) = scale * a (rows, inner) @ b (cols, inner)^T, all rows contiguous; bt: scratch (inner, cols)
template <typename T>
static void dots(T* out, const T* a, const T* b, int64_t rows, int64_t cols, int64_t inner, T scale, T* bt) {
  for (int64_t c = 0; c < cols; ++c)
    for (int64_t k = 0; k < inner; ++k) bt[k * cols + c] = b[c * inner + k];
  std::fill(out, out + rows * cols, T(0));
  accumulate(out, a, bt, rows, inner, cols, false, scale);
}

// query, key (M, N, Dk), value (M, N, D), bias (M, N, 2) or empty, real (M, N) bool or empty. The logits of a
// block of rows are scale * query_rows @ key^T, made when needed and never kept.
// Returns context (M, N, D) = A @ value (A row-normalised if normalize) and the row sums of A (M, N).
std::vector<torch::Tensor> forward(torch::Tensor query, torch::Tensor key, torch::Tensor value, double scale,
                                   torch::Tensor bias, torch::Tensor real, bool normalize) {
  const int64_t M = query.size(0), n = query.size(1), dk = query.size(2), d = value.size(2);
  auto context = torch::empty({M, n, d}, value.options());
  auto totals = torch::empty({M, n}, value.options());
  const int64_t rows = block_rows(n);
  AT_DISPATCH_FLOATING_TYPES(value.scalar_type(), "geometric_attention_forward", [&] {
    const scalar_t* Q = query.data_ptr<scalar_t>();
    const scalar_t* K = key.data_ptr<scalar_t>();
    const scalar_t* V = value.data_ptr<scalar_t>();
    const scalar_t* B = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    const bool* R = real.numel() ? real.data_ptr<bool>() : nullptr;
    scalar_t* C = context.data_ptr<scalar_t>();
    scalar_t* S = totals.data_ptr<scalar_t>();
    at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
      Block<scalar_t> blk(n, rows);
      std::vector<scalar_t> logits(rows * n), transposed(n * dk);
      auto opts = value.options();
      for (int64_t b = begin; b < end; ++b) {
        auto k = torch::from_blob(const_cast<scalar_t*>(K + b * n * dk), {n, dk}, opts);
        auto v = torch::from_blob(const_cast<scalar_t*>(V + b * n * d), {n, d}, opts);
        for (int64_t r0 = 0; r0 < n; r0 += rows) {
          const int64_t r1 = std::min(n, r0 + rows), count = r1 - r0;
          const scalar_t* q_rows = Q + (b * n + r0) * dk;
          if (n < kSmall) {
            dots(logits.data(), q_rows, K + b * n * dk, count, n, dk, scalar_t(scale), transposed.data());
          } else {
            auto l = torch::from_blob(logits.data(), {count, n}, opts);
            at::mm_out(l, torch::from_blob(const_cast<scalar_t*>(q_rows), {count, dk}, opts), k.t());
            if (scale != 1.0) l.mul_(scale);
          }
          block_forward(blk, logits.data(), B ? B + b * n * 2 : nullptr, R ? R + b * n : nullptr, r0, r1, S + b * n);
          if (normalize) {
            for (int64_t i = r0; i < r1; ++i) {
              const scalar_t inverse = scalar_t(1) / std::max(S[b * n + i], scalar_t(kEps));
              scalar_t* w = blk.w.data() + (i - r0) * n;
              for (int64_t j = 0; j < n; ++j) w[j] *= inverse;
            }
          }
          if (n < kSmall) {
            std::fill(C + (b * n + r0) * d, C + (b * n + r1) * d, scalar_t(0));
            accumulate(C + (b * n + r0) * d, blk.w.data(), V + b * n * d, count, n, d, false, scalar_t(1));
          } else {
            auto out = torch::from_blob(C + (b * n + r0) * d, {count, d}, opts);
            at::mm_out(out, torch::from_blob(blk.w.data(), {count, n}, opts), v);
          }
        }
      }
    });
  });
  return {context, totals};
}

// Gradients of forward's context with respect to query, key, value and bias. The logits and A are recomputed block
// by block, as flash attention does, so memory stays O(N) per thread.
std::vector<torch::Tensor> backward(torch::Tensor grad_context, torch::Tensor query, torch::Tensor key,
                                    torch::Tensor value, double scale, torch::Tensor bias, torch::Tensor real,
                                    torch::Tensor totals, bool normalize) {
  const int64_t M = query.size(0), n = query.size(1), dk = query.size(2), d = value.size(2);
  auto grad_query = torch::empty_like(query);
  auto grad_key = torch::zeros_like(key);
  auto grad_value = torch::zeros_like(value);
  auto grad_bias = bias.numel() ? torch::zeros_like(bias) : torch::empty({0}, bias.options());
  const int64_t rows = block_rows(n);
  AT_DISPATCH_FLOATING_TYPES(value.scalar_type(), "geometric_attention_backward", [&] {
    const scalar_t* Q = query.data_ptr<scalar_t>();
    const scalar_t* K = key.data_ptr<scalar_t>();
    const scalar_t* V = value.data_ptr<scalar_t>();
    const scalar_t* B = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    const bool* R = real.numel() ? real.data_ptr<bool>() : nullptr;
    const scalar_t* S = totals.data_ptr<scalar_t>();
    const scalar_t* G = grad_context.data_ptr<scalar_t>();
    scalar_t* GQ = grad_query.data_ptr<scalar_t>();
    scalar_t* GK = grad_key.data_ptr<scalar_t>();
    scalar_t* GV = grad_value.data_ptr<scalar_t>();
    scalar_t* GB = B ? grad_bias.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
      Block<scalar_t> blk(n, rows);
      std::vector<scalar_t> logits(rows * n), gz(rows * n), row_totals(n), gs(rows * d), transposed(n * std::max(d, dk));
      auto opts = value.options();
      for (int64_t b = begin; b < end; ++b) {
        auto k = torch::from_blob(const_cast<scalar_t*>(K + b * n * dk), {n, dk}, opts);
        auto v = torch::from_blob(const_cast<scalar_t*>(V + b * n * d), {n, d}, opts);
        auto gk = torch::from_blob(GK + b * n * dk, {n, dk}, opts);
        auto gv = torch::from_blob(GV + b * n * d, {n, d}, opts);
        const bool* real_b = R ? R + b * n : nullptr;
        for (int64_t r0 = 0; r0 < n; r0 += rows) {
          const int64_t r1 = std::min(n, r0 + rows), count = r1 - r0;
          const bool small = n < kSmall;
          const scalar_t* q_rows = Q + (b * n + r0) * dk;
          const scalar_t* g_rows = G + (b * n + r0) * d;
          auto q = torch::from_blob(const_cast<scalar_t*>(q_rows), {count, dk}, opts);
          if (small) {
            dots(logits.data(), q_rows, K + b * n * dk, count, n, dk, scalar_t(scale), transposed.data());
          } else {
            auto l = torch::from_blob(logits.data(), {count, n}, opts);
            at::mm_out(l, q, k.t());
            if (scale != 1.0) l.mul_(scale);
          }
          block_forward(blk, logits.data(), B ? B + b * n * 2 : nullptr, real_b, r0, r1, row_totals.data());
          // gz: gradient of the weights the forward used, then of A, then of z = log A
          if (small) {
            dots(gz.data(), g_rows, V + b * n * d, count, n, d, scalar_t(1), transposed.data());
          } else {
            auto gzb = torch::from_blob(gz.data(), {count, n}, opts);
            at::mm_out(gzb, torch::from_blob(const_cast<scalar_t*>(g_rows), {count, d}, opts), v.t());
          }
          // value gradient: (A / T)^T @ grad_context = A^T @ (grad_context rows divided by their totals T)
          for (int64_t i = r0; i < r1; ++i) {
            const scalar_t inverse = normalize ? scalar_t(1) / std::max(S[b * n + i], scalar_t(kEps)) : scalar_t(1);
            for (int64_t c = 0; c < d; ++c) gs[(i - r0) * d + c] = G[(b * n + i) * d + c] * inverse;
          }
          if (small)
            accumulate(GV + b * n * d, blk.w.data(), gs.data(), count, n, d, true, scalar_t(1));
          else
            gv.addmm_(torch::from_blob(blk.w.data(), {count, n}, opts).t(), torch::from_blob(gs.data(), {count, d}, opts));
          for (int64_t i = r0; i < r1; ++i) {
            const scalar_t* w = blk.w.data() + (i - r0) * n;
            scalar_t* gi = gz.data() + (i - r0) * n;
            if (normalize) {  // A_hat = A / T: dL/dA = (dL/dA_hat - sum_k dL/dA_hat_k A_hat_k) / T
              const scalar_t total = S[b * n + i], t = std::max(total, scalar_t(kEps));
              scalar_t dot = 0;
              for (int64_t j = 0; j < n; ++j) dot += gi[j] * w[j];
              dot = total <= scalar_t(kEps) ? scalar_t(0) : dot / t;
              for (int64_t j = 0; j < n; ++j) gi[j] = (gi[j] - dot) / t;
            }
            for (int64_t j = 0; j < n; ++j) gi[j] *= w[j];  // A = exp(z): dA = A dz
            // z_j = log_p_j + prefix[hi_j] - prefix[lo_j] (forward's column ranges): gradient of prefix[c], c = 1..N.
            // direct terms: +gz_c for c > i (right sources), -gz_{c-1} for c <= i (left sources, lo = j + 1);
            // mirror terms m = 2i + 1 - c: -gz_m for c <= i (m > i), +gz_m for i + 2 <= c < N (m < i), and prefix[N]
            // also takes every left source whose mirror lies beyond the end. prefix[0] = 0 is constant.
            scalar_t* gp = blk.scratch.data() + (i - r0) * (n + 1);
            gp[0] = scalar_t(0);
            const int64_t mirror_begin = std::min(i + 1, std::max<int64_t>(1, 2 * i + 2 - n));
            for (int64_t c = 1; c < mirror_begin; ++c) gp[c] = -gi[c - 1];  // mirror 2i + 1 - c >= N
            for (int64_t c = mirror_begin; c <= i; ++c) gp[c] = -gi[c - 1] - gi[2 * i + 1 - c];
            if (i + 1 < n) gp[i + 1] = gi[i + 1];
            const int64_t mirror_end = std::min(n, 2 * i + 2);
            for (int64_t c = i + 2; c < mirror_end; ++c) gp[c] = gi[c] + gi[2 * i + 1 - c];
            for (int64_t c = std::max(i + 2, mirror_end); c < n; ++c) gp[c] = gi[c];
            scalar_t beyond = 0;  // left sources j <= 2i + 1 - N read prefix[N]
            for (int64_t j = 0; j <= std::min(i - 1, 2 * i + 1 - n); ++j) beyond += gi[j];
            gp[n] = beyond;
          }
          // prefix[c] = sum_{k < c} log(1 - P_k): the gradient of log(1 - P_k) is sum_{c > k} grad prefix[c]
          for (int64_t r = 0; r < count; r += kChains) {
            scalar_t run[kChains] = {};
            for (int64_t c = n - 1; c >= 0; --c)
              for (int64_t q = 0; q < kChains; ++q) {
                run[q] += blk.scratch[(r + q) * (n + 1) + c + 1];
                blk.prefix[(r + q) * (n + 1) + c] = run[q];
              }
          }
          for (int64_t i = r0; i < r1; ++i) {
            const scalar_t* lp = blk.log_p.data() + (i - r0) * n;
            scalar_t* gi = gz.data() + (i - r0) * n;
            scalar_t* gl = blk.prefix.data() + (i - r0) * (n + 1);  // gradient of log(1 - P)
            gl[i] = scalar_t(0);
            if (real_b)
              for (int64_t j = 0; j < n; ++j) gl[j] = real_b[j] ? gl[j] : scalar_t(0);
            // d log sigmoid(x) / dx = 1 - P, d log(1 - sigmoid(x)) / dx = -P; gi becomes the logits' gradient
            for (int64_t j = 0; j < n; ++j) {
              const scalar_t p = std::exp(std::max(lp[j], kLowest<scalar_t>));
              gi[j] = gi[j] * (scalar_t(1) - p) - gl[j] * p;
            }
            if (GB) {
              scalar_t left = 0, right = 0;
              for (int64_t j = 0; j < i; ++j) left += gi[j];
              for (int64_t j = i; j < n; ++j) right += gi[j];
              GB[(b * n + i) * 2] = right;
              GB[(b * n + i) * 2 + 1] = left;
            }
          }
          // logits = scale * q k^T: grad q = scale * grad_logits @ k, grad k += scale * grad_logits^T @ q
          if (small) {
            std::fill(GQ + (b * n + r0) * dk, GQ + (b * n + r1) * dk, scalar_t(0));
            accumulate(GQ + (b * n + r0) * dk, gz.data(), K + b * n * dk, count, n, dk, false, scalar_t(scale));
            accumulate(GK + b * n * dk, gz.data(), q_rows, count, n, dk, true, scalar_t(scale));
          } else {
            auto grad_logits = torch::from_blob(gz.data(), {count, n}, opts);
            auto gq = torch::from_blob(GQ + (b * n + r0) * dk, {count, dk}, opts);
            at::mm_out(gq, grad_logits, k);
            if (scale != 1.0) gq.mul_(scale);
            gk.addmm_(grad_logits.t(), q, 1.0, scale);
          }
        }
      }
    });
  });
  return {grad_query, grad_key, grad_value, grad_bias};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "geometric attention: A @ value and the row sums of A");
  m.def("backward", &backward, "geometric attention: gradients of query, key, value and direction bias");
}
"""

_MODULE = None
_TRIED = False


def _flags() -> list[str]:
    # -ffast-math lets gcc call glibc's vector exp/log1p (libmvec); -mavx2 only where this CPU has it
    flags = ["-O3", "-ffast-math"]
    if torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512"):
        flags += ["-mavx2", "-mfma"]
    return flags


def load():
    """The compiled extension, or None when it is switched off or cannot be built (then warns once)."""
    global _MODULE, _TRIED
    if _TRIED:
        return _MODULE
    _TRIED = True
    if os.environ.get("LENGTHGEN_FUSED_GEOMETRIC", "1") == "0":
        return None
    from torch.utils import cpp_extension

    flags = _flags()
    key = hashlib.sha256((SOURCE + " ".join(flags) + torch.__version__).encode()).hexdigest()[:12]
    try:
        _MODULE = cpp_extension.load_inline(
            name=f"lengthgen_geometric_attention_{key}",
            cpp_sources=SOURCE,
            extra_cflags=flags,
            verbose=False,
        )
    except Exception as error:  # no compiler or ninja, or a failed build: the PyTorch path is exact, only slower
        warnings.warn(
            f"lengthgen: the fused geometric attention kernel could not be built ({type(error).__name__}: "
            f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}); using the PyTorch path. "
            "Set LENGTHGEN_FUSED_GEOMETRIC=0 to skip the attempt.",
            stacklevel=3,
        )
        _MODULE = None
    return _MODULE
