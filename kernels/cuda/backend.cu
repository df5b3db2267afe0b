// defines: the CUDA backend object (kernels/cuda_backend.h), installed when libbench_cuda loads,
//          and the catalog rows of the hand-written CUDA kernels
//
// The host-compiled launchers reach everything CUDA-only through it: the runtime
// (kernels/device_runtime.h), cuBLASLt, the flash attention and cuDNN's SDPA. The tile kernels'
// CUDA builds register themselves, one per program (the CUDA pass, kernels/tile/registry.h).
#include <cuda_runtime.h>

#include <string>

#include "../catalog.h"
#include "../cuda_backend.h"
#include "../cuda_launchers.h"
#include "../device_runtime.h"
#include "flash_attention.cuh"

namespace bench::kernels::cuda {

namespace {

void ok(cudaError_t e, const char* what) {
  if (e != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(e));
}

class Backend final : public CudaBackend {
 public:
  int device_count() const override { return cuda::device_count(); }
  std::string device_name() const override {
    if (cuda::device_count() == 0) return "cuda (no device)";
    int d = 0;
    cudaDeviceProp prop{};
    if (cudaGetDevice(&d) != cudaSuccess || cudaGetDeviceProperties(&prop, d) != cudaSuccess) {
      cudaGetLastError();
      return "cuda";
    }
    return "cuda:" + std::to_string(d) + " (" + prop.name + ")";
  }
  size_t memory_available() const override { return cuda::memory_available(); }
  void* thread_stream() const override { return cuda::thread_stream(); }
  std::unique_ptr<AllocatorBackend> make_allocator() const override {
    return make_cuda_backend(cuda::current_device());
  }
  void copy(void* dst, const void* src, size_t bytes, bool wait) const override { cuda::copy(dst, src, bytes, wait); }
  void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows,
               bool wait) const override {
    cuda::copy_2d(dst, dst_pitch, src, src_pitch, width, rows, wait);
  }
  void zero(void* p, size_t bytes, void* stream) const override { cuda::zero(p, bytes, stream); }
  void synchronize(void* stream) const override { cuda::synchronize(stream); }

