// defines: attention_tiled_state_size, attention_tiled_unsupported, attention_tiled_preferred,
//          attention_tiled_forward, attention_tiled_backward — the CPU's tiled (flash-style)
//          attention, which never holds the B·H·T² probabilities
//
// Sections, in order: 1. float64 reference (none of its own: the variant is attention_forward's,
// so kernels/attention_reference.h's attention_forward_reference and attention_backward_reference are the
// references, and the log-sum-exp is m + ln sum_j e^(l_j - m) of attention_reference_row)
// 2. tile programs (none: each (query block, key block) tile is two GEMMs around a row loop on the
// host)  3. launchers.
//
// Same variants and the same formulas as kernels/attention_reference.h (causal, sliding window, soft-cap,
// GQA/MQA, probability dropout with the mask of the global index in [B, H, T, T]), computed in
// blocks of kAttentionQueryBlock (64) queries x kAttentionKeyBlock (128) keys (FlashAttention-2's order):
//   forward, per query row, over the visible key blocks: l = cap(scale q.k); m' = max(m, max l);
//     c = e^(m - m'); z = c z + sum e^(l - m'); o = c o + sum e^(l - m') M/(1-p) v; then o /= z
//     and lse = m + ln z — only O and lse ([B, H, T]) are kept.
//   backward, from Q, K, V, O, dO and lse: D = rowsum(dO * O) (= sum_j P dP, dropout included),
//     per tile P = e^(l - lse), dV += (P M/(1-p))^T dO, dP = (dO V^T) M/(1-p),
//     dS = P (dP - D) (1 - (l/c)^2 with a cap), dQ += scale dS K, dK += scale dS^T Q.
// Memory: O(T) per row besides the inputs and outputs, a few 64 x 128 tiles per task; the
// materializing path (attention_forward) keeps B·H·T² probabilities (twice that with a cap)
// and a 64 x T block per (batch, kv head). Summation order differs from it, so results agree to
// rounding, not bit for bit: docs/attention-cores.md, "Tiled attention on the CPU", says where each
// runs.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>

#include "attention.h"

namespace bench::kernels {

// ---------------------------------------------------------------------------------------------
// 3. launchers (CPU targets, float and double; instantiated in attention_tiled.cpp)
// ---------------------------------------------------------------------------------------------

/// Keys per block of the tiled path (the query block is kAttentionQueryBlock): 128 halves the
/// small GEMM calls of 64 (their fixed cost shows at 64 x 64 x 64) for a 64 x 128 tile of 32 KiB.
inline constexpr int64_t kAttentionKeyBlock = 128;

/// Elements (of the compute type) of the state the tiled forward leaves for its backward: the
/// log-sum-exp of each query row, [B, H, T].
inline int64_t attention_tiled_state_size(const AttentionArgs& a) { return a.batch * a.n_heads * a.seq; }

/// Why the tiled path cannot run on `exec` in T; "" when it can: a host target (CPU or guarded;
/// not CUDA, which has its own flash kernels, nor the emulated-block executor) and float or
/// double (bf16 on the CPU keeps the materializing path).
template <class T>
std::string attention_tiled_unsupported(const Exec& exec) {
  if (exec.backend == tile::Backend::kCuda || exec.backend == tile::Backend::kEmulated)
    return "the tiled attention runs on the CPU only (CUDA has its flash kernels)";
  if (!std::is_same_v<T, float> && !std::is_same_v<T, double>) return "the tiled attention runs in float or double";
  return "";
}

/// Probabilities above this many bytes per layer make kernel = "auto" take the tiled path on the
/// CPU (B=1, H=4, T=4096 in float is 256 MiB; the experiments' CPU sizes are far below).
inline constexpr double kAttentionTiledAutoBytes = 64.0 * 1024 * 1024;

/// Whether kernel = "auto" takes the tiled path for `a` in elements of `elem_bytes`: the
/// materializing path's probabilities (attention_probs_size) would exceed kAttentionTiledAutoBytes.
/// Only where attention_tiled_unsupported is "" (the caller checks).
inline bool attention_tiled_preferred(const AttentionArgs& a, double elem_bytes) {
  return static_cast<double>(attention_probs_size(a)) * elem_bytes > kAttentionTiledAutoBytes;
}

/// attention_forward's contract without the probabilities: out [B*T, H*dh] from the fused qkv
/// rows, the log-sum-exp of each query row into lse ([B, H, T], what attention_tiled_backward
/// reads) and the largest logit into row_max ([B, H, T], may be null). Parallel over (batch, head,
/// query block). Throws std::invalid_argument on an inconsistent shape or rate, or where
/// attention_tiled_unsupported says it cannot run.
template <class T>
void attention_tiled_forward(const Exec& exec, const AttentionArgs& args, const T* qkv, T* out, acc_t<T>* lse,
                             acc_t<T>* row_max);

/// Gradient of attention_tiled_forward: from qkv, the forward's out and lse, and dout, writes all
/// of dqkv (dQ, and dK, dV summed over each kv head's query heads); `args` (dropout rate and seed
/// included) must be the forward's. Parallel over (batch, kv head), like attention_backward, so
/// each dK/dV has one writer and a fixed order.
template <class T>
void attention_tiled_backward(const Exec& exec, const AttentionArgs& args, const T* qkv, const T* out,
                              const acc_t<T>* lse, const T* dout, T* dqkv);

}  // namespace bench::kernels
