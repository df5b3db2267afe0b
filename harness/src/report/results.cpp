// render_results(): the `bench results` view of one run — a table per runner, as the runner
// declares it (runners/runner.h: ResultsTable), and one for cases of runners this build does not
// have — made from the run's data (store/run_data.h), whether read back from the database or
// collected in memory by `bench run`.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <vector>

#include "bench/error.h"
#include "report/case_words.h"
#include "report/report.h"
#include "report/results_view.h"
#include "report/sheet.h"
#include "report/significance.h"
#include "runners/registry.h"
#include "store/runs.h"

namespace bench::report {

namespace {

using store::RunData;

/// How the text table and Markdown show a number: `format` (a fmt spec), or 4 significant digits.
std::string styled(const Value& v, std::string_view format) {
  if (format.empty() || !v.is_number() || !std::isfinite(v.as_double())) return display_text(v);
  return fmt::format(fmt::runtime(format), v.as_double());
}

Value text_or_null(const std::string& s) { return s.empty() ? Value() : Value::string(s); }

/// An error message on one line (a traceback would break the list under the table).
std::string single_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

/// A case's notes, a line each (empty lines left out).
std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  size_t start = 0;
  while (start <= text.size()) {
    const size_t end = std::min(text.find('\n', start), text.size());
    if (end > start) out.push_back(single_line(text.substr(start, end - start)));
    start = end + 1;
  }
  return out;
}

/// A section being filled: the ordinal first, `visible` columns (with their formats), status and
/// error last.
class SectionBuilder {
 public:
  SectionBuilder(std::string title, const std::vector<std::pair<SheetColumn, std::string>>& visible) {
    section_.title = std::move(title);
    section_.sheet.columns.push_back({"ordinal", "#", true});
    for (const auto& [column, format] : visible) {
      section_.sheet.columns.push_back(column);
      formats_.push_back(format);
    }
    section_.sheet.columns.push_back({"status", "status", false});
    section_.sheet.columns.push_back({"error", "error", false});
  }
  /// `texts`: the display text of some of the visible cells (by index), where not the formatted value.
  void add(const CaseRow& c, const std::vector<Value>& visible, const std::map<size_t, std::string>& texts = {}) {
    std::vector<SheetCell> cells;
    cells.push_back({Value::integer(c.ordinal), display_text(Value::integer(c.ordinal))});
    for (size_t i = 0; i < visible.size(); ++i) {
      const auto text = texts.find(i);
      cells.push_back({visible[i], text != texts.end() ? text->second : styled(visible[i], formats_[i])});
    }
    const Value status = Value::string(c.result.status), error = text_or_null(c.result.error);
    cells.push_back({status, display_text(status)});
    cells.push_back({error, display_text(error)});
    const bool first = reported_.insert(c.ordinal).second;
    if (!c.result.error.empty() && first)
      section_.errors.push_back(fmt::format("case {} {}: {}", c.ordinal, c.result.status, single_line(c.result.error)));
    if (!c.result.notes.empty() && first)
      for (const std::string& line : lines_of(c.result.notes)) note(fmt::format("case {}: {}", c.ordinal, line));
    section_.sheet.rows.push_back(std::move(cells));
  }
  void note(std::string line) { section_.notes.push_back(std::move(line)); }
  ResultsSection take() { return std::move(section_); }

