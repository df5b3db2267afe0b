// The per-kernel profile of a run's throughput cases, read from table `profile`: the rows against
// the case's ceilings (roof_gbps, roof_gflops), and `bench results --profile`, which shows them.
#include "report/profile.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>

#include "bench/error.h"
#include "report/sheet.h"

namespace bench::report {

using store::RunData;

namespace {

int mode_rank(const std::string& mode) {
  if (mode == "forward") return 0;
  if (mode == "forward_backward") return 1;
  if (mode == "train_step") return 2;
  return 3;
}

bool mode_before(const std::string& a, const std::string& b) {
  return mode_rank(a) != mode_rank(b) ? mode_rank(a) < mode_rank(b) : a < b;
}

std::string text(const Value& v) { return v.is_string() ? v.as_string() : std::string(); }

/// A ceiling or a time: the metric when it is a positive number.
std::optional<double> positive_metric(const CaseRow& c, const std::string& name) {
  const auto v = c.metric(name);
  return v && *v > 0 ? v : std::nullopt;
}

/// A cell: the raw value and its text (`format` a fmt spec; empty: the generic 4 significant digits).
SheetCell cell(const Value& v, std::string_view format = "") {
  if (format.empty() || !v.is_number() || !std::isfinite(v.as_double())) return {v, display_text(v)};
  return {v, fmt::format(fmt::runtime(format), v.as_double())};
}

/// The device the ceilings were measured on: the name in device_json, else the run's device.
std::string device_name(const RunData& run) {
  const auto d = nlohmann::json::parse(run.device_json, nullptr, false);
  if (d.is_object() && d.contains("name") && d["name"].is_string()) return d["name"].get<std::string>();
  return run.device;
}

/// ms as a share of the step (in %): of the profiled step's time when stored, else of the rows' sum.
std::optional<double> step_percent(double ms, const CaseProfile& p) {
  const double step = p.step_ms.value_or(p.total_ms());
  return step > 0 ? std::optional<double>(ms / step * 100) : std::nullopt;
}

/// One case's tables: its kernels (the slowest `top`) and its time by slot.
struct CaseSheets {
  const CaseProfile* p = nullptr;
  Sheet kernels, slots;
  std::vector<std::string> notes;
};

// The kernel table's columns: key (CSV, JSON), header, right-aligned, format, and whether the
// text table shows it (scope, slot and type are in `component` there; bytes and FLOPs in the rates).
struct Column {
  const char* key;
  const char* header;
  bool right;
  const char* format;
  bool shown;
};
constexpr Column kKernelColumns[] = {
    {"rank", "#", true, "", true},
    {"component", "component", false, "", true},
    {"scope", "scope", false, "", false},
    {"slot", "slot", false, "", false},
    {"type", "type", false, "", false},
    {"pass", "pass", false, "", true},
    {"kernel", "kernel", false, "", true},
    {"calls", "calls", true, "", true},
    {"ms", "ms", true, "", true},
    {"step_percent", "% step", true, "{:.1f}", true},
    {"bytes", "bytes", true, "", false},
    {"flops", "FLOPs", true, "", false},
    {"gbps", "GB/s", true, "", true},
    {"gbps_percent", "% roof", true, "{:.1f}", true},
    {"gflops", "GFLOP/s", true, "", true},
    {"gflops_percent", "% roof", true, "{:.1f}", true},
    {"intensity", "FLOP/byte", true, "", true},
    {"bound", "bound", false, "", true},
};
constexpr Column kSlotColumns[] = {
    {"slot", "slot", false, "", true},
    {"rows", "rows", true, "", true},
    {"calls", "calls", true, "", true},
    {"ms", "ms", true, "", true},
    {"step_percent", "% step", true, "{:.1f}", true},
};

template <size_t N>
Sheet empty_sheet(const Column (&columns)[N]) {
  Sheet s;
  for (const Column& c : columns) s.columns.push_back({c.key, c.header, c.right});
  return s;
}

template <size_t N>
std::vector<SheetCell> cells(const Column (&columns)[N], const std::vector<Value>& values) {
  std::vector<SheetCell> row;
  for (size_t i = 0; i < N; ++i) row.push_back(cell(values[i], columns[i].format));
  return row;
}

/// The columns a person reads (the text table and Markdown).
template <size_t N>
Sheet shown_part(const Sheet& full, const Column (&columns)[N]) {
  Sheet s;
  std::vector<size_t> keep;
  for (size_t i = 0; i < N; ++i)
    if (columns[i].shown) keep.push_back(i), s.columns.push_back(full.columns[i]);
  for (const auto& row : full.rows) {
    std::vector<SheetCell> r;
    for (size_t i : keep) r.push_back(row[i]);
    s.rows.push_back(std::move(r));
  }
  return s;
}

CaseSheets case_sheets(const CaseProfile& p, int64_t top, const std::string& device) {
  CaseSheets out;
  out.p = &p;
  out.kernels = empty_sheet(kKernelColumns);
  const size_t shown = top > 0 ? std::min(p.rows.size(), static_cast<size_t>(top)) : p.rows.size();
  double shown_ms = 0;
  for (size_t i = 0; i < shown; ++i) {
    const ProfileRow& r = p.rows[i];
    const KernelFigures k = kernel_figures(r, p);
    shown_ms += r.ms;
    out.kernels.rows.push_back(cells(
        kKernelColumns, {Value::integer(static_cast<int64_t>(i + 1)), Value::string(component_name(r)),
                         Value::string(r.scope), Value::string(r.slot), Value::string(r.component),
                         Value::string(r.pass), Value::string(r.kernel), Value::integer(r.calls), Value::number(r.ms),
                         number_or_null(step_percent(r.ms, p)), std::isnan(r.bytes) ? Value() : Value::number(r.bytes),
                         std::isnan(r.flops) ? Value() : Value::number(r.flops), number_or_null(k.gbps),
                         number_or_null(k.gbps_percent), number_or_null(k.gflops), number_or_null(k.gflops_percent),
                         number_or_null(k.intensity), k.bound == "-" ? Value() : Value::string(k.bound)}));
  }
  // Time by slot, the slowest first, over every row (not only those shown).
  struct Slot {
    int64_t rows = 0, calls = 0;
    double ms = 0;
  };
  std::vector<std::pair<std::string, Slot>> slots;
  for (const ProfileRow& r : p.rows) {
    auto it = std::find_if(slots.begin(), slots.end(), [&](const auto& s) { return s.first == r.slot; });
    if (it == slots.end()) it = slots.emplace(slots.end(), r.slot, Slot{});
    it->second.rows += 1;
    it->second.calls += r.calls;
    it->second.ms += r.ms;
  }
  std::stable_sort(slots.begin(), slots.end(), [](const auto& a, const auto& b) { return a.second.ms > b.second.ms; });
  out.slots = empty_sheet(kSlotColumns);
  for (const auto& [name, s] : slots)
    out.slots.rows.push_back(cells(kSlotColumns, {Value::string(name), Value::integer(s.rows), Value::integer(s.calls),
                                                  Value::number(s.ms), number_or_null(step_percent(s.ms, p))}));

  const double total = p.total_ms();
  std::string sum = fmt::format("sum of the {} rows {:.4g} ms", p.rows.size(), total);
  if (p.step_ms)
    sum += fmt::format(" = {:.1f} % of the profiled step's {:.4g} ms", total / *p.step_ms * 100, *p.step_ms);
  else
    sum += " (the profiled step's time was not stored)";
  if (shown < p.rows.size())
    sum += fmt::format("; the {} shown {:.4g} ms ({:.1f} %)", shown, shown_ms, step_percent(shown_ms, p).value_or(0));
  out.notes.push_back(sum);
  const auto ridge = p.ridge();
  out.notes.push_back(fmt::format("ceilings on {}: copy {} GB/s, GEMM {} GFLOP/s, ridge {} FLOP/byte", device,
                                  p.roof_gbps ? fmt::format("{:.4g}", *p.roof_gbps) : "unknown",
                                  p.roof_gflops ? fmt::format("{:.4g}", *p.roof_gflops) : "unknown",
                                  ridge ? fmt::format("{:.4g}", *ridge) : "unknown"));
  if (p.noisy)
    out.notes.push_back(
        fmt::format("case {} {}: its timing was noisy (see the timings); the profile's steps ran right after it, on "
                    "the same machine",
                    p.c->ordinal, p.mode));
  return out;
}

}  // namespace

std::optional<double> CaseProfile::ridge() const {
  if (!roof_gbps || !roof_gflops) return std::nullopt;
  return *roof_gflops / *roof_gbps;
}

double CaseProfile::total_ms() const {
  double t = 0;
  for (const ProfileRow& r : rows) t += r.ms;
  return t;
}

std::vector<CaseProfile> load_profiles(const RunData& run, const std::string& mode) {
  std::vector<CaseProfile> out;
  for (const CaseRow& c : run.cases) {
    // c.result.profile is in store::sort_profile's order: by mode, then the slowest first.
    std::vector<CaseProfile> mine;
    for (const ProfileRow& r : c.result.profile) {
      if (!mode.empty() && r.mode != mode) continue;
      auto it = std::find_if(mine.begin(), mine.end(), [&](const CaseProfile& p) { return p.mode == r.mode; });
      if (it == mine.end()) {
        CaseProfile p;
        p.c = &c;
        p.mode = r.mode;
        p.step_ms = positive_metric(c, "profile_step_ms/" + r.mode);
        p.roof_gbps = positive_metric(c, "roof_gbps");
        p.roof_gflops = positive_metric(c, "roof_gflops");
        for (const Timing& m : c.result.timings)
          if (m.mode == r.mode) p.noisy = m.noisy;
        it = mine.insert(mine.end(), std::move(p));
      }
      it->rows.push_back(r);
    }
    std::stable_sort(mine.begin(), mine.end(),
                     [](const CaseProfile& a, const CaseProfile& b) { return mode_before(a.mode, b.mode); });
    for (CaseProfile& p : mine) out.push_back(std::move(p));
  }
  return out;
}

std::vector<std::string> profiled_modes(const store::Store& db, int64_t run_id) {
  const auto q = db.query("SELECT DISTINCT p.mode FROM profile p JOIN cases c ON c.id = p.case_id WHERE c.run_id = ?1",
                          {Value::integer(run_id)});
  std::vector<std::string> modes;
  for (const auto& row : q.rows) modes.push_back(text(row[0]));
  std::sort(modes.begin(), modes.end(), mode_before);
  return modes;
}

KernelFigures kernel_figures(const ProfileRow& r, const CaseProfile& p) {
  KernelFigures k;
  const double seconds = r.ms * 1e-3;
  if (seconds > 0 && std::isfinite(r.bytes)) k.gbps = r.bytes / seconds / 1e9;
  if (seconds > 0 && std::isfinite(r.flops)) k.gflops = r.flops / seconds / 1e9;
  if (k.gbps && p.roof_gbps) k.gbps_percent = *k.gbps / *p.roof_gbps * 100;
  if (k.gflops && p.roof_gflops) k.gflops_percent = *k.gflops / *p.roof_gflops * 100;
  // 0/0 (a kernel that declares nothing it does) has no intensity; x/0 is a pure compute kernel.
  if (std::isfinite(r.bytes) && std::isfinite(r.flops) && (r.bytes > 0 || r.flops > 0))
    k.intensity = r.bytes > 0 ? r.flops / r.bytes : std::numeric_limits<double>::infinity();
  if (k.intensity && p.ridge()) k.bound = *k.intensity < *p.ridge() ? "memory" : "compute";
  return k;
}

std::string component_name(const ProfileRow& r) {
  const std::string& where = r.scope.empty() ? r.slot : r.scope;
  if (r.component.empty()) return where;
  return where.empty() ? r.component : where + " " + r.component;
}

std::string render_profile(const store::Store& db, int64_t run_id, const ProfileOptions& o, Format f) {
  const RunData run = store::load_run(db, run_id);
  const std::vector<CaseProfile> profiles = load_profiles(run, o.mode);
  const std::vector<std::string> modes = profiled_modes(db, run_id);
  if (profiles.empty() && !modes.empty()) {
    std::string list;
    for (const auto& m : modes) list += (list.empty() ? "" : ", ") + m;
    throw Error(
        fmt::format("run {} in {} has no profile of mode \"{}\" (it has: {})", run_id, db.path(), o.mode, list));
  }
  const std::string device = device_name(run);
  std::vector<CaseSheets> sheets;
  for (const CaseProfile& p : profiles) sheets.push_back(case_sheets(p, o.top, device));
  const auto title = [](const CaseSheets& s) {
    const size_t shown = s.kernels.rows.size(), all = s.p->rows.size();
    return fmt::format(
        "case #{} {} · {}: {}", s.p->c->ordinal, s.p->c->label, s.p->mode,
        shown < all ? fmt::format("the {} slowest of {} kernels", shown, all) : fmt::format("{} kernels", all));
  };
  const std::string none(
      "no profile in this run: its throughput cases ran with profile = false, or it has none "
      "(docs/results.md, \"The profile\")\n");
  std::string out;
  switch (f) {
    case Format::kTable:
    case Format::kMarkdown: {
      const bool md = f == Format::kMarkdown;
      if (!md)
        out = fmt::format("run {}: {} ({}), profile of {} on {}\n", run.id, run.experiment_name, run.status, o.mode,
                          device);
      if (sheets.empty()) return out + none;
      for (const CaseSheets& s : sheets) {
        out += md ? fmt::format("{}### {}\n\n", out.empty() ? "" : "\n", title(s)) : "\n" + title(s) + "\n";
        const Sheet kernels = shown_part(s.kernels, kKernelColumns);
        out += md ? sheet_markdown(kernels) : sheet_text(kernels);
        out += md ? "\ntime by slot\n\n" + sheet_markdown(s.slots) + "\n" : "time by slot\n" + sheet_text(s.slots);
        for (const auto& n : s.notes) out += n + (md ? "  \n" : "\n");
      }
      return out;
    }
    case Format::kCsv: {
      // Two blocks, the kernels and the time by slot, each row led by its case and mode.
      for (Sheet CaseSheets::*part : {&CaseSheets::kernels, &CaseSheets::slots}) {
        if (sheets.empty()) break;
        Sheet all;
        all.columns = {{"ordinal", "#", true}, {"case", "case", false}, {"mode", "mode", false}};
        const Sheet& first = sheets.front().*part;
        all.columns.insert(all.columns.end(), first.columns.begin(), first.columns.end());
        for (const CaseSheets& s : sheets)
          for (const auto& row : (s.*part).rows) {
            std::vector<SheetCell> r = {cell(Value::integer(s.p->c->ordinal)), cell(Value::string(s.p->c->label)),
                                        cell(Value::string(s.p->mode))};
            r.insert(r.end(), row.begin(), row.end());
            all.rows.push_back(std::move(r));
          }
        out += (out.empty() ? "" : "\r\n") + sheet_csv(all);
      }
      return out;
    }
    case Format::kJson: {
      nlohmann::ordered_json j;
      j["run"] = {{"id", run.id}, {"experiment_name", run.experiment_name}, {"status", run.status}, {"device", device}};
      j["mode"] = o.mode;
      j["cases"] = nlohmann::ordered_json::array();
      for (const CaseSheets& s : sheets) {
        const CaseProfile& p = *s.p;
        nlohmann::ordered_json c;
        c["ordinal"] = p.c->ordinal;
        c["case"] = p.c->label;
        c["mode"] = p.mode;
        c["step_ms"] = json_of(number_or_null(p.step_ms));
        c["rows_ms"] = p.total_ms();
        c["rows"] = p.rows.size();
        c["roof_gbps"] = json_of(number_or_null(p.roof_gbps));
        c["roof_gflops"] = json_of(number_or_null(p.roof_gflops));
        c["ridge"] = json_of(number_or_null(p.ridge()));
        c["noisy"] = p.noisy;
        c["kernels"] = sheet_json(s.kernels);
        c["slots"] = sheet_json(s.slots);
        j["cases"].push_back(std::move(c));
      }
      return dump_json(j);
    }
  }
  return out;
}

}  // namespace bench::report
