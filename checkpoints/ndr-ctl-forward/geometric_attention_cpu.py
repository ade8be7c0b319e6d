"""Fused CPU kernel for geometric attention (thesis Eq. 5.7-5.8) followed by the weighted sum of values.

C++ built with `torch.utils.cpp_extension.load_inline` on first use (about a minute, said in one line on stderr),
then cached in a build folder of this installation's own (see `build_directory`). `load()` returns None, with a
warning, when it cannot be built (no compiler, no ninja), or when `LENGTHGEN_FUSED_GEOMETRIC=0`; the caller then uses
the pure PyTorch path of `geometric_attention.py`.

What it saves over the PyTorch path: per row, the log-sigmoids, the prefix sum, the mirror-column differences and
the exponentials are computed in a few arrays of length N that stay in cache, instead of about a dozen passes over
(..., N, N) tensors. The logits are made and used a block of 64 rows at a time and never kept, so evaluation holds
no (..., N, N) tensor. When a gradient is needed, forward keeps the weights A (as large as the scores) and backward
recomputes only the logits' sigmoids: redoing the whole forward, flash attention style, would cost backward three
more transcendental functions per score and the prefix sums again, to save memory that the kept weights, as large as
the scores, already fit in. Rows are independent, so forward is split over (batch x head x block of rows) tasks with
ATen's thread pool (`torch.set_num_threads` applies; the extension is built with OpenMP, which that pool is), each
thread with its own buffers; backward splits over whole matrices, whose blocks of rows all add to one key gradient.
Each task calls BLAS directly, single-threaded, with denormal floats flushed to zero (the comments in `SOURCE` say why
each of these is done).
"""

import contextlib
import hashlib
import os
import sys
import warnings

import torch

try:
    import fcntl
except ImportError:  # Windows: no OS lock of our own, torch's lock file alone guards a build
    fcntl = None

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

// Denormal floats (below 1.2e-38 in magnitude) are flushed to zero while a thread runs the kernel, then the thread's
// setting is restored. Weights A near the bottom of float's normal range are common (a source behind many likely
// ones), and their products with values or gradients fall below it, where each operation takes a slow microcode
// assist. What is lost is under 1.2e-38 in absolute value.
#if defined(__SSE__) || defined(__x86_64__)
#include <xmmintrin.h>
struct FlushDenormals {
  const unsigned int saved = _mm_getcsr();
  FlushDenormals() { _mm_setcsr(saved | 0x8040); }  // flush-to-zero (bit 15) and denormals-are-zero (bit 6)
  ~FlushDenormals() { _mm_setcsr(saved); }
};
#else
struct FlushDenormals {};
#endif

// The weights kept for backward are as large as the scores, fresh memory at every call: in 4 KiB pages its first
// writes take one page fault per page, a large part of the forward's time at long lengths. Asking the kernel for
// 2 MiB pages (transparent huge pages, where the system allows them on request, as Debian's and Ubuntu's default
// does) makes that 512 times fewer faults.
#if defined(__linux__)
#include <sys/mman.h>
static void huge_pages(const torch::Tensor& t) {
  constexpr uintptr_t kHuge = uintptr_t(1) << 21;
  const uintptr_t begin = (reinterpret_cast<uintptr_t>(t.data_ptr()) + kHuge - 1) & ~(kHuge - 1);
  const uintptr_t end = (reinterpret_cast<uintptr_t>(t.data_ptr()) + t.nbytes()) & ~(kHuge - 1);
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);  // advice: failure is harmless
}
#else
static void huge_pages(const torch::Tensor&) {}
#endif

// Rows per block: 64 rows make the products big enough for BLAS to run near its speed (fewer rows make them
// markedly slower at long lengths). Within a block the rows go kChains at a time, so that their buffers stay in L2
// cache at any N: the running sums along a row are serial, and the sums of kChains rows side by side let their adds
// overlap.
static constexpr int64_t kRows = 64;
static constexpr int64_t kChains = 8;
static_assert(kRows % kChains == 0, "blocks hold whole groups of chains");