 private:
  ResultsSection section_;
  std::vector<std::string> formats_;
  std::set<int64_t> reported_;
};

/// A row per timed mode of the runner's cases (and of any case with timings); a case without
/// timings gets one row of NULLs.
ResultsSection timings_section(const RunData& run, const Runner& runner) {
  std::vector<std::pair<SheetColumn, std::string>> visible = {{{"case", "case", false}, ""},
                                                              {{"mode", "mode", false}, ""}};
  const std::vector<ModeMetric>& columns = runner.mode_metrics();
  for (const ModeMetric& c : columns) visible.push_back({{c.name, c.header, true}, c.format});
  // Whether the mode stopped above its noise target: true, false, or NULL (stored before schema
  // version 6); the table shows "noisy" or nothing.
  visible.push_back({{"noisy", "noisy", false}, ""});
  const size_t noisy_column = visible.size() - 1;
  SectionBuilder b(std::string(runner.name()), visible);
  for (const CaseRow& c : run.cases) {
    if (c.runner != runner.name() && c.result.timings.empty()) continue;
    if (c.result.timings.empty()) {
      std::vector<Value> row = {Value::string(c.label), Value()};
      row.resize(visible.size());
      b.add(c, row);
    }
    for (const Timing& m : c.result.timings) {
      std::vector<Value> row = {Value::string(c.label), Value::string(m.mode)};
      for (const ModeMetric& col : columns) row.push_back(number_or_null(col.value(m)));
      const bool known = !std::isnan(m.noise) || !std::isnan(m.max_noise) || m.noisy;
      row.push_back(known ? Value::boolean(m.noisy) : Value());
      b.add(c, row, {{noisy_column, m.noisy ? "noisy" : ""}});
      if (const std::string note = runner.mode_note(m); !note.empty())
        b.note(fmt::format("case {} {}: {}", c.ordinal, m.mode, note));
    }
  }
  return b.take();
}

/// A row per case of the runner, a column per metric it declares with one (NULL when the case has none).
ResultsSection metrics_section(const RunData& run, const Runner& runner) {
  std::vector<const MetricSpec*> columns;
  for (const MetricSpec& col : runner.metrics())
    if (!col.column.empty() &&
        (!col.when_present || std::any_of(run.cases.begin(), run.cases.end(), [&](const CaseRow& c) {
          return c.runner == runner.name() && c.metric(col.name).has_value();
        })))
      columns.push_back(&col);
  std::vector<std::pair<SheetColumn, std::string>> visible = {{{"case", "case", false}, ""}};
  for (const MetricSpec* c : columns) visible.push_back({{c->name, c->column, true}, c->format});
  SectionBuilder b(std::string(runner.name()), visible);
  for (const CaseRow& c : run.cases) {
    if (c.runner != runner.name()) continue;
    std::vector<Value> row = {Value::string(c.label)};
    for (const MetricSpec* col : columns) {
      const Metric* m = c.result.find_metric(col->name);
      row.push_back(m == nullptr || std::isnan(m->value) ? Value() : Value::number(m->value));
    }
    b.add(c, row);
  }
  return b.take();
}

/// The metric whose spread over seeds the results give, and the rule its verdict follows (that of
/// `bench compare`'s defaults, docs/results.md).
constexpr std::string_view kSeedMetric = "final_loss";
constexpr double kSeedAlpha = 0.05, kSeedMinEffect = 0.02;

/// Seed replicates: the runner's cases whose labels are equal but for their `seed=` word, one row
/// per configuration in the order of its first case: how many seeds, the final loss's median,
/// min, max and spread (max - min) over those that ended with one, and against the configuration
/// with the lowest median, B/A, p and the verdict of `bench compare` (Mann-Whitney, alpha 0.05,
/// minimum effect 2 %): "same" or "worse" when the seeds can tell, "unclear" when they cannot.
/// When no configuration has two seeds there is no row, only the note that one seed cannot tell.
ResultsSection seeds_section(const RunData& run, const Runner& runner) {
  ResultsSection out;
  out.title = std::string(runner.name()) + " across seeds";
  out.runner = std::string(runner.name());
  out.across_seeds = true;
  struct Config {
    std::string key;
    std::vector<const CaseRow*> cases;
    std::vector<double> values;
  };
  std::vector<Config> configs;
  std::map<std::string, size_t> index;
  for (const CaseRow& c : run.cases) {
    if (c.runner != runner.name()) continue;
    std::string key;
    for (const std::string& t : label_tokens(c))
      if (t.rfind("seed=", 0) != 0) key += (key.empty() ? "" : " ") + t;
    if (key.empty()) key = "base";
    const auto [it, added] = index.emplace(key, configs.size());
    if (added) configs.push_back({key, {}, {}});
    Config& g = configs[it->second];
    g.cases.push_back(&c);
    if (const auto v = c.metric(std::string(kSeedMetric))) g.values.push_back(*v);
  }
  if (configs.empty()) return out;
  const bool replicated =
      std::any_of(configs.begin(), configs.end(), [](const Config& g) { return g.cases.size() > 1; });
  if (!replicated) {
    out.notes.push_back(
        fmt::format("{}: one seed per configuration, so a difference in final loss cannot be told from seed noise; "
                    "a list `seed = [1, 2, 3, 4, 5]` replicates every case (4 or more seeds a side can reach p < 0.05)",
                    runner.name()));
    return out;
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    const size_t n = v.size();
    return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
  };
  const Config* best = nullptr;
  double best_median = 0;
  for (const Config& g : configs) {
    if (g.values.empty()) continue;
    const double m = median(g.values);
    if (best == nullptr || m < best_median) {
      best = &g;
      best_median = m;
    }
  }
  const std::vector<std::pair<std::string, std::string>> columns = {{"case", ""},
                                                                    {"seeds", ""},
                                                                    {"final_loss_median", "{:.4f}"},
                                                                    {"final_loss_min", "{:.4f}"},
                                                                    {"final_loss_max", "{:.4f}"},
                                                                    {"final_loss_spread", "{:.4f}"},
                                                                    {"vs_best", "{:.4f}"},
                                                                    {"p", "{:.3g}"},
                                                                    {"verdict", ""}};
  const char* headers[] = {"case", "seeds", "final loss median", "min", "max", "spread", "B/best", "p", "verdict"};
  out.sheet.columns.push_back({"ordinal", "#", true});
  for (size_t i = 0; i < columns.size(); ++i)
    out.sheet.columns.push_back({columns[i].first, headers[i], i >= 1 && i <= 7});
  out.sheet.columns.push_back({"status", "status", false});
  out.sheet.columns.push_back({"error", "error", false});
  auto cell = [&](const Value& v, size_t column) { return SheetCell{v, styled(v, columns[column].second)}; };
  for (const Config& g : configs) {
    std::vector<SheetCell> row;
    const Value ordinal = Value::integer(g.cases.front()->ordinal);
    row.push_back({ordinal, display_text(ordinal)});
    row.push_back(cell(Value::string(g.key), 0));
    row.push_back(cell(Value::integer(static_cast<int64_t>(g.cases.size())), 1));
    if (g.values.empty()) {
      for (size_t i = 2; i < columns.size(); ++i) row.push_back(cell(Value(), i));
    } else {
      const auto [lo, hi] = std::minmax_element(g.values.begin(), g.values.end());
      row.push_back(cell(Value::number(median(g.values)), 2));
      row.push_back(cell(Value::number(*lo), 3));
      row.push_back(cell(Value::number(*hi), 4));
      row.push_back(cell(Value::number(*hi - *lo), 5));
      if (&g == best) {
        row.push_back(cell(Value(), 6));
        row.push_back(cell(Value(), 7));
        row.push_back(cell(Value::string("best"), 8));
      } else {
        const Comparison cmp =
            compare_samples(best->values, g.values, Direction::kLowerIsBetter, kSeedAlpha, kSeedMinEffect);
        row.push_back(cell(number_or_null(cmp.ratio), 6));
        row.push_back(cell(number_or_null(cmp.p), 7));
        row.push_back(cell(Value::string(std::string(verdict_name(cmp.verdict, false))), 8));
      }
    }
    const auto completed =
        std::count_if(g.cases.begin(), g.cases.end(), [](const CaseRow* c) { return c->result.status == "completed"; });
    const Value status = Value::string(completed == static_cast<int64_t>(g.cases.size())
                                           ? std::string("completed")
                                           : fmt::format("{} of {} completed", completed, g.cases.size()));
    row.push_back({status, display_text(status)});
    row.push_back({Value(), display_text(Value())});
    out.sheet.rows.push_back(std::move(row));
  }
  out.notes.push_back(fmt::format(
      "final loss over each configuration's seeds; B/best, p and verdict against the lowest median ({}), by the "
      "rule of bench compare (Mann-Whitney, alpha {}, minimum effect {:.0f} %)",
      best != nullptr ? best->key : std::string("none"), kSeedAlpha, kSeedMinEffect * 100));
  return out;
}

// Cases of runners this build does not have (`bench demo --store` writes runner "demo"): one row
// per metric, in the order they were stored.
ResultsSection other_section(const RunData& run) {
  SectionBuilder b("other", {{{"case", "case", false}, ""},
                             {{"metric", "metric", false}, ""},
                             {{"value", "value", true}, ""},
                             {{"unit", "unit", false}, ""}});
  for (const CaseRow& c : run.cases) {
    if (find_runner(c.runner) != nullptr) continue;
    for (const Metric& m : c.result.metrics) {
      b.add(c, {Value::string(c.label), Value::string(m.name), std::isnan(m.value) ? Value() : Value::number(m.value),
                Value::string(m.unit)});
    }
  }
  return b.take();
}

// "device: <name>, N threads[: why] (isa); fp32 GEMM peak X, bf16 Z GFLOP/s (library), copy Y GB/s; bench V
// (compiler)": every number in the tables is relative to this line (MFU uses the measured GEMM
// peak of the model's dtype).
std::string device_line(const std::string& device_json, const std::string& version, const std::string& compiler) {
  const auto d = nlohmann::json::parse(device_json, nullptr, false);
  if (d.is_discarded() || !d.is_object() || !d.contains("name"))
    return fmt::format("bench {} ({})\n", version, compiler);
  auto str = [&](const char* k) { return d.contains(k) && d[k].is_string() ? d[k].get<std::string>() : std::string(); };
  auto num = [&](const char* k) { return d.contains(k) && d[k].is_number() ? d[k].get<double>() : 0.0; };
  const std::string bf16 =
      num("peak_gflops_bf16_gemm") > 0 ? fmt::format(", bf16 {:.0f}", num("peak_gflops_bf16_gemm")) : std::string();
  // Runs recorded since the team's size carries its reason show it ("2 threads: 2 CPUs in the
  // affinity mask"); older runs print as they always did.
  const std::string threads =
      str("threads_why").empty() ? fmt::format("{} threads", static_cast<int>(num("threads"))) : str("threads_why");
  return fmt::format("device: {}, {} ({}); fp32 GEMM peak {:.0f}{} GFLOP/s ({}), copy {:.1f} GB/s; bench {} ({})\n",
                     str("name"), threads, str("isa"), num("peak_gflops_fp32_gemm"), bf16, str("gemm"),
                     num("copy_gbps"), version, compiler);
}

}  // namespace

