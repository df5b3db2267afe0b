// Stability runner: trains for the configured steps with AdamW, warm-up and decay. The runner is
// a training loop (StabilityCase::train) plus observers that read each step after it ran
// (runners/stability_observers.h): the trace records per step the loss, the global grad norm
// (before clipping), the max attention logit and the mean output log-normalizer z, and detects
// divergence; the layer series record on logging steps named series (per-layer gradient and update
// RMS, attention statistics, block output RMS, parameter norm, held-out loss); after training the
// final evaluation (held-out loss, at other context lengths too) and the spike detector. Optionally
// probes the model at initialization first (docs/stability.md defines every figure).
#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench/interfaces.h"
#include "kernels/memory.h"
#include "model/checkpoint.h"
#include "model/model.h"
#include "plugins/registry.h"
#include "runners/init_probe.h"
#include "runners/runner.h"
#include "runners/stability_observers.h"
#include "runners/stats.h"
#include "runners/step_graph.h"

namespace bench {

namespace {

using Clock = std::chrono::steady_clock;

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
      ParamSpec::boolean(
          "cuda_graph", true,
          "on a device, capture the plain train step and the logging step (log_every) once each (after "
          "one uncaptured step of the kind) and replay them, the probes and series read after each "
          "replay; a kind of step that cannot be captured (docs/gpu-path.md) runs uncaptured, the other kind "
          "still replayed, with "
          "graph_fallback/stability = 1 and the reason in the case's notes, unless cuda_graph = true is "
          "given (then the case fails)"),
  };
  return specs;
}

/// The caption of the per-layer figures at initialization (init_probe_batches).
constexpr const char* kInitCaption =
    "Per block, averaged over init_probe_batches batches and init_probe_seeds initializations, before any "
    "update (Xiong et al. 2020: Post-LN gradients grow toward the output, Pre-LN's stay flat).";

/// The per-case figures of a stability case: `bench results`' columns first (in their order), then
/// what `bench compare` knows the direction of, then the rest (the data's entropies, the last value
/// of each probe's series, per layer where it has layers, the held-out loss at each eval length,
/// the learning-rate grid's sensitivity), which compare as neither better nor worse.
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
      MetricSpec("max_attn_logit").per_layer(),
      MetricSpec("final_attn_entropy", "nats"),
      MetricSpec("final_attn_entropy", "nats").per_layer(),
      MetricSpec("final_max_attn_logit").per_layer(),
      MetricSpec("final_block_rms").per_layer(),
      MetricSpec("final_grad_rms").per_layer(),
      MetricSpec("final_update_rms").per_layer(),
      MetricSpec("final_param_norm"),
      MetricSpec("final_embed_rms"),
      MetricSpec("final_logit_mean", "nats"),
      MetricSpec("val_loss_at_", "nats").followed_by_number(),
      MetricSpec("lr_sensitivity", "nats"),
      MetricSpec("lr_grid_size"),
      MetricSpec("cuda_graph"),
      MetricSpec("graph_steps", "steps"),
      MetricSpec("graph_fallback/"),
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

namespace {

/// The learning-rate schedule and AdamW's settings of [stability].
struct TrainSettings {
  explicit TrainSettings(const Params& s)
      : steps(s.integer("steps")),
        log_every(s.integer("log_every")),
        peak(s.number("lr")),
        warmup(s.integer("warmup_steps") > 0
                   ? s.integer("warmup_steps")
                   : static_cast<int64_t>(std::round(s.number("warmup_fraction") * static_cast<double>(steps)))),
        schedule(s.string("schedule")),
        min_lr_ratio(s.number("min_lr_ratio")),
        independent(s.string("weight_decay_mode") == "independent") {
    opt.beta1 = s.number("beta1");
    opt.beta2 = s.number("beta2");
    opt.eps = s.number("eps");
    opt.weight_decay = s.number("weight_decay");
    opt.grad_clip = s.number("grad_clip");
  }
  /// opt.lr and opt.decay_lr of `step`.
  void set_step(int64_t step) {
    opt.lr = lr_at(step, steps, peak, warmup, schedule, min_lr_ratio);
    opt.decay_lr = independent ? opt.lr / peak : opt.lr;
  }
  /// A logging step: every log_every steps, and the last.
  bool logging(int64_t step) const { return step % log_every == 0 || step == steps - 1; }

  int64_t steps, log_every;
  double peak;
  int64_t warmup;
  std::string schedule;
  double min_lr_ratio;
  bool independent;
  OptimizerStep opt;
};

/// One stability case: the training loop over the model and its data, and the observers that
/// read its steps (runners/stability_observers.h).
class StabilityCase {
 public:
  StabilityCase(const Case& c, const ResolvedCase& rc, RunnerEnv& env);
  CaseResult run();

