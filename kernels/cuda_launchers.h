// defines: the declarations of every CUDA launcher (namespace bench::kernels::cuda), instantiated
// for float and bf16 in kernels/cuda/*.cu. Each mirrors the host launcher of kernels/<name>.h
// with a stream in place of the Exec and returns the launch's Status as a Status.
//
// Declared without CUDA headers: the host launchers of kernels/*.cpp (compiled by the C++
// compiler) call them for Backend::kCuda in a CUDA build (BENCH_HAVE_CUDA), see
// BENCH_ON_CUDA below. Stream is Stream (the same type: CUstream_st*).
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "activation.h"
#include "adamw.h"
#include "attention.h"
#include "cross_entropy.h"
#include "dropout.h"
#include "elementwise.h"
#include "norm.h"
#include "rope.h"
#include "softcap.h"
#include "softmax.h"

struct CUstream_st;

namespace bench::kernels::cuda {

using Stream = CUstream_st*;
/// A Status; 0 is cudaSuccess.
using Status = int;

/// Throws std::runtime_error naming `what` and the CUDA error when `s` is not success (the
/// message comes from kernels/cuda/runtime.cu).
void check_status(Status s, const char* what);

/// The dense GEMM of kernels/gemm.h through cuBLASLt (kernels/cuda/gemm.cuh), with one Gemm
/// (handle, workspace, plan cache) per host thread. Throws on failure.
template <class T>
void gemm(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc);

/// kernels::attention_forward / attention_backward on the GPU, with the same contract and the same
/// probs and workspace buffers (kernels/cuda/attention.cu): cuBLASLt products per (batch, head)
/// and the softmax and dropout tile programs; bf16 takes the flash kernels where
/// attention_uses_flash says so. Throws on failure.
template <class T>
void attention_forward(Stream stream, const AttentionArgs& args, const T* qkv, T* out, T* probs, acc_t<T>* row_max,
                       T* workspace);
template <class T>
void attention_backward(Stream stream, const AttentionArgs& args, const T* qkv, const T* out, const T* probs,
                        const T* dout, T* dqkv, T* workspace);

template <class T>
Status attention_entropy(Stream stream, const AttentionArgs& args, const T* qkv, acc_t<T>* entropy);
template <class T>
Status attention_row_max(Stream stream, const AttentionArgs& args, const T* qkv, acc_t<T>* row_max);

/// The cuDNN SDPA baseline (kernels/cuda/cudnn_attention.cu), the CUDA side of
/// kernels::attention_cudnn_*: libcudnn.so.9 is loaded with dlopen at the first call, never
/// linked. available: whether it loads (`why`, may be null: the reason, or the version loaded);
/// false, never a throw, where bench was built without cuDNN's headers or runs without the
/// library. forward / backward: kernels::attention_cudnn_forward / _backward's contract (stats:
/// the log-sum-exp [B, H, T] in float); bf16 only (float throws); std::runtime_error naming the
/// cuDNN call and its status on failure.
bool cudnn_attention_available(std::string* why);
template <class T>
void cudnn_attention_forward(Stream stream, const AttentionArgs& args, const T* qkv, T* out, float* stats);
template <class T>
void cudnn_attention_backward(Stream stream, const AttentionArgs& args, const T* qkv, const T* out, const float* stats,
                              const T* dout, T* dqkv);

template <class T>
Status norm_forward(Stream stream, bool center, const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean,
                    acc_t<T>* rstd, int64_t rows, int64_t cols, double eps);
template <class T>
Status norm_backward(Stream stream, bool center, const T* dy, const T* x, const T* weight, const acc_t<T>* mean,
                     const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows, int64_t cols,
                     acc_t<T>* workspace);
template <class T>
Status softmax_forward(Stream stream, const T* s, T* p, int64_t rows, int64_t cols, int64_t ld, double scale,
                       double softcap, SoftmaxMask mask, acc_t<T>* row_max);
template <class T>
Status softmax_backward(Stream stream, const T* p, const T* dp, const T* s, T* ds, int64_t rows, int64_t cols,
                        int64_t ld, double scale, double softcap, SoftmaxMask mask);
template <class T>
Status cross_entropy(Stream stream, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                     acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale);
template <class T>
Status rope_apply(Stream stream, T* x, int64_t tokens, int64_t seq, int64_t n_heads, int64_t d_head, int64_t row_stride,
                  const acc_t<T>* cos, const acc_t<T>* sin, RopeLayout layout, bool inverse);
template <class T>
Status activation_forward(Stream stream, Activation act, const T* x, T* y, int64_t n);
template <class T>
Status activation_backward(Stream stream, Activation act, const T* x, const T* dy, T* dx, int64_t n);
template <class T>
Status glu_forward(Stream stream, Activation act, const T* gu, T* h, int64_t rows, int64_t d_ff);
template <class T>
Status glu_backward(Stream stream, Activation act, const T* gu, const T* dh, T* dgu, int64_t rows, int64_t d_ff);
template <class T>
Status adamw_update(Stream stream, T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n, const AdamWStep& step,
                    acc_t<T>* master);
Status adamw_scalars(Stream stream, double* state, double beta1, double beta2, double clip);
template <class T>
Status add(Stream stream, const T* a, const T* b, T* out, int64_t n);
template <class T>
Status axpy(Stream stream, acc_t<T> alpha, const T* x, T* y, int64_t n);
template <class T>
Status scale(Stream stream, acc_t<T> alpha, T* x, int64_t n);
/// `partial`: sum_squares_partials(n) device doubles; `result`: one device double.
template <class T>
Status sum_squares(Stream stream, const T* x, int64_t n, double* partial, double* result);
/// The same two stages for any SumOf.
template <class T>
Status sum_of(Stream stream, SumOf what, const T* x, int64_t n, double* partial, double* result);
template <class T>
Status embedding_forward(Stream stream, const int32_t* tokens, const T* table, T* out, int64_t n_tokens, int64_t dim);
template <class T>
Status embedding_backward(Stream stream, const int32_t* tokens, const T* dout, T* dtable, int64_t n_tokens,
                          int64_t dim);

template <class T>
Status dropout_apply(Stream stream, const T* x, T* y, int64_t n, double p, uint64_t seed);

/// cudaErrorInvalidValue unless cap > 0.
template <class T>
Status softcap_forward(Stream stream, const T* x, T* y, int64_t n, double cap);
template <class T>
Status softcap_backward(Stream stream, const T* y, const T* dy, T* dx, int64_t n, double cap);

}  // namespace bench::kernels::cuda

