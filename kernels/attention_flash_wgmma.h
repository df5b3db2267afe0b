// defines: attention_flash_wgmma_refusal, attention_flash_wgmma_forward — the bf16 flash forward
//          on Hopper's warpgroup MMA (kernels/cuda/flash_attention_wgmma_kernels.cuh: wgmma,
//          sm_90a), as the flash_wgmma core calls it; the launcher is in attention.cpp
//
// Compiled for sm_90a and checked by the CPU warp emulator, NOT yet run on a GPU: nothing takes
// it by default (core = "auto" never picks it); `core = "flash_wgmma"` asks for it, with the
// mma.sync backward of attention_backward (the same state: the log-sum-exp, then the workspace).
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
/// path's probs buffer), so that attention_backward's flash path takes it. Throws
/// std::invalid_argument with attention_flash_wgmma_refusal's reason where it cannot run.
void attention_flash_wgmma_forward(const Exec& exec, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                   float* row_max, tile::bf16* state);

}  // namespace bench::kernels
