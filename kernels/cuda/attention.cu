// The CUDA path of kernels::attention_forward / attention_backward for float and bf16: the CPU
// launcher's algorithm (kernels/attention.cpp) with the same probs, scores and workspace
// buffers, its products on cuBLASLt and its softmax and dropout on the same tile programs, queued
// in order on one stream (so dK and dV sum the query heads of a group in a fixed order).
//
// The CPU processes 64 queries at a time, to balance tasks over cores and skip masked key blocks.
// Here every step is a launch, so a block is as many queries as the workspace holds rows:
// B * Hkv * min(T, 64) rows of T, which is usually a whole head (one launch sequence per
// (batch, head)), at the cost of computing the masked upper triangle of S.
//
// This path materializes the T x T probabilities like the CPU's. bf16 takes the flash kernels
// (flash_attention.cuh: nothing of size T^2, tensor cores) where attention_uses_flash says so; it
// keeps the log-sum-exp per query and the backward's float workspace in the probs buffer, which
// the model allocates at setup, before it knows where it runs.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "../attention.h"
#include "flash_attention.cuh"
#include "launch.cuh"

namespace bench::kernels::cuda {

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string("attention: ") + what + ": " + cudaGetErrorString(e));
}

struct Dims {
  int64_t batch, seq, heads, kv_heads, d_head, group, width;
  int64_t block;  // queries per step
};

Dims dims_of(const AttentionArgs& a, bool with_workspace) {
  if (a.batch <= 0 || a.seq <= 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.d_head <= 0 || a.window < 0 ||
      a.n_heads % a.n_kv_heads != 0 || !(a.dropout >= 0 && a.dropout < 1))
    throw std::invalid_argument("attention: inconsistent shape or dropout rate");
  Dims d{a.batch, a.seq, a.n_heads, a.n_kv_heads, a.d_head, a.n_heads / a.n_kv_heads, 0, a.seq};
  d.width = (a.n_heads + 2 * a.n_kv_heads) * a.d_head;
  if (with_workspace) {
    // attention_workspace_size(a) elements, T apart: that many query rows fit.
    const int64_t rows = attention_workspace_size(a) / a.seq;
    d.block = std::max<int64_t>(1, std::min(a.seq, rows));
  }
  return d;
}

/// Keys [lo, hi) that some query of [q0, q1) may see.
void key_range(const AttentionArgs& a, int64_t q0, int64_t q1, int64_t& lo, int64_t& hi) {
  const SoftmaxMask m{a.causal, 0, a.window};
  int64_t unused = 0;
  softmax_row_range(m, q0, a.seq, lo, unused);
  softmax_row_range(m, q1 - 1, a.seq, unused, hi);
}

/// Zero columns [0, lo) and [hi, cols) of `rows` rows, ld apart.
template <class T>
void zero_outside(cudaStream_t stream, T* x, int64_t rows, int64_t cols, int64_t ld, int64_t lo, int64_t hi) {
  const size_t pitch = static_cast<size_t>(ld) * sizeof(T);
  if (lo > 0)
    ok(cudaMemset2DAsync(x, pitch, 0, static_cast<size_t>(lo) * sizeof(T), static_cast<size_t>(rows), stream),
       "memset");
  if (hi < cols)
    ok(cudaMemset2DAsync(x + hi, pitch, 0, static_cast<size_t>(cols - hi) * sizeof(T), static_cast<size_t>(rows),
                         stream),
       "memset");
}

template <class T>
void dropout_block(cudaStream_t stream, const AttentionArgs& a, const T* x, T* y, int64_t rows, int64_t cols,
                   int64_t ld, int64_t b, int64_t h, int64_t q0, int64_t lo) {
  if (rows <= 0 || cols <= 0) return;
  using A = acc_t<T>;
  const int64_t base = attention_prob_index(a, b, h, q0, lo);
  tile::dispatch_block(cols, [&]<int B>() {
    ok(tile::launch_cuda(
           tile::Grid{rows},
           programs::DropoutRows<T, B>{x, y, cols, ld, base, a.seq, a.dropout_seed, static_cast<float>(a.dropout),
                                       static_cast<A>(1.0 / (1.0 - a.dropout))},
           stream),
       "dropout");
  });
}