// Buffers for one block of kRows rows (logits, w) and for one group of kChains rows within it (the rest): the steps
// of a row run a group at a time, so that their buffers stay in L2 cache at any length.
template <typename T>
struct Block {
  int64_t n;
  std::vector<T> logits;   // kRows x N: scale * q k^T; in backward, then P = sigmoid(logits + bias)
  std::vector<T> w;        // kRows x N: A[i, j], unnormalised (forward without kept weights), or dL/dA in backward
  std::vector<T> log_p;    // kChains x N: log P[i, j]
  std::vector<T> prefix;   // kChains x (N + 1): prefix[c] = sum_{k < c} log(1 - P[i, k]), excluded k adding 0
  std::vector<T> scratch;  // kChains x (N + 1)
  explicit Block(int64_t n)
      : n(n), logits(kRows * n), w(kRows * n), log_p(kChains * n), prefix(kChains * (n + 1)),
        scratch(kChains * (n + 1)) {}
};

// log1p(e) for e = exp(-|x|) in (0, 1]: log(1 + e) = 2 atanh(t), t = e / (2 + e) in (0, 1/3], by its series to t^15
// (truncation below 2e-9 relative, under float's rounding). glibc's vector log1pf costs several times its expf;
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
    // log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)); log(1 - sigmoid(x)) = min(-x, 0) - log1p(exp(-|x|)). The exp
    // has a loop of its own: a call to the vector library inside the loop would make gcc reload the series'
    // constants from the stack at every step
    for (int64_t j = 0; j < n; ++j) log_p[j] = std::exp(std::max(-std::abs(x[j]), kLowest<T>));
    for (int64_t j = 0; j < n; ++j) {
      const T softplus = log1p_unit(log_p[j]);
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
    T* log_p = blk.log_p.data() + (i - g0) * n;  // then exp(x)
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
    // A = exp(x), made in the buffer (in cache) and written to w, which can be the large kept weights, in one pass
    for (int64_t j = 0; j < n; ++j) x[j] = std::max(x[j] + log_p[j], kLowest<T>);
    for (int64_t j = 0; j < n; ++j) log_p[j] = std::exp(x[j]);
    for (int64_t j = 0; j < n; ++j) x[j] = x[j] > kLowest<T> ? log_p[j] : T(0);
    x[i] = T(0);
    if (real)
      for (int64_t j = 0; j < n; ++j) x[j] = real[j] ? x[j] : T(0);
    T total = 0;
    for (int64_t j = 0; j < n; ++j) {
      wi[j] = x[j];
      total += x[j];
    }
    totals[i] = total;
  }
}

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

// The Fortran BLAS that torch links (MKL in the x86 wheels). Declared weak: under a torch built without one they
// are null, and the products go through ATen (Tensor::addmm_) instead, as they also do after use_blas(false).
extern "C" {
void sgemm_(const char*, const char*, const int*, const int*, const int*, const float*, const float*, const int*,
            const float*, const int*, const float*, float*, const int*) __attribute__((weak));
void dgemm_(const char*, const char*, const int*, const int*, const int*, const double*, const double*, const int*,
            const double*, const int*, const double*, double*, const int*) __attribute__((weak));
int MKL_Set_Num_Threads_Local(int) __attribute__((weak));
}

// Each task's products run on its own thread: MKL called inside a parallel region otherwise still plans for the
// pool's threads and picks a packing (copy) kernel, which slows backward on more than one thread. Restores the
// thread's setting.
struct SequentialBlas {
  const int saved = MKL_Set_Num_Threads_Local ? MKL_Set_Num_Threads_Local(1) : 0;
  ~SequentialBlas() {
    if (MKL_Set_Num_Threads_Local) MKL_Set_Num_Threads_Local(saved);
  }
};

static bool use_blas = true;
static bool blas(char ta, char tb, int m, int n, int k, float alpha, const float* a, int lda, const float* b, int ldb,
                 float beta, float* c, int ldc) {
  if (!use_blas || !sgemm_) return false;
  sgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
  return true;
}
static bool blas(char ta, char tb, int m, int n, int k, double alpha, const double* a, int lda, const double* b,
                 int ldb, double beta, double* c, int ldc) {
  if (!use_blas || !dgemm_) return false;
  dgemm_(&ta, &tb, &m, &n, &k, &alpha, a, &lda, b, &ldb, &beta, c, &ldc);
  return true;
}

