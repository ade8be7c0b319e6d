"""Fused CPU kernel for geometric attention (thesis Eq. 5.7-5.8) followed by the weighted sum of values.

C++ built with `torch.utils.cpp_extension.load_inline` on first use (about a minute, then cached in
`TORCH_EXTENSIONS_DIR`). `load()` returns None, with a warning, when it cannot be built (no compiler, no ninja), or
when `LENGTHGEN_FUSED_GEOMETRIC=0`; the caller then uses the pure PyTorch path of `geometric_attention.py`.

What it saves over the PyTorch path: per row, the log-sigmoids, the prefix sum, the mirror-column differences and
the exponentials are computed in a few arrays of length N that stay in cache, instead of about a dozen passes over
(..., N, N) tensors. From 256 positions on, the logits are made and used a block of 64 rows at a time and never
kept, so evaluation holds no (..., N, N) tensor; shorter sequences get batched products over all matrices instead.
When a gradient is needed, forward keeps the weights A (as large as the scores) and backward recomputes only the
logits' sigmoids: redoing the whole forward, flash attention style, would cost backward three more transcendental
functions per score and the prefix sums again, for memory the issue's budget (2x the scores) does not need. Rows are
independent, so the work is split over (batch x head x block of rows) tasks with ATen's thread pool
(`torch.set_num_threads` applies; the extension is built with OpenMP, which that pool is), each thread with its own
buffers; backward from 256 positions on splits over whole matrices, whose blocks of rows all add to one key gradient.
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

// Rows per block: 64 rows make the products big enough for BLAS to run near its speed (8 rows cost 1.8x at
// N = 1024 here). Within a block the rows go kChains at a time, so that their buffers stay in L2 cache at any N:
// the running sums along a row are serial, and the sums of kChains rows side by side let their adds overlap.
static constexpr int64_t kRows = 64;
static constexpr int64_t kChains = 8;
static_assert(kRows % kChains == 0, "blocks hold whole groups of chains");

// Buffers for one block of kRows rows (logits, w; none for short sequences, whose (M, N, N) tensors are made whole)
// and for one group of kChains rows within it (the rest): the steps of a row run a group at a time, so that their
// buffers stay in L2 cache at any length.
template <typename T>
struct Block {
  int64_t n;
  std::vector<T> logits;   // kRows x N: scale * q k^T; in backward, then P = sigmoid(logits + bias)
  std::vector<T> w;        // kRows x N: A[i, j], unnormalised (forward without kept weights), or dL/dA in backward
  std::vector<T> log_p;    // kChains x N: log P[i, j]
  std::vector<T> prefix;   // kChains x (N + 1): prefix[c] = sum_{k < c} log(1 - P[i, k]), excluded k adding 0
  std::vector<T> scratch;  // kChains x (N + 1)
  Block(int64_t n, bool whole)
      : n(n), logits(whole ? 0 : kRows * n), w(whole ? 0 : kRows * n), log_p(kChains * n), prefix(kChains * (n + 1)),
        scratch(kChains * (n + 1)) {}
};

// log1p(e) for e = exp(-|x|) in (0, 1]: log(1 + e) = 2 atanh(t), t = e / (2 + e) in (0, 1/3], by its series to t^15
// (truncation below 2e-9 relative, under float's rounding). glibc's vector log1pf cost four times its expf here;
// this is one division and eight multiply-adds. Double keeps std::log1p.
template <typename T>
static inline T log1p_unit(T e) {
  const T t = e / (T(2) + e), u = t * t;
  const T series = T(1) + u * (T(1) / 3 + u * (T(1) / 5 + u * (T(1) / 7 + u * (T(1) / 9 + u * (T(1) / 11 +
                   u * (T(1) / 13 + u * (T(1) / 15)))))));
  return T(2) * t * series;
}
template <> inline double log1p_unit<double>(double e) { return std::log1p(e); }

// x_ij = logits_ij + the direction bias of row i (bias[i, 0] at j >= i, bias[i, 1] at j < i), in place.
template <typename T>
static void add_bias(T* x, const T* bias, int64_t i, int64_t n) {
  if (!bias) return;
  const T left = bias[2 * i + 1], right = bias[2 * i];
  for (int64_t j = 0; j < i; ++j) x[j] += left;
  for (int64_t j = i; j < n; ++j) x[j] += right;
}

// Eq. 5.7-5.8 for the targets g0..g1 (at most kChains) of one (N, N) matrix, in log space. logits: their rows
// (bias added here); bias: the matrix's (N, 2) direction bias or null; real: its (N) padding mask or null. Writes
// the unnormalised weights A of the rows to w ((g1 - g0) x N) and their row sums to totals[i].
template <typename T>
static void group_forward(Block<T>& blk, T* logits, const T* bias, const bool* real, int64_t g0, int64_t g1, T* w,
                          T* totals) {
  const int64_t n = blk.n;
  // the loops below are simple enough for gcc to vectorize, exp included (glibc's libmvec)
  for (int64_t i = g0; i < g1; ++i) {
    T* x = logits + (i - g0) * n;
    T* log_p = blk.log_p.data() + (i - g0) * n;
    T* log_not_p = blk.scratch.data() + (i - g0) * (n + 1);
    add_bias(x, bias, i, n);
    for (int64_t j = 0; j < n; ++j) {
      // log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)); log(1 - sigmoid(x)) = min(-x, 0) - log1p(exp(-|x|))
      const T softplus = log1p_unit(std::exp(std::max(-std::abs(x[j]), kLowest<T>)));
      log_p[j] = std::min(x[j], T(0)) - softplus;
      log_not_p[j] = std::min(-x[j], T(0)) - softplus;
    }
    log_not_p[i] = T(0);  // the target and padding are left out of every product
    if (real)
      for (int64_t j = 0; j < n; ++j) log_not_p[j] = real[j] ? log_not_p[j] : T(0);
  }
  T run[kChains] = {};  // the running sums of the group's rows side by side (rows past g1 sum leftovers, unread)
  for (int64_t c = 0; c < n; ++c)
    for (int64_t q = 0; q < kChains; ++q) {
      blk.prefix[q * (n + 1) + c] = run[q];
      run[q] += blk.scratch[q * (n + 1) + c];
    }
  for (int64_t q = 0; q < kChains; ++q) blk.prefix[q * (n + 1) + n] = run[q];
  for (int64_t i = g0; i < g1; ++i) {
    const T* prefix = blk.prefix.data() + (i - g0) * (n + 1);
    const T* log_p = blk.log_p.data() + (i - g0) * n;
    T* x = blk.scratch.data() + (i - g0) * (n + 1);
    T* wi = w + (i - g0) * n;
    // x[j] = sum of log(1 - P_k) over the sources k closer to i than j, with the mirror column m = 2i + 1 - j:
    // right of i (j > i) the columns [m, j) (from 0 once m < 0); left of i the columns [j + 1, m) (to N once m > N)
    const int64_t right_end = std::min(n, 2 * i + 2), left_begin = std::max<int64_t>(0, 2 * i + 1 - n);
    for (int64_t j = 0; j < left_begin; ++j) x[j] = prefix[n] - prefix[j + 1];
    for (int64_t j = left_begin; j < i; ++j) x[j] = prefix[2 * i + 1 - j] - prefix[j + 1];
    x[i] = T(0);
    for (int64_t j = i + 1; j < right_end; ++j) x[j] = prefix[j] - prefix[2 * i + 1 - j];
    for (int64_t j = right_end; j < n; ++j) x[j] = prefix[j];
    for (int64_t j = 0; j < n; ++j) x[j] = std::max(x[j] + log_p[j], kLowest<T>);
    for (int64_t j = 0; j < n; ++j) wi[j] = std::exp(x[j]);
    for (int64_t j = 0; j < n; ++j) wi[j] = x[j] > kLowest<T> ? wi[j] : T(0);
    wi[i] = T(0);
    if (real)
      for (int64_t j = 0; j < n; ++j) wi[j] = real[j] ? wi[j] : T(0);
    T total = 0;
    for (int64_t j = 0; j < n; ++j) total += wi[j];
    totals[i] = total;
  }
}

// Below kSmall positions, one batched product over all matrices (at::bmm) beats products per block of rows (here
// 1.5x SDPA's time instead of 2.2x at N = 64, 1.9x instead of 2.0x at 192, and 2.0x instead of 1.8x at 256); the
// (M, N, N) tensors this makes (logits and weights, and in backward the logits' gradient) are small there. From
// kSmall positions on, blocks of kRows rows, and no (M, N, N) tensor but the weights kept for backward.
static constexpr int64_t kSmall = 256;

// Backward of targets g0..g1 (at most kChains) of one matrix. p: their rows of P = sigmoid(logits + bias); gz: their
// rows of the gradient of the (normalised) weights, made into that of the logits; w: their rows of A; totals, real:
// the matrix's row sums of A and padding mask (or null); grad_bias: the matrix's (N, 2) bias gradient or null.
template <typename T>
static void group_backward(Block<T>& blk, const T* p, T* gz, const T* w, const T* totals, const bool* real,
                           bool normalize, int64_t g0, int64_t g1, T* grad_bias) {
  const int64_t n = blk.n;
  for (int64_t i = g0; i < g1; ++i) {
    const T* wi = w + (i - g0) * n;
    T* gi = gz + (i - g0) * n;
    if (normalize) {  // A_hat = A / T: dL/dA = (dL/dA_hat - sum_k dL/dA_hat_k A_hat_k) / T
      const T total = totals[i], t = std::max(total, T(kEps));
      T dot = 0;
      for (int64_t j = 0; j < n; ++j) dot += gi[j] * wi[j];
      dot = total <= T(kEps) ? T(0) : dot / t;
      for (int64_t j = 0; j < n; ++j) gi[j] = (gi[j] - dot) / t;
    }
    for (int64_t j = 0; j < n; ++j) gi[j] *= wi[j];  // A = exp(z): dA = A dz
    // z_j = log_p_j + prefix[hi_j] - prefix[lo_j] (forward's column ranges): gradient of prefix[c], c = 1..N.
    // direct terms: +gz_c for c > i (right sources), -gz_{c-1} for c <= i (left sources, lo = j + 1);
    // mirror terms m = 2i + 1 - c: -gz_m for c <= i (m > i), +gz_m for i + 2 <= c < N (m < i), and prefix[N]
    // also takes every left source whose mirror lies beyond the end. prefix[0] = 0 is constant.
    T* gp = blk.scratch.data() + (i - g0) * (n + 1);
    gp[0] = T(0);
    const int64_t mirror_begin = std::min(i + 1, std::max<int64_t>(1, 2 * i + 2 - n));
    for (int64_t c = 1; c < mirror_begin; ++c) gp[c] = -gi[c - 1];  // mirror 2i + 1 - c >= N
    for (int64_t c = mirror_begin; c <= i; ++c) gp[c] = -gi[c - 1] - gi[2 * i + 1 - c];
    if (i + 1 < n) gp[i + 1] = gi[i + 1];
    const int64_t mirror_end = std::min(n, 2 * i + 2);
    for (int64_t c = i + 2; c < mirror_end; ++c) gp[c] = gi[c] + gi[2 * i + 1 - c];
    for (int64_t c = std::max(i + 2, mirror_end); c < n; ++c) gp[c] = gi[c];
    T beyond = 0;  // left sources j <= 2i + 1 - N read prefix[N]
    for (int64_t j = 0; j <= std::min(i - 1, 2 * i + 1 - n); ++j) beyond += gi[j];
    gp[n] = beyond;
  }
  // prefix[c] = sum_{k < c} log(1 - P_k): the gradient of log(1 - P_k) is sum_{c > k} grad prefix[c]
  T run[kChains] = {};
  for (int64_t c = n - 1; c >= 0; --c)
    for (int64_t q = 0; q < kChains; ++q) {
      run[q] += blk.scratch[q * (n + 1) + c + 1];
      blk.prefix[q * (n + 1) + c] = run[q];
    }
  for (int64_t i = g0; i < g1; ++i) {
    const T* pi = p + (i - g0) * n;
    T* gi = gz + (i - g0) * n;
    T* gl = blk.prefix.data() + (i - g0) * (n + 1);  // gradient of log(1 - P)
    gl[i] = T(0);
    if (real)
      for (int64_t j = 0; j < n; ++j) gl[j] = real[j] ? gl[j] : T(0);
    // d log sigmoid(x) / dx = 1 - P, d log(1 - sigmoid(x)) / dx = -P; gi becomes the logits' gradient
    for (int64_t j = 0; j < n; ++j) gi[j] = gi[j] * (T(1) - pi[j]) - gl[j] * pi[j];
    if (grad_bias) {
      T left = 0, right = 0;
      for (int64_t j = 0; j < i; ++j) left += gi[j];
      for (int64_t j = i; j < n; ++j) right += gi[j];
      grad_bias[2 * i] = right;
      grad_bias[2 * i + 1] = left;
    }
  }
}

// out (rows, cols) = scale * a (rows, inner) @ b (cols, inner)^T, all rows contiguous
template <typename T>
static void products(T* out, const T* a, const T* b, int64_t rows, int64_t cols, int64_t inner, double scale,
                     const at::TensorOptions& opts) {
  auto o = torch::from_blob(out, {rows, cols}, opts);
  at::mm_out(o, torch::from_blob(const_cast<T*>(a), {rows, inner}, opts),
             torch::from_blob(const_cast<T*>(b), {cols, inner}, opts).t());
  if (scale != 1.0) o.mul_(scale);
}

// query, key (M, N, Dk), value (M, N, D), bias (M, N, 2) or empty, real (M, N) bool or empty. From kSmall positions
// on, the logits of a block of rows are scale * query_rows @ key^T, made when needed and never kept.
// Returns context (M, N, D) = A @ value (A row-normalised if normalize), the row sums of A (M, N), and, if
// keep_weights (for backward), the unnormalised A (M, N, N); otherwise A exists one block of rows at a time.
std::vector<torch::Tensor> forward(torch::Tensor query, torch::Tensor key, torch::Tensor value, double scale,
                                   torch::Tensor bias, torch::Tensor real, bool normalize, bool keep_weights) {
  const int64_t M = query.size(0), n = query.size(1), dk = query.size(2), d = value.size(2);
  const bool whole = n < kSmall;
  auto opts = value.options();
  // the scale goes on the (M, N, Dk) queries once instead of on every (N, N) block of logits
  auto scaled_query = scale != 1.0 ? (query * scale).contiguous() : query;
  auto logits = whole ? at::bmm(scaled_query, key.transpose(1, 2)) : torch::empty({0}, opts);
  auto weights = keep_weights || whole ? torch::empty({M, n, n}, opts) : torch::empty({0}, opts);
  auto context = torch::empty({M, n, d}, opts);
  auto totals = torch::empty({M, n}, opts);
  AT_DISPATCH_FLOATING_TYPES(value.scalar_type(), "geometric_attention_forward", [&] {
    const scalar_t* Q = scaled_query.data_ptr<scalar_t>();
    const scalar_t* K = key.data_ptr<scalar_t>();
    const scalar_t* V = value.data_ptr<scalar_t>();
    const scalar_t* B = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    const bool* R = real.numel() ? real.data_ptr<bool>() : nullptr;
    scalar_t* L = whole ? logits.data_ptr<scalar_t>() : nullptr;
    scalar_t* W = weights.numel() ? weights.data_ptr<scalar_t>() : nullptr;
    scalar_t* C = context.data_ptr<scalar_t>();
    scalar_t* S = totals.data_ptr<scalar_t>();
    // every (matrix, block of rows) is independent: the tasks are split over the threads, each with its own buffers
    const int64_t blocks = (n + kRows - 1) / kRows;
    at::parallel_for(0, M * blocks, 1, [&](int64_t begin, int64_t end) {
      Block<scalar_t> blk(n, whole);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / blocks, r0 = (task % blocks) * kRows;
        {
          const int64_t r1 = std::min(n, r0 + kRows), count = r1 - r0;
          scalar_t* l = whole ? L + (b * n + r0) * n : blk.logits.data();
          if (!whole) products(l, Q + (b * n + r0) * dk, K + b * n * dk, count, n, dk, 1.0, opts);
          scalar_t* w = W ? W + (b * n + r0) * n : blk.w.data();
          for (int64_t g0 = r0; g0 < r1; g0 += kChains)
            group_forward(blk, l + (g0 - r0) * n, B ? B + b * n * 2 : nullptr, R ? R + b * n : nullptr, g0,
                          std::min(r1, g0 + kChains), w + (g0 - r0) * n, S + b * n);
          if (!whole) {
            auto out = torch::from_blob(C + (b * n + r0) * d, {count, d}, opts);
            at::mm_out(out, torch::from_blob(w, {count, n}, opts),
                       torch::from_blob(const_cast<scalar_t*>(V + b * n * d), {n, d}, opts));
          }
        }
      }
    });
  });
  if (whole) at::bmm_out(context, weights, value);
  if (normalize) context.div_(totals.clamp_min(kEps).unsqueeze(-1));  // (A / T) @ value = (A @ value) / T
  if (!keep_weights) weights = torch::empty({0}, opts);
  return {context, totals, weights};
}

// Gradients of forward's context with respect to query, key, value and bias, from the weights forward kept. The
// logits are recomputed (one product) for the sigmoids P; nothing else of the forward is redone.
std::vector<torch::Tensor> backward(torch::Tensor grad_context, torch::Tensor query, torch::Tensor key,
                                    torch::Tensor value, double scale, torch::Tensor bias, torch::Tensor real,
                                    torch::Tensor totals, torch::Tensor weights, bool normalize) {
  const int64_t M = query.size(0), n = query.size(1), dk = query.size(2), d = value.size(2);
  const bool whole = n < kSmall;
  auto opts = value.options();
  // value gradient: (A / T)^T @ grad_context = A^T @ (grad_context rows divided by their totals T)
  auto grad_value = at::bmm(weights.transpose(1, 2),
                            normalize ? grad_context / totals.clamp_min(kEps).unsqueeze(-1) : grad_context);
  auto scaled_query = scale != 1.0 ? (query * scale).contiguous() : query;
  auto sigmoids = whole ? at::bmm(scaled_query, key.transpose(1, 2)) : torch::empty({0}, opts);
  auto grad_logits = whole ? at::bmm(grad_context, value.transpose(1, 2)) : torch::empty({0}, opts);
  auto grad_query = whole ? torch::empty({0}, opts) : torch::empty_like(query);
  auto grad_key = whole ? torch::empty({0}, opts) : torch::zeros_like(key);
  auto grad_bias = bias.numel() ? torch::zeros_like(bias) : torch::empty({0}, opts);
  AT_DISPATCH_FLOATING_TYPES(value.scalar_type(), "geometric_attention_backward", [&] {
    const scalar_t* Q = query.data_ptr<scalar_t>();
    const scalar_t* QS = scaled_query.data_ptr<scalar_t>();
    const scalar_t* K = key.data_ptr<scalar_t>();
    const scalar_t* V = value.data_ptr<scalar_t>();
    const scalar_t* B = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    const bool* R = real.numel() ? real.data_ptr<bool>() : nullptr;
    const scalar_t* S = totals.data_ptr<scalar_t>();
    const scalar_t* W = weights.data_ptr<scalar_t>();
    const scalar_t* G = grad_context.data_ptr<scalar_t>();
    scalar_t* P = whole ? sigmoids.data_ptr<scalar_t>() : nullptr;
    scalar_t* GL = whole ? grad_logits.data_ptr<scalar_t>() : nullptr;
    scalar_t* GQ = whole ? nullptr : grad_query.data_ptr<scalar_t>();
    scalar_t* GK = whole ? nullptr : grad_key.data_ptr<scalar_t>();
    scalar_t* GB = B ? grad_bias.data_ptr<scalar_t>() : nullptr;
    // tasks of one block of rows, except from kSmall positions on, where a matrix's blocks all add to its key
    // gradient: there a task is a whole matrix
    const int64_t blocks = (n + kRows - 1) / kRows, per_task = whole ? 1 : blocks;
    at::parallel_for(0, M * blocks / per_task, 1, [&](int64_t begin, int64_t end) {
      Block<scalar_t> blk(n, whole);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task * per_task / blocks, first = (task * per_task) % blocks;
        const scalar_t* bias_b = B ? B + b * n * 2 : nullptr;
        for (int64_t r0 = first * kRows; r0 < std::min(n, (first + per_task) * kRows); r0 += kRows) {
          const int64_t r1 = std::min(n, r0 + kRows), count = r1 - r0;
          const scalar_t* q_rows = Q + (b * n + r0) * dk;
          scalar_t* p = whole ? P + (b * n + r0) * n : blk.logits.data();
          scalar_t* gz = whole ? GL + (b * n + r0) * n : blk.w.data();
          if (!whole) {
            products(p, QS + (b * n + r0) * dk, K + b * n * dk, count, n, dk, 1.0, opts);
            products(gz, G + (b * n + r0) * d, V + b * n * d, count, n, d, 1.0, opts);
          }
          // P = sigmoid(x) = 1 / (1 + e) at x >= 0 and e / (1 + e) below, e = exp(-|x|)
          for (int64_t i = r0; i < r1; ++i) {
            scalar_t* x = p + (i - r0) * n;
            add_bias(x, bias_b, i, n);
            for (int64_t j = 0; j < n; ++j) {
              const scalar_t e = std::exp(std::max(-std::abs(x[j]), kLowest<scalar_t>));
              x[j] = (x[j] >= scalar_t(0) ? scalar_t(1) : e) / (scalar_t(1) + e);
            }
          }
          for (int64_t g0 = r0; g0 < r1; g0 += kChains)
            group_backward(blk, p + (g0 - r0) * n, gz + (g0 - r0) * n, W + (b * n + g0) * n, S + b * n,
                           R ? R + b * n : nullptr, normalize, g0, std::min(r1, g0 + kChains),
                           GB ? GB + b * n * 2 : nullptr);
          if (!whole) {  // logits = scale * q k^T: grad q = scale * grad_logits @ k, grad k += scale * grad_logits^T @ q
            auto gl = torch::from_blob(gz, {count, n}, opts);
            auto gq = torch::from_blob(GQ + (b * n + r0) * dk, {count, dk}, opts);
            at::mm_out(gq, gl, torch::from_blob(const_cast<scalar_t*>(K + b * n * dk), {n, dk}, opts));
            if (scale != 1.0) gq.mul_(scale);
            torch::from_blob(GK + b * n * dk, {n, dk}, opts)
                .addmm_(gl.t(), torch::from_blob(const_cast<scalar_t*>(q_rows), {count, dk}, opts), 1.0, scale);
          }
        }
      }
    });
  });
  if (whole) {
    grad_query = at::bmm(grad_logits, key).mul_(scale);
    grad_key = at::bmm(grad_logits.transpose(1, 2), query).mul_(scale);
  }
  return {grad_query, grad_key, grad_value, grad_bias};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "geometric attention: A @ value, the row sums of A, and A if kept for backward");
  m.def("backward", &backward, "geometric attention: gradients of query, key, value and direction bias");
}
"""

