#include "cli/prepare.h"

#include <unistd.h>

#include <cstdio>

#include "model/model.h"

namespace bench::cli {

Prepared prepare(const std::string& path, const std::string& device_flag) {
  Prepared p;
  p.file = read_experiment(path);
  p.registry = std::make_unique<Registry>();
  p.registry->load_defaults();
  for (const auto& dir : p.file.plugin_paths) p.registry->load_directory(dir, true);

  const std::string wanted = device_flag.empty() ? p.file.device : device_flag;
  // The GPU model path is not built yet: every component runs on the CPU only.
  if (wanted == "cuda") {
    const SourceLoc loc = device_flag.empty() ? p.file.root.find("device")->loc : SourceLoc{};
    throw ConfigError(loc,
                      "device \"cuda\": this build runs models on the CPU only (the CUDA executor compiles, "
                      "but no component has a CUDA path yet); use \"auto\" or \"cpu\"");
  }
  p.device = "cpu";
  p.device_note = wanted == "auto" ? "auto: cpu (no component has a CUDA path in this build)" : "cpu (requested)";

  p.cases = expand_cases(p.file, *p.registry, p.device);
  for (const auto& c : p.cases) {
    ResolvedCase rc = resolve_case(c, *p.registry);
    validate_case(rc, *p.registry);
    p.resolved.push_back(std::move(rc));
  }
  for (const auto& rc : p.resolved)
    p.max_model_bytes = std::max(p.max_model_bytes, Model::estimate_bytes(rc.model, *p.registry));
  return p;
}

void print_error(const std::exception& e) { std::fprintf(stderr, "%s\n", e.what()); }

}  // namespace bench::cli
