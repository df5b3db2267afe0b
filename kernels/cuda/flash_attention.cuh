// defines: bench::kernels::cuda::flash_attention_forward, flash_attention_backward,
//          flash_attention_backward_workspace — fused causal attention on the tensor cores, the
//          CUDA path of kernels/attention.h; flash_attention_f32_forward, flash_attention_f32_backward,
//          flash_attention_f32_backward_workspace — its float32 sibling in FFMA (the flash core in float32)
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "../attention.h"

namespace bench::kernels::cuda {

/// Flash-style attention forward (online softmax over key tiles, nothing of size T^2 in memory),
/// with the contract of kernels::attention_forward: qkv holds fused rows [B*T, (H + 2 Hkv) * dh]
/// (Q heads, then K heads, then V heads), out is [B*T, H*dh]; query head h reads kv head
/// h / (H / Hkv). Causal or not, sliding window, logit soft-cap. row_max [B, H, T] receives each
/// query's largest logit (after scale and soft-cap: the stability runner's max attention logit)
/// and lse [B, H, T] the log-sum-exp of its logits (what a backward needs); either may be null.
///
/// bf16 in and out, Q K^T and P V on the tensor cores (mma.sync m16n8k16, float accumulation),
/// the softmax in float. d_head 64 or 128. Dropout on the probabilities with the CPU path's mask
/// (a.dropout, a.dropout_seed: kernels/attention.h), recomputed, never stored. A rate outside
/// [0, 1), another d_head or a window with causal = false return cudaErrorNotSupported without
/// launching; a grid over CUDA's limits (more than 65535 blocks of 128 queries when causal, else
/// more than 65535 (batch, head) pairs; attention_uses_flash is false there) or a base pointer
/// that is not 16-byte aligned throws std::invalid_argument saying which.
cudaError_t flash_attention_forward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                    float* row_max, float* lse);

/// The bf16 forward on Hopper's warpgroup MMA (flash_attention_wgmma_kernels.cuh: wgmma, sm_90a
/// only): the contract of flash_attention_forward, every variant, d_head 64 or 128. Compiled and
/// checked by the CPU emulator, NOT yet run on a GPU: nothing selects it by default (it runs where
/// a layer sets `core = "flash_wgmma"`; docs/flash-forward.md). What flash_attention_wgmma_refusal names returns
/// cudaErrorNotSupported without launching; a base pointer not 16-byte aligned throws
/// std::invalid_argument. `warp_specialized`: the variant with a producer warpgroup, mbarriers and
/// the two consumer warpgroups' ping-pong (FlashAttention-3's structure; 384 threads a block), else
/// the one of two warpgroups in step (256 threads). `tma` (with warp_specialized only, else
/// cudaErrorNotSupported): the producer's copies by TMA tensor loads into 128-byte swizzled tiles,
/// the tensor map encoded here by cuTensorMapEncodeTiled fetched from the driver
/// (cudaErrorNotSupported where that fails). a.flash_forward_key_tile: the keys a tile
/// (flash::wgmma_forward_key_tile: 0 the default, 128 warp-specialized, 64 in step; 64 or 128
/// asked for; the variant in step has 64 only, else cudaErrorNotSupported). None has run on a GPU.
cudaError_t flash_attention_wgmma_forward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                          tile::bf16* out, float* row_max, float* lse, bool warp_specialized = false,
                                          bool tma = false);

/// The keys a tile flash_attention_wgmma_forward launches for `a` and the variant
/// (flash::wgmma_forward_key_tile of a.flash_forward_key_tile): 64 or 128, 0 where it launches none.
int flash_attention_wgmma_key_tile(const AttentionArgs& a, bool warp_specialized);

/// Why flash_attention_wgmma_forward cannot run `a` on the current device (one line), or "":
/// a shape the mma.sync forward refuses, a device other than compute capability 9.0, a grid too
/// tall, a key tile (a.flash_forward_key_tile) other than 0, 64 or 128.
std::string flash_attention_wgmma_refusal(const AttentionArgs& a);

/// Bytes of float workspace flash_attention_backward needs: B H T (d_head + 1).
size_t flash_attention_backward_workspace(const AttentionArgs& a);

