// `bench validate FILE`: everything `bench run` checks before it runs, and nothing more.
#include <cstdio>

#include "cli/prepare.h"

namespace bench::cli {

int cmd_validate(const GlobalOptions& g, const std::string& file, const std::string& device) {
  try {
    const Prepared p = prepare(file, device);
    check_memory(p, available_memory(p.device));
    if (!g.quiet) {
      int64_t tp = 0, st = 0;
      for (const auto& c : p.cases) (c.runner == "throughput" ? tp : st) += 1;
      std::printf("%s: ok: %zu cases (%lld throughput, %lld stability) on %s; largest model needs %.1f MiB\n",
                  file.c_str(), p.cases.size(), static_cast<long long>(tp), static_cast<long long>(st),
                  p.device.c_str(), static_cast<double>(p.max_model_bytes) / (1024.0 * 1024.0));
      for (const auto& c : p.cases)
        std::printf("  %3lld  %-10s  %s\n", static_cast<long long>(c.ordinal), c.runner.c_str(), c.label.c_str());
    }
    return kOk;
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
}

}  // namespace bench::cli