Sheet visible_part(const Sheet& full) {
  Sheet s;
  s.columns.assign(full.columns.begin(), full.columns.end() - 1);
  for (const auto& row : full.rows) s.rows.emplace_back(row.begin(), row.end() - 1);
  return s;
}

std::vector<ResultsSection> results_sections(const RunData& run) {
  std::vector<ResultsSection> sections;
  for (const Runner* r : runners()) {
    const ResultsTable t = r->table();
    sections.push_back(t.timings ? timings_section(run, *r) : metrics_section(run, *r));
    sections.back().runner = std::string(r->name());
    const auto& declared = r->metrics();
    if (!t.timings && std::any_of(declared.begin(), declared.end(),
                                  [](const MetricSpec& c) { return !c.column.empty() && c.name == kSeedMetric; }))
      sections.push_back(seeds_section(run, *r));
  }
  sections.push_back(other_section(run));
  std::erase_if(sections, [](const ResultsSection& s) { return s.sheet.rows.empty() && s.notes.empty(); });
  return sections;
}

int64_t select_run(const store::Store& db, int64_t run_id, const std::string& experiment) {
  if (run_id != 0) {
    if (!store::has_run(db, run_id)) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
    return run_id;
  }
  if (!experiment.empty()) {
    const auto latest = store::latest_run_of(db, experiment);
    if (!latest) throw Error(fmt::format("no run of experiment \"{}\" in {}", experiment, db.path()));
    return *latest;
  }
  const auto latest = db.latest_run();
  if (!latest) throw Error(fmt::format("no runs in {} (run `bench run` first)", db.path()));
  return *latest;
}