// c (m, n) = alpha * op(a) @ op(b) + beta * c for row-major matrices with leading dimensions lda, ldb, ldc, op
// transposing where asked. Straight to BLAS: at::mm_out on from_blob tensors adds ATen's dispatch to every call, and
// a block of rows makes four or five small products.
template <typename T>
static void gemm(bool transpose_a, bool transpose_b, int64_t m, int64_t n, int64_t k, T alpha, const T* a,
                 int64_t lda, const T* b, int64_t ldb, T beta, T* c, int64_t ldc) {
  // BLAS is column-major, where this is c^T = op(b)^T @ op(a)^T
  if (blas(transpose_b ? 'T' : 'N', transpose_a ? 'T' : 'N', n, m, k, alpha, b, ldb, a, lda, beta, c, ldc)) return;
  const auto opts = torch::TensorOptions().dtype(c10::CppTypeToScalarType<T>::value);
  auto matrix = [&](const T* x, int64_t rows, int64_t cols, int64_t ld, bool transpose) {
    auto t = torch::from_blob(const_cast<T*>(x), {transpose ? cols : rows, transpose ? rows : cols}, {ld, 1}, opts);
    return transpose ? t.t() : t;
  };
  auto out = torch::from_blob(c, {m, n}, {ldc, 1}, opts);
  out.addmm_(matrix(a, m, k, lda, transpose_a), matrix(b, k, n, ldb, transpose_b), beta, alpha);
}

// query, key (M, N, Dk), value (M, N, D), bias (M, N, 2) or empty, real (M, N) bool or empty. The logits of a block
// of rows are scale * query_rows @ key^T (the scale applied by BLAS), made when needed and never kept.
// Returns context (M, N, D) = A @ value (A row-normalised if normalize), the row sums of A (M, N), and, if
// keep_weights (for backward), the unnormalised A (M, N, N); otherwise A exists one block of rows at a time.
std::vector<torch::Tensor> forward(torch::Tensor query, torch::Tensor key, torch::Tensor value, double scale,
                                   torch::Tensor bias, torch::Tensor real, bool normalize, bool keep_weights) {
  const int64_t M = query.size(0), n = query.size(1), dk = query.size(2), d = value.size(2);
  auto opts = value.options();
  auto weights = keep_weights ? torch::empty({M, n, n}, opts) : torch::empty({0}, opts);
  huge_pages(weights);
  auto context = torch::empty({M, n, d}, opts);
  auto totals = torch::empty({M, n}, opts);
  AT_DISPATCH_FLOATING_TYPES(value.scalar_type(), "geometric_attention_forward", [&] {
    const scalar_t* Q = query.data_ptr<scalar_t>();
    const scalar_t* K = key.data_ptr<scalar_t>();
    const scalar_t* V = value.data_ptr<scalar_t>();
    const scalar_t* B = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    const bool* R = real.numel() ? real.data_ptr<bool>() : nullptr;
    scalar_t* W = weights.numel() ? weights.data_ptr<scalar_t>() : nullptr;
    scalar_t* C = context.data_ptr<scalar_t>();
    scalar_t* S = totals.data_ptr<scalar_t>();
    // every (matrix, block of rows) is independent: the tasks are split over the threads, each with its own buffers
    const int64_t blocks = (n + kRows - 1) / kRows;
    at::parallel_for(0, M * blocks, 1, [&](int64_t begin, int64_t end) {
      FlushDenormals flush;
      SequentialBlas sequential;
      Block<scalar_t> blk(n);
      for (int64_t task = begin; task < end; ++task) {
        const int64_t b = task / blocks, r0 = (task % blocks) * kRows, r1 = std::min(n, r0 + kRows), count = r1 - r0;
        scalar_t* l = blk.logits.data();
        gemm<scalar_t>(false, true, count, n, dk, scale, Q + (b * n + r0) * dk, dk, K + b * n * dk, dk, 0, l, n);
        scalar_t* w = W ? W + (b * n + r0) * n : blk.w.data();
        for (int64_t g0 = r0; g0 < r1; g0 += kChains)
          group_forward(blk, l + (g0 - r0) * n, B ? B + b * n * 2 : nullptr, R ? R + b * n : nullptr, g0,
                        std::min(r1, g0 + kChains), w + (g0 - r0) * n, S + b * n);
        gemm<scalar_t>(false, false, count, d, n, 1, w, n, V + b * n * d, d, 0, C + (b * n + r0) * d, d);
      }
    });
  });
  if (normalize) context.div_(totals.clamp_min(kEps).unsqueeze(-1));  // (A / T) @ value = (A @ value) / T
  return {context, totals, weights};
}