# Vector code for the CPU it builds on (the build is cached per instruction set, so a shared cache never serves one
# CPU's build to another): "avx512" and "avx2" where torch reports them, "portable" (the compiler's baseline x86-64,
# SSE2) otherwise or on request (LENGTHGEN_GEOMETRIC_ISA=portable|avx2|avx512).
ISA_FLAGS = {
    "portable": [],
    "avx2": ["-mavx2", "-mfma"],
    "avx512": ["-mavx2", "-mfma", "-mavx512f", "-mavx512dq", "-mavx512bw", "-mavx512vl", "-mprefer-vector-width=512"],
}
_MODULES: dict[str, object] = {}


def native_isa() -> str:
    """The widest instruction set of `ISA_FLAGS` this CPU runs, as torch's own dispatch sees it."""
    return {"AVX512": "avx512", "AVX2": "avx2"}.get(torch.backends.cpu.get_cpu_capability(), "portable")


def _flags(isa: str) -> list[str]:
    # -fopenmp: ATen's parallel_for is an OpenMP region compiled into this extension (without the flag it would run
    # on one thread); -ffast-math lets gcc call glibc's vector exp (libmvec) in the instruction set's width
    return ["-O3", "-ffast-math", "-fopenmp", *ISA_FLAGS[isa]]


