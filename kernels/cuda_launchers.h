// defines: bench::kernels::cuda::Stream, Status, check_status, gemm, gemm_batched, gemm_epilogue,
//          cudnn_attention_available,
//          cudnn_attention_forward, cudnn_attention_backward — the entry points of the
//          hand-written CUDA code that is not a tile program (an internal header)
//
// What CUDA alone has, declared without CUDA headers: the cuBLASLt GEMM (kernels/cuda/gemm.cu)
// and cuDNN's SDPA (kernels/cuda/cudnn_attention.cu); the flash attention has its own header
// (kernels/cuda/flash_attention.cuh). kernels/cuda/backend.cu puts them behind
// kernels::CudaBackend, through which the launchers reach them. The tile kernels have no
// declarations here: each launcher is written once, in kernels/<name>.cpp, for every target.
#pragma once

#include <cstdint>
#include <string>

#include "attention.h"

struct CUstream_st;

namespace bench::kernels::cuda {

/// A cudaStream_t, named without CUDA headers.
using Stream = CUstream_st*;
/// A cudaError_t as an int; 0 is cudaSuccess.
using Status = int;

/// Throws std::runtime_error naming `what` and the CUDA error when `s` is not success.
void check_status(Status s, const char* what);

/// The dense GEMM of kernels/gemm.h through cuBLASLt (kernels/cuda/gemm.cuh), with one Gemm
/// (handle, workspace, plan cache) per host thread. Throws on failure.
template <class T>
void gemm(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
          int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc);

/// kernels::gemm_batched through cuBLASLt: `count` products at fixed strides (elements), one call
/// with strided batched layouts, on the same per-thread Gemm. Throws on failure.
template <class T>
void gemm_batched(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                  int64_t lda, int64_t stride_a, const T* b, int64_t ldb, int64_t stride_b, float beta, T* c,
                  int64_t ldc, int64_t stride_c, int64_t count);

/// kernels::gemm_epilogue's fused form through cuBLASLt (kernels/cuda/gemm.cuh): kind is a
/// kernels::EpilogueKind, gelu_tanh whether the activation is GeLU (tanh), cuBLASLt's. false,
/// having done nothing, where cuBLASLt has no such epilogue or no algorithm for it; throws on any
/// other failure.
template <class T>
bool gemm_epilogue(Stream stream, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha, const T* a,
                   int64_t lda, const T* b, int64_t ldb, float beta, T* c, int64_t ldc, int kind, bool gelu_tanh,
                   const T* bias, T* aux, int64_t ld_aux, T* bias_grad);

/// The cuDNN SDPA baseline (kernels/cuda/cudnn_attention.cu), the CUDA side of
/// kernels::attention_cudnn_*: libcudnn.so.9 is loaded with dlopen at the first call, never
/// linked. available: whether it loads (`why`, may be null: the reason, or the version loaded);
/// false, never a throw, where bench was built without cuDNN's headers or runs without the
/// library. forward / backward: kernels::attention_cudnn_forward / _backward's contract (stats:
/// the log-sum-exp [B, H, T] in float); bf16 only (float throws); std::runtime_error naming the
/// cuDNN call and its status on failure.
bool cudnn_attention_available(std::string* why);
/// The loaded cuDNN's version as cuDNN numbers it (9.16.0 is 91600); 0 where none loads.
int cudnn_version();
/// "" when the loaded cuDNN runs `a`, forward and backward; else why not (it does not load, the
/// variant, the version). Never throws.
std::string cudnn_attention_refusal(const AttentionArgs& a);
template <class T>
void cudnn_attention_forward(Stream stream, const AttentionArgs& args, const T* qkv, T* out, float* stats);
template <class T>
void cudnn_attention_backward(Stream stream, const AttentionArgs& args, const T* qkv, const T* out, const float* stats,
                              const T* dout, T* dqkv);

}  // namespace bench::kernels::cuda
