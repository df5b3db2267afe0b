// defines: bench::report::ResultsSection, results_sections, visible_part — the tables of the
// `bench results` view, shared with the HTML report. Private to report/.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "report/sheet.h"
#include "store/run_data.h"

namespace bench::report {

/// One table of the view. The sheet's first column is the case ordinal and its last the case
/// error: CSV and JSON keep both, the text table and Markdown drop the error and list the errors.
struct ResultsSection {
  std::string title;
  Sheet sheet;
  std::vector<std::string> errors;  ///< "case 3 failed: message", one per case
  std::vector<std::string> notes;   ///< lines shown under the table (or alone when it has no rows)
  std::string runner;               ///< the runner whose cases the table shows
  bool across_seeds = false;        ///< the seed replicates' table of `runner` (seeds_section)
};

/// The tables of the run: one per runner (runners/registry.h) in their order, titled by its name
/// and made as its ResultsTable says, each followed, for a runner with a `final_loss` column, by
/// "<runner> across seeds" (the final loss's spread over seed replicates and its verdict against
/// the best configuration; a note alone when every configuration has one seed), then "other" for
/// cases of runners this build does not have; each only when it has rows or notes.
std::vector<ResultsSection> results_sections(const store::RunData& run);

/// The sheet as people read it: without the error column.
Sheet visible_part(const Sheet& full);

}  // namespace bench::report
