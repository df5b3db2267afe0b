// defines: the declarations of every CUDA launcher (namespace bench::kernels::cuda), instantiated
// for float and bf16 in kernels/cuda/*.cu. Each mirrors the host launcher of kernels/<name>.h
// with a stream in place of the Exec and returns the launch's cudaError_t.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "../activation.h"
#include "../adamw.h"
#include "../cross_entropy.h"
#include "../dropout.h"
#include "../elementwise.h"
#include "../norm.h"
#include "../rope.h"
#include "../softcap.h"
#include "../softmax.h"

namespace bench::kernels::cuda {

template <class T>
cudaError_t norm_forward(cudaStream_t stream, bool center, const T* x, const T* weight, const T* bias, T* y,
                         acc_t<T>* mean, acc_t<T>* rstd, int64_t rows, int64_t cols, double eps);
template <class T>
cudaError_t norm_backward(cudaStream_t stream, bool center, const T* dy, const T* x, const T* weight,
                          const acc_t<T>* mean, const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows,
                          int64_t cols, acc_t<T>* workspace);
template <class T>
cudaError_t softmax_forward(cudaStream_t stream, const T* s, T* p, int64_t rows, int64_t cols, int64_t ld, double scale,
                            double softcap, SoftmaxMask mask, acc_t<T>* row_max);
template <class T>
cudaError_t softmax_backward(cudaStream_t stream, const T* p, const T* dp, const T* s, T* ds, int64_t rows,
                             int64_t cols, int64_t ld, double scale, double softcap, SoftmaxMask mask);
template <class T>
cudaError_t cross_entropy(cudaStream_t stream, const T* logits, const int32_t* targets, int64_t rows, int64_t vocab,
                          acc_t<T>* loss, acc_t<T>* z, T* dlogits, double z_coef, double grad_scale);
template <class T>
cudaError_t rope_apply(cudaStream_t stream, T* x, int64_t tokens, int64_t seq, int64_t n_heads, int64_t d_head,
                       int64_t row_stride, const acc_t<T>* cos, const acc_t<T>* sin, RopeLayout layout, bool inverse);
template <class T>
cudaError_t activation_forward(cudaStream_t stream, Activation act, const T* x, T* y, int64_t n);
template <class T>
cudaError_t activation_backward(cudaStream_t stream, Activation act, const T* x, const T* dy, T* dx, int64_t n);
template <class T>
cudaError_t glu_forward(cudaStream_t stream, Activation act, const T* gu, T* h, int64_t rows, int64_t d_ff);
template <class T>
cudaError_t glu_backward(cudaStream_t stream, Activation act, const T* gu, const T* dh, T* dgu, int64_t rows,
                         int64_t d_ff);
template <class T>
cudaError_t adamw_update(cudaStream_t stream, T* p, const T* g, acc_t<T>* m, acc_t<T>* v, int64_t n,
                         const AdamWStep& step);
template <class T>
cudaError_t add(cudaStream_t stream, const T* a, const T* b, T* out, int64_t n);
template <class T>
cudaError_t axpy(cudaStream_t stream, acc_t<T> alpha, const T* x, T* y, int64_t n);
template <class T>
cudaError_t scale(cudaStream_t stream, acc_t<T> alpha, T* x, int64_t n);
/// `partial`: sum_squares_partials(n) device doubles; `result`: one device double.
template <class T>
cudaError_t sum_squares(cudaStream_t stream, const T* x, int64_t n, double* partial, double* result);
template <class T>
cudaError_t embedding_forward(cudaStream_t stream, const int32_t* tokens, const T* table, T* out, int64_t n_tokens,
                              int64_t dim);
template <class T>
cudaError_t embedding_backward(cudaStream_t stream, const int32_t* tokens, const T* dout, T* dtable, int64_t n_tokens,
                               int64_t dim);

template <class T>
cudaError_t dropout_apply(cudaStream_t stream, const T* x, T* y, int64_t n, double p, uint64_t seed);

/// cudaErrorInvalidValue unless cap > 0.
template <class T>
cudaError_t softcap_forward(cudaStream_t stream, const T* x, T* y, int64_t n, double cap);
template <class T>
cudaError_t softcap_backward(cudaStream_t stream, const T* y, const T* dy, T* dx, int64_t n, double cap);

}  // namespace bench::kernels::cuda