// Gradients of forward's context with respect to query, key, value and bias, from the weights forward kept. The
// logits are recomputed (one product) for the sigmoids P; nothing else of the forward is redone. A task is one whole
// matrix, as its blocks of rows all add to its key gradient.
std::vector<torch::Tensor> backward(torch::Tensor grad_context, torch::Tensor query, torch::Tensor key,
                                    torch::Tensor value, double scale, torch::Tensor bias, torch::Tensor real,
                                    torch::Tensor totals, torch::Tensor weights, bool normalize) {
  const int64_t M = query.size(0), n = query.size(1), dk = query.size(2), d = value.size(2);
  auto opts = value.options();
  // value gradient: (A / T)^T @ grad_context = A^T @ (grad_context rows divided by their totals T)
  auto grad_rows = normalize ? (grad_context / totals.clamp_min(kEps).unsqueeze(-1)).contiguous() : grad_context;
  auto grad_query = torch::empty_like(query);
  auto grad_key = torch::zeros_like(key);
  auto grad_value = torch::empty_like(value);
  auto grad_bias = bias.numel() ? torch::zeros_like(bias) : torch::empty({0}, opts);
  AT_DISPATCH_FLOATING_TYPES(value.scalar_type(), "geometric_attention_backward", [&] {
    const scalar_t* Q = query.data_ptr<scalar_t>();
    const scalar_t* K = key.data_ptr<scalar_t>();
    const scalar_t* V = value.data_ptr<scalar_t>();
    const scalar_t* B = bias.numel() ? bias.data_ptr<scalar_t>() : nullptr;
    const bool* R = real.numel() ? real.data_ptr<bool>() : nullptr;
    const scalar_t* S = totals.data_ptr<scalar_t>();
    const scalar_t* W = weights.data_ptr<scalar_t>();
    const scalar_t* G = grad_context.data_ptr<scalar_t>();
    const scalar_t* GR = grad_rows.data_ptr<scalar_t>();
    scalar_t* GQ = grad_query.data_ptr<scalar_t>();
    scalar_t* GK = grad_key.data_ptr<scalar_t>();
    scalar_t* GV = grad_value.data_ptr<scalar_t>();
    scalar_t* GB = B ? grad_bias.data_ptr<scalar_t>() : nullptr;
    at::parallel_for(0, M, 1, [&](int64_t begin, int64_t end) {
      FlushDenormals flush;
      SequentialBlas sequential;
      Block<scalar_t> blk(n);
      for (int64_t b = begin; b < end; ++b) {
        const scalar_t* bias_b = B ? B + b * n * 2 : nullptr;
        for (int64_t r0 = 0; r0 < n; r0 += kRows) {
          const int64_t r1 = std::min(n, r0 + kRows), count = r1 - r0;
          scalar_t* p = blk.logits.data();
          scalar_t* gz = blk.w.data();
          gemm<scalar_t>(false, true, count, n, dk, scale, Q + (b * n + r0) * dk, dk, K + b * n * dk, dk, 0, p, n);
          gemm<scalar_t>(false, true, count, n, d, 1, G + (b * n + r0) * d, d, V + b * n * d, d, 0, gz, n);
          // the block's share of the value gradient, while its rows of A are in cache for group_backward too
          gemm<scalar_t>(true, false, n, d, count, 1, W + (b * n + r0) * n, n, GR + (b * n + r0) * d, d, r0 ? 1 : 0,
                         GV + b * n * d, d);
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
          // logits = scale * q k^T: grad q = scale * grad_logits @ k, grad k += scale * grad_logits^T @ q
          gemm<scalar_t>(false, false, count, dk, n, scale, gz, n, K + b * n * dk, dk, 0, GQ + (b * n + r0) * dk, dk);
          gemm<scalar_t>(true, false, n, dk, count, scale, gz, n, Q + (b * n + r0) * dk, dk, 1, GK + b * n * dk, dk);
        }
      }
    });
  });
  return {grad_query, grad_key, grad_value, grad_bias};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "geometric attention: A @ value, the row sums of A, and A if kept for backward");
  m.def("backward", &backward, "geometric attention: gradients of query, key, value and direction bias");
  m.def("use_blas", [](bool on) { use_blas = on; }, "products through BLAS directly (default) or through ATen");
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
    flags = _flags(isa)
    key = hashlib.sha256((SOURCE + " ".join(flags) + torch.__version__).encode()).hexdigest()[:12]
    try:
        _MODULES[isa] = _build(f"lengthgen_geometric_attention_{isa}_{key}", flags, isa)
    except Exception as error:  # no compiler or ninja, or a failed build: the PyTorch path is exact, only slower
        warnings.warn(
            f"lengthgen: the fused geometric attention kernel could not be built ({type(error).__name__}: "
            f"{str(error).strip().splitlines()[-1] if str(error).strip() else ''}); using the PyTorch path. "
            "Set LENGTHGEN_FUSED_GEOMETRIC=0 to skip the attempt.",
            stacklevel=3,
        )
        _MODULES[isa] = None
    return _MODULES[isa]


