// test::due_declared_plots, test::undrawn: the report's figures that the runners' declarations
// (MetricSpec::plots) say a run's stored metrics call for, and which of them a report lacks.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "bench/value.h"
#include "runners/registry.h"
#include "store/store.h"

namespace bench::test {

/// The figure kinds due for a run: a runner's figure is due when some case of the run stores each
/// metric the runner declares with that figure (the learning-rate plot needs lr and final_loss).
inline std::set<std::string> due_declared_plots(const store::Store& db, int64_t run) {
  std::map<std::string, std::vector<std::string>> stored;  // runner -> metric names
  const auto rows =
      db.query("SELECT DISTINCT c.runner, m.name FROM metrics m JOIN cases c ON c.id = m.case_id WHERE c.run_id = ?",
               {Value::integer(run)});
  for (const auto& row : rows.rows) stored[row.at(0).as_string()].push_back(row.at(1).as_string());
  std::set<std::string> due;
  for (const auto& [name, metrics] : stored) {
    const Runner* runner = find_runner(name);
    if (runner == nullptr) continue;
    std::map<std::string, bool> complete;  // figure -> every metric declared with it is stored
    for (const MetricSpec& spec : runner->metrics()) {
      bool present = false;
      for (const std::string& m : metrics) present = present || spec.matches(m);
      for (const std::string& figure : spec.plots) {
        const auto [it, fresh] = complete.emplace(figure, present);
        if (!fresh) it->second = it->second && present;
      }
    }
    for (const auto& [figure, all] : complete)
      if (all) due.insert(figure);
  }
  return due;
}

/// The figures of `due` that `html` does not draw (no `data-kind="KIND"`).
inline std::vector<std::string> undrawn(const std::set<std::string>& due, const std::string& html) {
  std::vector<std::string> missing;
  for (const std::string& kind : due)
    if (html.find("data-kind=\"" + kind + "\"") == std::string::npos) missing.push_back(kind);
  return missing;
}

}  // namespace bench::test