/// Where the flash path keeps its state inside the probs buffer: lse [B, H, T], then, 256-byte
/// aligned, the backward's workspace (B H T (d_head + 1) floats).
float* flash_lse(const AttentionArgs& a, void* probs) {
  (void)a;
  return static_cast<float*>(probs);
}
void* flash_workspace(const AttentionArgs& a, void* probs) {
  return static_cast<float*>(probs) + attention_flash_workspace_offset(a);
}

}  // namespace

template <class T>
void attention_forward(Stream stream, const AttentionArgs& a, const T* qkv, T* out, T* probs, acc_t<T>* row_max,
                       T* workspace) {
  if constexpr (std::is_same_v<T, tile::bf16>) {
    if (attention_uses_flash(a)) {
      (void)dims_of(a, false);  // the same argument checks as the other path
      ok(flash_attention_forward(stream, a, qkv, out, row_max, flash_lse(a, probs)), "flash forward");
      return;
    }
  }
  const bool drop = a.dropout > 0;
  if (drop && workspace == nullptr) throw std::invalid_argument("attention: dropout needs the workspace");
  const Dims d = dims_of(a, drop);
  const int64_t seq = d.seq, dh = d.d_head, ld_out = d.heads * dh;
  T* scores = a.softcap > 0 ? probs + d.batch * d.heads * seq * seq : probs;
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t h = 0; h < d.heads; ++h) {
      const int64_t bh = b * d.heads + h, g = h / d.group;
      for (int64_t q0 = 0; q0 < seq; q0 += d.block) {
        const int64_t q1 = std::min(seq, q0 + d.block), rows = q1 - q0;
        int64_t lo = 0, hi = 0;
        key_range(a, q0, q1, lo, hi);
        const int64_t cols = hi - lo;
        const T* q = qkv + (b * seq + q0) * d.width + h * dh;
        const T* k = qkv + (b * seq + lo) * d.width + (d.heads + g) * dh;
        const T* v = qkv + (b * seq + lo) * d.width + (d.heads + d.kv_heads + g) * dh;
        T* p = probs + (bh * seq + q0) * seq;
        T* s = scores + (bh * seq + q0) * seq;
        gemm<T>(stream, false, true, rows, cols, dh, static_cast<float>(a.scale), q, d.width, k, d.width, 0.f, s + lo,
                seq);
        check_status(softmax_forward<T>(stream, s + lo, p + lo, rows, cols, seq, 1.0, a.softcap,
                                        SoftmaxMask{a.causal, q0 - lo, a.window},
                                        row_max != nullptr ? row_max + bh * seq + q0 : nullptr),
                     "attention softmax");
        zero_outside(stream, p, rows, seq, seq, lo, hi);
        if (s != p) zero_outside(stream, s, rows, seq, seq, lo, hi);
        const T* pv = p + lo;
        if (drop) {
          dropout_block(stream, a, p + lo, workspace, rows, cols, seq, b, h, q0, lo);
          pv = workspace;
        }
        gemm<T>(stream, false, false, rows, dh, cols, 1.f, pv, seq, v, d.width, 0.f,
                out + (b * seq + q0) * ld_out + h * dh, ld_out);
      }
    }
}

