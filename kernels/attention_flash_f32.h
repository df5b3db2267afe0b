// defines: attention_flash_f32_unsupported, attention_flash_f32_state_size,
//          attention_flash_f32_forward, attention_flash_f32_backward — the float32 flash attention
//          (kernels/cuda/flash_attention_f32_kernels.cuh: CUDA, SIMT FFMA in float32), as the flash
//          core calls it; the launchers are in attention.cpp
//
// The variant and its float64 references are kernels/attention_reference.h's (attention_forward_reference,
// attention_lse_reference, attention_backward_reference).
#pragma once

#include <cstdint>
#include <string>

#include "attention.h"
#include "tile/exec.h"

namespace bench::kernels {

/// Why the float32 flash kernels (kernels/cuda/flash_attention_f32_kernels.cuh: CUDA, float32,
/// FFMA in float32) cannot run `a`; "" when they can. Every variant runs (causal or not, a window
/// with or without causal masking, soft-cap, GQA/MQA, dropout); the limits are d_head (64 or 128),
/// a consistent shape and at most 65535 (batch, head) pairs (grid y). Pure C++ on any build.
inline std::string attention_flash_f32_unsupported(const AttentionArgs& a) {
  if (a.batch < 0 || a.seq < 0 || a.n_heads <= 0 || a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    return "the shape is inconsistent (positive sizes, n_heads a multiple of n_kv_heads)";
  if (a.d_head != 64 && a.d_head != 128)
    return "d_head = " + std::to_string(a.d_head) +
           ": the float32 flash kernels take 64 or 128 (each thread keeps 8 x d_head / 16 accumulators per "
           "product; dK and dV's at 128 already fill the registers)";
  if (a.dropout < 0 || a.dropout >= 1) return "the dropout rate is outside [0, 1)";
  if (a.batch * a.n_heads > kCudaMaxGridY)
    return std::to_string(a.batch * a.n_heads) +
           " (batch, head) pairs: the kernels' grid y takes at most 65535 (CUDA's limit); split the batch";
  return "";
}

/// Floats of state the float32 flash kernels keep between forward and backward: the log-sum-exp
/// per query [B, H, T], then from attention_flash_workspace_offset on (256-byte aligned) the
/// backward's D = rowsum(dO * O), B H T floats.
inline int64_t attention_flash_f32_state_size(const AttentionArgs& a) {
  return attention_flash_workspace_offset(a) + a.batch * a.n_heads * a.seq;
}

/// attention_forward's contract in float32 through the float32 flash kernels (CUDA only: one
/// launch, no probabilities): out, row_max (may be null) and the log-sum-exp in `state`
/// (attention_flash_f32_state_size floats). Throws std::invalid_argument on another backend or a
/// variant attention_flash_f32_unsupported names.
void attention_flash_f32_forward(const Exec& exec, const AttentionArgs& a, const float* qkv, float* out, float* row_max,
                                 float* state);
/// Its gradient: all of dqkv from the forward's qkv, out and state and dout (three launches, no
/// atomics: the same bits on every run). The same limits.
void attention_flash_f32_backward(const Exec& exec, const AttentionArgs& a, const float* qkv, const float* out,
                                  const float* dout, float* state, float* dqkv);

}  // namespace bench::kernels
