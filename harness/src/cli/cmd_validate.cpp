// `bench validate FILE`: everything `bench run` checks before it runs (prepare: each case resolved and
// checked by its plan-only build; the memory check), and nothing more.
#include <cstdio>

#include "cli/prepare.h"

namespace bench::cli {

int cmd_validate(const GlobalOptions& g, const std::string& file, const std::string& device) {
  try {
    const Prepared p = prepare(file, device);
    check_memory(p, available_memory(p.device));
    if (!g.quiet) {
      std::printf("%s: ok: %s on %s; largest model needs %.1f MiB\n", file.c_str(), p.case_counts().c_str(),
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
