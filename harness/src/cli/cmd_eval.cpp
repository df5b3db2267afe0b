// `bench eval`: the loss of a model configuration with given weights over every token of a file,
// and optionally its logits and each block's output as NumPy arrays (docs/weights.md).
#include <cmath>
#include <cstdio>

#include "cli/commands.h"
#include "cli/prepare.h"
#include "experiment/experiment.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "runners/evaluate.h"
#include "runners/registry.h"
#include "runners/threads.h"

namespace bench::cli {

int cmd_eval(const GlobalOptions& g, const EvalArgs& o) {
  try {
    ExperimentFile file = read_experiment(o.config, runner_sections(), /*model_only=*/true);
    Registry registry;
    registry.load_defaults();
    for (const auto& dir : file.plugin_paths) registry.load_directory(dir, true);
    // A model-only file (no runner section) still describes one model: give it an empty section
    // of the first runner so that it expands into a case.
    bool has_runner = false;
    for (const auto& r : file.runners) has_runner = has_runner || file.root.find(r.name) != nullptr;
    if (!has_runner) file.root[file.runners.front().name] = Value::table();
    const std::vector<Case> cases = expand_cases(file, registry, "cpu");
    if (o.case_ordinal >= static_cast<int64_t>(cases.size()))
      throw Error(o.config + " has " + std::to_string(cases.size()) + " cases; --case " +
                  std::to_string(o.case_ordinal) + " does not exist");
    const Case& c = cases[static_cast<size_t>(o.case_ordinal)];
    ResolvedCase rc = resolve_case(c, registry, file.runners);
    if (o.seq_len > 0) rc.model.dims.seq_len = o.seq_len;
    rc.model.dims.batch_size = o.batch_size;
    rc.model.dims.dropout_embedding = rc.model.dims.dropout_attention = rc.model.dims.dropout_residual = 0;
    validate_case(rc, registry);
    if (cases.size() > 1 && !g.quiet)
      std::fprintf(stderr, "eval: case %lld of %zu: %s\n", static_cast<long long>(o.case_ordinal), cases.size(),
                   c.label.c_str());
    use_threads(thread_request(o.threads, 0, o.config, 1, usable_cpus()), g.quiet);

    Model model(rc.model, registry, static_cast<uint64_t>(rc.seed));
    if (!o.weights.empty()) load_weights(model, o.weights);
    const std::vector<int32_t> tokens = read_eval_tokens(registry, o.tokens, o.token_format, rc.model.dims.vocab_size);
    RunContext ctx;
    ctx.probes = false;
    ctx.seed = static_cast<uint64_t>(rc.seed);
    const EvalResult r = evaluate_tokens(model, tokens, !o.dump_logits.empty(), !o.dump_hidden.empty(), ctx);
    const bool f64 = rc.model.dtype == DType::kFloat64;
    const ModelDims& d = rc.model.dims;
    if (!o.dump_logits.empty()) write_npy(o.dump_logits, {r.positions, d.vocab_size}, r.logits, f64);
    if (!o.dump_hidden.empty()) write_npy(o.dump_hidden, {d.n_layers, r.positions, d.d_model}, r.hidden, f64);
    if (o.format == "json") {
      std::printf(
          "{\"loss\": %.17g, \"perplexity\": %.17g, \"positions\": %lld, \"windows\": %lld, \"seq_len\": %lld}\n",
          r.loss, std::exp(r.loss), static_cast<long long>(r.positions), static_cast<long long>(r.windows),
          static_cast<long long>(d.seq_len));
    } else {
      std::printf("loss %.6f nats/token (perplexity %.4g) over %lld positions in %lld windows of %lld\n", r.loss,
                  std::exp(r.loss), static_cast<long long>(r.positions), static_cast<long long>(r.windows),
                  static_cast<long long>(d.seq_len));
    }
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
