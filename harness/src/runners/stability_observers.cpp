// The observers of the stability runner's training loop (runners/stability_observers.h). The
// metrics each emits are appended in the order the runner stores them (runners/stability.cpp).
#include "runners/stability_observers.h"

#include <algorithm>

#include "runners/registry.h"
#include "runners/stats.h"

namespace bench {

namespace {

/// Splits a probe name "NAME/LAYER" into NAME and LAYER; a name without a layer gets -1.
std::pair<std::string, int64_t> split_layer(const std::string& key) {
  const size_t slash = key.rfind('/');
  if (slash == std::string::npos) return {key, -1};
  return {key.substr(0, slash), std::stoll(key.substr(slash + 1))};
}

/// Metric name of a series' summary: "final_grad_rms_L3", "final_param_norm".
std::string metric_name(const std::string& prefix, const std::string& name, int64_t layer) {
  return prefix + name + (layer >= 0 ? "_L" + std::to_string(layer) : "");
}

/// Unit of a series' summary metric, as the stability runner declares it (stability.cpp); "" for
/// a plugin's own probe, which nothing declares.
std::string summary_unit(const std::string& metric) {
  const Runner* stability = find_runner("stability");
  const MetricSpec* spec = stability != nullptr ? stability->declaration(metric) : nullptr;
  return spec != nullptr ? spec->unit : "";
}

}  // namespace

double TrainStep::probe(const char* name) const {
  auto it = probes.find(name);
  return it == probes.end() ? NAN : it->second;
}

bool TrainTrace::observe(const TrainStep& t, std::vector<StepRecord>& out) {
  for (const auto& [key, v] : t.probes) {
    const auto [name, layer] = split_layer(key);
    if (name == "max_attn_logit" && layer >= 0 && std::isfinite(v)) {
      auto [it, fresh] = layer_max_logit_.emplace(layer, v);
      if (!fresh) it->second = std::max(it->second, v);
    }
  }
  const double loss = t.info.loss, norm = t.grad_norm, logit = t.probe("max_attn_logit");
  losses_.push_back(loss);
  norms_.push_back(norm);
  if (t.step == 0) initial_loss_ = loss;
  if (std::isfinite(loss)) best_ = std::min(best_, loss);
  if (std::isfinite(logit)) max_logit_ = std::max(max_logit_, logit);
  last_norm_ = norm;
  last_z_ = t.info.z_mean;
  last_z_loss_ = t.info.z_loss;
  if (t.logging || !std::isfinite(loss))
    out.push_back(StepRecord{t.step, t.lr, loss, norm, logit, t.info.z_mean, t.info.z_loss, t.ms});
  const bool bad = !std::isfinite(loss) || !std::isfinite(norm);
  if (diverged_step_ < 0 && (bad || (t.step > warmup_ && loss > initial_loss_))) diverged_step_ = t.step;
  if (bad) non_finite_ = true;
  return !bad;
}

double TrainTrace::tail_mean() const {
  const auto n = static_cast<int64_t>(losses_.size());
  const int64_t tail = std::min<int64_t>(10, n);
  double mean = 0;
  for (int64_t i = n - tail; i < n; ++i) mean += losses_[static_cast<size_t>(i)] / static_cast<double>(tail);
  return mean;
}

void TrainTrace::emit_best(std::vector<Metric>& m) const { m.push_back({"best_loss", best_, "nats"}); }

void TrainTrace::emit_last(std::vector<Metric>& m) const {
  if (diverged_step_ >= 0) m.push_back({"diverged_step", static_cast<double>(diverged_step_), "step"});
  m.push_back({"max_attn_logit", std::isfinite(max_logit_) ? max_logit_ : NAN, ""});
  m.push_back({"final_grad_norm", last_norm_, ""});
  m.push_back({"final_z_mean", last_z_, "nats"});
  m.push_back({"final_z_loss", last_z_loss_, "nats"});
}

void TrainTrace::emit_layers(std::vector<Metric>& m) const {
  for (const auto& [layer, v] : layer_max_logit_) m.push_back({metric_name("", "max_attn_logit", layer), v, ""});
}

HeldOut held_out(Model& model, Dataset& dataset, const ModelDims& d, int64_t n, RunContext& ctx,
                 std::vector<int32_t>& inputs, std::vector<int32_t>& targets) {
  ctx.training = false;
  ctx.probes = false;
  double sum = 0;
  int64_t bytes = 0;
  for (int64_t b = 0; b < n; ++b) {
    dataset.batch(Split::kValidation, b, d.batch_size, d.seq_len, inputs.data(), targets.data());
    sum += model.forward(inputs.data(), targets.data(), ctx).loss;
    const int64_t covered = dataset.bytes_of(targets.data(), d.tokens());
    bytes = covered < 0 || bytes < 0 ? -1 : bytes + covered;
  }
  const double loss = sum / static_cast<double>(n);
  return {loss, bits_per_byte(loss, n * d.tokens(), bytes),
          bytes < 0 ? NAN : static_cast<double>(bytes) / static_cast<double>(n * d.tokens())};
}

void LayerSeries::before_update(Model& model, RunContext& ctx) {
  if (ctx.capturing)
    model.squares_by_layer_into(LayerQuantity::kGradient, ctx);
  else
    grad_sq_ = model.squares_by_layer(LayerQuantity::kGradient);
  model.snapshot_parameters();  // in the model's memory: nothing of its size to the host
}

void LayerSeries::after_update_captured(Model& model, RunContext& ctx) {
  model.squares_by_layer_into(LayerQuantity::kUpdate, ctx);
  model.parameter_norm_into(ctx);
}

void LayerSeries::after_update(const TrainStep& t, Model& model, Dataset& dataset, const ModelDims& d, RunContext& ctx,
                               std::vector<int32_t>& inputs, std::vector<int32_t>& targets,
                               std::vector<SeriesPoint>& out) {
  const int64_t step = t.step;
  std::vector<SeriesPoint> logged;
  for (const auto& [key, v] : t.probes) {
    const auto [name, layer] = split_layer(key);
    // The whole-model max logit and z are columns of `steps` already.
    if (layer < 0 && (name == "max_attn_logit" || name == "z_mean")) continue;
    logged.push_back({name, layer, step, v});
  }
  LayerSums sums;
  if (t.has_sums) {
    sums = t.sums;
  } else {
    sums.gradient = grad_sq_;
    sums.update = model.squares_by_layer(LayerQuantity::kUpdate);
    sums.param_norm = model.parameter_norm(ctx);
  }
  for (size_t i = 0; i < sums.gradient.size(); ++i) {
    const auto count = static_cast<double>(std::max<int64_t>(1, sums.gradient[i].count));
    logged.push_back({"grad_rms", static_cast<int64_t>(i), step, std::sqrt(sums.gradient[i].sum_squares / count)});
    logged.push_back({"update_rms", static_cast<int64_t>(i), step, std::sqrt(sums.update[i].sum_squares / count)});
  }
  logged.push_back({"param_norm", -1, step, sums.param_norm});
  if (val_every_ > 0 && (step % val_every_ == 0 || step == steps_ - 1) && std::isfinite(t.info.loss)) {
    const HeldOut h = held_out(model, dataset, d, val_batches_, ctx, inputs, targets);
    logged.push_back({"val_loss", -1, step, h.loss});
    if (std::isfinite(h.bits_per_byte)) logged.push_back({"val_bpb", -1, step, h.bits_per_byte});
  }
  for (const auto& r : logged) last_[{r.name, r.layer}] = r.value;
  out.insert(out.end(), logged.begin(), logged.end());
}

void LayerSeries::emit(std::vector<Metric>& m) const {
  for (const auto& [key, v] : last_)
    if (key.first != "val_loss" && key.first != "val_bpb") {  // final_val_* are the full evaluation's
      const std::string name = metric_name("final_", key.first, key.second);
      m.push_back({name, v, summary_unit(name)});
    }
}

FinalEvaluation evaluate_final(const ResolvedCase& rc, RunnerEnv& env, Model& model, Dataset& dataset, RunContext& ctx,
                               std::vector<int32_t>& inputs, std::vector<int32_t>& targets) {
  FinalEvaluation out;
  const int64_t eval_batches = rc.runner.integer("eval_batches");
  if (eval_batches <= 0) return out;
  out.val = held_out(model, dataset, rc.model.dims, eval_batches, ctx, inputs, targets);
  const ModelDims& d = rc.model.dims;
  for (int64_t len : rc.runner.integers("eval_lengths")) {
    ModelSpec spec = rc.model;
    spec.dims.seq_len = len;
    spec.dims.batch_size = std::max<int64_t>(1, d.tokens() / len);
    Model longer(spec, env.registry, static_cast<uint64_t>(rc.seed));
    double loss = NAN;
    if (longer.copy_parameters_from(model).empty()) {
      std::vector<int32_t> in(static_cast<size_t>(spec.dims.tokens())), tg(in.size());
      loss = held_out(longer, dataset, spec.dims, eval_batches, ctx, in, tg).loss;
    }
    out.long_context.emplace_back(len, loss);
    env.progress.update(env.prefix + " · eval at length " + std::to_string(len));
  }
  return out;
}

SpikeCounts::SpikeCounts(const TrainTrace& trace, int64_t window, double sigma)
    : loss(find_spikes(trace.losses(), window, sigma)), grad(find_spikes(trace.grad_norms(), window, sigma)) {
  any = loss;
  any.insert(any.end(), grad.begin(), grad.end());
  std::sort(any.begin(), any.end());
  any.erase(std::unique(any.begin(), any.end()), any.end());
}

void SpikeCounts::emit(int64_t done, std::vector<Metric>& m) const {
  m.push_back({"spike_count", static_cast<double>(any.size()), "steps"});
  m.push_back({"spike_fraction", done > 0 ? static_cast<double>(any.size()) / static_cast<double>(done) : 0, ""});
  m.push_back({"loss_spike_count", static_cast<double>(loss.size()), "steps"});
  m.push_back({"grad_spike_count", static_cast<double>(grad.size()), "steps"});
}

}  // namespace bench
