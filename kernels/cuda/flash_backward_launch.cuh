// defines: bench::kernels::cuda::launch_backward_main, by_head_and_dropout — the launch of a flash
//          backward's main kernel (flash_attention_backward_kernels.cuh's flash_backward on
//          mma.sync, flash_attention_wgmma_backward_kernels.cuh's flash_backward_wgmma), shared by
//          flash_attention.cu and flash_attention_wgmma.cu (CUDA translation units only)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "../attention.h"
#include "flash_attention_backward_kernels.cuh"

namespace bench::kernels::cuda {

/// Calls step.template operator()<D, kDropout>() for a's d_head (64, else 128) and whether it
/// drops out, and returns what it returns. Dropout is a template parameter of the kernels: its
/// index arithmetic and hashing cost registers that the kernels without it should not pay.
template <class Step>
cudaError_t by_head_and_dropout(const AttentionArgs& a, const Step& step) {
  if (a.dropout > 0)
    return a.d_head == 64 ? step.template operator()<64, true>() : step.template operator()<128, true>();
  return a.d_head == 64 ? step.template operator()<64, false>() : step.template operator()<128, false>();
}

/// Launches `kernel` (a main backward kernel: qkv, dout, lse, dvec, dq_accum, dqkv, then the
/// shape, scale, soft-cap, window, causal, dropout and its seed, then heaviest_first) on the grid
/// both take (flash::backward_grid: 128-key blocks in x, (batch, kv head) in y; causal with
/// a.flash_backward_heaviest_first, the two swapped), with `threads` threads and `smem` bytes of
/// dynamic shared memory, set first. cudaErrorInvalidConfiguration where the swapped grid's y
/// (the key blocks) passes CUDA's 65535. `first`: arguments before qkv (the wgmma backward's TMA
/// variant: its tensor maps), none for the others.
template <class Kernel, class... First>
cudaError_t launch_backward_main(Kernel kernel, size_t smem, int threads, cudaStream_t stream, const AttentionArgs& a,
                                 const uint16_t* qkv, const uint16_t* dout, const float* lse, const float* dvec,
                                 float* dq_accum, uint16_t* dqkv, const First&... first) {
  const cudaError_t err =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  int64_t x = 0, y = 0;
  const bool heaviest_first =
      flash::backward_grid(a.seq, a.batch * a.n_kv_heads, a.causal, a.flash_backward_heaviest_first, x, y);
  if (y > kCudaMaxGridY) return cudaErrorInvalidConfiguration;
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
  kernel<<<grid, threads, smem, stream>>>(
      first..., qkv, dout, lse, dvec, dq_accum, dqkv, a.seq, static_cast<int>(a.n_heads),
      static_cast<int>(a.n_kv_heads), static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal,
      static_cast<float>(a.dropout), a.dropout_seed, a.dropout_step_at, heaviest_first);
  return cudaGetLastError();
}

}  // namespace bench::kernels::cuda
