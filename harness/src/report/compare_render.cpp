// render_compare(): the comparison as tables (text, Markdown), CSV blocks or JSON.
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "report/compare.h"
#include "report/sheet.h"
#include "runners/registry.h"

namespace bench::report {

namespace {

std::string ratio_text(const std::optional<double>& x) { return x ? fmt::format("{:.3f}", *x) : "-"; }

std::string interval_text(const Comparison& c) {
  if (!c.lo || !c.hi) return "-";
  return fmt::format("{:.3f} to {:.3f}", *c.lo, *c.hi);
}

std::string p_text(const std::optional<double>& p) {
  if (!p) return "-";
  return *p < 0.001 ? "<0.001" : fmt::format("{:.3f}", *p);
}

Value opt_number(const std::optional<double>& x) { return x ? Value::number(*x) : Value(); }

/// The sheet of one runner's rows; `full` adds the columns that only CSV and JSON carry.
Sheet rows_sheet(const std::vector<const CompareRow*>& rows, bool throughput, bool full) {
  Sheet s;
  s.columns.push_back({"case", "case", false});
  if (throughput) s.columns.push_back({"mode", "mode", false});
  s.columns.push_back({"metric", "metric", false});
  s.columns.push_back({"a", "A", true});
  s.columns.push_back({"b", "B", true});
  s.columns.push_back({"ratio", "B/A", true});
  if (full) {
    s.columns.push_back({"ci_low", "ci_low", true});
    s.columns.push_back({"ci_high", "ci_high", true});
    s.columns.push_back({"ci_level", "ci_level", true});
  } else {
    s.columns.push_back({"interval", "interval of B/A", true});
  }
  s.columns.push_back({"p", "p", true});
  if (full) {
    s.columns.push_back({"n_a", "n_a", true});
    s.columns.push_back({"n_b", "n_b", true});
  } else {
    s.columns.push_back({"n", throughput ? "reps A/B" : "seeds A/B", true});
  }
  s.columns.push_back({"verdict", "verdict", false});
  if (full) {
    s.columns.push_back({"regression", "regression", false});
    s.columns.push_back({"a_label", "a_label", false});
    s.columns.push_back({"b_label", "b_label", false});
  }
  for (const CompareRow* r : rows) {
    std::vector<SheetCell> cells;
    const auto text_cell = [](const std::string& t) { return SheetCell{Value::string(t), t}; };
    cells.push_back(text_cell(r->key.empty() ? "-" : r->key));
    if (throughput) cells.push_back(text_cell(r->mode));
    cells.push_back(full ? text_cell(r->metric) : text_cell(r->header));
    cells.push_back({r->a_value, display_text(r->a_value)});
    cells.push_back({r->b_value, display_text(r->b_value)});
    cells.push_back({opt_number(r->result.ratio), ratio_text(r->result.ratio)});
    if (full) {
      cells.push_back({opt_number(r->result.lo), ""});
      cells.push_back({opt_number(r->result.hi), ""});
      cells.push_back({r->result.lo ? Value::number(r->result.level) : Value(), ""});
    } else {
      const std::string iv = interval_text(r->result);
      cells.push_back({Value::string(iv), iv});
    }
    cells.push_back({opt_number(r->result.p), p_text(r->result.p)});
    if (full) {
      cells.push_back({Value::integer(static_cast<int64_t>(r->n_a)), ""});
      cells.push_back({Value::integer(static_cast<int64_t>(r->n_b)), ""});
    } else {
      const std::string n = fmt::format("{}/{}", r->n_a, r->n_b);
      cells.push_back({Value::string(n), n});
    }
    const std::string verdict(verdict_name(r->result.verdict, r->timing));
    cells.push_back(text_cell(r->regression ? verdict + " !" : verdict));
    if (full) {
      cells.back() = text_cell(verdict);
      cells.push_back({Value::boolean(r->regression), r->regression ? "true" : "false"});
      cells.push_back(text_cell(r->a_label));
      cells.push_back(text_cell(r->b_label));
    }
    s.rows.push_back(std::move(cells));
  }
  return s;
}

std::string summary(const CompareReport& r) {
  std::map<std::string, int> counts;
  for (const auto& row : r.rows) counts[std::string(verdict_name(row.result.verdict, row.timing))] += 1;
  std::string s;
  for (const char* v :
       {"faster", "slower", "better", "worse", "higher", "lower", "same", "unclear", "single run", "noisy"})
    if (counts.count(v) != 0) s += fmt::format("{}{} {}", s.empty() ? "" : ", ", counts[v], v);
  return fmt::format("verdicts: {}; regressions (slower or worse, marked !): {}\n", s, r.regressions);
}

}  // namespace

std::string render_compare(const CompareReport& r, Format f) {
  // A table per runner (timed modes for a runner with a timings table), then one for the rows of
  // runners this build does not have.
  struct Part {
    std::string title;
    std::vector<const CompareRow*> rows;
    bool throughput;
  };
  std::vector<Part> parts;
  for (const Runner* runner : runners()) parts.push_back({std::string(runner->name()), {}, runner->table().timings});
  parts.push_back({"other", {}, false});
  for (const auto& row : r.rows) {
    auto it = std::find_if(parts.begin(), parts.end(), [&](const Part& p) { return p.title == row.runner; });
    (it == parts.end() ? parts.back() : *it).rows.push_back(&row);
  }

  std::string out;
  switch (f) {
    case Format::kTable:
    case Format::kMarkdown: {
      const bool md = f == Format::kMarkdown;
      const char* br = md ? "  " : "";  // a Markdown line break
      out += fmt::format("A (baseline): {1}{0}\nB: {2}{0}\nrule: {3}\n", br, r.a_title, r.b_title, r.rule);
      for (const Part& p : parts) {
        if (p.rows.empty()) continue;
        const Sheet s = rows_sheet(p.rows, p.throughput, false);
        out += md ? fmt::format("\n### {}\n\n", p.title) + sheet_markdown(s)
                  : fmt::format("\n{}\n", p.title) + sheet_text(s);
      }
      if (!r.only_a.empty() || !r.only_b.empty()) out += "\n";
      for (const auto& l : r.only_a) out += fmt::format("{}only in A: {}\n", md ? "- " : "", l);
      for (const auto& l : r.only_b) out += fmt::format("{}only in B: {}\n", md ? "- " : "", l);
      out += "\n" + summary(r);
      return out;
    }
    case Format::kCsv: {
      for (const Part& p : parts)
        if (!p.rows.empty()) out += (out.empty() ? "" : "\r\n") + sheet_csv(rows_sheet(p.rows, p.throughput, true));
      return out;
    }
    case Format::kJson: {
      nlohmann::ordered_json j;
      j["a"] = r.a_title;
      j["b"] = r.b_title;
      j["rule"] = r.rule;
      for (const Part& p : parts)
        if (p.title != "other" || !p.rows.empty()) j[p.title] = sheet_json(rows_sheet(p.rows, p.throughput, true));
      j["only_in_a"] = r.only_a;
      j["only_in_b"] = r.only_b;
      j["regressions"] = r.regressions;
      return dump_json(j);
    }
  }
  return out;
}

}  // namespace bench::report
