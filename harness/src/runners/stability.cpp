// Stability runner: trains for the configured steps with AdamW, warm-up and decay, and records
// per step the loss, the global grad norm (before clipping), the max attention logit and the
// mean output log-normalizer z, and on logging steps named series (per-layer gradient and
// update RMS, attention statistics, block output RMS, parameter norm, held-out loss); optionally
// probes the model at initialization first; then summarizes (docs/stability.md defines every
// figure).
#include <chrono>
#include <cmath>
#include <filesystem>
#include <map>

#include "bench/interfaces.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "plugins/registry.h"
#include "runners/init_probe.h"
#include "runners/runner.h"
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

/// Unit of a series.
std::string series_unit(const std::string& name) {
  if (name == "val_bpb") return "bits/byte";
  return name == "val_loss" || name == "attn_entropy" || name == "logit_mean" ? "nats" : "";
}

/// The final weights of case `c` as <weights_dir>/case-<ordinal>.safetensors, described for the
/// case's row with a path relative to the database's directory.
Artifact save_final_weights(const Case& c, const Model& model, const RunnerEnv& env) {
  namespace fs = std::filesystem;
  if (env.weights_dir.empty()) throw Error("save_weights: this run has no directory for weights");
  fs::create_directories(env.weights_dir);
  const fs::path path = fs::path(env.weights_dir) / ("case-" + std::to_string(c.ordinal) + ".safetensors");
  // Float64 models keep every bit (a float64 run is a check); the others store F32 (a bf16
  // model's float master weights).
  save_weights(model, path.string(), model.spec().dtype == DType::kFloat64 ? "F64" : "F32");
  return file_artifact("weights", path.string(), env);
}

/// Mean held-out loss (nats/token) over validation batches 0..n-1, and the same in bits per byte
/// (NaN when the dataset's tokens have no bytes).
struct HeldOut {
  double loss = NAN;
  double bits_per_byte = NAN;
  double bytes_per_token = NAN;
};
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

/// The settings of [stability].
const std::vector<ParamSpec>& stability_params() {
  static const std::vector<ParamSpec> specs = {
      ParamSpec::integer("steps", 200, "optimizer steps").at_least(1),
      ParamSpec::number("lr", 3e-3, "peak learning rate").at_least(0),
      ParamSpec::number("warmup_fraction", 0.05, "linear warm-up as a fraction of the steps").at_least(0).at_most(1),
      ParamSpec::integer("warmup_steps", 0, "linear warm-up steps; overrides warmup_fraction when > 0").at_least(0),
      ParamSpec::choice("schedule", "cosine", {"cosine", "linear", "constant"}, "decay after warm-up"),
      ParamSpec::number("min_lr_ratio", 0.1, "final learning rate / peak").at_least(0).at_most(1),
      ParamSpec::number("weight_decay", 0.1, "AdamW weight decay of the decay group").at_least(0),
      ParamSpec::choice("weight_decay_mode", "coupled", {"coupled", "independent"},
                        "coupled: p *= 1 - lr*wd (PyTorch); independent: p *= 1 - wd*lr/peak_lr"),
      ParamSpec::number("beta1", 0.9, "AdamW beta1").at_least(0).at_most(1),
      ParamSpec::number("beta2", 0.95, "AdamW beta2").at_least(0).at_most(1),
      ParamSpec::number("eps", 1e-8, "AdamW epsilon").at_least(0),
      ParamSpec::number("grad_clip", 1.0, "clip the global grad norm to this; 0 = off").at_least(0),
      ParamSpec::strings("weight_decay_groups", {"matrix", "embedding"},
                         {"matrix", "embedding", "gain", "bias", "other"},
                         "parameter groups that weight decay applies to"),
      ParamSpec::integers("eval_lengths", {},
                          "after training, also evaluate the held-out loss at these context lengths (e.g. 2x, 4x)"),
      ParamSpec::integer("log_every", 1, "record a step every this many steps").at_least(1),
      ParamSpec::string("init_weights", "",
                        "start from these weights instead of a random initialization: a .safetensors file, a "
                        "sharded checkpoint's index, or a Hugging Face folder (relative to the experiment file)"),
      ParamSpec::boolean("save_weights", false,
                         "keep the final weights as safetensors next to the database (table artifacts)"),
      ParamSpec::integer("eval_batches", 8, "held-out batches for the final validation loss").at_least(0),
      ParamSpec::integer("val_every", 0,
                         "also record the held-out loss (val_batches batches) every this many steps; 0 = off")
          .at_least(0),
      ParamSpec::integer("val_batches", 2, "held-out batches of each val_every evaluation").at_least(1),
      ParamSpec::integer("init_probe_batches", 0,
                         "before training, average per-layer gradient norms and activation RMS at initialization "
                         "over this many batches (x init_probe_seeds); 0 = off")
          .at_least(0),
      ParamSpec::integer("init_probe_seeds", 1, "initializations (seed, seed+1, ...) the init probe averages over")
          .at_least(1),
      ParamSpec::integer("spike_window", 50, "trailing window of the spike detector (steps)").at_least(2),
      ParamSpec::number("spike_sigma", 7.0, "a spike exceeds the window mean by this many standard deviations")
          .at_least(0),
  };
  return specs;
}

