// profile_html(): the report's section on the per-kernel profile — per profiled mode, a roofline of
// every case's slowest kernels and a bar per case of its step's time split by slot.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "report/profile.h"
#include "report/svg.h"

namespace bench::report {

namespace {

using svg::escape;

/// Kernels per case on the roofline: the slowest, as `bench results --profile` lists them.
constexpr size_t kRooflineKernels = 10;

std::string roofline(const std::string& mode, const std::vector<const CaseProfile*>& cases, size_t* undrawn) {
  svg::RooflineChart chart;
  chart.id = "roofline-" + mode;
  chart.title = mode + ": kernels against the roofline";
  std::set<std::pair<double, double>> roofs;
  for (size_t i = 0; i < cases.size(); ++i) {
    const CaseProfile& p = *cases[i];
    if (p.roof_gbps && p.roof_gflops && roofs.insert({*p.roof_gbps, *p.roof_gflops}).second)
      chart.roofs.push_back({*p.roof_gbps, *p.roof_gflops, ""});
    svg::MarkGroup g;
    g.name = p.c->label;
    g.color = svg::palette()[i % svg::palette().size()];
    for (size_t r = 0; r < p.rows.size() && r < kRooflineKernels; ++r) {
      const ProfileRow& row = p.rows[r];
      const KernelFigures k = kernel_figures(row, p);
      if (!k.gflops || !k.intensity || !(*k.gflops > 0) || !std::isfinite(*k.intensity) || !(*k.intensity > 0)) {
        ++*undrawn;
        continue;
      }
      const auto pct = [](const std::optional<double>& v) {
        return v ? fmt::format(" ({:.1f} % of the roof)", *v) : "";
      };
      g.marks.push_back({*k.intensity, *k.gflops,
                         fmt::format("{}: {} · {} · {} ({}): {:.4g} ms, {:.4g} GB/s{}, {:.4g} GFLOP/s{}, {:.3g} "
                                     "FLOP/byte, {}",
                                     p.c->label, component_name(row), row.pass, row.kernel, row.slot, row.ms,
                                     k.gbps.value_or(0), pct(k.gbps_percent), *k.gflops, pct(k.gflops_percent),
                                     *k.intensity, k.bound == "-" ? "bound unknown" : k.bound + "-bound"),
                         p.noisy});
    }
    chart.groups.push_back(std::move(g));
  }
  if (roofs.size() > 1)  // several ceilings (dtypes): say which is which
    for (auto& r : chart.roofs) r.label = fmt::format("ridge {:.3g}", r.gflops / r.gbps);
  return svg::roofline_chart(chart);
}

std::string time_split(const std::string& mode, const std::vector<const CaseProfile*>& cases) {
  svg::StackedBarChart chart;
  chart.id = "profile-time-" + mode;
  chart.title = mode + ": the step's time by slot";
  chart.x_label = "ms per step";
  // Slots in the order of their time over all cases, so that the largest sit left on every bar.
  std::map<std::string, double> slot_ms;
  for (const CaseProfile* p : cases)
    for (const ProfileRow& r : p->rows) slot_ms[r.slot] += r.ms;
  std::vector<std::pair<std::string, double>> order(slot_ms.begin(), slot_ms.end());
  std::stable_sort(order.begin(), order.end(), [](const auto& a, const auto& b) { return a.second > b.second; });
  std::map<std::string, size_t> key_of;
  for (const auto& [slot, ms] : order) {
    key_of[slot] = chart.keys.size();
    chart.keys.push_back({slot, svg::palette()[chart.keys.size() % svg::palette().size()]});
  }
  for (const CaseProfile* p : cases) {
    svg::StackedBar b;
    b.label = p->c->label;
    b.noisy = p->noisy;
    std::vector<double> ms(chart.keys.size(), 0);
    for (const ProfileRow& r : p->rows) ms[key_of.at(r.slot)] += r.ms;
    const double total = p->total_ms();
    for (size_t k = 0; k < ms.size(); ++k)
      if (ms[k] > 0)
        b.segments.push_back({k, ms[k],
                              fmt::format("{} · {}: {:.4g} ms ({:.1f} % of the rows)", p->c->label, chart.keys[k].first,
                                          ms[k], total > 0 ? ms[k] / total * 100 : 0)});
    b.value_text =
        p->step_ms ? fmt::format("{:.3g} of {:.3g} ms", total, *p->step_ms) : fmt::format("{:.3g} ms", total);
    if (p->noisy) b.value_text += " noisy";
    chart.bars.push_back(std::move(b));
  }
  return svg::stacked_bar_chart(chart);
}

}  // namespace

std::string profile_html(const store::Store& db, const store::RunData& run) {
  const std::vector<CaseProfile> all = load_profiles(run, "");
  if (all.empty()) return "";
  const std::vector<std::string> modes = profiled_modes(db, run.id);
  std::string o =
      "<h3 id=\"profile\">Where the time goes</h3>\n"
      "<p class=\"note\">Each case's step profiled per kernel in separate, untimed steps (docs/results.md, \"The "
      "profile\"). Roofline: each mark is one of a case's ten slowest kernels that declares its bytes and FLOPs, at "
      "its arithmetic intensity (FLOP/byte) and achieved GFLOP/s; the slope is the measured copy bandwidth, the flat "
      "line the measured GEMM rate, and they meet at the ridge point. Left of the ridge a kernel is memory-bound "
      "(its ceiling is the slope), right of it compute-bound. Bars: each case's profiled step split by slot. "
      "<code>bench results --profile</code> lists the kernels.</p>\n";
  for (const std::string& mode : modes) {
    std::vector<const CaseProfile*> cases;
    for (const CaseProfile& p : all)
      if (p.mode == mode) cases.push_back(&p);
    o += "<div class=\"plots\">\n";
    size_t undrawn = 0;
    const std::string chart = roofline(mode, cases, &undrawn);
    if (chart.find("<circle class=\"marker") != std::string::npos)
      o += svg::figure(
          "roofline", chart,
          fmt::format("{}: the ten slowest kernels of each case against the device's ceilings{}.", escape(mode),
                      undrawn > 0 ? fmt::format(" ({} of them declare no bytes or no FLOPs and are not drawn)", undrawn)
                                  : std::string()));
    o += svg::figure("profile-time", time_split(mode, cases),
                     fmt::format("{}: the sum of each case's profile rows by slot, against the profiled step's time; a "
                                 "pale bar: the mode's timing was noisy.",
                                 escape(mode)));
    o += "</div>\n";
  }
  return o;
}

}  // namespace bench::report