 private:
  /// The loop: one train step after the other until the last, a stop or a non-finite step.
  void train();
  /// One train step (forward, backward, clip, AdamW), read for the observers: replayed from
  /// the captured graph where it can be (replayed_step), else run uncaptured.
  TrainStep train_step(int64_t step);
  /// Whether `step` replays the captured step of its kind (capturing it first): on a device with
  /// cuda_graph, after one step of that kind (plain, logging) ran uncaptured, unless that kind's
  /// capture failed (the other kind keeps its graph).
  bool replays(const TrainStep& t);
  /// Step t.step as a replay of the captured step of its kind (captured at the first call); false
  /// when the step cannot be captured (then graph_fallback and the steps of that kind run
  /// uncaptured).
  bool replayed_step(TrainStep& t);
  /// Give up on the graph of one kind of step (logging or plain): why, on the console at once and
  /// in the case's notes at its end (graph_notes), and graph_fallback/stability; or the case's
  /// failure when cuda_graph = true was given.
  void fall_back(bool logging, const std::string& why);
  /// The case's notes on the graphs given up on: one where both kinds failed alike, else one per
  /// kind that failed, saying which steps ran uncaptured where the other kind replayed its graph.
  void graph_notes();
  /// The case's metrics, in the order they are stored.
  void emit_metrics(const FinalEvaluation& final_eval, double train_s);

