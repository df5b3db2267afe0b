// defines: bench::kernels::CudaBackend, install_cuda_backend, cuda_backend — what the CUDA
//          library provides to the host-compiled side (an internal header: not part of the plugin
//          API, not installed)
//
// The plugin API library (launchers, memory, tile registry) is compiled by the C++ compiler
// alone and links no CUDA library. libbench_cuda, when it is loaded (the harness links it in a
// CUDA build), installs one CudaBackend (kernels/cuda/backend.cu), as a ggml backend registers
// itself: the runtime pieces the memory functions need, and the hand-written kernels that are
// not tile programs (cuBLASLt GEMM, the flash attention, cuDNN's SDPA). Tile programs do not go
// through it: their CUDA builds are registered one by one (tile/registry.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "attention.h"
#include "caching_allocator.h"

namespace bench::kernels {

/// The CUDA side, as the host-compiled code sees it. Every method throws std::runtime_error
/// naming the CUDA (or cuBLASLt, cuDNN) call on failure, unless it says otherwise.
class CudaBackend {
 public:
  virtual ~CudaBackend() = default;

  // --- the runtime --------------------------------------------------------------------------
  /// Visible devices; 0 without a driver or a device (never throws).
  virtual int device_count() const = 0;
  /// "cuda:0 (NVIDIA H200)", or "cuda (no device)" (never throws).
  virtual std::string device_name() const = 0;
  /// Free bytes of the current device.
  virtual size_t memory_available() const = 0;
  /// This host thread's stream on the current device (kernels/device_runtime.h).
  virtual void* thread_stream() const = 0;
  /// cudaMalloc / cudaFree on the current device, for a CachingAllocator.
  virtual std::unique_ptr<AllocatorBackend> make_allocator() const = 0;
  /// Asynchronous copy on this thread's stream (any direction); with `wait`, waits for it.
  virtual void copy(void* dst, const void* src, size_t bytes, bool wait) const = 0;
  virtual void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
                       bool wait) const = 0;
  /// Zero `bytes` at p on `stream` (nullptr: this thread's stream), without waiting.
  virtual void zero(void* p, size_t bytes, void* stream) const = 0;
  /// Wait for `stream`, then report its sticky error.
  virtual void synchronize(void* stream) const = 0;

  // --- hand-written kernels -----------------------------------------------------------------
  /// kernels::gemm's contract through cuBLASLt (float computed in float, bf16 in float on the
  /// tensor cores). `bf16` says which of the two the pointers are.
  virtual void gemm(void* stream, bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc) const = 0;
  /// kernels::gemm_batched's contract: `count` products at fixed strides (elements) in one
  /// cuBLASLt call (strided batched layouts).
  virtual void gemm_batched(void* stream, bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                            float alpha, const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb,
                            int64_t stride_b, float beta, void* c, int64_t ldc, int64_t stride_c,
                            int64_t count) const = 0;
  /// kernels::gemm_epilogue fused by cuBLASLt: kind is a kernels::EpilogueKind, gelu_tanh whether
  /// the activation is GeLU (tanh). false, having done nothing, where cuBLASLt has no such
  /// epilogue (another activation) or no algorithm for it: the launcher then runs it unfused.
  virtual bool gemm_epilogue(void* stream, bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k,
                             float alpha, const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c,
                             int64_t ldc, int kind, bool gelu_tanh, const void* bias, void* aux, int64_t ld_aux,
                             void* bias_grad) const = 0;
  /// The flash attention (kernels/cuda/flash_attention.cuh), bf16: `state` is the probs buffer
  /// of attention_forward holding the log-sum-exp, then the backward's workspace.
  virtual void flash_forward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                             float* row_max, void* state) const = 0;
  virtual void flash_backward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, const tile::bf16* out,
                              const tile::bf16* dout, void* state, tile::bf16* dqkv) const = 0;
  /// The bf16 flash forward on wgmma (kernels/cuda/flash_attention.cuh,
  /// flash_attention_wgmma_forward; sm_90a), with flash_forward's `state` (`warp_specialized`: the
  /// variant with a producer warpgroup and the consumers' ping-pong), and why it cannot run `a`
  /// on this device ("" when it can).
  virtual void flash_wgmma_forward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                   float* row_max, void* state, bool warp_specialized) const = 0;
  virtual std::string flash_wgmma_refusal(const AttentionArgs& a) const = 0;
  /// The bf16 flash backward with its main kernel on wgmma (flash_attention_wgmma_backward;
  /// sm_90a), flash_backward's contract and `state`, and why it cannot run `a` here ("" when it can).
  virtual void flash_wgmma_backward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, const tile::bf16* out,
                                    const tile::bf16* dout, void* state, tile::bf16* dqkv) const = 0;
  virtual std::string flash_wgmma_backward_refusal(const AttentionArgs& a) const = 0;
  /// The float32 flash attention (kernels/cuda/flash_attention.cuh, flash_attention_f32_*):
  /// `state` holds the log-sum-exp [B, H, T], then (attention_flash_workspace_offset floats on)
  /// the backward's workspace (attention_flash_f32_state_size floats in all).
  virtual void flash_f32_forward(void* stream, const AttentionArgs& a, const float* qkv, float* out, float* row_max,
                                 float* state) const = 0;
  virtual void flash_f32_backward(void* stream, const AttentionArgs& a, const float* qkv, const float* out,
                                  const float* dout, float* state, float* dqkv) const = 0;
  /// cuDNN's fused attention (kernels/cuda/cudnn_attention.cu), bf16.
  virtual bool cudnn_available(std::string* why) const = 0;
  /// "" when the loaded cuDNN runs `a`, its backward included; else why not (never throws).
  virtual std::string cudnn_refusal(const AttentionArgs& a) const = 0;
  virtual void cudnn_forward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                             float* stats) const = 0;
  virtual void cudnn_backward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, const tile::bf16* out,
                              const float* stats, const tile::bf16* dout, tile::bf16* dqkv) const = 0;
};

/// Installs the CUDA backend (libbench_cuda, when it loads); nullptr uninstalls it.
void install_cuda_backend(const CudaBackend* backend);
/// The installed CUDA backend, or nullptr in a process without one (a CPU-only build).
const CudaBackend* cuda_backend();
/// The installed CUDA backend; throws std::runtime_error naming `what` when there is none.
const CudaBackend& require_cuda_backend(const char* what);

}  // namespace bench::kernels
