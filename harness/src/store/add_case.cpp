// Store::add_case, Store::add_metrics — a case and everything it measured, written in one
// transaction; numbers that SQLite cannot hold (NaN) are refused or stored as NULL, as store.h says.
#include <fmt/format.h>
#include <sqlite3.h>

#include <cmath>
#include <set>
#include <tuple>

#include "bench/error.h"
#include "store/sqlite.h"
#include "store/store.h"
#include "store/write_transaction.h"

namespace bench::store {

namespace {

std::optional<double> finite_or_null(double v) { return std::isfinite(v) ? std::optional<double>(v) : std::nullopt; }

std::optional<double> nan_to_null(double v) { return std::isnan(v) ? std::nullopt : std::optional<double>(v); }

/// A value of a NOT NULL REAL column: SQLite would turn NaN into NULL and then reject it with a
/// message that does not say which number was bad.
double require_number(double v, int64_t ordinal, std::string_view field) {
  if (std::isnan(v)) throw Error(fmt::format("case {}: {} is NaN", ordinal, field));
  return v;
}

/// Refuses a profile row without a time and a row given twice (the table's key), naming the row:
/// SQLite's constraint message would name only the columns.
void check_profile(const CaseRow& c) {
  std::set<std::tuple<std::string_view, std::string_view, std::string_view, std::string_view, std::string_view>> keys;
  for (const ProfileRow& p : c.profile) {
    const auto row = [&] {
      return fmt::format("profile row (mode '{}', scope '{}', slot '{}', pass '{}', kernel '{}')", p.mode, p.scope,
                         p.slot, p.pass, p.kernel);
    };
    require_number(p.ms, c.ordinal, row() + " ms");
    if (p.calls < 0) throw Error(fmt::format("case {}: {} has {} calls", c.ordinal, row(), p.calls));
    if (!keys.emplace(p.mode, p.scope, p.slot, p.pass, p.kernel).second)
      throw Error(fmt::format("case {}: {} is given twice", c.ordinal, row()));
  }
}

}  // namespace

int64_t Store::add_case(int64_t run_id, const CaseRow& c) {
  // Checked before the transaction, so a bad value costs no lock.
  require_number(c.wall_s, c.ordinal, "wall_s");
  for (const ThroughputRow& t : c.throughput) {
    const auto field = [&](std::string_view name) { return fmt::format("throughput {} {}", t.mode, name); };
    require_number(t.median_ms, c.ordinal, field("median_ms"));
    require_number(t.mean_ms, c.ordinal, field("mean_ms"));
    require_number(t.min_ms, c.ordinal, field("min_ms"));
    require_number(t.max_ms, c.ordinal, field("max_ms"));
    require_number(t.stddev_ms, c.ordinal, field("stddev_ms"));
    require_number(t.mad_ms, c.ordinal, field("mad_ms"));
    require_number(t.tokens_per_s, c.ordinal, field("tokens_per_s"));
    require_number(t.flops_per_iter, c.ordinal, field("flops_per_iter"));
    require_number(t.gflops_per_s, c.ordinal, field("gflops_per_s"));
    for (double ms : t.samples_ms) require_number(ms, c.ordinal, field("sample"));
  }
  check_profile(c);
  const std::string now = now_utc();

  return write_transaction(fmt::format("adding case {} to run {}", c.ordinal, run_id), [&] {
    sqlite::Statement ins_case(db_.get(), R"sql(
      INSERT INTO cases(run_id, ordinal, runner, label, variant, axes_json, config_json, seed, status, error,
                        started_at, finished_at, wall_s, n_params, n_params_embedding, flops_per_token, placement)
      VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17))sql");
    ins_case.bind(1, run_id)
        .bind(2, c.ordinal)
        .bind(3, c.runner)
        .bind(4, c.label)
        .bind(5, c.variant)
        .bind(6, c.axes_json)
        .bind(7, c.config_json)
        .bind(8, c.seed)
        .bind(9, c.status)
        .bind(11, c.started_at.empty() ? now : c.started_at)
        .bind(12, c.finished_at.empty() ? now : c.finished_at)
        .bind(13, c.wall_s)
        .bind(14, c.n_params)
        .bind(15, c.n_params_embedding)
        .bind(16, c.flops_per_token);
    if (c.error.empty())
      ins_case.bind_null(10);
    else
      ins_case.bind(10, c.error);
    if (c.placement.empty())
      ins_case.bind_null(17);
    else
      ins_case.bind(17, c.placement);
    ins_case.run();
    const int64_t case_id = sqlite3_last_insert_rowid(db_.get());

    if (!c.throughput.empty()) {
      sqlite::Statement ins_tp(db_.get(), R"sql(
        INSERT INTO throughput(case_id, mode, repetitions, iterations, median_ms, mean_ms, min_ms, max_ms, stddev_ms,
                               mad_ms, tokens_per_s, flops_per_iter, gflops_per_s, mfu, peak_bytes, noise, max_noise,
                               noisy, load_avg, steal, other_busy, cores)
        VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, ?21,
               ?22))sql");
      sqlite::Statement ins_sample(db_.get(),
                                   "INSERT INTO samples(case_id, mode, repetition, ms) VALUES(?1, ?2, ?3, ?4)");
      for (const ThroughputRow& t : c.throughput) {
        ins_tp.bind(1, case_id)
            .bind(2, t.mode)
            .bind(3, t.repetitions)
            .bind(4, t.iterations)
            .bind(5, t.median_ms)
            .bind(6, t.mean_ms)
            .bind(7, t.min_ms)
            .bind(8, t.max_ms)
            .bind(9, t.stddev_ms)
            .bind(10, t.mad_ms)
            .bind(11, t.tokens_per_s)
            .bind(12, t.flops_per_iter)
            .bind(13, t.gflops_per_s)
            .bind(14, t.mfu ? nan_to_null(*t.mfu) : std::nullopt)
            .bind(15, t.peak_bytes)
            .bind(16, finite_or_null(t.noise))
            .bind(17, finite_or_null(t.max_noise))
            .bind(18, static_cast<int64_t>(t.noisy ? 1 : 0))
            .bind(19, finite_or_null(t.load_avg))
            .bind(20, finite_or_null(t.steal))
            .bind(21, finite_or_null(t.other_busy))
            .bind(22, t.cores > 0 ? std::optional<int64_t>(t.cores) : std::nullopt)
            .run();
        for (size_t i = 0; i < t.samples_ms.size(); ++i)
          ins_sample.bind(1, case_id).bind(2, t.mode).bind(3, static_cast<int64_t>(i)).bind(4, t.samples_ms[i]).run();
      }
    }

    if (!c.profile.empty()) {
      sqlite::Statement ins_profile(db_.get(), R"sql(
        INSERT INTO profile(case_id, mode, scope, slot, component, pass, kernel, calls, ms, bytes, flops)
        VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11))sql");
      for (const ProfileRow& p : c.profile)
        ins_profile.bind(1, case_id)
            .bind(2, p.mode)
            .bind(3, p.scope)
            .bind(4, p.slot)
            .bind(5, p.component)
            .bind(6, p.pass)
            .bind(7, p.kernel)
            .bind(8, p.calls)
            .bind(9, p.ms)
            .bind(10, finite_or_null(p.bytes))
            .bind(11, finite_or_null(p.flops))
            .run();
    }