/// The caption of the per-layer figures at initialization (init_probe_batches).
constexpr const char* kInitCaption =
    "Per block, averaged over init_probe_batches batches and init_probe_seeds initializations, before any "
    "update (Xiong et al. 2020: Post-LN gradients grow toward the output, Pre-LN's stay flat).";

/// The per-case figures of a stability case: `bench results`' columns first (in their order), then
/// what `bench compare` knows the direction of. Its other metrics (per-layer finals, the data's
/// entropies, val_loss_at_L ...) compare as neither better nor worse.
const std::vector<MetricSpec>& stability_metrics() {
  static const std::vector<MetricSpec> specs = {
      MetricSpec("lr").results_column("lr", "{:.3g}").plotted_in("final-loss-vs-lr"),
      MetricSpec("final_loss", "nats")
          .lower("final loss")
          .results_column("final loss (nats)", "{:.4f}")
          .by_default()
          .plotted_in("final-loss-vs-lr"),
      MetricSpec("best_loss", "nats").lower("best loss").results_column("best loss (nats)", "{:.4f}").by_default(),
      MetricSpec("final_val_bpb", "bits/byte")
          .results_column("val bits/byte", "{:.4f}")
          .only_when_present()
          .plotted_in("final-val-bpb"),
      MetricSpec("unigram_entropy", "nats").results_column("unigram H (nats)", "{:.4f}").plotted_in("loss"),
      MetricSpec("spike_count", "steps").lower("spikes").results_column("spikes", "{:.0f}").by_default(),
      MetricSpec("diverged_step", "step").results_column("diverged at step", "{:.0f}"),
      MetricSpec("max_attn_logit").neither("max logit").results_column("max logit").by_default(),
      MetricSpec("final_grad_norm").neither("grad norm").results_column("grad norm"),
      MetricSpec("final_val_loss", "nats").lower("final val loss"),
      MetricSpec("final_train_loss", "nats").lower("final train loss"),
      MetricSpec("loss_spike_count", "steps").lower("loss spikes"),
      MetricSpec("grad_spike_count", "steps").lower("grad spikes"),
      MetricSpec("spike_fraction").lower("spike fraction"),
      MetricSpec("train_tokens_per_s", "tokens/s").higher("train tokens/s").time_or_rate(),
      MetricSpec("initial_loss", "nats"),
      MetricSpec("steps_done", "steps"),
      MetricSpec("vocab_size", "tokens").plotted_in("final-val-bpb"),
      MetricSpec("val_bytes_per_token", "bytes/token").plotted_in("final-val-bpb"),
      MetricSpec("bigram_entropy", "nats").plotted_in("loss"),
      MetricSpec("final_z_mean", "nats"),
      MetricSpec("final_z_loss", "nats"),
  };
  return specs;
}

