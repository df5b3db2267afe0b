// Float32 flash attention forward and backward (kernels/cuda/flash_attention.cuh): the kernels of
// flash_attention_f32_kernels.cuh (which describes them, their shared memory and registers) with
// the hardware as their Thread, and their launchers. Compiled for sm_90; not run on a GPU yet.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

#include "../attention_flash_f32.h"
#include "flash_attention.cuh"
#include "flash_attention_f32_backward_kernels.cuh"
#include "flash_attention_f32_kernels.cuh"

namespace bench::kernels::cuda {

namespace {

using flash32::kBlock;
using flash32::kThreads;
using flash32::kWarps;

extern __shared__ __align__(16) uint8_t g_shared32[];

/// The hardware behind flash_attention_f32_kernels.cuh's Thread.
struct CudaThread32 {
  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int block_x() const { return static_cast<int>(blockIdx.x); }
  __device__ __forceinline__ int block_y() const { return static_cast<int>(blockIdx.y); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  __device__ __forceinline__ float shfl_xor(float v, int mask) const { return __shfl_xor_sync(0xffffffffu, v, mask); }
  /// 2^x by the SFU (ex2.approx.f32: relative error about 2^-22, no flush of denormal results
  /// beyond the hardware's; -inf gives +0).
  __device__ __forceinline__ float exp2(float x) const {
    float y;
    asm("ex2.approx.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
  }
  __device__ __forceinline__ uint8_t* shared() const { return g_shared32; }
};

template <int D, bool kDropout>
__global__ void __launch_bounds__(kThreads)
    flash32_forward(flash32::Params p, const int64_t* step_at, const float* __restrict__ qkv, float* __restrict__ out,
                    float* __restrict__ row_max, float* __restrict__ lse) {
  CudaThread32 th;
  p.seed = dropout_seed_of(p.seed, step_at);
  flash32::forward<D, kDropout>(th, p, qkv, out, row_max, lse);
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash32_backward_prep(const float* __restrict__ out, const float* __restrict__ dout, float* __restrict__ dvec,
                          int64_t n_t, int n_h, int64_t rows) {
  CudaThread32 th;
  flash32::backward_prep<D>(th, out, dout, dvec, n_t, n_h, rows);
}

template <int D, bool kDropout>
__global__ void __launch_bounds__(kThreads)
    flash32_backward_dkdv(flash32::Params p, const int64_t* step_at, const float* __restrict__ qkv,
                          const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ dvec,
                          float* __restrict__ dqkv) {
  CudaThread32 th;
  p.seed = dropout_seed_of(p.seed, step_at);
  flash32::backward_dkdv<D, kDropout>(th, p, qkv, dout, lse, dvec, dqkv);
}

template <int D, bool kDropout>
__global__ void __launch_bounds__(kThreads)
    flash32_backward_dq(flash32::Params p, const int64_t* step_at, const float* __restrict__ qkv,
                        const float* __restrict__ dout, const float* __restrict__ lse, const float* __restrict__ dvec,
                        float* __restrict__ dqkv) {
  CudaThread32 th;
  p.seed = dropout_seed_of(p.seed, step_at);
  flash32::backward_dq<D, kDropout>(th, p, qkv, dout, lse, dvec, dqkv);
}

/// Refuses, with the reason, what the kernels cannot launch: more than 65535 (batch, head) pairs
/// in grid y, or a base pointer that is not 16-byte aligned (rows move as float4).
void check_launchable(const char* what, const AttentionArgs& a, std::initializer_list<const void*> pointers) {
  const int64_t y = a.batch * a.n_heads;
  if (y > 65535)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(y) +
                                " (batch, head) pairs exceed CUDA's 65535 blocks in grid y: split the batch");
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument(std::string(what) +
                                  ": a base pointer is not 16-byte aligned (the float32 flash kernels load float4)");
}

template <class Kernel>
cudaError_t allow_smem(Kernel kernel, size_t bytes) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes));
}

template <int D, bool kDropout>
cudaError_t launch_forward(cudaStream_t stream, const AttentionArgs& a, const float* qkv, float* out, float* row_max,
                           float* lse) {
  constexpr size_t smem = flash32::forward_smem_bytes<D>();
  if (const cudaError_t err = allow_smem(flash32_forward<D, kDropout>, smem); err != cudaSuccess) return err;
  const dim3 grid(static_cast<unsigned>((a.seq + kBlock - 1) / kBlock), static_cast<unsigned>(a.batch * a.n_heads));
  flash32_forward<D, kDropout>
      <<<grid, kThreads, smem, stream>>>(flash32::params_of(a), a.dropout_step_at, qkv, out, row_max, lse);
  return cudaGetLastError();
}

template <int D, bool kDropout>
cudaError_t launch_backward(cudaStream_t stream, const AttentionArgs& a, const float* qkv, const float* out,
                            const float* dout, const float* lse, float* dqkv, float* dvec) {
  const flash32::Params p = flash32::params_of(a);
  const int64_t rows = a.batch * a.n_heads * a.seq;
  flash32_backward_prep<D><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, stream>>>(
      out, dout, dvec, a.seq, p.n_h, rows);
  constexpr size_t smem_kv = flash32::backward_dkdv_smem_bytes<D>(), smem_q = flash32::backward_dq_smem_bytes<D>();
  if (const cudaError_t err = allow_smem(flash32_backward_dkdv<D, kDropout>, smem_kv); err != cudaSuccess) return err;
  if (const cudaError_t err = allow_smem(flash32_backward_dq<D, kDropout>, smem_q); err != cudaSuccess) return err;
  const auto tiles = static_cast<unsigned>((a.seq + kBlock - 1) / kBlock);
  flash32_backward_dkdv<D, kDropout>
      <<<dim3(tiles, static_cast<unsigned>(a.batch * a.n_kv_heads)), kThreads, smem_kv, stream>>>(
          p, a.dropout_step_at, qkv, dout, lse, dvec, dqkv);
  flash32_backward_dq<D, kDropout>
      <<<dim3(tiles, static_cast<unsigned>(a.batch * a.n_heads)), kThreads, smem_q, stream>>>(p, a.dropout_step_at, qkv,
                                                                                              dout, lse, dvec, dqkv);
  return cudaGetLastError();
}

}  // namespace

