// defines: bench::kernels::cuda::flash_attention_forward, flash_attention_backward,
//          flash_attention_backward_workspace — fused causal attention on the tensor cores, the
//          CUDA path of kernels/attention.h
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

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
/// launching; a grid over CUDA's limits (more than 65535 (batch, head) pairs) or a base pointer
/// that is not 16-byte aligned throws std::invalid_argument saying which.
cudaError_t flash_attention_forward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                    float* row_max, float* lse);

/// Bytes of float workspace flash_attention_backward needs: B H T (d_head + 1).
size_t flash_attention_backward_workspace(const AttentionArgs& a);

/// Flash-style attention backward: from the forward's qkv, out and lse (log-sum-exp per query,
/// [B, H, T]) and dout ([B*T, H*dh]), writes all of dqkv ([B*T, (H + 2 Hkv) dh]): dQ, and dK, dV
/// summed over the query heads of each kv head. Recomputes the probabilities tile by tile;
/// `workspace` (flash_attention_backward_workspace bytes, any contents) holds a float dQ
/// accumulator and D = rowsum(dO * O). The same variants (dropout with the forward's mask) and
/// limits as the forward.
cudaError_t flash_attention_backward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                     const tile::bf16* out, const tile::bf16* dout, const float* lse, tile::bf16* dqkv,
                                     void* workspace);

}  // namespace bench::kernels::cuda