/// The report's per-step figures of stability cases, in the order it draws them.
const std::vector<CurveSpec>& stability_curves() {
  using S = CurveSpec::Source;
  static const std::vector<CurveSpec> curves = {
      {S::kStepColumn, "loss", "loss", "Training loss", "loss (nats)", false,
       "Training loss per step (before the step's update), one panel per peak learning rate. Gaps: non-finite loss.",
       true},
      {S::kStepColumn, "grad_norm", "grad-norm", "Gradient norm", "global grad norm", true,
       "Global L2 norm of the gradient before clipping.", false},
      {S::kStepColumn, "max_attn_logit", "max-logit", "Max attention logit", "max attention logit", true,
       "Largest attention logit of the step over all layers and heads (Wortsman et al. 2023: trouble above ~1e3).",
       false},
      {S::kStepColumn, "z_mean", "z", "Output log-normalizer z", "mean z = logsumexp(logits)", false,
       "Mean log-normalizer of the output softmax; only z-loss anchors it, and drift costs bf16 precision.", false},
      {S::kSeries, "val_loss", "val_loss", "Held-out loss", "held-out loss (nats)", false,
       "Mean loss over held-out batches, every val_every steps and at the last step.", false},
      {S::kSeries, "val_bpb", "val_bpb", "Held-out bits per byte", "held-out loss (bits/byte)", false,
       "The held-out loss in bits per byte (text datasets), every val_every steps: compares across tokenizers.", false},
      {S::kSeries, "param_norm", "param_norm", "Parameter norm", "L2 norm of all parameters", false,
       "Global L2 norm of the parameters.", false},
      {S::kSeries, "attn_entropy", "attn_entropy", "Attention entropy", "mean attention entropy (nats)", false,
       "Entropy of the attention distributions, averaged over layers, heads and queries; collapse goes to 0.", false},
      {S::kSeries, "logit_mean", "logit_mean", "Mean output logit", "mean logit", false,
       "Mean of the output logits over tokens and vocabulary: with z, a drift of all logits together.", false},
      {S::kInitLayers, "init_grad_norm", "init_grad_norm", "At initialization",
       "gradient norm of the block's parameters", true, kInitCaption, false},
      {S::kInitLayers, "init_block_rms", "init_block_rms", "At initialization", "RMS of the block's output", true,
       kInitCaption, false},
  };
  return curves;
}

/// Short training runs (docs/stability.md); over a learning-rate grid, lr_sensitivity at the end.
class StabilityRunner final : public Runner {
 public:
  std::string_view name() const override { return "stability"; }
  const std::vector<ParamSpec>& params() const override { return stability_params(); }
  void resolve(const Params& s, ModelSpec& model) const override {
    model.decay_groups = s.strings("weight_decay_groups");
    for (int64_t len : s.integers("eval_lengths"))
      if (len < 1) throw ConfigError(s.where("eval_lengths"), "eval_lengths must be positive context lengths");
    if (s.given("init_weights")) {
      const std::string path = s.path("init_weights");
      std::error_code ec;
      if (!std::filesystem::exists(path, ec))
        throw ConfigError(s.where("init_weights"), "init_weights: no such file or folder: " + path);
      if (s.integer("init_probe_batches") > 0)
        throw ConfigError(s.where("init_probe_batches"),
                          "init_probe_batches probes random initializations; it cannot be combined with init_weights");
    }
  }
  CaseResult run(const Case& c, const ResolvedCase& rc, RunnerEnv& env) const override;
  /// The resolved configuration without the peak learning rate: cases with equal keys differ only
  /// in `lr` and form one variant's learning-rate grid.
  std::string group_key(const ResolvedCase& rc) const override {
    Value root = resolved_value(rc);
    root["runner"].erase("lr");
    return root.json();
  }
  /// lr_sensitivity and lr_grid_size over every learning-rate grid of the run.
  std::vector<CaseMetrics> finish(const std::vector<FinishedCase>& cases) const override {
    std::vector<GridCase> grid;
    for (const FinishedCase& f : cases) {
      const auto value = [&](const char* m) { return f.result->metric(m).value_or(NAN); };
      grid.push_back({group_key(*f.resolved), f.index, value("lr"), value("initial_loss"), value("final_val_loss")});
    }
    std::vector<CaseMetrics> out;
    for (auto& [index, metrics] : lr_grid_metrics(grid)) out.push_back({index, std::move(metrics)});
    return out;
  }
  ResultsTable table() const override { return {.timings = false, .steps = true}; }
  const std::vector<MetricSpec>& metrics() const override { return stability_metrics(); }
  const std::vector<CurveSpec>& curves() const override { return stability_curves(); }
  std::string summary(const CaseResult& r) const override {
    std::string s;
    for (const Metric& m : r.metrics)
      if (m.name == "final_loss") s += ", final loss " + std::to_string(m.value).substr(0, 6);
    return s;
  }
};

}  // namespace

