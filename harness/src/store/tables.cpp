// The stored tables of a case, column by column: the one place that says which member of the
// record (store/record.h) each column of the schema (docs/results.md) holds, and in which unit.
#include "store/tables.h"

#include "store/run_data.h"

namespace bench::store {

namespace {

using detail::column;

/// A column of a member of the row.
template <class Row, class T>
Column<Row> of(std::string_view name, T Row::*member, Role role = Role::kKey, std::string_view unit = "",
               Kept kept = Kept::kAsIs) {
  return column<Row>(
      name, role, unit, kept, [member](auto& r) -> auto& { return r.*member; });
}

/// A value column (a measured number) of a member of the row.
template <class Row, class T>
Column<Row> value(std::string_view name, T Row::*member, std::string_view unit, Kept kept = Kept::kAsIs) {
  return of(name, member, Role::kValue, unit, kept);
}

/// A column of a CaseRow that holds a member of its result.
template <class T>
Column<CaseRow> result(std::string_view name, T CaseResult::*member, Role role = Role::kKey, std::string_view unit = "",
                       Kept kept = Kept::kAsIs) {
  return column<CaseRow>(
      name, role, unit, kept, [member](auto& r) -> auto& { return r.result.*member; });
}

}  // namespace

const Table<CaseRow>& case_table() {
  // The order of `bench export`'s case values and of the result's JSON keys.
  static const Table<CaseRow> t{
      "cases",
      "",
      nullptr,
      {of("ordinal", &CaseRow::ordinal, Role::kIdentity), of("runner", &CaseRow::runner, Role::kIdentity),
       of("label", &CaseRow::label, Role::kIdentity), of("variant", &CaseRow::variant, Role::kIdentity),
       of("axes_json", &CaseRow::axes_json, Role::kIdentity), of("config_json", &CaseRow::config_json, Role::kIdentity),
       of("seed", &CaseRow::seed, Role::kIdentity), result("status", &CaseResult::status),
       result("error", &CaseResult::error, Role::kKey, "", Kept::kNonEmpty),
       result("placement", &CaseResult::placement, Role::kKey, "", Kept::kNonEmpty),
       result("notes", &CaseResult::notes, Role::kKey, "", Kept::kNonEmpty),
       result("started_at", &CaseResult::started_at, Role::kKey, "", Kept::kNowWhenEmpty),
       result("finished_at", &CaseResult::finished_at, Role::kKey, "", Kept::kNowWhenEmpty),
       result("n_params", &CaseResult::n_params, Role::kValue, "params"),
       result("n_params_embedding", &CaseResult::n_params_embedding, Role::kValue, "params"),
       result("flops_per_token", &CaseResult::flops_per_token, Role::kValue, "FLOP/token", Kept::kNotNaN),
       result("wall_s", &CaseResult::wall_s, Role::kValue, "s", Kept::kNumber)}};
  return t;
}

const Table<Timing>& throughput_table() {
  static const Table<Timing> t{"throughput",
                               "timings",
                               &CaseResult::timings,
                               {of("mode", &Timing::mode),
                                value("repetitions", &Timing::repetitions, ""),
                                value("iterations", &Timing::iterations, ""),
                                value("median_ms", &Timing::median_ms, "ms", Kept::kNumber),
                                value("mean_ms", &Timing::mean_ms, "ms", Kept::kNumber),
                                value("min_ms", &Timing::min_ms, "ms", Kept::kNumber),
                                value("max_ms", &Timing::max_ms, "ms", Kept::kNumber),
                                value("stddev_ms", &Timing::stddev_ms, "ms", Kept::kNumber),
                                value("mad_ms", &Timing::mad_ms, "ms", Kept::kNumber),
                                value("tokens_per_s", &Timing::tokens_per_s, "tokens/s", Kept::kNumber),
                                value("flops_per_iter", &Timing::flops_per_iter, "FLOP", Kept::kNumber),
                                value("gflops_per_s", &Timing::gflops_per_s, "GFLOP/s", Kept::kNumber),
                                value("mfu", &Timing::mfu, "", Kept::kNotNaN),
                                value("peak_bytes", &Timing::peak_bytes, "bytes"),
                                value("noise", &Timing::noise, "", Kept::kFinite),
                                value("max_noise", &Timing::max_noise, "", Kept::kFinite),
                                value("noisy", &Timing::noisy, ""),
                                value("load_avg", &Timing::load_avg, "", Kept::kFinite),
                                value("steal", &Timing::steal, "", Kept::kFinite),
                                value("other_busy", &Timing::other_busy, "", Kept::kFinite),
                                value("cores", &Timing::cores, "", Kept::kPositive)}};
  return t;
}

const Table<ProfileRow>& profile_table() {
  static const Table<ProfileRow> t{
      "profile",
      "profile",
      &CaseResult::profile,
      {of("mode", &ProfileRow::mode), of("scope", &ProfileRow::scope), of("slot", &ProfileRow::slot),
       of("component", &ProfileRow::component), of("pass", &ProfileRow::pass), of("kernel", &ProfileRow::kernel),
       value("calls", &ProfileRow::calls, ""), value("ms", &ProfileRow::ms, "ms", Kept::kNumber),
       value("bytes", &ProfileRow::bytes, "bytes", Kept::kFinite),
       value("flops", &ProfileRow::flops, "FLOP", Kept::kFinite)}};
  return t;
}

const Table<StepRecord>& step_table() {
  static const Table<StepRecord> t{
      "steps",
      "steps",
      &CaseResult::steps,
      {of("step", &StepRecord::step), value("lr", &StepRecord::lr, "", Kept::kFinite),
       value("loss", &StepRecord::loss, "nats", Kept::kFinite),
       value("grad_norm", &StepRecord::grad_norm, "", Kept::kFinite),
       value("max_attn_logit", &StepRecord::max_attn_logit, "", Kept::kFinite),
       value("z_mean", &StepRecord::z_mean, "nats", Kept::kFinite),
       value("z_loss", &StepRecord::z_loss, "nats", Kept::kFinite), value("ms", &StepRecord::ms, "ms", Kept::kFinite)}};
  return t;
}

const Table<SeriesPoint>& series_table() {
  static const Table<SeriesPoint> t{
      "series",
      "series",
      &CaseResult::series,
      {of("name", &SeriesPoint::name), of("layer", &SeriesPoint::layer, Role::kKey, "", Kept::kNonNegative),
       of("step", &SeriesPoint::step), value("value", &SeriesPoint::value, "", Kept::kFinite)}};
  return t;
}

const Table<Metric>& metric_table() {
  static const Table<Metric> t{
      "metrics",
      "metrics",
      &CaseResult::metrics,
      {of("name", &Metric::name), value("value", &Metric::value, "", Kept::kNotNaN), of("unit", &Metric::unit)}};
  return t;
}

const Table<Artifact>& artifact_table() {
  static const Table<Artifact> t{"artifacts",
                                 "artifacts",
                                 &CaseResult::artifacts,
                                 {of("kind", &Artifact::kind), of("path", &Artifact::path),
                                  value("bytes", &Artifact::bytes, "bytes"), of("sha256", &Artifact::sha256)}};
  return t;
}

size_t samples_position() {
  const auto& columns = throughput_table().columns;
  for (size_t i = 0; i < columns.size(); ++i)
    if (columns[i].name == "peak_bytes") return i + 1;
  return columns.size();
}

CaseResult as_stored(CaseResult r) {
  CaseRow row;
  row.result = std::move(r);
  for (const Column<CaseRow>& c : case_table().columns)
    if (c.role != Role::kIdentity && c.kept != Kept::kNowWhenEmpty) c.set(row, stored_value(c, row));
  for_each_row_table([&](const auto& table) {
    for (auto& x : row.result.*table.rows) as_stored(table, x);
  });
  sort_modes(row.result.timings);
  sort_profile(row.result.profile);
  return std::move(row.result);
}

}  // namespace bench::store
