// defines: bench::kernels::cuda::{norm_forward, ..., attention_row_max} — the CUDA launchers'
//          former signatures (a stream, a Status back), for tests/cuda/cuda_check.cu only
//
// Each launcher is now written once (kernels/<name>.cpp) and takes an Exec on every target; these
// adapters call it with Backend::kCuda so that cuda_check.cu keeps compiling unchanged but for
// its include. They go when cuda_check keeps only its timing (issue 18: its correctness checks
// move to kernels_test, which runs its cases on CUDA where a device is visible).
#pragma once

#include <cuda_runtime.h>

#include <cstdio>
#include <exception>

#include "../../kernels/activation.h"
#include "../../kernels/adamw.h"
#include "../../kernels/attention.h"
#include "../../kernels/cross_entropy.h"
#include "../../kernels/cuda_launchers.h"
#include "../../kernels/dropout.h"
#include "../../kernels/elementwise.h"
#include "../../kernels/norm.h"
#include "../../kernels/rope.h"
#include "../../kernels/softcap.h"
#include "../../kernels/softmax.h"

namespace bench::kernels::cuda {

namespace adapter {
inline tile::Exec on(Stream stream) { return tile::Exec{tile::Backend::kCuda, stream}; }
/// Runs `f`; its exception, printed, becomes cudaErrorUnknown.
template <class F>
Status status(F&& f) {
  try {
    f();
    return cudaSuccess;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s\n", e.what());
    return cudaErrorUnknown;
  }
}
}  // namespace adapter

template <class T>
Status norm_forward(Stream s, bool center, const T* x, const T* w, const T* b, T* y, acc_t<T>* mean, acc_t<T>* rstd,
                    int64_t rows, int64_t cols, double eps) {
  return adapter::status(
      [&] { kernels::norm_forward<T>(adapter::on(s), center, x, w, b, y, mean, rstd, rows, cols, eps); });
}
template <class T>
Status norm_backward(Stream s, bool center, const T* dy, const T* x, const T* w, const acc_t<T>* mean,
                     const acc_t<T>* rstd, T* dx, T* dw, T* db, int64_t rows, int64_t cols, acc_t<T>* ws) {
  return adapter::status(
      [&] { kernels::norm_backward<T>(adapter::on(s), center, dy, x, w, mean, rstd, dx, dw, db, rows, cols, ws); });
}
template <class T>
Status softmax_forward(Stream s, const T* x, T* p, int64_t rows, int64_t cols, int64_t ld, double scale, double cap,
                       SoftmaxMask mask, acc_t<T>* row_max) {
  return adapter::status(
      [&] { kernels::softmax_forward<T>(adapter::on(s), x, p, rows, cols, ld, scale, cap, mask, row_max); });
}
template <class T>
Status softmax_backward(Stream s, const T* p, const T* dp, const T* x, T* ds, int64_t rows, int64_t cols, int64_t ld,
                        double scale, double cap, SoftmaxMask mask) {
  return adapter::status(
      [&] { kernels::softmax_backward<T>(adapter::on(s), p, dp, x, ds, rows, cols, ld, scale, cap, mask); });
}
template <class T>
Status cross_entropy(Stream s, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab, int64_t ld,
                     acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale) {
  return adapter::status([&] {
    kernels::cross_entropy<T>(adapter::on(s), logits, targets, rows, vocab, ld, loss, z, dlogits, z_coef, grad_scale);
  });
}
template <class T>
Status rope_apply(Stream s, T* x, int64_t tokens, int64_t seq, int64_t heads, int64_t d_head, int64_t stride,
                  const acc_t<T>* cos, const acc_t<T>* sin, RopeLayout layout, bool inverse) {
  return adapter::status([&] {
    kernels::rope_apply<T>(adapter::on(s), x, tokens, seq, heads, d_head, stride, cos, sin, layout, inverse);
  });
}
template <class T>
Status activation_forward(Stream s, Activation act, const T* x, T* y, int64_t n) {
  return adapter::status([&] { kernels::activation_forward<T>(adapter::on(s), act, x, y, n); });
}
template <class T>
Status activation_backward(Stream s, Activation act, const T* x, const T* dy, T* dx, int64_t n) {
  return adapter::status([&] { kernels::activation_backward<T>(adapter::on(s), act, x, dy, dx, n); });
}
template <class T>
Status glu_forward(Stream s, Activation act, const T* gu, T* h, int64_t rows, int64_t d_ff) {
  return adapter::status([&] { kernels::glu_forward<T>(adapter::on(s), act, gu, h, rows, d_ff); });
}
template <class T>
Status glu_backward(Stream s, Activation act, const T* gu, const T* dh, T* dgu, int64_t rows, int64_t d_ff) {
  return adapter::status([&] { kernels::glu_backward<T>(adapter::on(s), act, gu, dh, dgu, rows, d_ff); });
}
template <class T>
Status adamw_update(Stream s, T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n, const AdamWStep& step,
                    acc_t<T>* master) {
  return adapter::status([&] { kernels::adamw_update<T>(adapter::on(s), p, g, m, v, n, step, master); });
}
inline Status adamw_scalars(Stream s, double* state, double beta1, double beta2, double clip) {
  return adapter::status([&] { kernels::adamw_scalars(adapter::on(s), state, beta1, beta2, clip); });
}
template <class T>
Status add(Stream s, const T* a, const T* b, T* out, int64_t n) {
  return adapter::status([&] { kernels::add<T>(adapter::on(s), a, b, out, n); });
}
template <class T>
Status sum_of(Stream s, SumOf what, const T* x, int64_t n, double* partial, double* result) {
  return adapter::status([&] { kernels::sum_of_into<T>(adapter::on(s), what, x, n, partial, result); });
}
template <class T>
Status sum_squares(Stream s, const T* x, int64_t n, double* partial, double* result) {
  return sum_of<T>(s, SumOf::kSquares, x, n, partial, result);
}
template <class T>
Status softcap_forward(Stream s, const T* x, T* y, int64_t n, double cap) {
  return adapter::status([&] { kernels::softcap_forward<T>(adapter::on(s), x, y, n, cap); });
}
template <class T>
Status softcap_backward(Stream s, const T* y, const T* dy, T* dx, int64_t n, double cap) {
  return adapter::status([&] { kernels::softcap_backward<T>(adapter::on(s), y, dy, dx, n, cap); });
}
template <class T>
void attention_forward(Stream s, const AttentionArgs& a, const T* qkv, T* out, T* probs, acc_t<T>* row_max,
                       T* workspace) {
  kernels::attention_forward<T>(adapter::on(s), a, qkv, out, probs, row_max, workspace);
}
template <class T>
void attention_backward(Stream s, const AttentionArgs& a, const T* qkv, const T* out, const T* probs, const T* dout,
                        T* dqkv, T* workspace) {
  kernels::attention_backward<T>(adapter::on(s), a, qkv, out, probs, dout, dqkv, workspace);
}
template <class T>
Status attention_entropy(Stream s, const AttentionArgs& a, const T* qkv, acc_t<T>* entropy) {
  return adapter::status([&] { kernels::attention_entropy<T>(adapter::on(s), a, qkv, entropy); });
}
template <class T>
Status attention_row_max(Stream s, const AttentionArgs& a, const T* qkv, acc_t<T>* row_max) {
  return adapter::status([&] { kernels::attention_row_max<T>(adapter::on(s), a, qkv, row_max); });
}

}  // namespace bench::kernels::cuda