def load(isa: str | None = None):
    """The compiled extension for `isa` (default: LENGTHGEN_GEOMETRIC_ISA, else the CPU's own, `native_isa`), or None
    when it is switched off (LENGTHGEN_FUSED_GEOMETRIC=0) or cannot be built (then warns once)."""
    if os.environ.get("LENGTHGEN_FUSED_GEOMETRIC", "1") == "0":
        return None
    isa = isa or os.environ.get("LENGTHGEN_GEOMETRIC_ISA") or native_isa()
    if isa not in ISA_FLAGS:
        raise ValueError(f"LENGTHGEN_GEOMETRIC_ISA must be one of {', '.join(ISA_FLAGS)}, got {isa!r}")
    if isa in _MODULES:
        return _MODULES[isa]
    from torch.utils import cpp_extension

    flags = _flags(isa)
    key = hashlib.sha256((SOURCE + " ".join(flags) + torch.__version__).encode()).hexdigest()[:12]
    try:
        _MODULES[isa] = cpp_extension.load_inline(
            name=f"lengthgen_geometric_attention_{isa}_{key}",
            cpp_sources=SOURCE,
            extra_cflags=flags,
            extra_ldflags=["-fopenmp"],
            verbose=False,
        )
    except Exception as error:  # no compiler or ninja, or a failed build: the PyTorch path is exact, only slower
        warnings.warn(
            f"lengthgen: the fused geometric attention kernel could not be built ({type(error).__name__}: "
            f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}); using the PyTorch path. "
            "Set LENGTHGEN_FUSED_GEOMETRIC=0 to skip the attempt.",
            stacklevel=3,
        )
        _MODULES[isa] = None
    return _MODULES[isa]
