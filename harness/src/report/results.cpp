// render_results(): the `bench results` view of one run — a throughput table and a stability
// table, each column declared once below.
#include <fmt/format.h>

#include <cmath>
#include <set>
#include <vector>

#include "bench/error.h"
#include "report/report.h"
#include "report/results_view.h"
#include "report/sheet.h"

namespace bench::report {

namespace {

/// Runner names as the runners record them in cases.runner.
constexpr std::string_view kThroughputRunner = "throughput";
constexpr std::string_view kStabilityRunner = "stability";
/// Throughput modes in the order a reader expects them; other modes follow alphabetically.
constexpr std::string_view kModeOrder[] = {"forward", "forward_backward", "train_step"};

/// How a number is shown in the text table and Markdown (CSV and JSON keep full precision).
enum class Style { kSig4, kFixed1, kFixed4, kLr, kCount };

/// A throughput column: an SQL expression over `cases c` LEFT JOIN `throughput t`.
struct ThroughputColumn {
  std::string_view key, header, sql;
  Style style;
};
constexpr ThroughputColumn kThroughputColumns[] = {
    {"median_ms", "median ms", "t.median_ms", Style::kSig4},
    {"mad_ms", "± MAD ms", "t.mad_ms", Style::kSig4},
    {"tokens_per_s", "tokens/s", "t.tokens_per_s", Style::kSig4},
    {"gflops_per_s", "GFLOP/s", "t.gflops_per_s", Style::kSig4},
    {"mfu_percent", "MFU %", "t.mfu * 100.0", Style::kFixed1},
    {"peak_mb", "peak MB", "t.peak_bytes / 1048576.0", Style::kFixed1},
};

/// A stability column: one metric of the case (metrics.name), NULL when absent.
struct MetricColumn {
  std::string_view metric, header;
  Style style;
};
constexpr MetricColumn kStabilityColumns[] = {
    {"lr", "lr", Style::kLr},
    {"final_loss", "final loss (nats)", Style::kFixed4},
    {"best_loss", "best loss (nats)", Style::kFixed4},
    {"unigram_entropy", "unigram H (nats)", Style::kFixed4},
    {"spike_count", "spikes", Style::kCount},
    {"diverged_step", "diverged at step", Style::kCount},
    {"max_attn_logit", "max logit", Style::kSig4},
    {"final_grad_norm", "grad norm", Style::kSig4},
};

std::string styled(const Value& v, Style style) {
  if (!v.is_number() || !std::isfinite(v.as_double())) return display_text(v);
  const double x = v.as_double();
  switch (style) {
    case Style::kSig4:
      return display_text(v);
    case Style::kFixed1:
      return fmt::format("{:.1f}", x);
    case Style::kFixed4:
      return fmt::format("{:.4f}", x);
    case Style::kLr:
      return fmt::format("{:.3g}", x);
    case Style::kCount:
      return fmt::format("{:.0f}", x);
  }
  return display_text(v);
}

/// An error message on one line (a traceback would break the list under the table).
std::string single_line(std::string s) {
  for (char& c : s)
    if (c == '\n' || c == '\r' || c == '\t') c = ' ';
  return s;
}

/// Fills a section from a query whose columns are ordinal, the visible columns, status, error.
ResultsSection make_section(std::string title, std::vector<SheetColumn> visible, const std::vector<Style>& styles,
                            const store::QueryResult& r) {
  ResultsSection s{std::move(title), {}, {}};
  s.sheet.columns.push_back({"ordinal", "#", true});
  for (auto& c : visible) s.sheet.columns.push_back(std::move(c));
  s.sheet.columns.push_back({"status", "status", false});
  s.sheet.columns.push_back({"error", "error", false});
  std::set<int64_t> reported;
  for (const auto& row : r.rows) {
    std::vector<SheetCell> cells;
    for (size_t c = 0; c < row.size(); ++c) {
      const bool styled_column = c >= 1 && c - 1 < styles.size();
      cells.push_back({row[c], styled_column ? styled(row[c], styles[c - 1]) : display_text(row[c])});
    }
    const int64_t ordinal = row.front().as_int();
    const Value& status = row[row.size() - 2];
    const Value& error = row.back();
    if (!error.is_null() && reported.insert(ordinal).second)
      s.errors.push_back(fmt::format("case {} {}: {}", ordinal, status.as_string(), single_line(error.as_string())));
    s.sheet.rows.push_back(std::move(cells));
  }
  return s;
}

ResultsSection throughput_section(const store::Store& db, int64_t run_id) {
  std::string sql = "SELECT c.ordinal, c.label, t.mode";
  std::vector<SheetColumn> visible = {{"case", "case", false}, {"mode", "mode", false}};
  std::vector<Style> styles = {Style::kSig4, Style::kSig4};  // text columns: the style is unused
  for (const ThroughputColumn& c : kThroughputColumns) {
    sql += fmt::format(", {} AS \"{}\"", c.sql, c.key);
    visible.push_back({std::string(c.key), std::string(c.header), true});
    styles.push_back(c.style);
  }
  sql += R"sql(, c.status, c.error
    FROM cases c LEFT JOIN throughput t ON t.case_id = c.id
    WHERE c.run_id = ?1 AND (c.runner = ?2 OR t.case_id IS NOT NULL)
    ORDER BY c.ordinal, CASE t.mode WHEN ?3 THEN 0 WHEN ?4 THEN 1 WHEN ?5 THEN 2 ELSE 3 END, t.mode)sql";
  std::vector<Value> params = {Value::integer(run_id), Value::string(std::string(kThroughputRunner))};
  for (std::string_view mode : kModeOrder) params.push_back(Value::string(std::string(mode)));
  return make_section("throughput", std::move(visible), styles, db.query(sql, params));
}

ResultsSection stability_section(const store::Store& db, int64_t run_id) {
  std::string sql = "SELECT c.ordinal, c.label";
  std::vector<SheetColumn> visible = {{"case", "case", false}};
  std::vector<Style> styles = {Style::kSig4};
  std::vector<Value> params = {Value::integer(run_id), Value::string(std::string(kStabilityRunner))};
  for (const MetricColumn& c : kStabilityColumns) {
    params.push_back(Value::string(std::string(c.metric)));
    sql += fmt::format(", (SELECT m.value FROM metrics m WHERE m.case_id = c.id AND m.name = ?{}) AS \"{}\"",
                       params.size(), c.metric);
    visible.push_back({std::string(c.metric), std::string(c.header), true});
    styles.push_back(c.style);
  }
  sql += ", c.status, c.error FROM cases c WHERE c.run_id = ?1 AND c.runner = ?2 ORDER BY c.ordinal";
  return make_section("stability", std::move(visible), styles, db.query(sql, params));
}

// Cases of any other runner (`bench demo --store` writes runner "demo"): one row per metric.
ResultsSection other_section(const store::Store& db, int64_t run_id) {
  const std::string sql =
      "SELECT c.ordinal, c.label, m.name, m.value, m.unit, c.status, c.error FROM cases c JOIN metrics m ON "
      "m.case_id = c.id WHERE c.run_id = ?1 AND c.runner NOT IN (?2, ?3) ORDER BY c.ordinal, m.rowid";
  return make_section(
      "other",
      {{"case", "case", false}, {"metric", "metric", false}, {"value", "value", true}, {"unit", "unit", false}},
      {Style::kSig4, Style::kSig4, Style::kSig4, Style::kSig4},
      db.query(sql, {Value::integer(run_id), Value::string(std::string(kThroughputRunner)),
                     Value::string(std::string(kStabilityRunner))}));
}

// "device: <name>, N threads (isa); fp32 GEMM peak X, bf16 Z GFLOP/s (library), copy Y GB/s; bench V
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
  return fmt::format(
      "device: {}, {} threads ({}); fp32 GEMM peak {:.0f}{} GFLOP/s ({}), copy {:.1f} GB/s; bench {} ({})\n",
      str("name"), static_cast<int>(num("threads")), str("isa"), num("peak_gflops_fp32_gemm"), bf16, str("gemm"),
      num("copy_gbps"), version, compiler);
}

}  // namespace

