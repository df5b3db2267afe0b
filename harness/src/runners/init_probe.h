// defines: bench::InitProbe, probe_initialization, record_init_probe — gradient and activation
// statistics of a model at initialization, averaged over batches and seeds, before any training
// step (the diagnostics runner, and the stability runner's init_probe_batches)
#pragma once

#include <cstdint>
#include <vector>

#include "experiment/resolve.h"
#include "runners/runner.h"

namespace bench {

class Dataset;

/// Averages over `seeds` x `batches` forward/backward passes of freshly initialized models.
struct InitProbe {
  std::vector<double> grad_norm;  ///< per block: L2 norm of the block's parameter gradients (Xiong et al. 2020)
  std::vector<double> block_rms;  ///< per block: RMS of the block's output h_i
  double embed_rms = 0;           ///< RMS of the residual stream entering block 0, h_0
  double growth_exponent = 0;     ///< log(rms(h_L) / rms(h_0)) / L of the averaged RMS values (OLMo 2)
  double loss = 0;                ///< mean loss over the passes
  int64_t n_params = 0;           ///< of the model probed
  int64_t n_params_embedding = 0;
};

/// Build the case's model with seeds seed, seed + 1, ... (`seeds` of them), run training
/// batches 0 .. batches-1 through forward and backward on each, and average. No update is made.
InitProbe probe_initialization(const ResolvedCase& rc, RunnerEnv& env, Dataset& dataset, int64_t batches,
                               int64_t seeds);

/// The probe as a case's results: series init_grad_norm and init_block_rms per layer at step -1,
/// and the metrics init_growth_exponent, init_embed_rms, init_grad_norm_first / _last / _ratio and
/// init_loss, appended to `out`.
void record_init_probe(const InitProbe& probe, CaseResult& out);

}  // namespace bench