std::string render_results(const store::Store& db, int64_t run_id, Format f) {
  return render_results(store::load_run(db, select_run(db, run_id, "")), f);
}

std::string render_results(const RunData& run, Format f) {
  const std::vector<ResultsSection> sections = results_sections(run);
  std::string out;
  switch (f) {
    case Format::kTable: {
      out = fmt::format("run {}: {} ({}), started {} on {}, git {}\n", run.id, run.experiment_name, run.status,
                        run.started_at, run.device, run.git_sha);
      out += device_line(run.device_json, run.harness_version, run.compiler);
      if (!run.error.empty()) out += fmt::format("run error: {}\n", run.error);
      if (sections.empty()) out += "no cases in this run\n";
      for (const ResultsSection& s : sections) {
        if (!s.sheet.rows.empty()) out += "\n" + s.title + "\n" + sheet_text(visible_part(s.sheet));
        for (const auto& e : s.errors) out += e + "\n";
        for (const auto& n : s.notes) out += (s.sheet.rows.empty() ? "\n" : "") + n + "\n";
      }
      return out;
    }
    case Format::kMarkdown: {
      for (const ResultsSection& s : sections) {
        out += (out.empty() ? "" : "\n") + fmt::format("### {}\n\n", s.title);
        if (!s.sheet.rows.empty()) out += sheet_markdown(visible_part(s.sheet));
        if (!s.errors.empty() || (!s.notes.empty() && !s.sheet.rows.empty())) out += "\n";
        for (const auto& e : s.errors) out += "- " + e + "\n";
        for (const auto& n : s.notes) out += n + "\n";
      }
      return out;
    }
    case Format::kCsv: {
      for (const ResultsSection& s : sections)
        if (!s.sheet.rows.empty()) out += (out.empty() ? "" : "\r\n") + sheet_csv(s.sheet);
      return out;
    }
    case Format::kJson: {
      nlohmann::ordered_json j;
      auto& r = j["run"];
      r["id"] = run.id;
      r["experiment_name"] = run.experiment_name;
      r["status"] = run.status;
      r["started_at"] = run.started_at;
      r["finished_at"] = json_of(text_or_null(run.finished_at));
      r["device"] = run.device;
      r["git_sha"] = run.git_sha;
      r["error"] = json_of(text_or_null(run.error));
      r["n_cases"] = run.n_cases;
      r["device_json"] = run.device_json;
      r["harness_version"] = run.harness_version;
      r["compiler"] = run.compiler;
      for (const Runner* runner : runners()) j[std::string(runner->name())] = nlohmann::ordered_json::array();
      for (const ResultsSection& s : sections) {
        if (!s.sheet.rows.empty()) j[s.title] = sheet_json(s.sheet);
        if (!s.notes.empty()) j["notes"][s.title] = s.notes;
      }
      return dump_json(j);
    }
  }
  return out;
}

}  // namespace bench::report
