// `bench validate FILE`: everything `bench run` checks before it runs (prepare: each case resolved and
// checked by its plan-only build; the memory check), and nothing more. It prints each case's
// resolved shape and budget, and under `match` the target and each case's gap; or every
// independent mistake of the file, each on its own line in file order, as a compiler does.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>

#include "cli/prepare.h"
#include "experiment/diagnostics.h"
#include "experiment/match.h"

namespace bench::cli {

namespace {

std::string scientific(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

// "d_model=64 n_layers=4 n_heads=4 d_ff=192 batch=8 steps=100  params 98,304 ..."
std::string shape_line(const ResolvedCase& rc) {
  const ModelDims& d = rc.model.dims;
  const Budget& b = rc.budget;
  std::string s = "d_model=" + std::to_string(d.d_model) + " n_layers=" + std::to_string(d.n_layers) +
                  " n_heads=" + std::to_string(d.n_heads) + " d_ff=" + std::to_string(b.d_ff) +
                  " batch=" + std::to_string(d.batch_size);
  if (b.train_tokens > 0) s += " steps=" + std::to_string(b.train_tokens / d.tokens());
  s += "  params " + thousands(static_cast<double>(b.params_non_embedding)) + " non-emb";
  if (b.train_tokens > 0) s += ", " + scientific(b.train_flops_total) + " train FLOPs";
  if (!b.match.empty()) {
    char gap[32];
    std::snprintf(gap, sizeof gap, "%+.2f%%", 100 * b.match_gap);
    s += std::string("  (target ") + (b.match == "params" ? thousands(b.match_target) : scientific(b.match_target)) +
         ", gap " + gap + ")";
  }
  return s;
}

}  // namespace

int cmd_validate(const GlobalOptions& g, const std::string& file, const std::string& device) {
  try {
    const Prepared p = prepare(file, device);
    check_memory(p, available_memory(p.device));
    if (!g.quiet) {
      std::printf("%s: ok: %s on %s; largest model needs %.1f MiB\n", file.c_str(), p.case_counts().c_str(),
                  p.device.c_str(), static_cast<double>(p.max_model_bytes) / (1024.0 * 1024.0));
      if (const auto m = read_match(p.file.root)) {
        const std::string reference = m->reference.empty() && !p.cases.empty() ? p.cases.front().variant : m->reference;
        std::printf("  match %s: reference '%s', solving %s (multiple of %lld, tolerance %.2f%%)\n", m->budget.c_str(),
                    reference.c_str(), m->width_name.c_str(), static_cast<long long>(m->multiple), 100 * m->tolerance);
      }
      int width = 0;  // the labels in one column, the shapes after them
      for (const auto& c : p.cases) width = std::max(width, static_cast<int>(c.label.size()));
      for (size_t i = 0; i < p.cases.size(); ++i) {
        const Case& c = p.cases[i];
        std::printf("  %3lld  %-10s  %-*s  %s\n", static_cast<long long>(c.ordinal), c.runner.c_str(), width,
                    c.label.c_str(), shape_line(p.resolved[i]).c_str());
      }
    }
    return kOk;
  } catch (const ConfigErrors& all) {
    for (const ConfigError& e : all.all()) print_error(e);  // each mistake on its line, in file order
    return kBadInput;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
