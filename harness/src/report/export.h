// defines: bench::report::render_export — `bench export`: a run as one long (tidy) table, one
// number per row, for pandas and spreadsheets (columns in docs/results.md)
#pragma once

#include <cstdint>
#include <string>

#include "report/report.h"
#include "store/store.h"

namespace bench::report {

/// The run's numbers as rows of: run_id, case_id, ordinal, runner, variant, label, case_status,
/// case_seed, one column per swept key of the run (named by its key path, e.g.
/// "model.norm.type"), then kind (case, throughput, sample, profile, step, series, metric), mode, step,
/// repetition, name, value, unit. CSV (Format::kCsv): that table, RFC 4180. JSON (Format::kJson):
/// {"run": {...}, "cases": [...], "measurements": [...]} where measurements are the same rows as
/// objects and cases carry each case's axes and resolved configuration. Other formats: CSV.
/// Throws bench::Error when there is no run `run_id`.
std::string render_export(const store::Store& db, int64_t run_id, Format f);

}  // namespace bench::report