#if BENCH_HAVE_CUDA
/// Check the Status of a CUDA launcher's call (in a CUDA build).
#define BENCH_CUDA_CALL(name, call) ::bench::kernels::cuda::check_status(call, name)
/// First statement of a host launcher over element type T: with Backend::kCuda, runs `call` (a
/// CUDA launcher's call; `stream` names exec's stream in it) and returns. float64 has no CUDA
/// path: the GPU runs float and bf16.
#define BENCH_ON_CUDA(exec, T, name, call)                                                             \
  if ((exec).backend == ::bench::tile::Backend::kCuda) {                                               \
    if constexpr (std::is_same_v<T, double>) {                                                         \
      throw std::invalid_argument(std::string(name) + ": float64 has no CUDA path");                   \
    } else {                                                                                           \
      [[maybe_unused]] const auto stream = static_cast<::bench::kernels::cuda::Stream>((exec).stream); \
      ::bench::kernels::cuda::check_status(call, name);                                                \
    }                                                                                                  \
    return;                                                                                            \
  }
#else
#define BENCH_CUDA_CALL(name, call) \
  throw std::runtime_error(std::string(name) + ": this build has no CUDA (configure with nvcc on the PATH)")
#define BENCH_ON_CUDA(exec, T, name, call)             \
  if ((exec).backend == ::bench::tile::Backend::kCuda) \
    throw std::runtime_error(std::string(name) + ": this build has no CUDA (configure with nvcc on the PATH)");
#endif
