// `bench list [plugins|components|cores|kernels]`
#include <cstdio>
#include <string>
#include <utility>

#include "cli/prepare.h"
#include "experiment/experiment.h"
#include "kernels/catalog.h"
#include "runners/registry.h"

namespace bench::cli {

int cmd_list(const GlobalOptions&, const std::string& what, const std::string& experiment) {
  Registry registry;
  try {
    registry.load_defaults();
    if (!experiment.empty()) {
      const ExperimentFile f = read_experiment(experiment, runner_sections());
      for (const auto& dir : f.plugin_paths) registry.load_directory(dir, true);
    }
  } catch (const std::exception& e) {
    print_error(e);
    return kBadInput;
  }
  if (what == "plugins") {
    for (const auto& p : registry.plugins())
      std::printf("%-10s %-6s %s\n           %s\n", p.name.c_str(), p.version.c_str(), p.doc.c_str(), p.path.c_str());
    return kOk;
  }
  if (what == "cores") {
    // The causal attention's cores (its `core` key), from whichever plugin registered them.
    for (const auto& [core, origin] : registry.attention_cores())
      std::printf("%-14s %s\n               %s\n", core->name.c_str(), core->doc.c_str(), origin.c_str());
    return kOk;
  }
  if (what == "kernels") {
    // Where each runs in this process: the host executors, and CUDA where the backend is loaded.
    const auto types = [](uint8_t t) {
      std::string s;
      for (const auto& [bit, name] :
           {std::pair{kernels::kF32, "f32"}, {kernels::kBf16, "bf16"}, {kernels::kF64, "f64"}})
        if ((t & bit) != 0) s += (s.empty() ? "" : ",") + std::string(name);
      return s;
    };
    for (const auto& k : kernels::catalog()) {
      std::string where = k.host_types != 0 ? "cpu,emulated(" + types(k.host_types) + ")" : "";
      if (k.cuda_types != 0) where += (where.empty() ? "" : " ") + std::string("cuda(") + types(k.cuda_types) + ")";
      std::printf("%-26s %-22s %-34s %s\n", k.name.c_str(), k.file.c_str(), where.c_str(), k.doc.c_str());
    }
    return kOk;
  }
  for (Slot slot : all_slots()) {
    const auto comps = registry.components(slot);
    if (comps.empty()) continue;
    std::printf("[%s]\n", std::string(slot_name(slot)).c_str());
    for (const ComponentInfo* c : comps) {
      std::printf("  %-14s %s\n", c->name.c_str(), c->doc.c_str());
      for (const auto& p : c->params) {
        std::string type(param_type_name(p.type));
        if (!p.choices.empty()) {
          type += " {";
          for (size_t i = 0; i < p.choices.size(); ++i) type += (i ? "|" : "") + p.choices[i];
          type += "}";
        }
        std::printf("      %-20s %-24s = %-14s %s\n", p.name.c_str(), type.c_str(), p.default_str().c_str(),
                    p.doc.c_str());
      }
    }
  }
  return kOk;
}

}  // namespace bench::cli