cudaError_t flash_attention_f32_forward(cudaStream_t stream, const AttentionArgs& a, const float* qkv, float* out,
                                        float* row_max, float* lse) {
  if (!attention_flash_f32_unsupported(a).empty()) return cudaErrorNotSupported;
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  check_launchable("flash_attention_f32_forward", a, {qkv, out});
  // Dropout is a template parameter: its index arithmetic and hashing cost registers that the
  // kernels without it should not pay.
  if (a.dropout > 0)
    return a.d_head == 64 ? launch_forward<64, true>(stream, a, qkv, out, row_max, lse)
                          : launch_forward<128, true>(stream, a, qkv, out, row_max, lse);
  return a.d_head == 64 ? launch_forward<64, false>(stream, a, qkv, out, row_max, lse)
                        : launch_forward<128, false>(stream, a, qkv, out, row_max, lse);
}

size_t flash_attention_f32_backward_workspace(const AttentionArgs& a) {
  return static_cast<size_t>(a.batch * a.n_heads * a.seq) * sizeof(float);
}

cudaError_t flash_attention_f32_backward(cudaStream_t stream, const AttentionArgs& a, const float* qkv,
                                         const float* out, const float* dout, const float* lse, float* dqkv,
                                         void* workspace) {
  if (!attention_flash_f32_unsupported(a).empty()) return cudaErrorNotSupported;
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  check_launchable("flash_attention_f32_backward", a, {qkv, out, dout, dqkv});
  auto* dvec = static_cast<float*>(workspace);
  if (a.dropout > 0)
    return a.d_head == 64 ? launch_backward<64, true>(stream, a, qkv, out, dout, lse, dqkv, dvec)
                          : launch_backward<128, true>(stream, a, qkv, out, dout, lse, dqkv, dvec);
  return a.d_head == 64 ? launch_backward<64, false>(stream, a, qkv, out, dout, lse, dqkv, dvec)
                        : launch_backward<128, false>(stream, a, qkv, out, dout, lse, dqkv, dvec);
}

}  // namespace bench::kernels::cuda
