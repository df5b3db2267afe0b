// defines: bench::attention::CoreQuery, CoreInfo, find_core, core_names, kAutoOrder (the core
//          API itself is bench/attention_core.h) — the attention itself, softmax(q k^T) v on the fused
//          qkv rows, behind the causal attention's frame (causal.cpp: projections, QK-norm,
//          rotation, probes, cost)
//
// A core is one class in one file of this plugin (core_materializing.cpp, core_flash.cpp,
// core_flash_wgmma.cpp, core_cudnn.cpp, core_tiled.cpp, core_fused.cpp), registered under its
// name by BENCH_ATTENTION_CORE at load: the frame's `core` key names it, and `core = "auto"`
// takes the first of kAutoOrder that runs the layer's variant on the target and prefers it
// (docs/variants/attention.md, "Cores").
#pragma once

#include <string>
#include <vector>

#include "bench/attention_core.h"
#include "bench/bench.h"
#include "kernels/attention.h"

namespace bench::attention {

// The interface is the plugin API's (bench/attention_core.h: AttentionCore, the registry,
// BENCH_ATTENTION_CORE), so that another plugin can add a core; these are the names this
// plugin's files use.
using CoreQuery = AttentionCoreQuery;
using CoreInfo = AttentionCoreInfo;

/// The core named `name` that a loaded plugin (this one or another) registered, or null.
inline const CoreInfo* find_core(const std::string& name) { return find_attention_core(name); }
/// Every registered core's name, in load order (for messages).
inline std::vector<std::string> core_names() { return attention_core_names(); }

/// The `prefers` of a core that `auto` takes wherever it runs the layer's variant.
inline bool prefers_always(const CoreQuery&) { return true; }

/// What `core = "auto"` tries, in order: the first that runs the variant and prefers it. The
/// fused core prefers only a device in float32/float64 (bf16 on CUDA keeps cuDNN and flash first;
/// the CPU keeps tiled past a size, else materializing). The materializing core runs everything,
/// so the choice always ends.
inline constexpr const char* kAutoOrder[] = {"cudnn", "flash", "tiled", "fused", "materializing"};

}  // namespace bench::attention
