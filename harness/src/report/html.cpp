// render_html(): the HTML report of one run. Layout: header, throughput, stability, provenance.
// Everything is inline (CSS in <style>, plots as <svg>), so the file opens anywhere, offline.
#include "report/html.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "report/case_words.h"
#include "report/profile.h"
#include "report/results_view.h"
#include "report/svg.h"
#include "runners/registry.h"
#include "store/run_data.h"
#include "store/tables.h"

namespace bench::report {

using store::RunData;

namespace {

using svg::escape;

constexpr std::string_view kCss = R"css(
body { font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "DejaVu Sans", sans-serif; color: #222;
       margin: 0 auto; padding: 16px 24px 48px; max-width: 1480px; background: #fafafa; }
h1 { font-size: 22px; margin: 8px 0 4px; }
h2 { font-size: 18px; margin: 32px 0 8px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
h3 { font-size: 15px; margin: 20px 0 6px; }
p.meta, p.note { color: #555; margin: 4px 0; }
nav a { margin-right: 14px; color: #1f5fa8; }
.status { display: inline-block; padding: 1px 8px; border-radius: 9px; font-weight: 600; font-size: 12px; }
.status.completed { background: #dff3e0; color: #1d6b2a; }
.status.failed, .status.interrupted, .status.running { background: #fbe3e3; color: #8a1c1c; }
.plots { display: flex; flex-wrap: wrap; gap: 12px; }
figure.plot { margin: 0; background: #fff; border: 1px solid #e2e2e2; border-radius: 4px; padding: 4px; }
figure.plot figcaption { font-size: 12px; color: #555; max-width: 650px; padding: 2px 6px 4px; }
svg.chart { display: block; font: 11px system-ui, "DejaVu Sans", sans-serif; }
svg.chart .title { font-size: 13px; font-weight: 600; fill: #222; }
svg.chart .frame { fill: none; stroke: #bbb; }
svg.chart .grid { stroke: #ececec; }
svg.chart .tick { fill: #555; }
svg.chart .axis { fill: #333; }
svg.chart .series { fill: none; stroke-width: 1.6; stroke-linejoin: round; }
svg.chart .flag { stroke-width: 2; fill: none; }
svg.chart .reference { stroke: #888; stroke-dasharray: 5 4; }
svg.chart .reference-label { fill: #666; font-size: 10px; }
svg.chart .legend-line { stroke-width: 2.4; }
svg.chart .legend-title { font-weight: 600; fill: #333; }
svg.chart .legend-text { fill: #333; }
svg.chart .bar { opacity: 0.85; }
svg.chart .bar.noisy { opacity: 0.35; stroke: #b00; stroke-dasharray: 3 2; }
svg.chart .whisker { stroke: #333; stroke-width: 1; }
svg.chart .errorbar { stroke: #111; stroke-width: 3; }
svg.chart .sample { fill: #fff; stroke: #111; stroke-width: 0.8; }
svg.chart .clip-arrow { fill: #333; }
svg.chart .bar-label, svg.chart .bar-value { fill: #222; }
svg.chart .ceiling { fill: none; stroke: #444; stroke-width: 1.8; }
svg.chart .marker { stroke: #fff; stroke-width: 0.8; }
svg.chart .marker.noisy { opacity: 0.35; }
table { border-collapse: collapse; background: #fff; margin: 8px 0; font-size: 13px; }
th, td { border: 1px solid #e0e0e0; padding: 3px 8px; text-align: left; vertical-align: top; }
th { background: #f2f2f2; font-weight: 600; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
pre { background: #fff; border: 1px solid #e0e0e0; padding: 10px; overflow-x: auto; font-size: 12px; }
ul.errors { color: #8a1c1c; }
)css";

std::string sheet_html(const Sheet& s) {
  std::string o = "<table>\n<tr>";
  for (const auto& c : s.columns) o += "<th>" + escape(c.header) + "</th>";
  o += "</tr>\n";
  for (const auto& row : s.rows) {
    o += "<tr>";
    for (size_t c = 0; c < row.size(); ++c)
      o += fmt::format("<td{}>{}</td>", s.columns[c].right_aligned ? " class=\"num\"" : "", escape(row[c].text));
    o += "</tr>\n";
  }
  return o + "</table>\n";
}

/// The table a runner declares (runners/runner.h); none for a runner this build does not have.
ResultsTable table_of(const std::string& runner) {
  const Runner* r = find_runner(runner);
  return r == nullptr ? ResultsTable{} : r->table();
}

/// The throughput plots and table, then `profile` (profile_html: where the time goes).
std::string throughput_section(const RunData& run, const std::vector<ResultsSection>& tables,
                               const std::string& profile) {
  std::vector<std::string> modes;
  for (const CaseRow& c : run.cases)
    for (const Timing& m : c.result.timings)
      if (std::find(modes.begin(), modes.end(), m.mode) == modes.end()) modes.push_back(m.mode);
  std::string o = "<section id=\"throughput\">\n<h2>Throughput</h2>\n";
  if (modes.empty()) return o + "<p class=\"note\">This run has no throughput measurements.</p>\n</section>\n";
  o += "<p class=\"note\">Time per iteration of each case. Bar: median over the repetitions; thick line: median ± "
       "MAD (median absolute deviation); thin whisker: fastest to slowest repetition; dots: the repetitions. A pale, "
       "dashed bar marked noisy: the repetitions' spread stayed above the noise target (max_noise) until max_time; "
       "its time is not to be trusted.</p>\n"
       "<div class=\"plots\">\n";
  for (const std::string& mode : modes) {
    svg::BarChart chart;
    chart.id = "throughput-" + mode;
    chart.title = mode + ": time per iteration";
    chart.x_label = "ms per iteration";
    size_t reps = 0;
    for (const CaseRow& c : run.cases)
      for (const Timing& m : c.result.timings) {
        if (m.mode != mode) continue;
        svg::Bar b;
        b.label = c.label;
        b.value = m.median_ms;
        b.err_lo = std::max(0.0, m.median_ms - m.mad_ms);
        b.err_hi = m.median_ms + m.mad_ms;
        b.min = m.min_ms;
        b.max = m.max_ms;
        b.samples = m.samples_ms;
        b.value_text = fmt::format("{:.3g}", m.median_ms) + (m.noisy ? " noisy" : "");
        b.noisy = m.noisy;
        reps = std::max(reps, m.samples_ms.size());
        chart.bars.push_back(std::move(b));
      }
    o += svg::figure(
        "throughput", svg::bar_chart(chart),
        fmt::format("{}: median of {} repetitions per case, ms per iteration (lower is faster).", escape(mode), reps));
  }
  o += "</div>\n";
  for (const auto& t : tables)
    if (table_of(t.title).timings) {
      o += sheet_html(visible_part(t.sheet));
      if (!t.errors.empty()) {
        o += "<ul class=\"errors\">";
        for (const auto& e : t.errors) o += "<li>" + escape(e) + "</li>";
        o += "</ul>\n";
      }
      for (const auto& n : t.notes) o += "<p class=\"meta noisy\">" + escape(n) + "</p>\n";
    }
  return o + profile + "</section>\n";
}

/// How the stability cases are drawn: a panel per learning rate, a series per case, styled so
/// that the first swept keys pick the colour and the last one the dash pattern.
struct SeriesStyle {
  std::string name, color, dash;
};

struct StabilityLayout {
  std::vector<double> lrs;                    ///< panel order
  std::map<int64_t, double> lr_of;            ///< case id -> lr (NaN when none)
  std::map<int64_t, SeriesStyle> style;       ///< case id -> series style
  std::map<int64_t, std::string> series_key;  ///< case id -> label without lr and seed
  std::string legend_title;
};

StabilityLayout layout_of(const std::vector<const CaseRow*>& cases) {
  StabilityLayout l;
  std::map<int64_t, std::vector<std::string>> words;
  for (const CaseRow* c : cases) {
    const double lr = c->metric("lr").value_or(std::nan(""));
    l.lr_of[c->id] = lr;
    if (std::isfinite(lr) && std::find(l.lrs.begin(), l.lrs.end(), lr) == l.lrs.end()) l.lrs.push_back(lr);
    std::vector<std::string> w;
    for (const auto& t : label_tokens(*c))
      if (t.rfind("lr=", 0) != 0 && t.rfind("seed=", 0) != 0) w.push_back(t);
    std::string key;
    for (const auto& t : w) key += (key.empty() ? "" : " ") + t;
    l.series_key[c->id] = key.empty() ? "base" : key;
    words[c->id] = std::move(w);
  }
  std::sort(l.lrs.begin(), l.lrs.end());
  if (l.lrs.empty()) l.lrs.push_back(std::nan(""));

  // Words every series shares say nothing: drop them from the names.
  std::set<std::string> common;
  if (!cases.empty()) common.insert(words[cases.front()->id].begin(), words[cases.front()->id].end());
  for (const CaseRow* c : cases) {
    std::set<std::string> mine(words[c->id].begin(), words[c->id].end());
    std::set<std::string> keep;
    std::set_intersection(common.begin(), common.end(), mine.begin(), mine.end(), std::inserter(keep, keep.begin()));
    common = std::move(keep);
  }
  // When every name is key=value words with the same keys, show the values under a title of keys.
  std::vector<std::string> keys;
  bool same_keys = true;
  std::map<int64_t, std::vector<std::string>> values;
  for (const CaseRow* c : cases) {
    std::vector<std::string> k, v;
    for (const auto& t : words[c->id]) {
      if (common.count(t) != 0) continue;
      const size_t eq = t.find('=');
      if (eq == std::string::npos) {
        same_keys = false;
        break;
      }
      k.push_back(t.substr(0, eq));
      v.push_back(t.substr(eq + 1));
    }
    if (c == cases.front()) keys = k;
    same_keys = same_keys && k == keys;
    values[c->id] = std::move(v);
  }
  same_keys = same_keys && !keys.empty();
  if (same_keys)
    for (const auto& k : keys) l.legend_title += (l.legend_title.empty() ? "" : " · ") + k;

  // Colour by all but the last key, dash by the last when it has few values; else colour by series.
  std::set<std::string> last_values;
  if (same_keys)
    for (const auto& [id, v] : values) last_values.insert(v.back());
  const bool split = same_keys && keys.size() >= 2 && last_values.size() <= svg::dashes().size();
  std::map<std::string, size_t> colour_index, dash_index;
  for (const CaseRow* c : cases) {
    SeriesStyle s;
    std::string colour_key = l.series_key[c->id], dash_key;
    if (same_keys) {
      const auto& v = values[c->id];
      for (const auto& x : v) s.name += (s.name.empty() ? "" : " · ") + x;
      if (split) {
        colour_key.clear();
        for (size_t i = 0; i + 1 < v.size(); ++i) colour_key += v[i] + " ";
        dash_key = v.back();
      }
    } else {
      for (const auto& t : words[c->id])
        if (common.count(t) == 0) s.name += (s.name.empty() ? "" : " ") + t;
    }
    if (s.name.empty()) s.name = l.series_key[c->id];
    const size_t ci = colour_index.emplace(colour_key, colour_index.size()).first->second;
    const size_t di =
        split ? dash_index.emplace(dash_key, dash_index.size()).first->second : ci / svg::palette().size();
    s.color = svg::palette()[ci % svg::palette().size()];
    s.dash = svg::dashes()[di % svg::dashes().size()];
    l.style[c->id] = std::move(s);
  }
  return l;
}

std::string lr_text(double lr) { return std::isfinite(lr) ? fmt::format("{:g}", lr) : std::string("-"); }

/// A metric shared by all the cases (the data's entropies), if it is.
std::optional<double> shared_metric(const std::vector<const CaseRow*>& cases, const std::string& name) {
  std::optional<double> v;
  for (const CaseRow* c : cases) {
    const auto x = c->metric(name);
    if (!x || (v && std::fabs(*v - *x) > 1e-9)) return std::nullopt;
    v = x;
  }
  return v;
}

/// A curve's points of one case: (step + 1, value) of its steps column or whole-model series, in
/// step order; (layer + 1, value) of a per-layer series at initialization (step -1), in layer order.
std::vector<svg::Point> points(const CaseRow& c, const CurveSpec& cv) {
  std::vector<svg::Point> out;
  if (cv.source == CurveSpec::Source::kStepColumn) {
    for (const auto& column : store::step_table().columns)
      if (column.name == cv.name)
        for (const StepRecord& s : c.result.steps) {
          const Value v = store::stored_value(column, s);
          out.push_back({static_cast<double>(s.step) + 1, v.is_number() ? v.as_double() : std::nan("")});
        }
    return out;
  }
  std::vector<const SeriesPoint*> chosen;
  for (const SeriesPoint& s : c.result.series)
    if (s.name == cv.name &&
        (cv.source == CurveSpec::Source::kSeries ? s.layer < 0 && s.step >= 0 : s.layer >= 0 && s.step == -1))
      chosen.push_back(&s);
  const bool by_layer = cv.source == CurveSpec::Source::kInitLayers;
  std::stable_sort(chosen.begin(), chosen.end(), [&](const SeriesPoint* a, const SeriesPoint* b) {
    return by_layer ? a->layer < b->layer : a->step < b->step;
  });
  for (const SeriesPoint* s : chosen) {
    const double v = std::isfinite(s->value) ? s->value : std::nan("");
    out.push_back({static_cast<double>(by_layer ? s->layer : s->step) + 1, v});
  }
  return out;
}

/// A per-layer figure at initialization, after the heading `heading_done` says is not yet there.
std::string init_figure(const CurveSpec& cv, const std::vector<const CaseRow*>& cases, const StabilityLayout& l,
                        bool& heading_done) {
  svg::LineChart chart;
  chart.id = cv.kind;
  chart.title = cv.y_label + " at initialization";
  chart.x = {"layer + 1", false};
  chart.y = {cv.y_label, cv.log_y};
  for (const CaseRow* c : cases) {
    std::vector<svg::Point> p = points(*c, cv);
    if (p.empty()) continue;
    const SeriesStyle& st = l.style.at(c->id);
    chart.series.push_back({st.name, st.color, st.dash, std::move(p), true, {}});
  }
  if (chart.series.empty()) return "";
  std::string o = heading_done ? "" : "<h3>" + cv.heading + "</h3>\n<div class=\"plots\">\n";
  heading_done = true;
  return o + svg::figure(cv.kind, svg::line_chart(chart), cv.caption);
}

/// The data's unigram and bigram entropies, as reference lines, where all the cases share them.
std::vector<svg::Reference> entropy_refs(const std::vector<const CaseRow*>& cases) {
  std::vector<svg::Reference> r;
  if (const auto unigram = shared_metric(cases, "unigram_entropy"))
    r.push_back({*unigram, fmt::format("unigram entropy {:.3f}", *unigram)});
  if (const auto bigram = shared_metric(cases, "bigram_entropy"))
    r.push_back({*bigram, fmt::format("bigram entropy {:.3f}", *bigram)});
  return r;
}

/// Final loss against the learning rate, when some configuration ran at several.
std::string final_loss_vs_lr(const std::vector<const CaseRow*>& cases, const StabilityLayout& l) {
  std::string o;
  // Final loss against the learning rate, when some configuration ran at several.
  std::map<std::string, std::set<double>> lrs_per_key;
  for (const CaseRow* c : cases)
    if (std::isfinite(l.lr_of.at(c->id))) lrs_per_key[l.series_key.at(c->id)].insert(l.lr_of.at(c->id));
  const bool grid =
      std::any_of(lrs_per_key.begin(), lrs_per_key.end(), [](const auto& e) { return e.second.size() > 1; });
  if (grid) {
    o += "<h3>Final loss against the learning rate</h3>\n<div class=\"plots\">\n";
    svg::LineChart chart;
    chart.id = "final-loss-vs-lr";
    chart.title = "final loss vs peak learning rate";
    chart.x = {"peak learning rate", true};
    chart.y = {"final loss (nats)", false};
    chart.legend_title = l.legend_title;
    chart.references = entropy_refs(cases);
    std::map<std::string, size_t> index;
    for (const CaseRow* c : cases) {
      const std::string& key = l.series_key.at(c->id);
      const SeriesStyle& st = l.style.at(c->id);
      if (index.count(key) == 0) {
        index[key] = chart.series.size();
        chart.series.push_back({st.name, st.color, st.dash, {}, true, {}});
      }
      svg::Series& s = chart.series[index[key]];
      const double lr = l.lr_of.at(c->id);
      if (const auto loss = c->metric("final_loss"))
        s.points.push_back({lr, *loss});
      else
        s.flagged_x.push_back(lr);
    }
    for (auto& s : chart.series)
      std::sort(s.points.begin(), s.points.end(), [](const svg::Point& a, const svg::Point& b) { return a.x < b.x; });
    o += svg::figure(
        "final-loss-vs-lr", svg::line_chart(chart),
        "Final loss (held-out when evaluated) of each configuration at each peak learning rate; a cross on the "
        "top edge marks a run that diverged (no final loss). Dashed lines: the data's unigram and bigram "
        "entropies (the loss of the best context-free and previous-token-only models).");
    o += "</div>\n";
  }

  return o;
}

/// Held-out bits per byte, when the cases' vocabularies differ.
std::string bits_per_byte_figure(const std::vector<const CaseRow*>& cases) {
  std::string o;
  // Held-out bits per byte, when the cases' vocabularies differ: their losses in nats per token
  // do not compare, bits per byte do (docs/results.md).
  std::set<double> vocabularies;
  for (const CaseRow* c : cases)
    if (c->metric("final_val_bpb"))
      if (const auto v = c->metric("vocab_size")) vocabularies.insert(*v);
  if (vocabularies.size() > 1) {
    o += "<h3>Held-out loss in bits per byte</h3>\n<div class=\"plots\">\n";
    svg::BarChart chart;
    chart.id = "final-val-bpb";
    chart.title = "held-out loss, bits per byte";
    chart.x_label = "bits per byte (lower is better)";
    for (const CaseRow* c : cases) {
      const auto bpb = c->metric("final_val_bpb");
      if (!bpb) continue;
      svg::Bar b;
      const auto bpt = c->metric("val_bytes_per_token");
      b.label = bpt ? fmt::format("{} ({:.2f} bytes/token)", c->label, *bpt) : c->label;
      b.value = b.err_lo = b.err_hi = b.min = b.max = *bpb;
      b.value_text = fmt::format("{:.4f}", *bpb);
      chart.bars.push_back(std::move(b));
    }
    o += svg::figure(
        "final-val-bpb", svg::bar_chart(chart),
        "Final held-out loss of each case in bits per byte: loss (nats/token) x tokens / (bytes x ln 2), "
        "over the exact bytes the held-out tokens stand for. The cases' vocabularies differ, so their "
        "losses in nats per token do not compare; these do. Beside each case: the bytes a held-out token stands for.");
    o += "</div>\n";
  }

  return o;
}

/// The per-step curves the cases' runners declare.
std::string curve_figures(const std::vector<const CaseRow*>& cases, const StabilityLayout& l) {
  std::string o;
  // The curves the cases' runners declare (runners/runner.h: CurveSpec), in their order.
  std::vector<const CurveSpec*> curves;
  std::set<std::string> seen;
  for (const CaseRow* c : cases)
    if (const Runner* r = find_runner(c->runner); r != nullptr && seen.insert(c->runner).second)
      for (const CurveSpec& cv : r->curves()) curves.push_back(&cv);
  bool init_heading = false;
  for (const CurveSpec* cv : curves) {
    if (cv->source == CurveSpec::Source::kInitLayers) {
      o += init_figure(*cv, cases, l, init_heading);
      continue;
    }
    const bool series = cv->source == CurveSpec::Source::kSeries;
    if (series && std::none_of(cases.begin(), cases.end(), [&](const CaseRow* c) { return !points(*c, *cv).empty(); }))
      continue;
    o += fmt::format("<h3>{}</h3>\n<div class=\"plots\">\n", cv->heading);
    for (double lr : l.lrs) {
      svg::LineChart chart;
      chart.id = fmt::format("{}-lr-{}", cv->kind, lr_text(lr));
      chart.title = std::isfinite(lr) ? fmt::format("{}, lr = {}", cv->heading, lr_text(lr)) : cv->heading;
      chart.x = {"step + 1", true};
      chart.y = {cv->y_label, cv->log_y};
      chart.legend_title = l.legend_title;
      if (cv->entropy_lines) chart.references = entropy_refs(cases);
      for (const CaseRow* c : cases) {
        const double clr = l.lr_of.at(c->id);
        if (!(clr == lr || (!std::isfinite(clr) && !std::isfinite(lr)))) continue;
        const std::vector<svg::Point> p = points(*c, *cv);
        if (series && p.empty()) continue;
        const SeriesStyle& st = l.style.at(c->id);
        chart.series.push_back({st.name, st.color, st.dash, p, false, {}});
      }
      o += svg::figure(cv->kind, svg::line_chart(chart), cv->caption);
    }
    o += "</div>\n";
  }
  if (init_heading) o += "</div>\n";

  return o;
}

/// The summary table of the stability runners and their seed replicates.
std::string stability_tables(const std::vector<ResultsSection>& tables) {
  std::string o;
  for (const auto& t : tables)
    if (t.across_seeds && table_of(t.runner).steps) {
      // The final loss over seed replicates, or the note that one seed cannot tell.
      o += "<h3>Across seeds</h3>\n";
      if (!t.sheet.rows.empty()) o += sheet_html(visible_part(t.sheet));
      for (const auto& n : t.notes) o += "<p class=\"meta\">" + escape(n) + "</p>\n";
    } else if (!t.across_seeds && table_of(t.title).steps) {
      o += "<h3>Summary</h3>\n" + sheet_html(visible_part(t.sheet));
      if (!t.errors.empty()) {
        o += "<ul class=\"errors\">";
        for (const auto& e : t.errors) o += "<li>" + escape(e) + "</li>";
        o += "</ul>\n";
      }
    }
  return o;
}

std::string stability_section(const RunData& run, const std::vector<ResultsSection>& tables) {
  std::vector<const CaseRow*> cases;
  for (const CaseRow& c : run.cases)
    if (table_of(c.runner).steps) cases.push_back(&c);
  std::string o = "<section id=\"stability\">\n<h2>Stability</h2>\n";
  if (cases.empty()) return o + "<p class=\"note\">This run has no stability cases.</p>\n</section>\n";
  const StabilityLayout l = layout_of(cases);
  o += final_loss_vs_lr(cases, l) + bits_per_byte_figure(cases) + curve_figures(cases, l) + stability_tables(tables);
  return o + "</section>\n";
}

/// The tables of the other runners this build has (diagnostics ...), a section each.
std::string other_runner_sections(const std::vector<ResultsSection>& tables) {
  std::string o;
  for (const auto& t : tables) {
    const ResultsTable declared = table_of(t.title);
    if (find_runner(t.title) == nullptr || declared.timings || declared.steps) continue;
    o += fmt::format("<section id=\"{0}\">\n<h2>{0}</h2>\n", escape(t.title)) + sheet_html(visible_part(t.sheet));
    if (!t.errors.empty()) {
      o += "<ul class=\"errors\">";
      for (const auto& e : t.errors) o += "<li>" + escape(e) + "</li>";
      o += "</ul>\n";
    }
    o += "</section>\n";
  }
  return o;
}

std::string key_value_table(const std::vector<std::pair<std::string, std::string>>& rows) {
  std::string o = "<table>\n";
  for (const auto& [k, v] : rows) o += "<tr><th>" + escape(k) + "</th><td>" + escape(v) + "</td></tr>\n";
  return o + "</table>\n";
}

std::string provenance_section(const RunData& run) {
  std::string o = "<section id=\"provenance\">\n<h2>Provenance</h2>\n";
  o += key_value_table({{"run", std::to_string(run.id)},
                        {"experiment", run.experiment_name},
                        {"experiment file", run.experiment_path},
                        {"status", run.status},
                        {"error", run.error.empty() ? "-" : run.error},
                        {"started", run.started_at},
                        {"finished", run.finished_at.empty() ? "-" : run.finished_at},
                        {"cases", fmt::format("{} stored of {} planned", run.cases.size(), run.n_cases)},
                        {"seed", std::to_string(run.seed)},
                        {"git sha", run.git_sha},
                        {"bench version", run.harness_version},
                        {"compiler", run.compiler},
                        {"build flags", run.build_flags},
                        {"command line", run.command_line},
                        {"host", run.hostname},
                        {"device", run.device}});
  const auto device = nlohmann::json::parse(run.device_json, nullptr, false);
  if (device.is_object() && !device.empty()) {
    o += "<h3>Device</h3>\n";
    std::vector<std::pair<std::string, std::string>> rows;
    for (const auto& [k, v] : device.items())
      rows.emplace_back(k, v.is_string() ? v.get<std::string>()
                                         : (v.is_number_float() ? fmt::format("{:.4g}", v.get<double>()) : v.dump()));
    o += key_value_table(rows);
  }
  const auto plugins = nlohmann::json::parse(run.plugins_json, nullptr, false);
  if (plugins.is_array() && !plugins.empty()) {
    o += "<h3>Plugins</h3>\n<table>\n<tr><th>name</th><th>version</th><th>path</th></tr>\n";
    for (const auto& p : plugins) {
      const auto field = [&](const char* k) {
        return p.is_object() && p.contains(k) ? (p[k].is_string() ? p[k].get<std::string>() : p[k].dump()) : "";
      };
      o += fmt::format("<tr><td>{}</td><td>{}</td><td>{}</td></tr>\n", escape(field("name")), escape(field("version")),
                       escape(field("path")));
    }
    o += "</table>\n";
  }
  o += "<h3>Experiment file, as run</h3>\n<pre>" + escape(run.experiment_text) + "</pre>\n";
  return o + "</section>\n";
}

}  // namespace

std::string render_html(const store::Store& db, int64_t run_id) {
  const RunData run = load_run(db, run_id);
  const auto tables = results_sections(run);
  std::string o = "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n";
  o += fmt::format("<title>bench report: run {} ({})</title>\n", run.id, escape(run.experiment_name));
  o += "<style>" + std::string(kCss) + "</style>\n</head>\n<body>\n";
  o += fmt::format("<h1>{} — run {}</h1>\n", escape(run.experiment_name), run.id);
  o += fmt::format(
      "<p class=\"meta\"><span class=\"status {0}\">{0}</span> started {1}{2} · {3} · git {4} · bench {5}</p>\n",
      escape(run.status), escape(run.started_at),
      run.finished_at.empty() ? "" : ", finished " + escape(run.finished_at), escape(run.device),
      escape(run.git_sha.substr(0, 12)), escape(run.harness_version));
  if (!run.error.empty()) o += "<p class=\"meta\">run error: " + escape(run.error) + "</p>\n";
  const std::string profile = profile_html(db, run);
  o += "<nav><a href=\"#throughput\">throughput</a>";
  if (!profile.empty()) o += "<a href=\"#profile\">profile</a>";
  o += "<a href=\"#stability\">stability</a><a href=\"#provenance\">provenance</a></nav>\n";
  o += throughput_section(run, tables, profile);
  o += stability_section(run, tables);
  o += other_runner_sections(tables);
  o += provenance_section(run);
  o += "</body>\n</html>\n";
  return o;
}

}  // namespace bench::report