Sheet visible_part(const Sheet& full) {
  Sheet s;
  s.columns.assign(full.columns.begin(), full.columns.end() - 1);
  for (const auto& row : full.rows) s.rows.emplace_back(row.begin(), row.end() - 1);
  return s;
}

std::vector<ResultsSection> results_sections(const store::Store& db, int64_t run_id) {
  std::vector<ResultsSection> sections;
  sections.push_back(throughput_section(db, run_id));
  sections.push_back(stability_section(db, run_id));
  sections.push_back(other_section(db, run_id));
  std::erase_if(sections, [](const ResultsSection& s) { return s.sheet.rows.empty(); });
  return sections;
}

int64_t select_run(const store::Store& db, int64_t run_id, const std::string& experiment) {
  if (run_id != 0) {
    if (db.query("SELECT 1 FROM runs WHERE id = ?1", {Value::integer(run_id)}).rows.empty())
      throw Error(fmt::format("no run {} in {}", run_id, db.path()));
    return run_id;
  }
  if (!experiment.empty()) {
    const auto r = db.query("SELECT max(id) FROM runs WHERE experiment_name = ?1", {Value::string(experiment)});
    if (r.rows.empty() || r.rows[0][0].is_null())
      throw Error(fmt::format("no run of experiment \"{}\" in {}", experiment, db.path()));
    return r.rows[0][0].as_int();
  }
  const auto latest = db.latest_run();
  if (!latest) throw Error(fmt::format("no runs in {} (run `bench run` first)", db.path()));
  return *latest;
}

