// defines: bench::GemmCeiling, time_gemm_calls — the MFU's second denominator: the GEMMs a model's
// step really makes (recorded by kernels::GemmRecorder), timed back to back on its device.
//
// The first denominator (DeviceInfo::peak_gflops*) is one square GEMM size, 4096^3 on a GPU and
// 1024^3 on the CPU; a model's GEMMs are thinner (d_model 768: K = 768) or wider (the LM head), so
// the rate they can reach is often lower. The throughput runner reports MFU against both: `mfu` in
// its timings (square) and `mfu_model_gemms/<mode>` with `gemm_ceiling_gflops` in its metrics.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/gemm.h"
#include "kernels/memory.h"

namespace bench {

struct GemmCeiling {
  double gflops_per_s = 0;  ///< FLOPs of one pass / the median time of a pass
  double flops = 0;         ///< FLOPs of one pass over the calls (2 m n k each)
  int64_t calls = 0;        ///< GEMM calls in one pass
  int64_t shapes = 0;       ///< distinct (flags, m, n, k, element size) among them
  double median_ms = 0, min_ms = 0, max_ms = 0;
};

/// Times `calls` back to back, in their recorded order, `passes` times after one untimed pass, in
/// memory of kind `memory` on the device `exec` runs on: random operands (never zeros), one
/// buffer per operand and element size sized for the largest call, beta as recorded. A CUDA pass
/// is timed with events around the whole pass (no host synchronization between the GEMMs); a host
/// pass with a steady clock. Throws bench::Error when `calls` is empty or passes < 1.
GemmCeiling time_gemm_calls(const std::vector<kernels::GemmCall>& calls, kernels::Memory memory, int passes);

}  // namespace bench