template <class T>
void attention_backward(Stream stream, const AttentionArgs& a, const T* qkv, const T* out, const T* probs,
                        const T* dout, T* dqkv, T* workspace) {
  if constexpr (std::is_same_v<T, tile::bf16>) {
    if (attention_uses_flash(a)) {
      (void)dims_of(a, false);
      void* p = const_cast<T*>(probs);  // the lse is read, the workspace after it written
      ok(flash_attention_backward(stream, a, qkv, out, dout, flash_lse(a, p), dqkv, flash_workspace(a, p)),
         "flash backward");
      return;
    }
  }
  (void)out;  // the materialized path recomputes from the probabilities
  if (workspace == nullptr) throw std::invalid_argument("attention: backward needs the workspace");
  const Dims d = dims_of(a, true);
  const int64_t seq = d.seq, dh = d.d_head, ld_out = d.heads * dh;
  const T* scores = a.softcap > 0 ? probs + d.batch * d.heads * seq * seq : nullptr;
  const auto scale = static_cast<float>(a.scale);
  const size_t pitch = static_cast<size_t>(d.width) * sizeof(T);
  T* ws = workspace;  // dP, then dS in place; rows seq apart
  for (int64_t b = 0; b < d.batch; ++b)
    for (int64_t g = 0; g < d.kv_heads; ++g) {
      const int64_t k_col = (d.heads + g) * dh, v_col = (d.heads + d.kv_heads + g) * dh;
      T* dk = dqkv + b * seq * d.width + k_col;
      T* dv = dqkv + b * seq * d.width + v_col;
      ok(cudaMemset2DAsync(dk, pitch, 0, static_cast<size_t>(dh) * sizeof(T), static_cast<size_t>(seq), stream),
         "memset");
      ok(cudaMemset2DAsync(dv, pitch, 0, static_cast<size_t>(dh) * sizeof(T), static_cast<size_t>(seq), stream),
         "memset");
      const T* k = qkv + b * seq * d.width + k_col;
      const T* v = qkv + b * seq * d.width + v_col;
      for (int64_t h = g * d.group; h < (g + 1) * d.group; ++h) {
        const int64_t bh = b * d.heads + h;
        for (int64_t q0 = 0; q0 < seq; q0 += d.block) {
          const int64_t q1 = std::min(seq, q0 + d.block), rows = q1 - q0;
          int64_t lo = 0, hi = 0;
          key_range(a, q0, q1, lo, hi);
          const int64_t cols = hi - lo;
          const T* p = probs + (bh * seq + q0) * seq + lo;
          const T* s = scores != nullptr ? scores + (bh * seq + q0) * seq + lo : nullptr;
          const T* d_o = dout + (b * seq + q0) * ld_out + h * dh;
          const T* q = qkv + (b * seq + q0) * d.width + h * dh;
          const T* pd = p;
          if (a.dropout > 0) {
            dropout_block(stream, a, p, ws, rows, cols, seq, b, h, q0, lo);
            pd = ws;
          }
          gemm<T>(stream, true, false, cols, dh, rows, 1.f, pd, seq, d_o, ld_out, 1.f, dv + lo * d.width, d.width);
          gemm<T>(stream, false, true, rows, cols, dh, 1.f, d_o, ld_out, v + lo * d.width, d.width, 0.f, ws, seq);
          if (a.dropout > 0) dropout_block(stream, a, ws, ws, rows, cols, seq, b, h, q0, lo);
          check_status(softmax_backward<T>(stream, p, ws, s, ws, rows, cols, seq, 1.0, a.softcap,
                                           SoftmaxMask{a.causal, q0 - lo, a.window}),
                       "attention softmax backward");
          gemm<T>(stream, false, false, rows, dh, cols, scale, ws, seq, k + lo * d.width, d.width, 0.f,
                  dqkv + (b * seq + q0) * d.width + h * dh, d.width);
          gemm<T>(stream, true, false, cols, dh, rows, scale, ws, seq, q, d.width, 1.f, dk + lo * d.width, d.width);
        }
      }
    }
}

/// One program per query row (t, bh): the grid attention_entropy and attention_row_max share.
template <class Make>
Status launch_rows(Stream stream, const AttentionArgs& a, Make make) {
  (void)dims_of(a, false);
  if (a.batch * a.n_heads > 65535) return cudaErrorInvalidConfiguration;  // the grid's y
  Status st = cudaSuccess;
  tile::dispatch_block(a.seq, [&]<int B>() {
    st = tile::launch_cuda(tile::Grid{a.seq, a.batch * a.n_heads}, make.template operator()<B>(), stream);
  });
  return st;
}

template <class T>
Status attention_entropy(Stream stream, const AttentionArgs& a, const T* qkv, acc_t<T>* entropy) {
  return launch_rows(stream, a, [&]<int B>() { return programs::make_attention_entropy<T, B>(a, qkv, entropy); });
}

template <class T>
Status attention_row_max(Stream stream, const AttentionArgs& a, const T* qkv, acc_t<T>* row_max) {
  return launch_rows(stream, a, [&]<int B>() { return programs::make_attention_row_max<T, B>(a, qkv, row_max); });
}

#define BENCH_INSTANTIATE(T)                                                                                         \
  template void attention_forward<T>(Stream, const AttentionArgs&, const T*, T*, T*, acc_t<T>*, T*);                 \
  template void attention_backward<T>(Stream, const AttentionArgs&, const T*, const T*, const T*, const T*, T*, T*); \
  template Status attention_entropy<T>(Stream, const AttentionArgs&, const T*, acc_t<T>*);                           \
  template Status attention_row_max<T>(Stream, const AttentionArgs&, const T*, acc_t<T>*);
BENCH_INSTANTIATE(float)
BENCH_INSTANTIATE(tile::bf16)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels::cuda