def installation_key() -> str:
    """A short hash of this installation: the Python environment (`sys.prefix`: a virtual environment's own), its
    interpreter and the torch version. The copies of this file that checkpoints carry share the build of the
    environment that loads them."""
    installation = (sys.prefix, sys.executable, sys.version, torch.__version__)
    return hashlib.sha256("\n".join(installation).encode()).hexdigest()[:10]


def build_directory(name: str) -> str:
    """The folder the extension `name` is built in, one of this installation's own (`installation_key`) under
    TORCH_EXTENSIONS_DIR if set, else under torch's per-user extensions folder: two installations (two virtual
    environments) never rebuild over each other's build or wait on it."""
    from torch.utils import cpp_extension

    root = os.environ.get("TORCH_EXTENSIONS_DIR") or cpp_extension.get_default_build_root()
    return os.path.join(root, f"{name}_{installation_key()}")


def _build(name: str, flags: list[str], isa: str):
    """load_inline in `build_directory(name)`, under this installation's lock on that folder. torch guards a build
    with a lock file that it removes when the build ends; a process killed while building leaves it behind, and
    torch would then wait on it forever. Only lengthgen builds in this folder, and only while holding the lock taken
    here, which the system releases when its holder dies however it ends: so, holding it, a torch lock file can only be
    the leftover of a dead build, and is removed."""
    from torch.utils import cpp_extension

    directory = build_directory(name)
    os.makedirs(directory, exist_ok=True)
    with _lock(directory) as exclusive:
        leftover = os.path.join(directory, "lock")
        interrupted = exclusive and os.path.exists(leftover)
        if interrupted:
            _say(f"removing the lock file of an interrupted build of the kernel in {directory}")
            os.remove(leftover)
        # the name includes the source's hash, so the library exists exactly when a build of this source finished
        # (a link that was killed midway is only redone, without the compilation)
        library = os.path.join(directory, name + (".pyd" if os.name == "nt" else ".so"))  # torch's name for it
        if not os.path.exists(library):
            _say(f"compiling the fused geometric-attention kernel for {isa} (about a minute, once per installation; "
                 "LENGTHGEN_FUSED_GEOMETRIC=0 skips it)...")
        return cpp_extension.load_inline(
            name=name,
            cpp_sources=SOURCE,
            extra_cflags=flags,
            extra_ldflags=["-fopenmp"],
            build_directory=directory,
            verbose=False,
        )


@contextlib.contextmanager
def _lock(directory: str):
    """Holds an exclusive OS lock (flock) on a file of `directory` (yields True), waiting for it if another process
    holds it; without fcntl (Windows) takes none (yields False)."""
    if fcntl is None:
        yield False
        return
    with open(os.path.join(directory, ".lengthgen-build.lock"), "a") as handle:  # closing it releases the lock
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _say(f"waiting for another process building the kernel in {directory}")
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield True


def _say(line: str) -> None:
    print(f"lengthgen: {line}", file=sys.stderr, flush=True)