  const Case& c_;
  const ResolvedCase& rc_;
  const Params& s_;
  const ModelDims& d_;
  RunnerEnv& env_;
  CaseResult row_;
  Model model_;
  std::unique_ptr<Dataset> dataset_;
  TrainSettings settings_;
  std::vector<int32_t> inputs_, targets_;
  RunContext ctx_;
  TrainTrace trace_;
  LayerSeries series_;
  int64_t done_ = 0;
  /// A captured step of one kind and what its replays read: a step of the kind ran uncaptured
  /// (warmed: the plans and workspaces the capture reuses), the step as captured, the graph, and
  /// where it leaves its values (a logging step's differ from a plain one's).
  struct Graph {
    bool warmed = false;
    std::string failed;  // why its capture failed (its steps run uncaptured); empty while it may capture
    std::function<void()> enqueue;
    std::unique_ptr<StepReplay> replay;
    ReplayLayout layout;
  };
  // CUDA graphs (cuda_graph): on where the case may capture; the plain step's graph and the
  // logging step's (layer probes, the series' sums; graphs_by_kind_[logging]), each given up on
  // its own when its capture fails (a probe that reads back to the host breaks only the logging
  // step's).
  bool graphs_ = false;
  bool fell_back_ = false;
  int64_t replayed_ = 0;
  Graph graphs_by_kind_[2];
};

StabilityCase::StabilityCase(const Case& c, const ResolvedCase& rc, RunnerEnv& env)
    : c_(c),
      rc_(rc),
      s_(rc.runner),
      d_(rc.model.dims),
      env_(env),
      model_(rc.model, env.registry, static_cast<uint64_t>(rc.seed)),
      settings_(rc.runner),
      inputs_(static_cast<size_t>(d_.tokens())),
      targets_(inputs_.size()),
      trace_(settings_.warmup),
      series_(s_.integer("val_every"), s_.integer("val_batches"), settings_.steps) {
  // Given weights replace the whole initialization; load_weights checks every tensor by name and
  // shape, as `bench eval` does, and lists each mismatch.
  if (s_.given("init_weights")) load_weights(model_, s_.path("init_weights"));
  dataset_ = create_dataset(rc, env);
  ctx_.seed = static_cast<uint64_t>(rc.seed);
  // Graphs where the model is in a device's memory (CUDA; the guarded device emulates them).
  graphs_ = s_.boolean("cuda_graph") && model_.memory() != kernels::Memory::kHost;
}

CaseResult StabilityCase::run() {
  const Cost cost = model_.cost();
  row_.n_params = model_.n_params();
  row_.n_params_embedding = model_.n_params_embedding();
  row_.flops_per_token = (cost.flops_forward + cost.flops_backward) / static_cast<double>(d_.tokens());
  // At initialization, before any update: per-layer gradient norms and activation growth. The
  // diagnostics runner measures the same on its own; these keys keep working here.
  if (const int64_t batches = s_.integer("init_probe_batches"); batches > 0)
    record_init_probe(probe_initialization(rc_, env_, *dataset_, batches, s_.integer("init_probe_seeds")), row_);
  const auto t0 = std::chrono::steady_clock::now();
  train();
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  // Held-out loss at the end (and at other context lengths), without gradients.
  FinalEvaluation final_eval;
  if (!trace_.non_finite() && row_.status != "interrupted")
    final_eval = evaluate_final(rc_, env_, model_, *dataset_, ctx_, inputs_, targets_);
  emit_metrics(final_eval, train_s);
  for (const auto& [kind, path] : dataset_->derived_files()) row_.artifacts.push_back(file_artifact(kind, path, env_));
  if (s_.boolean("save_weights") && row_.status != "interrupted")
    row_.artifacts.push_back(save_final_weights(c_, model_, env_));
  if (trace_.non_finite()) {
    row_.status = "diverged";
    row_.error = "non-finite loss or gradient at step " + std::to_string(trace_.diverged_step());
  }
  return std::move(row_);
}

void StabilityCase::train() {
  for (int64_t step = 0; step < settings_.steps; ++step) {
    if (env_.stop && env_.stop->load()) {
      row_.status = "interrupted";
      break;
    }
    const TrainStep t = train_step(step);
    ++done_;
    if (t.logging) series_.after_update(t, model_, *dataset_, d_, ctx_, inputs_, targets_, row_.series);
    if (!trace_.observe(t, row_.steps)) break;
    if (step % 5 == 0)
      env_.progress.update(env_.prefix + " · step " + std::to_string(step + 1) + "/" + std::to_string(settings_.steps) +
                           " · loss " + std::to_string(t.info.loss).substr(0, 6));
  }
}

void StabilityCase::fall_back(bool logging, const std::string& why) {
  if (s_.given("cuda_graph")) throw Error("cuda_graph: the stability train step cannot be captured: " + why);
  graphs_by_kind_[logging ? 1 : 0].failed = why;
  fell_back_ = true;
  if (graphs_by_kind_[logging ? 0 : 1].failed != why)  // not said already, for the other kind
    env_.progress.note(env_.prefix + " · stability train step not captured into a CUDA graph, run uncaptured: " + why);
}

void StabilityCase::graph_notes() {
  const std::string head = "stability train step not captured into a CUDA graph";
  const auto note = [&](const std::string& text) { row_.notes += (row_.notes.empty() ? "" : "\n") + text; };
  const Graph &plain = graphs_by_kind_[0], &logging = graphs_by_kind_[1];
  if (!plain.failed.empty() && plain.failed == logging.failed) {
    note(head + ", run uncaptured: " + plain.failed);  // cases.notes
    return;
  }
  // A kind that failed while the other replayed its graph says which steps ran uncaptured.
  for (const bool is_logging : {true, false}) {
    const Graph &g = graphs_by_kind_[is_logging ? 1 : 0], &other = graphs_by_kind_[is_logging ? 0 : 1];
    if (g.failed.empty()) continue;
    if (!other.replay)
      note(head + ", run uncaptured: " + g.failed);
    else
      note(head + (is_logging ? " for its logging steps" : " for its steps between logging steps") +
           ", which ran uncaptured (the others replayed theirs): " + g.failed);
  }
}

bool StabilityCase::replays(const TrainStep& t) {
  Graph& g = graphs_by_kind_[t.logging ? 1 : 0];
  if (!graphs_ || !g.failed.empty()) return false;
  if (g.warmed) return true;
  g.warmed = true;  // this one runs uncaptured: the plans, workspaces and snapshot the capture reuses
  return false;
}

bool StabilityCase::replayed_step(TrainStep& t) {
  const auto ts = Clock::now();
  dataset_->batch(Split::kTrain, t.step, d_.batch_size, d_.seq_len, inputs_.data(), targets_.data());
  settings_.set_step(t.step);
  t.lr = settings_.opt.lr;
  // Outside the graph, what changes from step to step: the batch (tokens, the embedding's
  // buckets), the learning rate and decay, and the step number (dropout draws its masks from it).
  model_.stage_batch(inputs_.data(), targets_.data());
  model_.stage_optimizer(settings_.opt);
  model_.stage_step(t.step);  // dropout's masks
  Graph& g = graphs_by_kind_[t.logging ? 1 : 0];
  if (!g.replay) {
    // The step as captured: its settings are frozen here, as a graph's kernel arguments are (the
    // guarded device's emulated replays run this again, so they see what a GPU's replays see).
    // A logging step also reduces its layer probes and the layer series' sums into the model's
    // memory, around the update, as the uncaptured step reads them (train_step).
    g.enqueue = [this, step = t.step, opt = settings_.opt, logging = t.logging] {
      ctx_.training = true;
      ctx_.probes = true;
      ctx_.layer_probes = logging;
      ctx_.step = step;
      ctx_.clear_probes();
      model_.zero_grad();
      (void)model_.forward(inputs_.data(), targets_.data(), ctx_);
      model_.backward(ctx_);
      if (logging) series_.before_update(model_, ctx_);
      (void)model_.optimizer_step(opt, ctx_);
      if (logging) LayerSeries::after_update_captured(model_, ctx_);
    };
    CapturedStep captured = capture_step(ctx_, g.enqueue);  // captured, and replayed once: this step
    if (captured.replay && !model_.replay_has_loss())
      captured.why_not = "the head leaves no loss in device memory (bench/device_probes.h: loss_at)";
    if (!captured.why_not.empty()) {
      fall_back(t.logging, captured.why_not);
      return false;
    }
    g.replay = std::move(captured.replay);
    g.layout = model_.replay_layout();
  } else {
    g.replay->launch();
  }
  ctx_.clear_probes();
  const ReplayReadout r = model_.read_replay(ctx_, g.layout);  // one read of a small block: waits for the replay
  t.info = r.info;
  t.grad_norm = r.grad_norm;
  t.has_sums = r.has_sums;
  t.sums = r.sums;
  t.probes = ctx_.probe_values();
  t.ms = std::chrono::duration<double, std::milli>(Clock::now() - ts).count();
  ++replayed_;
  return true;
}

TrainStep StabilityCase::train_step(int64_t step) {
  const auto ms_since = [](Clock::time_point t) {
    return std::chrono::duration<double, std::milli>(Clock::now() - t).count();
  };
  TrainStep t;
  t.step = step;
  t.logging = settings_.logging(step);
  if (replays(t) && replayed_step(t)) return t;
  const auto ts = Clock::now();
  dataset_->batch(Split::kTrain, step, d_.batch_size, d_.seq_len, inputs_.data(), targets_.data());
  ctx_.training = true;
  ctx_.probes = true;
  ctx_.layer_probes = t.logging;
  ctx_.step = step;
  ctx_.clear_probes();
  model_.zero_grad();
  t.info = model_.forward(inputs_.data(), targets_.data(), ctx_);
  model_.backward(ctx_);
  settings_.set_step(step);
  t.lr = settings_.opt.lr;
  double snapshot_ms = 0;  // measurement work, not part of the step's time
  if (t.logging) {
    const auto t_snap = Clock::now();
    series_.before_update(model_, ctx_);
    snapshot_ms = ms_since(t_snap);
  }
  t.grad_norm = model_.optimizer_step(settings_.opt, ctx_);
  t.ms = ms_since(ts) - snapshot_ms;
  t.probes = ctx_.probe_values();
  return t;
}

void StabilityCase::emit_metrics(const FinalEvaluation& final_eval, double train_s) {
  auto& m = row_.metrics;
  const double val = final_eval.val.loss, tail_mean = trace_.tail_mean();
  m.push_back({"lr", settings_.peak, ""});
  m.push_back({"steps_done", static_cast<double>(done_), "steps"});
  m.push_back({"initial_loss", trace_.initial_loss(), "nats"});
  m.push_back({"final_loss", std::isfinite(val) ? val : tail_mean, "nats"});
  m.push_back({"final_val_loss", val, "nats"});
  // Bits per byte compare across tokenizers, where nats per token do not (docs/results.md).
  if (std::isfinite(final_eval.val.bits_per_byte)) {
    m.push_back({"final_val_bpb", final_eval.val.bits_per_byte, "bits/byte"});
    m.push_back({"val_bytes_per_token", final_eval.val.bytes_per_token, "bytes/token"});
  }
  m.push_back({"vocab_size", static_cast<double>(d_.vocab_size), "tokens"});
  m.push_back({"final_train_loss", tail_mean, "nats"});
  trace_.emit_best(m);
  SpikeCounts(trace_, s_.integer("spike_window"), s_.number("spike_sigma")).emit(done_, m);
  trace_.emit_last(m);
  m.push_back({"train_tokens_per_s", static_cast<double>(done_ * d_.tokens()) / train_s, "tokens/s"});
  trace_.emit_layers(m);
  series_.emit(m);
  for (const auto& [k, v] : dataset_->reference()) m.push_back({k, v, "nats"});
  for (const auto& [len, loss] : final_eval.long_context)
    m.push_back({"val_loss_at_" + std::to_string(len), loss, "nats"});
  if (model_.memory() != kernels::Memory::kHost) {  // a device: whether its steps were replayed
    const bool captured = graphs_by_kind_[0].replay || graphs_by_kind_[1].replay;
    m.push_back({"cuda_graph", captured ? 1.0 : 0.0, ""});
    m.push_back({"graph_steps", static_cast<double>(replayed_), "steps"});
    if (fell_back_) m.push_back({"graph_fallback/stability", 1.0, ""});
  }
  graph_notes();
}

}  // namespace

CaseResult StabilityRunner::run(const Case& c, const ResolvedCase& rc, RunnerEnv& env) const {
  return StabilityCase(c, rc, env).run();
}

const Runner& stability_runner() {
  static const StabilityRunner runner;
  return runner;
}

}  // namespace bench
