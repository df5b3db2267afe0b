// Flash attention forward and backward (kernels/cuda/flash_attention.cuh): the kernels of
// flash_attention_kernels.cuh and flash_attention_backward_kernels.cuh (which describe them) with
// the hardware as their Thread, and their launchers.
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>
#include <utility>

#include "flash_attention.cuh"
#include "flash_attention_backward_kernels.cuh"
#include "flash_attention_kernels.cuh"
#include "flash_backward_launch.cuh"
#include "flash_thread.cuh"

namespace bench::kernels::cuda {

namespace {

using flash::kThreads;
using flash::kWarps;

template <int D, bool kDropout>
__global__ void __launch_bounds__(flash::kFwdThreads)
    flash_forward(const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out, float* __restrict__ row_max,
                  float* __restrict__ lse, int64_t n_t, int n_h, int n_kv, float scale, float softcap, int64_t window,
                  bool causal, float dropout, uint64_t seed, const int64_t* step_at) {
  CudaThread th;
  flash::flash_forward<D, kDropout>(th, qkv, out, row_max, lse, n_t, n_h, n_kv, scale, softcap, window, causal, dropout,
                                    dropout_seed_of(seed, step_at));
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_backward_prep(const uint16_t* __restrict__ out, const uint16_t* __restrict__ dout, float* __restrict__ dvec,
                        float* __restrict__ dq_accum, int64_t n_t, int n_h, int64_t rows) {
  CudaThread th;
  flash::flash_backward_prep<D>(th, out, dout, dvec, dq_accum, n_t, n_h, rows);
}

template <int D, bool kDropout>
__global__ void __launch_bounds__(flash::kBwdThreads, 1)
    flash_backward(const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout, const float* __restrict__ lse,
                   const float* __restrict__ dvec, float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv,
                   int64_t n_t, int n_h, int n_kv, float scale, float softcap, int64_t window, bool causal,
                   float dropout, uint64_t seed, const int64_t* step_at, bool heaviest_first) {
  CudaThread th;
  flash::flash_backward<D, kDropout>(th, qkv, dout, lse, dvec, dq_accum, dqkv, n_t, n_h, n_kv, scale, softcap, window,
                                     causal, dropout, dropout_seed_of(seed, step_at), heaviest_first);
}

template <int D>
__global__ void flash_backward_dq(const float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv, int64_t n_t, int n_h,
                                  int n_kv, int64_t pairs) {
  CudaThread th;
  flash::flash_backward_dq<D>(th, dq_accum, dqkv, n_t, n_h, n_kv, pairs);
}

/// Refuses, with the reason, what the flash kernels cannot launch: a grid over CUDA's limits (x:
/// 2^31 - 1 blocks; y: 65535; `y_is` names what y counts), or a base pointer that is not 16-byte
/// aligned (tiles move with 16-byte loads; rows are multiples of 64 elements). attention_uses_flash
/// (kernels/attention.h) keeps `auto` off the flash kernels past the same limits.
void check_launchable(const char* what, int64_t x, int64_t y, const char* y_is,
                      std::initializer_list<std::pair<const char*, const void*>> pointers) {
  if (y > kernels::kCudaMaxGridY)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(y) + " " + y_is +
                                " exceed CUDA's 65535 blocks in grid y: split the batch");
  if (x > 2147483647)
    throw std::invalid_argument(std::string(what) + ": " + std::to_string(x) + " blocks exceed CUDA's grid x limit");
  for (const auto& [name, p] : pointers)
    if (reinterpret_cast<uintptr_t>(p) % 16 != 0)
      throw std::invalid_argument(std::string(what) + ": " + name +
                                  " is not 16-byte aligned (the flash kernels load 16 bytes at a time)");
}

static_assert(flash::kFwdBlockM == kernels::kAttentionFlashForwardRows,
              "attention_uses_flash computes the forward's grid with the forward's block of queries");

/// The mma.sync main kernel (flash_backward) as flash_attention_backward_with's FlashBackwardMain.
cudaError_t backward_main(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv, const uint16_t* dout,
                          const float* lse, const float* dvec, float* dq_accum, uint16_t* dqkv) {
  return by_head_and_dropout(a, [&]<int D, bool kDropout>() {
    return launch_backward_main(flash_backward<D, kDropout>, flash::backward_smem_bytes<D>(), flash::kBwdThreads,
                                stream, a, qkv, dout, lse, dvec, dq_accum, dqkv);
  });
}

/// The prep kernel, `main`, and the dQ kernel.
template <int D>
cudaError_t launch_backward(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv, const uint16_t* out,
                            const uint16_t* dout, const float* lse, uint16_t* dqkv, float* dvec, float* dq_accum,
                            FlashBackwardMain main) {
  const int n_h = static_cast<int>(a.n_heads), n_kv = static_cast<int>(a.n_kv_heads);
  const int64_t rows = a.batch * a.n_heads * a.seq;
  flash_backward_prep<D><<<static_cast<unsigned>((rows + kWarps - 1) / kWarps), kThreads, 0, stream>>>(
      out, dout, dvec, dq_accum, a.seq, n_h, rows);
  const cudaError_t err = main(stream, a, qkv, dout, lse, dvec, dq_accum, dqkv);
  if (err != cudaSuccess) return err;
  const int64_t pairs = rows * D / 2;
  flash_backward_dq<D>
      <<<static_cast<unsigned>((pairs + 255) / 256), 256, 0, stream>>>(dq_accum, dqkv, a.seq, n_h, n_kv, pairs);
  return cudaGetLastError();
}

template <int D, bool kDropout>
cudaError_t launch_forward(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv, uint16_t* out,
                           float* row_max, float* lse) {
  constexpr size_t smem = flash::forward_smem_bytes<D>();
  const cudaError_t err = cudaFuncSetAttribute(flash_forward<D, kDropout>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                               static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  // 128-query blocks; causal, (batch, head) in x and the query blocks in y, heaviest first.
  int64_t x = 0, y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, x, y);
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
  flash_forward<D, kDropout><<<grid, flash::kFwdThreads, smem, stream>>>(
      qkv, out, row_max, lse, a.seq, static_cast<int>(a.n_heads), static_cast<int>(a.n_kv_heads),
      static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal, static_cast<float>(a.dropout),
      a.dropout_seed, a.dropout_step_at);
  return cudaGetLastError();
}

}  // namespace

cudaError_t flash_attention_forward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                    float* row_max, float* lse) {
  if (a.dropout < 0 || a.dropout >= 1 || (a.d_head != 64 && a.d_head != 128) || (a.window > 0 && !a.causal) ||
      a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    return cudaErrorNotSupported;
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  int64_t x = 0, y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, x, y);
  check_launchable("flash_attention_forward", x, y, a.causal ? "query blocks" : "(batch, head) pairs",
                   {{"qkv", qkv}, {"out", out}});
  const auto* in = reinterpret_cast<const uint16_t*>(qkv);
  auto* o = reinterpret_cast<uint16_t*>(out);
  // Dropout is a template parameter: its index arithmetic and hashing cost registers that the
  // kernels without it should not pay.
  if (a.dropout > 0)
    return a.d_head == 64 ? launch_forward<64, true>(stream, a, in, o, row_max, lse)
                          : launch_forward<128, true>(stream, a, in, o, row_max, lse);
  return a.d_head == 64 ? launch_forward<64, false>(stream, a, in, o, row_max, lse)
                        : launch_forward<128, false>(stream, a, in, o, row_max, lse);
}

