// Diagnostics runner ([diagnostics]): the model at initialization, before any update — per-layer
// gradient norms (Post-Norm vs Pre-Norm, Xiong et al. 2020) and the growth of the residual stream
// with depth, averaged over batches and initializations (runners/init_probe.h). No training step is
// taken. The stability runner's init_probe_batches / init_probe_seeds measure the same before they
// train; this is the probe on its own, at the cost of a forward and backward per batch and seed.
#include <memory>

#include "bench/interfaces.h"
#include "plugins/registry.h"
#include "runners/init_probe.h"
#include "runners/runner.h"

namespace bench {

namespace {

class DiagnosticsRunner final : public Runner {
 public:
  std::string_view name() const override { return "diagnostics"; }

  const std::vector<ParamSpec>& params() const override {
    static const std::vector<ParamSpec> specs = {
        ParamSpec::integer("batches", 4, "training batches (0, 1, ...) each initialization is probed on").at_least(1),
        ParamSpec::integer("seeds", 1, "initializations (seed, seed+1, ...) the figures average over").at_least(1),
    };
    return specs;
  }

  CaseResult run(const Case& /*c*/, const ResolvedCase& rc, RunnerEnv& env) const override {
    const std::unique_ptr<Dataset> dataset = create_dataset(rc, env);
    const InitProbe probe =
        probe_initialization(rc, env, *dataset, rc.runner.integer("batches"), rc.runner.integer("seeds"));
    CaseResult out;
    out.n_params = probe.n_params;
    out.n_params_embedding = probe.n_params_embedding;
    record_init_probe(probe, out);
    return out;
  }

  ResultsTable table() const override { return {}; }

  const std::vector<MetricSpec>& metrics() const override {
    static const std::vector<MetricSpec> specs = {
        MetricSpec("init_loss", "nats").results_column("loss (nats)", "{:.4f}"),
        MetricSpec("init_grad_norm_first").results_column("grad norm L0"),
        MetricSpec("init_grad_norm_last").results_column("grad norm last"),
        MetricSpec("init_grad_norm_ratio").results_column("last / L0"),
        MetricSpec("init_growth_exponent", "1/layer").results_column("growth / layer"),
        MetricSpec("init_embed_rms"),
    };
    return specs;
  }
};

}  // namespace

const Runner& diagnostics_runner() {
  static const DiagnosticsRunner runner;
  return runner;
}

}  // namespace bench
