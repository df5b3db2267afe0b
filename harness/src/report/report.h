// defines: bench::report — rendering of query results and of the `bench results` view of a run
// as an aligned text table, CSV, JSON or Markdown
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "store/run_data.h"
#include "store/store.h"

namespace bench::report {

/// An output format of `bench query` and `bench results`.
enum class Format { kTable, kCsv, kJson, kMarkdown };

/// "table", "csv", "json" or "markdown"; nullopt for anything else.
std::optional<Format> parse_format(std::string_view name);

/// Renders a query result. Table: aligned columns under a header rule, numeric columns
/// right-aligned, floats with 4 significant digits (integers as they are), NULL as "-", cells cut
/// at 80 characters. CSV (RFC 4180): a header row, fields quoted when needed, CRLF line ends,
/// floats at full precision, NULL as an empty field. JSON: an array of objects (column -> value),
/// non-finite floats as null. Markdown: a pipe table formatted like the text table.
std::string render(const store::QueryResult& r, Format f);

/// The `bench results` view of one run (run_id 0: the latest run): a header line (run id,
/// experiment, status, start time, device, git sha), then a table per runner (throughput,
/// stability ...; results_view.h), each only when the run has such cases, with the errors of failed cases listed under
/// their table. CSV and Markdown give the same tables without the header line (CSV: one block
/// per table, separated by an empty line); CSV and JSON rows carry the case ordinal and error as
/// extra fields. JSON: {"run": {...}, "throughput": [...], "stability": [...]}.
/// Throws bench::Error when the database has no runs or no run `run_id`. The text table and
/// Markdown show the case ordinal as their first column, `#` (what `bench compare --run` takes as `#N`).
std::string render_results(const store::Store& db, int64_t run_id, Format f);

/// The same view of a run already in memory (load_run's, or `bench run`'s own results).
std::string render_results(const store::RunData& run, Format f);

/// The run a command reads: `run_id` when non-zero, else the latest run of experiment
/// `experiment` when it is not empty, else the latest run. Throws bench::Error naming the database
/// when there is no such run.
int64_t select_run(const store::Store& db, int64_t run_id, const std::string& experiment);

}  // namespace bench::report