std::string render_results(const store::Store& db, int64_t run_id, Format f) {
  run_id = select_run(db, run_id, "");
  const auto run = db.query(
      "SELECT id, experiment_name, status, started_at, finished_at, device, git_sha, error, n_cases, device_json, "
      "harness_version, compiler FROM runs WHERE id = ?1",
      {Value::integer(run_id)});
  if (run.rows.empty()) throw Error(fmt::format("no run {} in {}", run_id, db.path()));
  const auto& info = run.rows.front();

  const std::vector<ResultsSection> sections = results_sections(db, run_id);

  std::string out;
  switch (f) {
    case Format::kTable: {
      out = fmt::format("run {}: {} ({}), started {} on {}, git {}\n", info[0].as_int(), info[1].as_string(),
                        info[2].as_string(), info[3].as_string(), info[5].as_string(), info[6].as_string());
      out += device_line(info[9].as_string(), info[10].as_string(), info[11].as_string());
      if (!info[7].is_null()) out += fmt::format("run error: {}\n", info[7].as_string());
      if (sections.empty()) out += "no cases in this run\n";
      for (const ResultsSection& s : sections) {
        out += "\n" + s.title + "\n" + sheet_text(visible_part(s.sheet));
        for (const auto& e : s.errors) out += e + "\n";
      }
      return out;
    }
    case Format::kMarkdown: {
      for (const ResultsSection& s : sections) {
        out += (out.empty() ? "" : "\n") + fmt::format("### {}\n\n", s.title) + sheet_markdown(visible_part(s.sheet));
        if (!s.errors.empty()) out += "\n";
        for (const auto& e : s.errors) out += "- " + e + "\n";
      }
      return out;
    }
    case Format::kCsv: {
      for (const ResultsSection& s : sections) out += (out.empty() ? "" : "\r\n") + sheet_csv(s.sheet);
      return out;
    }
    case Format::kJson: {
      nlohmann::ordered_json j;
      auto& r = j["run"];
      for (size_t c = 0; c < run.columns.size(); ++c) r[run.columns[c]] = json_of(info[c]);
      j["throughput"] = nlohmann::ordered_json::array();
      j["stability"] = nlohmann::ordered_json::array();
      for (const ResultsSection& s : sections) j[s.title] = sheet_json(s.sheet);
      return dump_json(j);
    }
  }
  return out;
}

}  // namespace bench::report
