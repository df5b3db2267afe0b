// defines: attention_flash_wgmma_refusal, attention_flash_wgmma_forward,
//          attention_flash_wgmma_backward_refusal, attention_flash_wgmma_backward — the bf16 flash
//          forward and backward on Hopper's warpgroup MMA (kernels/cuda/flash_attention_wgmma_kernels.cuh,
//          flash_attention_wgmma_backward_kernels.cuh: wgmma, sm_90a), as the flash_wgmma core calls
//          them; the launchers are in attention.cpp
//
// Compiled for sm_90a and checked by the CPU warp emulator, NOT yet run on a GPU: nothing takes
// them by default (core = "auto" never picks them); `core = "flash_wgmma"` asks for them, and
// `core = "flash_wgmma_ws"` for them with the warp-specialized forward. They
// share the flash path's state (the log-sum-exp, then the backward's workspace) with the mma.sync
// kernels, whose backward the core runs where the wgmma one refuses.
#pragma once

#include <string>

#include "attention.h"
#include "tile/exec.h"

namespace bench::kernels {

/// Why attention_flash_wgmma_forward cannot run `a` on `exec`'s target in bf16, one line; "" when
/// it can: a target other than CUDA, a variant the bf16 flash path does not take
/// (attention_uses_flash: its backward is the mma.sync one), or a device that is not compute
/// capability 9.0 (sm_90a code runs there alone). Never throws.
std::string attention_flash_wgmma_refusal(const Exec& exec, const AttentionArgs& a);

/// attention_forward's bf16 contract on CUDA through the wgmma forward: out, row_max (may be null)
/// and the log-sum-exp at the start of `state` (attention_flash_state_size elements, the flash
/// path's probs buffer), so that attention_backward's flash path takes it. `warp_specialized`:
/// the variant with a producer warpgroup, mbarriers and the consumers' ping-pong (the
/// flash_wgmma_ws core), else the two warpgroups in step (flash_wgmma). Throws
/// std::invalid_argument with attention_flash_wgmma_refusal's reason where it cannot run.
void attention_flash_wgmma_forward(const Exec& exec, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                   float* row_max, tile::bf16* state, bool warp_specialized = false);

/// Why attention_flash_wgmma_backward cannot run `a` on `exec`'s target in bf16, one line; "" when
/// it can (the same conditions as the forward's, with the backward's grid). Never throws.
std::string attention_flash_wgmma_backward_refusal(const Exec& exec, const AttentionArgs& a);

/// attention_backward's bf16 flash contract (`state` as the flash forward left it: the
/// log-sum-exp, then the workspace it writes) with the main kernel on wgmma
/// (kernels/cuda/flash_attention_wgmma_backward_kernels.cuh). Throws std::invalid_argument with
/// attention_flash_wgmma_backward_refusal's reason where it cannot run.
void attention_flash_wgmma_backward(const Exec& exec, const AttentionArgs& a, const tile::bf16* qkv,
                                    const tile::bf16* out, tile::bf16* state, const tile::bf16* dout, tile::bf16* dqkv);

}  // namespace bench::kernels
