// compare(): pair the cases of A and B, turn each metric into per-repetition (or per-seed) samples
// and judge B against A with the exact Mann-Whitney test and its interval (significance.h).
#include "report/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <set>

#include "bench/error.h"
#include "report/case_words.h"
#include "report/sheet.h"
#include "runners/registry.h"
#include "store/run_data.h"

namespace bench::report {

using store::RunData;

namespace {

Direction direction_of(Better b) {
  return b == Better::kLower ? Direction::kLowerIsBetter
                             : (b == Better::kHigher ? Direction::kHigherIsBetter : Direction::kNeutral);
}

/// The per-mode metric `name` some runner declares for compare (runners/runner.h: ModeMetric).
const ModeMetric* find_mode_metric(std::string_view name) {
  for (const Runner* r : runners())
    for (const ModeMetric& m : r->mode_metrics())
      if (m.name == name && m.per_repetition != nullptr) return &m;
  return nullptr;
}

/// The per-case metric `name` as `runner` declares it (runners/runner.h: MetricSpec); nullptr when
/// it does not: it compares as neither better nor worse.
const MetricSpec* find_metric_spec(const std::string& runner, std::string_view name) {
  const Runner* r = find_runner(runner);
  if (r == nullptr) return nullptr;
  return r->declaration(name);
}

bool is_seed_token(const std::string& t) { return t.rfind("seed=", 0) == 0; }

std::string join(const std::vector<std::string>& words) {
  std::string s;
  for (const auto& w : words) s += (s.empty() ? "" : " ") + w;
  return s;
}

/// Cases sharing a runner and a key: replicates (seeds) of one configuration.
struct Group {
  std::string runner, key;
  std::vector<const CaseRow*> cases;
};
using Groups = std::map<std::pair<std::string, std::string>, Group>;

/// Run mode: every case, keyed by its label without seed words.
Groups group_all(const RunData& run) {
  Groups g;
  for (const CaseRow& c : run.cases) {
    std::vector<std::string> words;
    for (auto& t : label_tokens(c))
      if (!is_seed_token(t)) words.push_back(t);
    std::string key = words.empty() ? "base" : join(words);
    auto& grp = g[{c.runner, key}];
    grp.runner = c.runner;
    grp.key = key;
    grp.cases.push_back(&c);
  }
  return g;
}

/// Case mode: the cases a selector picks, keyed by the rest of their labels.
Groups group_selected(const RunData& run, const std::string& selector, const std::string& side) {
  Groups g;
  std::vector<std::string> words;
  for (size_t pos = 0; pos < selector.size();) {
    const size_t space = selector.find(' ', pos);
    const std::string w = selector.substr(pos, space == std::string::npos ? std::string::npos : space - pos);
    if (!w.empty()) words.push_back(w);
    if (space == std::string::npos) break;
    pos = space + 1;
  }
  if (words.empty()) throw Error(fmt::format("{}: empty case selector", side));
  if (words.size() == 1 && words[0].size() > 1 && words[0][0] == '#') {
    int64_t ordinal = -1;
    try {
      size_t used = 0;
      ordinal = std::stoll(words[0].substr(1), &used);
      if (used != words[0].size() - 1) ordinal = -1;
    } catch (const std::exception&) {
      ordinal = -1;
    }
    if (ordinal < 0) throw Error(fmt::format("{}: \"{}\" is not a case ordinal (#0, #1 ...)", side, words[0]));
    for (const CaseRow& c : run.cases)
      if (c.ordinal == ordinal) {
        auto& grp = g[{c.runner, ""}];
        grp.runner = c.runner;
        grp.cases.push_back(&c);
      }
    if (g.empty()) throw Error(fmt::format("{}: run {} has no case #{}", side, run.id, ordinal));
    return g;
  }
  for (const CaseRow& c : run.cases) {
    const auto tokens = label_tokens(c);
    const bool all = std::all_of(words.begin(), words.end(), [&](const std::string& w) {
      return std::find(tokens.begin(), tokens.end(), w) != tokens.end();
    });
    if (!all) continue;
    std::vector<std::string> rest;
    for (const auto& t : tokens)
      if (!is_seed_token(t) && std::find(words.begin(), words.end(), t) == words.end()) rest.push_back(t);
    const std::string key = join(rest);
    auto& grp = g[{c.runner, key}];
    grp.runner = c.runner;
    grp.key = key;
    grp.cases.push_back(&c);
  }
  if (g.empty()) {
    const std::string example = run.cases.empty() ? std::string("(no cases)") : run.cases.front().label;
    throw Error(fmt::format("{}: \"{}\" matches no case of run {} (labels look like \"{}\"; or use #N)", side, selector,
                            run.id, example));
  }
  return g;
}

/// Per-repetition values of a per-mode metric over a group's cases, for one mode.
std::vector<double> throughput_samples(const Group& g, const std::string& mode, const ModeMetric& metric) {
  std::vector<double> v;
  for (const CaseRow* c : g.cases)
    for (const Timing& m : c->result.timings)
      if (m.mode == mode)
        for (double x : metric.per_repetition(m)) v.push_back(x);
  return v;
}

/// Whether any of the group's cases stopped timing `mode` above its noise target.
bool noisy(const Group& g, const std::string& mode) {
  return std::any_of(g.cases.begin(), g.cases.end(), [&](const CaseRow* c) {
    return std::any_of(c->result.timings.begin(), c->result.timings.end(),
                       [&](const Timing& m) { return m.mode == mode && m.noisy; });
  });
}

std::vector<std::string> modes_of(const Group& g) {
  std::vector<std::string> modes;
  for (const CaseRow* c : g.cases)
    for (const Timing& m : c->result.timings)
      if (std::find(modes.begin(), modes.end(), m.mode) == modes.end()) modes.push_back(m.mode);
  return modes;
}

/// 0 completed, 1 diverged, 2 failed; interrupted (and anything else) -1: not comparable.
int severity(const std::string& status) {
  if (status == "completed") return 0;
  if (status == "diverged") return 1;
  if (status == "failed") return 2;
  return -1;
}

std::string worst_status(const Group& g) {
  std::string worst = "completed";
  for (const CaseRow* c : g.cases) {
    if (severity(c->result.status) < 0) return c->result.status;
    if (severity(c->result.status) > severity(worst)) worst = c->result.status;
  }
  return worst;
}

std::string labels_of(const Group& g) {
  std::set<std::string> seen;
  std::string s;
  for (const CaseRow* c : g.cases)
    if (seen.insert(c->label).second) s += (s.empty() ? "" : "; ") + c->label;
  return s;
}

std::string run_title(const RunData& r) {
  return fmt::format("run {} ({}, {}, git {})", r.id, r.experiment_name, r.started_at, r.git_sha.substr(0, 12));
}

/// The per-mode metrics and the per-case metrics to compare: the runners' defaults, or the ones
/// asked for, each of which some runner declares or some case of A or B has.
std::pair<std::vector<std::string>, std::vector<std::string>> chosen_metrics(const CompareOptions& o, const RunData& a,
                                                                             const RunData& b) {
  std::vector<std::string> tp_metrics, st_metrics;
  if (o.metrics.empty())
    for (const Runner* runner : runners()) {
      for (const ModeMetric& m : runner->mode_metrics())
        if (m.compared) tp_metrics.push_back(m.name);
      for (const MetricSpec& m : runner->metrics())
        if (m.compared) st_metrics.push_back(m.name);
    }
  for (const std::string& m : o.metrics) {
    if (find_mode_metric(m) != nullptr) {
      tp_metrics.push_back(m);
      continue;
    }
    const auto stored = [&](const RunData& r) {
      return std::any_of(r.cases.begin(), r.cases.end(),
                         [&](const CaseRow& c) { return c.result.find_metric(m) != nullptr; });
    };
    const bool declared = std::any_of(runners().begin(), runners().end(),
                                      [&](const Runner* r) { return find_metric_spec(std::string(r->name()), m); });
    if (!declared && !stored(a) && !stored(b)) {
      std::string modes;
      for (const Runner* r : runners())
        for (const ModeMetric& x : r->mode_metrics())
          if (x.per_repetition != nullptr) modes += (modes.empty() ? "" : ", ") + x.name;
      throw Error(fmt::format(
          "unknown metric \"{}\": throughput metrics are {}; stability metrics are the names in the metrics table "
          "(final_loss, best_loss, spike_count ...)",
          m, modes));
    }
    st_metrics.push_back(m);
  }
  return {tp_metrics, st_metrics};
}

/// The rows of each per-mode metric (ModeMetric) of the modes both groups timed, after `base`.
void mode_rows(const Group& group_a, const Group& group_b, const std::vector<std::string>& tp_metrics,
               const CompareOptions& o, const CompareRow& base, std::vector<CompareRow>& out) {
  for (const std::string& mode : modes_of(group_a)) {
    const auto modes_b = modes_of(group_b);
    if (std::find(modes_b.begin(), modes_b.end(), mode) == modes_b.end()) continue;
    for (const std::string& m : tp_metrics) {
      const ModeMetric& def = *find_mode_metric(m);
      const Direction direction = direction_of(def.better);
      const auto va = throughput_samples(group_a, mode, def);
      const auto vb = throughput_samples(group_b, mode, def);
      if (va.empty() || vb.empty()) continue;
      CompareRow row = base;
      row.mode = mode;
      row.metric = m;
      row.header = std::string(def.header);
      row.timing = def.timing;
      row.n_a = va.size();
      row.n_b = vb.size();
      if (def.single) {
        // Memory is computed from the allocations, not sampled: the minimum effect alone decides.
        row.result = compare_samples(va, vb, direction, o.alpha, o.min_effect);
        const double ratio = row.result.ratio.value_or(1.0);
        const bool up = ratio >= 1 + o.min_effect, down = ratio <= 1 / (1 + o.min_effect);
        row.result.p.reset();
        row.result.verdict = up ? Verdict::kWorse : (down ? Verdict::kBetter : Verdict::kSame);
      } else {
        row.result = compare_samples(va, vb, direction, o.alpha, o.min_effect);
        // A side timed above its noise target cannot back a verdict, whatever its test says.
        if (noisy(group_a, mode) || noisy(group_b, mode)) row.result.verdict = Verdict::kNoisy;
      }
      row.a_value = Value::number(row.result.median_a);
      row.b_value = Value::number(row.result.median_b);
      row.regression = row.result.verdict == Verdict::kWorse;
      out.push_back(std::move(row));
    }
  }
}

/// The rows of each per-case metric either group has, judged as the group's runner declares it.
void metric_rows(const Group& group_a, const Group& group_b, const std::vector<std::string>& st_metrics,
                 const CompareOptions& o, const CompareRow& base, std::vector<CompareRow>& out) {
  for (const std::string& m : st_metrics) {
    const MetricSpec* def = find_metric_spec(group_a.runner, m);
    std::vector<double> va, vb;
    std::string unit;
    for (const CaseRow* c : group_a.cases)
      if (const auto v = c->metric(m)) va.push_back(*v), unit = c->result.find_metric(m)->unit;
    for (const CaseRow* c : group_b.cases)
      if (const auto v = c->metric(m)) vb.push_back(*v), unit = c->result.find_metric(m)->unit;
    if (va.empty() && vb.empty()) continue;
    CompareRow row = base;
    row.metric = m;
    row.header = def != nullptr && !def->header.empty() ? def->header : m;
    if (!unit.empty() && unit != "steps") row.header += " (" + unit + ")";
    row.timing = def != nullptr && def->timing;
    row.n_a = va.size();
    row.n_b = vb.size();
    if (!va.empty() && !vb.empty())
      row.result =
          compare_samples(va, vb, direction_of(def != nullptr ? def->better : Better::kNeither), o.alpha, o.min_effect);
    row.a_value = va.empty() ? Value() : Value::number(row.result.median_a);
    row.b_value = vb.empty() ? Value() : Value::number(row.result.median_b);
    if (va.empty() != vb.empty()) row.result.verdict = Verdict::kUnclear;
    row.regression = row.result.verdict == Verdict::kWorse;
    out.push_back(std::move(row));
  }
}

}  // namespace

CompareReport compare(const store::Store& db, const CompareOptions& o) {
  // The runs, and the groups of cases on each side.
  int64_t run_a = o.run, run_b = o.run;
  if (o.run == 0) {
    const auto parse_run = [&](const std::string& s, const char* side) {
      try {
        size_t used = 0;
        const int64_t id = std::stoll(s, &used);
        if (used == s.size() && id > 0) return id;
      } catch (const std::exception&) {
      }
      throw Error(fmt::format("{}: \"{}\" is not a run id; to compare cases of one run, give --run ID", side, s));
    };
    run_a = parse_run(o.a, "A");
    run_b = parse_run(o.b, "B");
  }
  const RunData a = load_run(db, run_a);
  const RunData b = run_b == run_a ? a : load_run(db, run_b);
  const Groups ga = o.run == 0 ? group_all(a) : group_selected(a, o.a, "A");
  const Groups gb = o.run == 0 ? group_all(b) : group_selected(b, o.b, "B");

  // The metrics: the defaults, or the ones asked for (each must exist somewhere).
  const auto [tp_metrics, st_metrics] = chosen_metrics(o, a, b);

  CompareReport r;
  if (o.run == 0) {
    r.a_title = run_title(a);
    r.b_title = run_title(b);
  } else {
    r.a_title = fmt::format("\"{}\" in {}", o.a, run_title(a));
    r.b_title = fmt::format("\"{}\" in run {}", o.b, b.id);
  }
  r.rule = fmt::format(
      "exact Mann-Whitney test on the repetitions (stability: on the seeds), alpha {:g}, minimum effect {:g} %: "
      "faster/slower (better/worse) when p < {:g} and B/A is beyond 1 ± {:g} %; same when the interval of B/A lies "
      "within [{:.4g}, {:.4g}]; otherwise unclear; one value per side: single run; a time or rate of a mode that "
      "either side timed above its noise target: noisy, never faster or slower",
      o.alpha, o.min_effect * 100, o.alpha, o.min_effect * 100, 1 / (1 + o.min_effect), 1 + o.min_effect);

  // In the order of the baseline's cases.
  std::vector<const Groups::value_type*> order;
  for (const auto& entry : ga) order.push_back(&entry);
  std::stable_sort(order.begin(), order.end(), [](const auto* x, const auto* y) {
    return x->second.cases.front()->ordinal < y->second.cases.front()->ordinal;
  });
  for (const auto* entry : order) {
    const auto& k = entry->first;
    const Group& group_a = entry->second;
    const auto it = gb.find(k);
    if (it == gb.end()) {
      r.only_a.push_back(labels_of(group_a));
      continue;
    }
    const Group& group_b = it->second;
    const auto base_row = [&] {
      CompareRow row;
      row.runner = group_a.runner;
      row.key = group_a.key;
      row.a_label = labels_of(group_a);
      row.b_label = labels_of(group_b);
      return row;
    };

    const std::string sa = worst_status(group_a), sb = worst_status(group_b);
    if (sa != sb) {
      CompareRow row = base_row();
      row.metric = "status";
      row.header = "status";
      row.a_value = Value::string(sa);
      row.b_value = Value::string(sb);
      row.n_a = group_a.cases.size();
      row.n_b = group_b.cases.size();
      if (severity(sa) < 0 || severity(sb) < 0) {
        row.result.verdict = Verdict::kUnclear;
      } else {
        row.result.verdict = severity(sb) > severity(sa) ? Verdict::kWorse : Verdict::kBetter;
      }
      row.regression = row.result.verdict == Verdict::kWorse;
      r.rows.push_back(std::move(row));
    }

    const CompareRow base = base_row();
    if (const Runner* runner = find_runner(group_a.runner); runner != nullptr && runner->table().timings)
      mode_rows(group_a, group_b, tp_metrics, o, base, r.rows);
    else
      metric_rows(group_a, group_b, st_metrics, o, base, r.rows);
  }
  for (const auto& [k, group_b] : gb)
    if (ga.find(k) == ga.end()) r.only_b.push_back(labels_of(group_b));
  if (r.rows.empty() && (!r.only_a.empty() || !r.only_b.empty()))
    throw Error(
        fmt::format("no case of A ({}) matches a case of B ({}): they must share the runner and the rest of "
                    "their labels",
                    r.only_a.empty() ? "-" : r.only_a.front(), r.only_b.empty() ? "-" : r.only_b.front()));
  r.regressions =
      static_cast<int>(std::count_if(r.rows.begin(), r.rows.end(), [](const CompareRow& x) { return x.regression; }));
  return r;
}

}  // namespace bench::report
