#include "runners/result_json.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "bench/error.h"

namespace bench {

namespace {

using Json = nlohmann::ordered_json;

/// A double as JSON: a number, or "nan", "inf", "-inf" (JSON has none of them).
Json num(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  return v;
}

double num_of(const Json& j) {
  if (j.is_number()) return j.get<double>();
  const std::string s = j.get<std::string>();
  if (s == "inf") return std::numeric_limits<double>::infinity();
  if (s == "-inf") return -std::numeric_limits<double>::infinity();
  if (s == "nan") return std::numeric_limits<double>::quiet_NaN();
  throw Error("not a number: " + s);
}

template <class T>
Json optional_json(const std::optional<T>& v) {
  if (!v) return nullptr;
  if constexpr (std::is_floating_point_v<T>) return num(*v);
  return *v;
}

template <class T>
std::optional<T> optional_of(const Json& j) {
  if (j.is_null()) return std::nullopt;
  if constexpr (std::is_floating_point_v<T>) return num_of(j);
  return j.get<T>();
}

}  // namespace

std::string result_json(const CaseResult& r) {
  Json timings = Json::array(), profile = Json::array(), steps = Json::array(), series = Json::array(),
       metrics = Json::array(), artifacts = Json::array();
  for (const Timing& t : r.timings) {
    Json samples = Json::array();
    for (double s : t.samples_ms) samples.push_back(num(s));
    timings.push_back({t.mode,
                       t.repetitions,
                       t.iterations,
                       num(t.median_ms),
                       num(t.mean_ms),
                       num(t.min_ms),
                       num(t.max_ms),
                       num(t.stddev_ms),
                       num(t.mad_ms),
                       num(t.tokens_per_s),
                       num(t.flops_per_iter),
                       num(t.gflops_per_s),
                       optional_json(t.mfu),
                       optional_json(t.peak_bytes),
                       samples,
                       num(t.noise),
                       num(t.max_noise),
                       t.noisy,
                       num(t.load_avg),
                       num(t.steal),
                       num(t.other_busy),
                       t.cores});
  }
  for (const ProfileRow& p : r.profile)
    profile.push_back(
        {p.mode, p.scope, p.slot, p.component, p.pass, p.kernel, p.calls, num(p.ms), num(p.bytes), num(p.flops)});
  for (const StepRecord& s : r.steps)
    steps.push_back({s.step, num(s.lr), num(s.loss), num(s.grad_norm), num(s.max_attn_logit), num(s.z_mean),
                     num(s.z_loss), num(s.ms)});
  for (const SeriesPoint& s : r.series) series.push_back({s.name, s.layer, s.step, num(s.value)});
  for (const Metric& m : r.metrics) metrics.push_back({m.name, num(m.value), m.unit});
  for (const Artifact& a : r.artifacts) artifacts.push_back({a.kind, a.path, a.bytes, a.sha256});
  const Json j = {{"status", r.status},
                  {"error", r.error},
                  {"placement", r.placement},
                  {"started_at", r.started_at},
                  {"finished_at", r.finished_at},
                  {"wall_s", num(r.wall_s)},
                  {"n_params", optional_json(r.n_params)},
                  {"n_params_embedding", optional_json(r.n_params_embedding)},
                  {"flops_per_token", optional_json(r.flops_per_token)},
                  {"timings", timings},
                  {"profile", profile},
                  {"steps", steps},
                  {"series", series},
                  {"metrics", metrics},
                  {"artifacts", artifacts}};
  return j.dump();
}

CaseResult result_from_json(const std::string& text) {
  CaseResult r;
  try {
    const Json j = Json::parse(text);
    r.status = j.at("status").get<std::string>();
    r.error = j.at("error").get<std::string>();
    r.placement = j.at("placement").get<std::string>();
    r.started_at = j.at("started_at").get<std::string>();
    r.finished_at = j.at("finished_at").get<std::string>();
    r.wall_s = num_of(j.at("wall_s"));
    r.n_params = optional_of<int64_t>(j.at("n_params"));
    r.n_params_embedding = optional_of<int64_t>(j.at("n_params_embedding"));
    r.flops_per_token = optional_of<double>(j.at("flops_per_token"));
    for (const Json& t : j.at("timings")) {
      Timing x;
      x.mode = t.at(0).get<std::string>();
      x.repetitions = t.at(1).get<int64_t>();
      x.iterations = t.at(2).get<int64_t>();
      double* fields[] = {&x.median_ms, &x.mean_ms,      &x.min_ms,         &x.max_ms,      &x.stddev_ms,
                          &x.mad_ms,    &x.tokens_per_s, &x.flops_per_iter, &x.gflops_per_s};
      for (size_t i = 0; i < std::size(fields); ++i) *fields[i] = num_of(t.at(3 + i));
      x.mfu = optional_of<double>(t.at(12));
      x.peak_bytes = optional_of<int64_t>(t.at(13));
      for (const Json& s : t.at(14)) x.samples_ms.push_back(num_of(s));
      x.noise = num_of(t.at(15));
      x.max_noise = num_of(t.at(16));
      x.noisy = t.at(17).get<bool>();
      x.load_avg = num_of(t.at(18));
      x.steal = num_of(t.at(19));
      x.other_busy = num_of(t.at(20));
      x.cores = t.at(21).get<int64_t>();
      r.timings.push_back(std::move(x));
    }
    for (const Json& p : j.at("profile")) {
      ProfileRow x;
      std::string* texts[] = {&x.mode, &x.scope, &x.slot, &x.component, &x.pass, &x.kernel};
      for (size_t i = 0; i < std::size(texts); ++i) *texts[i] = p.at(i).get<std::string>();
      x.calls = p.at(6).get<int64_t>();
      x.ms = num_of(p.at(7));
      x.bytes = num_of(p.at(8));
      x.flops = num_of(p.at(9));
      r.profile.push_back(std::move(x));
    }
    for (const Json& s : j.at("steps"))
      r.steps.push_back({s.at(0).get<int64_t>(), num_of(s.at(1)), num_of(s.at(2)), num_of(s.at(3)), num_of(s.at(4)),
                         num_of(s.at(5)), num_of(s.at(6)), num_of(s.at(7))});
    for (const Json& s : j.at("series"))
      r.series.push_back({s.at(0).get<std::string>(), s.at(1).get<int64_t>(), s.at(2).get<int64_t>(), num_of(s.at(3))});
    for (const Json& m : j.at("metrics"))
      r.metrics.push_back({m.at(0).get<std::string>(), num_of(m.at(1)), m.at(2).get<std::string>()});
    for (const Json& a : j.at("artifacts"))
      r.artifacts.push_back(
          {a.at(0).get<std::string>(), a.at(1).get<std::string>(), a.at(2).get<int64_t>(), a.at(3).get<std::string>()});
  } catch (const nlohmann::json::exception& e) {
    throw Error(std::string("not a case result: ") + e.what());
  }
  return r;
}

}  // namespace bench