    if (!c.steps.empty()) {
      sqlite::Statement ins_step(db_.get(), R"sql(
        INSERT INTO steps(case_id, step, lr, loss, grad_norm, max_attn_logit, z_mean, z_loss, ms)
        VALUES(?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9))sql");
      for (const StepRow& s : c.steps)
        ins_step.bind(1, case_id)
            .bind(2, s.step)
            .bind(3, finite_or_null(s.lr))
            .bind(4, finite_or_null(s.loss))
            .bind(5, finite_or_null(s.grad_norm))
            .bind(6, finite_or_null(s.max_attn_logit))
            .bind(7, finite_or_null(s.z_mean))
            .bind(8, finite_or_null(s.z_loss))
            .bind(9, finite_or_null(s.ms))
            .run();
    }

    if (!c.series.empty()) {
      sqlite::Statement ins_series(db_.get(),
                                   "INSERT INTO series(case_id, name, layer, step, value) VALUES(?1, ?2, ?3, ?4, ?5)");
      for (const SeriesRow& s : c.series)
        ins_series.bind(1, case_id)
            .bind(2, s.name)
            .bind(3, s.layer >= 0 ? std::optional<int64_t>(s.layer) : std::nullopt)
            .bind(4, s.step)
            .bind(5, finite_or_null(s.value))
            .run();
    }

    if (!c.metrics.empty()) {
      sqlite::Statement ins_metric(db_.get(), "INSERT INTO metrics(case_id, name, value, unit) VALUES(?1, ?2, ?3, ?4)");
      for (const MetricRow& m : c.metrics)
        ins_metric.bind(1, case_id).bind(2, m.name).bind(3, nan_to_null(m.value)).bind(4, m.unit).run();
    }

    if (!c.artifacts.empty()) {
      sqlite::Statement ins_artifact(
          db_.get(), "INSERT INTO artifacts(case_id, kind, path, bytes, sha256) VALUES(?1, ?2, ?3, ?4, ?5)");
      for (const ArtifactRow& a : c.artifacts)
        ins_artifact.bind(1, case_id).bind(2, a.kind).bind(3, a.path).bind(4, a.bytes).bind(5, a.sha256).run();
    }
    return case_id;
  });
}

void Store::add_metrics(int64_t case_id, const std::vector<MetricRow>& metrics) {
  write_transaction(fmt::format("adding metrics to case {}", case_id), [&] {
    sqlite::Statement ins(db_.get(),
                          "INSERT OR REPLACE INTO metrics(case_id, name, value, unit) VALUES(?1, ?2, ?3, ?4)");
    for (const MetricRow& m : metrics)
      ins.bind(1, case_id).bind(2, m.name).bind(3, nan_to_null(m.value)).bind(4, m.unit).run();
    return int64_t{0};
  });
}

}  // namespace bench::store
