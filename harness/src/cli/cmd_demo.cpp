// `bench demo NAME [--store]`: the three numeric stability demos of the lecture (seeds/004),
// computed with our kernels and printed as tables on stdout (runners/demos.h defines what each
// row holds); with --store, also a run of experiment "demo" in the database: one case per demo
// (runner "demo"), each table cell a metric named by its column and row, e.g. ce_bf16_c1000.
#include <fmt/format.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "bench/build_info.h"
#include "cli/commands.h"
#include "cli/prepare.h"
#include "runners/demos.h"
#include "store/store.h"

namespace bench::cli {

namespace {

std::string zloss_table() {
  std::string o =
      "z-loss: mean cross-entropy of 64 x 1000 logits ~ N(0, 4) shifted by c (float64 reference: the same for "
      "every c)\n";
  o += fmt::format("{:>8} {:>10} {:>10} {:>11} {:>10} {:>12}\n", "c", "CE fp32", "CE bf16", "|bf16-ref|", "mean z",
                   "z-loss 1e-4");
  for (const ZLossRow& r : zloss_demo())
    o += fmt::format("{:>8g} {:>10.4f} {:>10.4f} {:>11.4f} {:>10.1f} {:>12.2f}\n", r.shift, r.ce_fp32, r.ce_bf16,
                     std::abs(r.ce_bf16 - r.ce_exact), r.z_mean, r.z_loss);
  return o;
}

std::string qk_table() {
  std::string o = fmt::format(
      "QK-norm: attention over 64 positions, d_head 64, q and k scaled by s (uniform: entropy ln 64 = {:.2f})\n",
      std::log(64.0));
  o += fmt::format("{:>4} {:>10} {:>10} {:>15} {:>15}\n", "s", "entropy", "max weight", "QK-norm entropy",
                   "QK-norm max w.");
  for (const QkRow& r : qk_norm_demo())
    o += fmt::format("{:>4g} {:>10.2f} {:>10.2f} {:>15.2f} {:>15.2f}\n", r.scale, r.entropy, r.max_weight,
                     r.entropy_qk_norm, r.max_weight_qk_norm);
  return o;
}

std::string softcap_table() {
  std::string o = "soft-cap: y = 30 tanh(x / 30)\n";
  o += fmt::format("{:>8} {:>8}\n", "x", "y");
  for (const SoftcapRow& r : softcap_demo()) o += fmt::format("{:>8.1f} {:>8.2f}\n", r.x, r.y);
  return o;
}

/// "1000" for 1000, "0.5" for 0.5, "m200" for -200: a number as part of a metric name.
std::string tag(double v) {
  std::string s = fmt::format("{:g}", std::abs(v));
  return v < 0 ? "m" + s : s;
}

CaseRow demo_case(int64_t ordinal, const std::string& label) {
  CaseRow c;
  c.ordinal = ordinal;
  c.runner = "demo";
  c.label = label;
  c.variant = label;
  return c;
}

std::vector<CaseRow> demo_cases(const std::string& name) {
  std::vector<CaseRow> cases;
  if (name == "zloss" || name == "all") {
    CaseRow c = demo_case(static_cast<int64_t>(cases.size()), "zloss");
    for (const ZLossRow& r : zloss_demo()) {
      const std::string t = "_c" + tag(r.shift);
      c.result.metrics.push_back({"ce_fp32" + t, r.ce_fp32, "nats"});
      c.result.metrics.push_back({"ce_bf16" + t, r.ce_bf16, "nats"});
      c.result.metrics.push_back({"ce_bf16_error" + t, std::abs(r.ce_bf16 - r.ce_exact), "nats"});
      c.result.metrics.push_back({"z_mean" + t, r.z_mean, "nats"});
      c.result.metrics.push_back({"z_loss" + t, r.z_loss, "nats"});
    }
    cases.push_back(std::move(c));
  }
  if (name == "qk_norm" || name == "all") {
    CaseRow c = demo_case(static_cast<int64_t>(cases.size()), "qk_norm");
    for (const QkRow& r : qk_norm_demo()) {
      const std::string t = "_s" + tag(r.scale);
      c.result.metrics.push_back({"entropy" + t, r.entropy, "nats"});
      c.result.metrics.push_back({"max_weight" + t, r.max_weight, ""});
      c.result.metrics.push_back({"entropy_qk_norm" + t, r.entropy_qk_norm, "nats"});
      c.result.metrics.push_back({"max_weight_qk_norm" + t, r.max_weight_qk_norm, ""});
    }
    cases.push_back(std::move(c));
  }
  if (name == "softcap" || name == "all") {
    CaseRow c = demo_case(static_cast<int64_t>(cases.size()), "softcap");
    for (const SoftcapRow& r : softcap_demo()) c.result.metrics.push_back({"softcap30_x" + tag(r.x), r.y, ""});
    cases.push_back(std::move(c));
  }
  return cases;
}

/// One run of experiment "demo" holding `cases`; returns its id.
int64_t store_demo(const GlobalOptions& g, const std::string& name, const std::vector<CaseRow>& cases) {
  store::Store db(g.db);
  store::RunInfo info;
  info.experiment_name = "demo";
  info.experiment_path = "";
  info.experiment_text = "bench demo " + name;
  info.git_sha = build_info().git_sha;
  info.harness_version = build_info().version;
  info.plugins_json = "[]";
  info.device = "cpu";
  info.device_json = "{}";
  info.compiler = build_info().compiler;
  info.build_flags = build_info().flags;
  info.command_line = "bench demo " + name + " --store";
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  info.hostname = host;
  info.n_cases = static_cast<int64_t>(cases.size());
  const int64_t run = db.begin_run(info);
  for (const auto& c : cases) db.add_case(run, c);
  db.finish_run(run, "completed");
  return run;
}

}  // namespace

int cmd_demo(const GlobalOptions& g, const std::string& name, bool store) {
  std::string out;
  if (name == "zloss" || name == "all") out += zloss_table();
  if (name == "qk_norm" || name == "all") out += (out.empty() ? "" : "\n") + qk_table();
  if (name == "softcap" || name == "all") out += (out.empty() ? "" : "\n") + softcap_table();
  std::fputs(out.c_str(), stdout);
  if (store) {
    try {
      const int64_t run = store_demo(g, name, demo_cases(name));
      if (!g.quiet) std::fprintf(stderr, "stored as run %lld in %s\n", static_cast<long long>(run), g.db.c_str());
    } catch (const std::exception& e) {
      print_error(e);
      return kBadInput;
    }
  }
  return kOk;
}

}  // namespace bench::cli