CaseResult StabilityRunner::run(const Case& c, const ResolvedCase& rc, RunnerEnv& env) const {
  CaseResult row;
  const Params& s = rc.runner;
  const ModelDims& d = rc.model.dims;
  Model model(rc.model, env.registry, static_cast<uint64_t>(rc.seed));
  // Given weights replace the whole initialization; load_weights checks every tensor by name and
  // shape, as `bench eval` does, and lists each mismatch.
  if (s.given("init_weights")) load_weights(model, s.path("init_weights"));
  const std::unique_ptr<Dataset> dataset = create_dataset(rc, env);
  const Cost cost = model.cost();
  row.n_params = model.n_params();
  row.n_params_embedding = model.n_params_embedding();
  row.flops_per_token = (cost.flops_forward + cost.flops_backward) / static_cast<double>(d.tokens());

  const int64_t steps = s.integer("steps");
  const double peak = s.number("lr");
  const int64_t warmup =
      s.integer("warmup_steps") > 0
          ? s.integer("warmup_steps")
          : static_cast<int64_t>(std::round(s.number("warmup_fraction") * static_cast<double>(steps)));
  const std::string schedule = s.string("schedule");
  const bool independent = s.string("weight_decay_mode") == "independent";
  OptimizerStep opt;
  opt.beta1 = s.number("beta1");
  opt.beta2 = s.number("beta2");
  opt.eps = s.number("eps");
  opt.weight_decay = s.number("weight_decay");
  opt.grad_clip = s.number("grad_clip");
  const int64_t log_every = s.integer("log_every");

  std::vector<int32_t> inputs(static_cast<size_t>(d.tokens())), targets(inputs.size());
  RunContext ctx;
  ctx.seed = static_cast<uint64_t>(rc.seed);
  std::vector<double> losses, norms;
  double initial_loss = NAN, best = INFINITY, max_logit = -INFINITY, last_norm = NAN, last_z = NAN, last_z_loss = NAN;
  int64_t diverged_step = -1;
  bool non_finite = false;
  std::map<std::pair<std::string, int64_t>, double> last_logged;  // (series, layer) -> last value
  std::map<int64_t, double> layer_max_logit;                      // layer -> max over all steps
  const int64_t val_every = s.integer("val_every");

  // At initialization, before any update: per-layer gradient norms and activation growth. The
  // diagnostics runner measures the same on its own; these keys keep working here.
  if (const int64_t batches = s.integer("init_probe_batches"); batches > 0)
    record_init_probe(probe_initialization(rc, env, *dataset, batches, s.integer("init_probe_seeds")), row);
  const auto t0 = std::chrono::steady_clock::now();
  int64_t done = 0;
  for (int64_t step = 0; step < steps; ++step) {
    if (env.stop && env.stop->load()) {
      row.status = "interrupted";
      break;
    }
    const auto ts = std::chrono::steady_clock::now();
    dataset->batch(Split::kTrain, step, d.batch_size, d.seq_len, inputs.data(), targets.data());
    const bool logging = step % log_every == 0 || step == steps - 1;
    ctx.training = true;
    ctx.probes = true;
    ctx.layer_probes = logging;
    ctx.step = step;
    ctx.clear_probes();
    model.zero_grad();
    const LossInfo info = model.forward(inputs.data(), targets.data(), ctx);
    model.backward(ctx);
    opt.lr = lr_at(step, steps, peak, warmup, schedule, s.number("min_lr_ratio"));
    opt.decay_lr = independent ? opt.lr / peak : opt.lr;
    std::vector<LayerSquares> grad_sq;
    double snapshot_ms = 0;  // measurement work, not part of the step's time
    if (logging) {
      const auto t_snap = std::chrono::steady_clock::now();
      grad_sq = model.squares_by_layer(LayerQuantity::kGradient);
      model.snapshot_parameters();  // in the model's memory: nothing of its size to the host
      snapshot_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t_snap).count();
    }
    const double norm = model.optimizer_step(opt, ctx);
    const double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - ts).count() - snapshot_ms;
    ++done;

    const auto probes = ctx.probe_values();
    const auto probe = [&](const char* k) {
      auto it = probes.find(k);
      return it == probes.end() ? NAN : it->second;
    };
    const double logit = probe("max_attn_logit");
    for (const auto& [key, v] : probes) {
      const auto [name, layer] = split_layer(key);
      if (name == "max_attn_logit" && layer >= 0 && std::isfinite(v)) {
        auto [it, fresh] = layer_max_logit.emplace(layer, v);
        if (!fresh) it->second = std::max(it->second, v);
      }
    }
    if (logging) {
      std::vector<SeriesPoint> logged;
      for (const auto& [key, v] : probes) {
        const auto [name, layer] = split_layer(key);
        // The whole-model max logit and z are columns of `steps` already.
        if (layer < 0 && (name == "max_attn_logit" || name == "z_mean")) continue;
        logged.push_back({name, layer, step, v});
      }
      const auto update_sq = model.squares_by_layer(LayerQuantity::kUpdate);
      for (size_t i = 0; i < grad_sq.size(); ++i) {
        const auto count = static_cast<double>(std::max<int64_t>(1, grad_sq[i].count));
        logged.push_back({"grad_rms", static_cast<int64_t>(i), step, std::sqrt(grad_sq[i].sum_squares / count)});
        logged.push_back({"update_rms", static_cast<int64_t>(i), step, std::sqrt(update_sq[i].sum_squares / count)});
      }
      logged.push_back({"param_norm", -1, step, model.parameter_norm(ctx)});
      if (val_every > 0 && (step % val_every == 0 || step == steps - 1) && std::isfinite(info.loss)) {
        const HeldOut h = held_out(model, *dataset, d, s.integer("val_batches"), ctx, inputs, targets);
        logged.push_back({"val_loss", -1, step, h.loss});
        if (std::isfinite(h.bits_per_byte)) logged.push_back({"val_bpb", -1, step, h.bits_per_byte});
      }
      for (const auto& r : logged) last_logged[{r.name, r.layer}] = r.value;
      row.series.insert(row.series.end(), logged.begin(), logged.end());
    }
    losses.push_back(info.loss);
    norms.push_back(norm);
    if (step == 0) initial_loss = info.loss;
    if (std::isfinite(info.loss)) best = std::min(best, info.loss);
    if (std::isfinite(logit)) max_logit = std::max(max_logit, logit);
    last_norm = norm;
    last_z = info.z_mean;
    last_z_loss = info.z_loss;
    if (logging || !std::isfinite(info.loss)) {
      row.steps.push_back(StepRecord{step, opt.lr, info.loss, norm, logit, info.z_mean, info.z_loss, ms});
    }
    const bool bad = !std::isfinite(info.loss) || !std::isfinite(norm);
    if (diverged_step < 0 && (bad || (step > warmup && info.loss > initial_loss))) diverged_step = step;
    if (bad) {
      non_finite = true;
      break;
    }
    if (step % 5 == 0)
      env.progress.update(env.prefix + " · step " + std::to_string(step + 1) + "/" + std::to_string(steps) +
                          " · loss " + std::to_string(info.loss).substr(0, 6));
  }
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();

  // Held-out loss at the end, without gradients.
  HeldOut final_val;
  const int64_t eval_batches = s.integer("eval_batches");
  if (!non_finite && row.status != "interrupted" && eval_batches > 0)
    final_val = held_out(model, *dataset, d, eval_batches, ctx, inputs, targets);
  const double val = final_val.loss;
  // Held-out loss at other context lengths: the trained weights in a model built for length L
  // (same tokens per batch). Learned position tables cannot be moved to another length: NaN.
  std::vector<std::pair<int64_t, double>> long_context;
  if (!non_finite && row.status != "interrupted" && eval_batches > 0) {
    for (int64_t len : s.integers("eval_lengths")) {
      ModelSpec spec = rc.model;
      spec.dims.seq_len = len;
      spec.dims.batch_size = std::max<int64_t>(1, d.tokens() / len);
      Model longer(spec, env.registry, static_cast<uint64_t>(rc.seed));
      double loss = NAN;
      if (longer.copy_parameters_from(model).empty()) {
        std::vector<int32_t> in(static_cast<size_t>(spec.dims.tokens())), tg(in.size());
        loss = held_out(longer, *dataset, spec.dims, eval_batches, ctx, in, tg).loss;
      }
      long_context.emplace_back(len, loss);
      env.progress.update(env.prefix + " · eval at length " + std::to_string(len));
    }
  }
  const int64_t tail = std::min<int64_t>(10, static_cast<int64_t>(losses.size()));
  double tail_mean = 0;
  for (int64_t i = static_cast<int64_t>(losses.size()) - tail; i < static_cast<int64_t>(losses.size()); ++i)
    tail_mean += losses[static_cast<size_t>(i)] / static_cast<double>(tail);

  const auto loss_spikes = find_spikes(losses, s.integer("spike_window"), s.number("spike_sigma"));
  const auto norm_spikes = find_spikes(norms, s.integer("spike_window"), s.number("spike_sigma"));
  std::vector<int64_t> spikes = loss_spikes;
  spikes.insert(spikes.end(), norm_spikes.begin(), norm_spikes.end());
  std::sort(spikes.begin(), spikes.end());
  spikes.erase(std::unique(spikes.begin(), spikes.end()), spikes.end());

  auto& m = row.metrics;
  m.push_back({"lr", peak, ""});
  m.push_back({"steps_done", static_cast<double>(done), "steps"});
  m.push_back({"initial_loss", initial_loss, "nats"});
  m.push_back({"final_loss", std::isfinite(val) ? val : tail_mean, "nats"});
  m.push_back({"final_val_loss", val, "nats"});
  // Bits per byte compare across tokenizers, where nats per token do not (docs/results.md).
  if (std::isfinite(final_val.bits_per_byte)) {
    m.push_back({"final_val_bpb", final_val.bits_per_byte, "bits/byte"});
    m.push_back({"val_bytes_per_token", final_val.bytes_per_token, "bytes/token"});
  }
  m.push_back({"vocab_size", static_cast<double>(d.vocab_size), "tokens"});
  m.push_back({"final_train_loss", tail_mean, "nats"});
  m.push_back({"best_loss", best, "nats"});
  m.push_back({"spike_count", static_cast<double>(spikes.size()), "steps"});
  m.push_back({"spike_fraction", done > 0 ? static_cast<double>(spikes.size()) / static_cast<double>(done) : 0, ""});
  m.push_back({"loss_spike_count", static_cast<double>(loss_spikes.size()), "steps"});
  m.push_back({"grad_spike_count", static_cast<double>(norm_spikes.size()), "steps"});
  if (diverged_step >= 0) m.push_back({"diverged_step", static_cast<double>(diverged_step), "step"});
  m.push_back({"max_attn_logit", std::isfinite(max_logit) ? max_logit : NAN, ""});
  m.push_back({"final_grad_norm", last_norm, ""});
  m.push_back({"final_z_mean", last_z, "nats"});
  m.push_back({"final_z_loss", last_z_loss, "nats"});
  m.push_back({"train_tokens_per_s", static_cast<double>(done * d.tokens()) / train_s, "tokens/s"});
  for (const auto& [layer, v] : layer_max_logit) m.push_back({metric_name("", "max_attn_logit", layer), v, ""});
  for (const auto& [key, v] : last_logged)
    if (key.first != "val_loss" && key.first != "val_bpb")  // final_val_* are the full evaluation above
      m.push_back({metric_name("final_", key.first, key.second), v, series_unit(key.first)});
  for (const auto& [k, v] : dataset->reference()) m.push_back({k, v, "nats"});
  for (const auto& [len, loss] : long_context) m.push_back({"val_loss_at_" + std::to_string(len), loss, "nats"});
  for (const auto& [kind, path] : dataset->derived_files()) row.artifacts.push_back(file_artifact(kind, path, env));
  if (s.boolean("save_weights") && row.status != "interrupted")
    row.artifacts.push_back(save_final_weights(c, model, env));
  if (non_finite) {
    row.status = "diverged";
    row.error = "non-finite loss or gradient at step " + std::to_string(diverged_step);
  }
  return row;
}

const Runner& stability_runner() {
  static const StabilityRunner runner;
  return runner;
}

}  // namespace bench
