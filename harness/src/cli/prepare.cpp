#include "cli/prepare.h"

#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>

#include "experiment/diagnostics.h"
#include "experiment/match.h"
#include "kernels/memory.h"
#include "model/model.h"
#include "runners/registry.h"

namespace bench::cli {

Prepared prepare(const std::string& path, const std::string& device_flag) {
  Prepared p;
  // Every independent mistake of the file is found before any is reported (Diagnostics): a stage
  // runs unless a mistake before it blocks it, and each case is checked unless its own resolution
  // failed.
  Diagnostics diags;
  p.file = read_experiment(path, runner_sections(), diags);
  if (diags.blocked()) diags.throw_if_any();
  p.registry = std::make_unique<Registry>();
  p.registry->load_defaults();
  for (const auto& dir : p.file.plugin_paths) p.registry->load_directory(dir, true);

  const std::string wanted = device_flag.empty() ? p.file.device : device_flag;
  const int gpus = kernels::cuda_device_count();
  const std::string why_no_gpu =
      kernels::cuda_built() ? "no CUDA device is visible" : "this build has no CUDA (nvcc was not on the PATH)";
  if (wanted == "cuda" && gpus == 0) {
    const SourceLoc loc = device_flag.empty() ? p.file.root.find("device")->loc : SourceLoc{};
    diags.add(ConfigError(loc, (device_flag.empty() ? "device \"cuda\": " : "bench: --device cuda: ") + why_no_gpu +
                                   "; use \"auto\" or \"cpu\""));
    diags.throw_if_any();
  }
  tile::Backend backend = tile::Backend::kCpu;
  if (wanted == "cuda" || (wanted == "auto" && gpus > 0)) {
    p.device = "cuda";
    backend = tile::Backend::kCuda;
    p.device_note = wanted == "auto" ? "auto: cuda (" + std::to_string(gpus) + " visible)" : "cuda (requested)";
  } else if (wanted == "guarded") {
    p.device = "guarded";
    backend = tile::Backend::kGuarded;
    p.device_note = "guarded (requested): the CPU executor on guarded memory, which faults on host access";
  } else if (wanted == "emulated") {
    p.device = "emulated";
    backend = tile::Backend::kEmulated;
    p.device_note =
        "emulated (requested): the emulated-block executor running the device's composition, launch for launch";
  } else {
    p.device = "cpu";
    p.device_note = wanted == "auto" ? "auto: cpu (" + why_no_gpu + ")" : "cpu (requested)";
  }

  // A guarded or an emulated run is a CPU run: the [cpu] overrides apply.
  const std::string overrides = p.device == "cuda" ? "cuda" : "cpu";
  const bool runs = std::any_of(p.file.runners.begin(), p.file.runners.end(),
                                [&](const RunnerSection& r) { return p.file.root.find(r.name) != nullptr; });
  if (!runs) {
    // Nothing to run (reported by read_experiment): the models are still checked, each as the
    // case of an empty first runner section would build it (as `bench eval` reads such a file).
    ExperimentFile models = p.file;
    models.root[models.runners.front().name] = Value::table();
    for (const Case& c : expand_cases(models, *p.registry, overrides, diags)) {
      ResolvedCase rc;
      if (!diags.check([&] { rc = resolve_case(c, *p.registry, models.runners); })) continue;
      rc.model.backend = backend;
      diags.check([&] { (void)Model::plan(rc.model, *p.registry); });
    }
    diags.throw_if_any();
  }
  p.cases = expand_cases(p.file, *p.registry, overrides, diags);
  if (diags.blocked()) diags.throw_if_any();
  std::vector<Budget> matched(p.cases.size());
  if (read_match(p.file.root)) {
    // Solving reads every case: a mistake in one would stop it there. They are found first.
    for (const Case& c : p.cases) diags.check([&] { (void)resolve_case(c, *p.registry, p.file.runners); });
    diags.throw_if_any();
    matched = match_budgets(p.file, p.cases, *p.registry);  // rewrites solved widths
  }
  for (size_t i = 0; i < p.cases.size(); ++i) {
    ResolvedCase rc;
    if (!diags.check([&] { rc = resolve_case(p.cases[i], *p.registry, p.file.runners); })) continue;
    rc.model.backend = backend;
    // The plan-only build validates, sets up and measures, once (Model::plan); the budget is read
    // from it.
    diags.check([&] {
      const Model m(rc.model, *p.registry, Model::Validating{});
      p.plans.push_back(ModelPlan{m.bytes(), m.cost(), m.n_params(), m.n_params_embedding()});
      rc.budget = measure_budget(rc, m);
      rc.budget.match = matched[i].match;
      rc.budget.match_target = matched[i].match_target;
      rc.budget.match_gap = matched[i].match_gap;
      p.resolved.push_back(std::move(rc));
    });
  }
  diags.throw_if_any();
  p.keep_only(std::vector<bool>(p.cases.size(), true));
  return p;
}

void Prepared::keep_only(const std::vector<bool>& keep) {
  std::vector<Case> kept_cases;
  std::vector<ResolvedCase> kept_resolved;
  std::vector<ModelPlan> kept_plans;
  for (size_t i = 0; i < cases.size(); ++i) {
    if (!keep.at(i)) continue;
    kept_cases.push_back(std::move(cases[i]));
    kept_resolved.push_back(std::move(resolved[i]));
    kept_plans.push_back(plans[i]);
  }
  cases = std::move(kept_cases);
  resolved = std::move(kept_resolved);
  plans = std::move(kept_plans);
  max_model_bytes = 0;
  max_model_case = 0;
  for (size_t i = 0; i < plans.size(); ++i)
    if (plans[i].bytes > max_model_bytes) {
      max_model_bytes = plans[i].bytes;
      max_model_case = i;
    }
}

std::string Prepared::case_counts() const {
  std::string per_runner;
  for (const Runner* r : runners()) {
    const auto n = std::count_if(cases.begin(), cases.end(), [&](const Case& c) { return c.runner == r->name(); });
    if (n > 0) per_runner += (per_runner.empty() ? "" : ", ") + std::to_string(n) + " " + std::string(r->name());
  }
  return std::to_string(cases.size()) + " cases (" + per_runner + ")";
}

size_t available_memory(const std::string& device) {
  if (device == "cuda") return kernels::cuda_memory_available();
  std::ifstream in("/proc/meminfo");
  std::string key;
  size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return static_cast<size_t>(sysconf(_SC_PHYS_PAGES)) * static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
}

std::string mib(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f MiB", bytes / (1024.0 * 1024.0));
  return buf;
}

SourceLoc case_loc(const ExperimentFile& file, const Case& c) {
  if (const Value* variants = file.root.find("variant"); variants != nullptr && !c.variant.empty())
    for (const Value& v : variants->as_array())
      if (const Value* n = v.find("name"); n != nullptr && n->is_string() && n->as_string() == c.variant) return v.loc;
  if (const Value* model = file.root.find("model")) return model->loc;
  return SourceLoc{file.path, 0, 0, {}};
}

void check_memory(const Prepared& p, size_t available, int64_t processes) {
  const size_t need = p.max_model_bytes * static_cast<size_t>(std::max<int64_t>(1, processes));
  if (need <= available || p.cases.empty()) return;
  const Case& c = p.cases[p.max_model_case];
  const std::string what = processes > 1 ? std::to_string(processes) + " processes at once of case " : "case ";
  throw ConfigError(case_loc(p.file, c), what + std::to_string(c.ordinal) + " (" + c.runner + " " + c.label + ") need" +
                                             (processes > 1 ? " " : "s ") + mib(static_cast<double>(need)) +
                                             " but only " + mib(static_cast<double>(available)) +
                                             " of memory is available; make the model or the batch " +
                                             (processes > 1 ? "smaller, or run fewer --jobs" : "smaller"));
}

void print_error(const std::exception& e) { std::fprintf(stderr, "%s\n", e.what()); }

}  // namespace bench::cli