  void gemm(void* stream, bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
            const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc) const override {
    auto* s = static_cast<Stream>(stream);
    if (bf16) {
      cuda::gemm<tile::bf16>(s, trans_a, trans_b, m, n, k, alpha, static_cast<const tile::bf16*>(a), lda,
                             static_cast<const tile::bf16*>(b), ldb, beta, static_cast<tile::bf16*>(c), ldc);
    } else {
      cuda::gemm<float>(s, trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(a), lda,
                        static_cast<const float*>(b), ldb, beta, static_cast<float*>(c), ldc);
    }
  }
  void gemm_batched(void* stream, bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                    const void* a, int64_t lda, int64_t stride_a, const void* b, int64_t ldb, int64_t stride_b,
                    float beta, void* c, int64_t ldc, int64_t stride_c, int64_t count) const override {
    auto* s = static_cast<Stream>(stream);
    if (bf16) {
      using B = tile::bf16;
      cuda::gemm_batched<B>(s, trans_a, trans_b, m, n, k, alpha, static_cast<const B*>(a), lda, stride_a,
                            static_cast<const B*>(b), ldb, stride_b, beta, static_cast<B*>(c), ldc, stride_c, count);
    } else {
      cuda::gemm_batched<float>(s, trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(a), lda, stride_a,
                                static_cast<const float*>(b), ldb, stride_b, beta, static_cast<float*>(c), ldc,
                                stride_c, count);
    }
  }
  bool gemm_epilogue(void* stream, bool bf16, bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                     const void* a, int64_t lda, const void* b, int64_t ldb, float beta, void* c, int64_t ldc, int kind,
                     bool gelu_tanh, const void* bias, void* aux, int64_t ld_aux, void* bias_grad) const override {
    auto* s = static_cast<Stream>(stream);
    if (bf16) {
      using B = tile::bf16;
      return cuda::gemm_epilogue<B>(s, trans_a, trans_b, m, n, k, alpha, static_cast<const B*>(a), lda,
                                    static_cast<const B*>(b), ldb, beta, static_cast<B*>(c), ldc, kind, gelu_tanh,
                                    static_cast<const B*>(bias), static_cast<B*>(aux), ld_aux,
                                    static_cast<B*>(bias_grad));
    }
    return cuda::gemm_epilogue<float>(s, trans_a, trans_b, m, n, k, alpha, static_cast<const float*>(a), lda,
                                      static_cast<const float*>(b), ldb, beta, static_cast<float*>(c), ldc, kind,
                                      gelu_tanh, static_cast<const float*>(bias), static_cast<float*>(aux), ld_aux,
                                      static_cast<float*>(bias_grad));
  }
  // The flash state in the probs buffer: the log-sum-exp [B, H, T], then (256-byte aligned) the
  // backward's float workspace.
  void flash_forward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out, float* row_max,
                     void* state) const override {
    ok(flash_attention_forward(static_cast<cudaStream_t>(stream), a, qkv, out, row_max, static_cast<float*>(state)),
       "attention: flash forward");
  }
  void flash_backward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, const tile::bf16* out,
                      const tile::bf16* dout, void* state, tile::bf16* dqkv) const override {
    auto* lse = static_cast<float*>(state);
    ok(flash_attention_backward(static_cast<cudaStream_t>(stream), a, qkv, out, dout, lse, dqkv,
                                lse + attention_flash_workspace_offset(a)),
       "attention: flash backward");
  }
  void flash_wgmma_forward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out, float* row_max,
                           void* state, bool warp_specialized) const override {
    ok(flash_attention_wgmma_forward(static_cast<cudaStream_t>(stream), a, qkv, out, row_max,
                                     static_cast<float*>(state), warp_specialized),
       warp_specialized ? "attention: flash forward (wgmma, warp-specialized)" : "attention: flash forward (wgmma)");
  }
  std::string flash_wgmma_refusal(const AttentionArgs& a) const override { return flash_attention_wgmma_refusal(a); }
  void flash_wgmma_backward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, const tile::bf16* out,
                            const tile::bf16* dout, void* state, tile::bf16* dqkv) const override {
    auto* lse = static_cast<float*>(state);
    ok(flash_attention_wgmma_backward(static_cast<cudaStream_t>(stream), a, qkv, out, dout, lse, dqkv,
                                      lse + attention_flash_workspace_offset(a)),
       "attention: flash backward (wgmma)");
  }
  std::string flash_wgmma_backward_refusal(const AttentionArgs& a) const override {
    return flash_attention_wgmma_backward_refusal(a);
  }
  void flash_f32_forward(void* stream, const AttentionArgs& a, const float* qkv, float* out, float* row_max,
                         float* state) const override {
    ok(flash_attention_f32_forward(static_cast<cudaStream_t>(stream), a, qkv, out, row_max, state),
       "attention: flash forward (float32)");
  }
  void flash_f32_backward(void* stream, const AttentionArgs& a, const float* qkv, const float* out, const float* dout,
                          float* state, float* dqkv) const override {
    ok(flash_attention_f32_backward(static_cast<cudaStream_t>(stream), a, qkv, out, dout, state, dqkv,
                                    state + attention_flash_workspace_offset(a)),
       "attention: flash backward (float32)");
  }
  bool cudnn_available(std::string* why) const override { return cudnn_attention_available(why); }
  std::string cudnn_refusal(const AttentionArgs& a) const override { return cudnn_attention_refusal(a); }
  void cudnn_forward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                     float* stats) const override {
    cudnn_attention_forward<tile::bf16>(static_cast<Stream>(stream), a, qkv, out, stats);
  }
  void cudnn_backward(void* stream, const AttentionArgs& a, const tile::bf16* qkv, const tile::bf16* out,
                      const float* stats, const tile::bf16* dout, tile::bf16* dqkv) const override {
    cudnn_attention_backward<tile::bf16>(static_cast<Stream>(stream), a, qkv, out, stats, dout, dqkv);
  }
};

/// Installed for as long as this library is loaded.
struct Installation {
  Backend backend;
  Installation() { install_cuda_backend(&backend); }
  ~Installation() { install_cuda_backend(nullptr); }
  Installation(const Installation&) = delete;
  Installation& operator=(const Installation&) = delete;
};
const Installation installation;

std::string cudnn_unavailable() {
  std::string why;
  return cudnn_attention_available(&why) ? std::string() : why;
}

// The catalog rows' CUDA side for the kernels that are not tile programs.
const CudaKernelRegistration gemm_row{"gemm", kF32 | kBf16};
const CudaKernelRegistration flash_row{"flash_attention", kF32 | kBf16};
// The wgmma forward (sm_90a) is in this library whatever the device; whether the device runs it
// is flash_wgmma_refusal's to say, per call.
const CudaKernelRegistration flash_wgmma_row{"flash_attention_wgmma", kBf16};
const CudaKernelRegistration cudnn_forward_row{"attention_cudnn_forward", kBf16, &cudnn_unavailable};
const CudaKernelRegistration cudnn_backward_row{"attention_cudnn_backward", kBf16, &cudnn_unavailable};

}  // namespace

}  // namespace bench::kernels::cuda