/// Flash-style attention backward: from the forward's qkv, out and lse (log-sum-exp per query,
/// [B, H, T]) and dout ([B*T, H*dh]), writes all of dqkv ([B*T, (H + 2 Hkv) dh]): dQ, and dK, dV
/// summed over the query heads of each kv head. Recomputes the probabilities tile by tile;
/// `workspace` (flash_attention_backward_workspace bytes, any contents) holds a float dQ
/// accumulator and D = rowsum(dO * O). The same variants (dropout with the forward's mask) as the
/// forward; its grid's y is the (batch, kv head) pairs, at most 65535 (a.flash_backward_heaviest_first,
/// causal: the 128-key blocks, cudaErrorInvalidConfiguration past 65535).
cudaError_t flash_attention_backward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                     const tile::bf16* out, const tile::bf16* dout, const float* lse, tile::bf16* dqkv,
                                     void* workspace);

/// The main kernel of a flash backward (dK, dV into dqkv, dQ added to dq_accum), launched by
/// flash_attention_backward_with between the prep kernel (dvec = D, dq_accum zeroed) and the dQ
/// kernel (dq_accum to bf16), on raw bf16 bits; it returns cudaSuccess or the launch's error.
using FlashBackwardMain = cudaError_t (*)(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv,
                                          const uint16_t* dout, const float* lse, const float* dvec, float* dq_accum,
                                          uint16_t* dqkv);

/// flash_attention_backward with another main kernel (`main`): the same checks, workspace, prep
/// and dQ kernels. flash_attention_backward passes the mma.sync one, and
/// flash_attention_wgmma_backward the wgmma one.
cudaError_t flash_attention_backward_with(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                          const tile::bf16* out, const tile::bf16* dout, const float* lse,
                                          tile::bf16* dqkv, void* workspace, FlashBackwardMain main);

/// The bf16 backward with its main kernel on Hopper's warpgroup MMA
/// (flash_attention_wgmma_backward_kernels.cuh: wgmma, sm_90a only): the contract of
/// flash_attention_backward, every variant, d_head 64 or 128, the same workspace. Compiled and
/// checked by the CPU emulator, NOT yet run on a GPU (docs/flash-backward.md, "Flash attention
/// backward on wgmma"). What flash_attention_wgmma_backward_refusal names returns cudaErrorNotSupported
/// without launching.
cudaError_t flash_attention_wgmma_backward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                           const tile::bf16* out, const tile::bf16* dout, const float* lse,
                                           tile::bf16* dqkv, void* workspace);

/// Why flash_attention_wgmma_backward cannot run `a` on the current device (one line), or "": a
/// shape the mma.sync backward refuses, a device other than compute capability 9.0, a grid too tall.
std::string flash_attention_wgmma_backward_refusal(const AttentionArgs& a);

/// Float32 flash attention forward (kernels/cuda/flash_attention_f32_kernels.cuh): the contract of
/// flash_attention_forward in float32, computed in float32 with FFMA (no TF32, no bf16 rounding),
/// deterministic. Every variant: causal or not, a sliding window (with or without causal
/// masking), soft-cap, GQA/MQA, dropout with the CPU path's mask. d_head 64 or 128; what
/// attention_flash_f32_unsupported names returns cudaErrorNotSupported without launching; more
/// than 65535 (batch, head) pairs or a base pointer that is not 16-byte aligned throws
/// std::invalid_argument. One launch. lse is required by the backward; row_max may be null.
cudaError_t flash_attention_f32_forward(cudaStream_t stream, const AttentionArgs& a, const float* qkv, float* out,
                                        float* row_max, float* lse);

/// Bytes of workspace flash_attention_f32_backward needs: D = rowsum(dO * O), B H T floats.
size_t flash_attention_f32_backward_workspace(const AttentionArgs& a);

/// Float32 flash attention backward: writes all of dqkv (dQ, and dK, dV summed over the group's
/// query heads in a fixed order) from the forward's qkv, out and lse and dout. Three launches
/// (D, dK/dV per key tile, dQ per query tile), no atomics: the same bits on every run. The same
/// variants and limits as the forward.
cudaError_t flash_attention_f32_backward(cudaStream_t stream, const AttentionArgs& a, const float* qkv,
                                         const float* out, const float* dout, const float* lse, float* dqkv,
                                         void* workspace);

}  // namespace bench::kernels::cuda