size_t flash_attention_backward_workspace(const AttentionArgs& a) {
  return static_cast<size_t>(a.batch * a.n_heads * a.seq * (a.d_head + 1)) * sizeof(float);
}

cudaError_t flash_attention_backward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                     const tile::bf16* out, const tile::bf16* dout, const float* lse, tile::bf16* dqkv,
                                     void* workspace) {
  return flash_attention_backward_with(stream, a, qkv, out, dout, lse, dqkv, workspace, backward_main);
}

cudaError_t flash_attention_backward_with(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                          const tile::bf16* out, const tile::bf16* dout, const float* lse,
                                          tile::bf16* dqkv, void* workspace, FlashBackwardMain main) {
  if (a.dropout < 0 || a.dropout >= 1 || (a.d_head != 64 && a.d_head != 128) || (a.window > 0 && !a.causal) ||
      a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    return cudaErrorNotSupported;
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  check_launchable("flash_attention_backward", (a.seq + flash::kBwdBlockN - 1) / flash::kBwdBlockN,
                   a.batch * a.n_kv_heads, "(batch, kv head) pairs",
                   {{"qkv", qkv}, {"out", out}, {"dout", dout}, {"dqkv", dqkv}, {"workspace", workspace}});
  auto* dq_accum = static_cast<float*>(workspace);
  float* dvec = dq_accum + a.batch * a.n_heads * a.seq * a.d_head;
  const auto* in = reinterpret_cast<const uint16_t*>(qkv);
  const auto* o = reinterpret_cast<const uint16_t*>(out);
  const auto* d_o = reinterpret_cast<const uint16_t*>(dout);
  auto* dx = reinterpret_cast<uint16_t*>(dqkv);
  return a.d_head == 64 ? launch_backward<64>(stream, a, in, o, d_o, lse, dx, dvec, dq_accum, main)
                        : launch_backward<128>(stream, a, in, o, d_o, lse, dx, dvec, dq_accum, main);
}

}  // namespace bench::kernels::cuda
