#include "model/model.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <set>
#include <sstream>

#include "bench/ops.h"
#include "bench/random.h"
#include "kernels/adamw.h"
#include "kernels/dropout.h"
#include "kernels/elementwise.h"
#include "model/component_calls.h"
#include "plugins/registry.h"

namespace bench {

namespace {

[[noreturn]] void rethrow_from_plugin(const Registry& registry, const ComponentInfo& info, const char* step) {
  try {
    throw;
  } catch (const ConfigError&) {
    throw;
  } catch (const std::exception& e) {
    throw Error("plugin " + registry.origin(&info) + ": " + std::string(slot_name(info.slot)) + " '" + info.name +
                "': " + step + " threw: " + e.what());
  } catch (...) {
    throw Error("plugin " + registry.origin(&info) + ": " + std::string(slot_name(info.slot)) + " '" + info.name +
                "': " + step + " threw a non-standard exception");
  }
}

bool implements(Slot slot, Component* c) {
  switch (slot) {
    case Slot::kEmbedding:
      return dynamic_cast<Embedding*>(c) != nullptr;
    case Slot::kPosition:
      return dynamic_cast<Position*>(c) != nullptr;
    case Slot::kNormPosition:
      return dynamic_cast<Residual*>(c) != nullptr;
    case Slot::kHead:
      return dynamic_cast<Head*>(c) != nullptr;
    case Slot::kDataset:
      return dynamic_cast<Dataset*>(c) != nullptr;
    case Slot::kBlock:
    case Slot::kNorm:
    case Slot::kAttention:
    case Slot::kFfn:
      return dynamic_cast<Sublayer*>(c) != nullptr;
  }
  return false;
}

const char* interface_name(Slot slot) {
  switch (slot) {
    case Slot::kEmbedding:
      return "bench::Embedding";
    case Slot::kPosition:
      return "bench::Position";
    case Slot::kNormPosition:
      return "bench::Residual";
    case Slot::kHead:
      return "bench::Head";
    case Slot::kDataset:
      return "bench::Dataset";
    default:
      return "bench::Sublayer";
  }
}

}  // namespace

class ModelSetupContext final : public SetupContext {
 public:
  ModelSetupContext(Model& m, std::string scope, int64_t rows, int64_t width, int layer, Component* owner)
      : m_(m), scope_(std::move(scope)), rows_(rows), width_(width), layer_(layer), owner_(owner) {}

  const ModelDims& dims() const override { return m_.spec_.dims; }
  DType dtype() const override { return m_.spec_.dtype; }
  tile::Backend backend() const override { return m_.spec_.backend; }
  bool planning() const override { return m_.arena_.plan_only(); }
  int64_t rows() const override { return rows_; }
  int64_t width() const override { return width_; }
  int layer() const override { return layer_; }
  const std::string& scope() const override { return scope_; }

  Param* add_param(std::string_view name, Shape shape, Init init, ParamGroup group, int64_t pad_rows) override {
    const std::string full = join(scope_, name);
    for (const auto& p : m_.params_)
      if (p->name == full) throw Error("parameter '" + full + "' declared twice");
    if (shape.numel() <= 0) throw Error("parameter '" + full + "' has empty shape " + shape.str());
    if (pad_rows < 0) throw Error("parameter '" + full + "' has " + std::to_string(pad_rows) + " padding rows");
    auto p = std::make_unique<Param>();
    p->name = full;
    p->shape = shape;
    p->init = init;
    p->group = group;
    p->pad_rows = pad_rows;
    const auto& groups = m_.spec_.decay_groups;
    p->decay = std::find(groups.begin(), groups.end(), param_group_name(group)) != groups.end();
    m_.params_.push_back(std::move(p));
    return m_.params_.back().get();
  }

  Tensor buffer(Shape shape, DType dtype) override { return m_.arena_.allocate(shape, dtype); }

  std::unique_ptr<Component> build(Slot slot, std::string_view name, int64_t rows, int64_t width) override {
    if (slot == Slot::kDataset) throw Error("a model component cannot build a dataset");
    const SlotChoice& choice = m_.spec_.slot(slot);
    std::unique_ptr<Component> c = m_.registry_.create(*choice.info, choice.params);
    if (!implements(slot, c.get()))
      throw Error("plugin " + m_.registry_.origin(choice.info) + ": " + std::string(slot_name(slot)) + " '" +
                  choice.info->name + "' does not implement " + interface_name(slot));
    // In a plan, checked against the model's dimensions before anything is declared or
    // allocated: the plan is also the case's validation (bench validate, bench run).
    if (m_.validate_) {
      try {
        c->validate(m_.spec_.dims);
      } catch (...) {
        rethrow_from_plugin(m_.registry_, *choice.info, "validate");
      }
    }
    ModelSetupContext child(m_, join(scope_, name), rows < 0 ? rows_ : rows, width < 0 ? width_ : width, layer_,
                            c.get());
    try {
      c->setup(child);
    } catch (...) {
      rethrow_from_plugin(m_.registry_, *choice.info, "setup");
    }
    m_.nodes_.push_back({child.scope_, slot, choice.info->name, layer_, c.get(), choice.info});
    // Handed out wrapped: each call into it is a ComponentCall, for the profile.
    std::unique_ptr<Component> wrapped =
        wrap_component(slot, std::move(c), {child.scope_, std::string(slot_name(slot)), choice.info->name});
    if (owner_ != nullptr) owner_->adopt(wrapped.get());
    return wrapped;
  }

  Position* position() override {
    if (!m_.position_) throw Error("the position component is not built yet");
    return m_.position_.get();
  }
  Param* embedding_weight() override {
    if (!m_.embedding_) throw Error("the embedding is not built yet");
    return m_.embedding_->weight();
  }

 private:
  static std::string join(const std::string& scope, std::string_view name) {
    if (scope.empty()) return std::string(name);
    if (name.empty()) return scope;
    return scope + "." + std::string(name);
  }

  Model& m_;
  std::string scope_;
  int64_t rows_;
  int64_t width_;
  int layer_;
  Component* owner_;
};

Model::Model(const ModelSpec& spec, const Registry& registry, uint64_t seed, bool plan_only)
    : spec_(spec), registry_(registry), arena_(plan_only, kernels::memory_for(spec.backend)) {
  build(plan_only, seed);
}

Model::Model(const ModelSpec& spec, const Registry& registry, Validating)
    : spec_(spec), registry_(registry), arena_(true, kernels::memory_for(spec.backend)), validate_(true) {
  build(true, 0);
}

void Model::build(bool plan_only, uint64_t seed) {
  const ModelDims& d = spec_.dims;
  const int64_t rows = d.tokens();
  ModelSetupContext root(*this, "", rows, d.d_model, -1, nullptr);
  embedding_ = root.build_as<Embedding>(Slot::kEmbedding, "embed");
  position_ = root.build_as<Position>(Slot::kPosition, "pos");
  for (int64_t i = 0; i < d.n_layers; ++i) {
    ModelSetupContext layer(*this, "blocks", rows, d.d_model, static_cast<int>(i), nullptr);
    blocks_.push_back(layer.build_as<Sublayer>(Slot::kBlock, std::to_string(i)));
  }
  bool final_norm = spec_.final_norm == "on";
  if (spec_.final_norm == "auto") {
    // As the norm position the blocks built prefers (on when they built none).
    const auto residuals = components(Slot::kNormPosition);
    const auto* residual = residuals.empty() ? nullptr : dynamic_cast<const Residual*>(residuals.front().second);
    final_norm = residual == nullptr || residual->wants_final_norm();
  }
  if (final_norm) final_norm_ = root.build_as<Sublayer>(Slot::kNorm, "final_norm");
  head_ = root.build_as<Head>(Slot::kHead, "head");

  for (int64_t i = 0; i <= d.n_layers; ++i) acts_.push_back(arena_.allocate({rows, d.d_model}, spec_.dtype));
  normed_ = final_norm_ ? arena_.allocate({rows, d.d_model}, spec_.dtype) : acts_.back();
  grad_a_ = arena_.allocate({rows, d.d_model}, spec_.dtype);
  grad_b_ = arena_.allocate({rows, d.d_model}, spec_.dtype);
  if (arena_.memory() != kernels::Memory::kHost) {
    inputs_ = arena_.allocate({rows}, DType::kInt32);
    targets_ = arena_.allocate({rows}, DType::kInt32);
  }

  // Parameter storage: one flat block, weight-decay group first, so that the optimizer and
  // the gradient norm run over two contiguous ranges. A parameter's padding rows (a padded
  // vocabulary) follow its real rows there: zero, with a zero gradient, so AdamW keeps them zero
  // and they add nothing to the norms.
  std::stable_sort(params_.begin(), params_.end(), [](const auto& a, const auto& b) { return a->decay > b->decay; });
  int64_t total = 0;
  for (const auto& p : params_) total += p->padded_shape().numel();
  values_ = arena_.allocate({total}, spec_.dtype);
  grads_ = arena_.allocate({total}, spec_.dtype);
  const DType acc = spec_.dtype == DType::kFloat64 ? DType::kFloat64 : DType::kFloat32;
  adam_m_ = arena_.allocate({total}, acc);
  adam_v_ = arena_.allocate({total}, acc);
  if (spec_.dtype == DType::kBFloat16) master_ = arena_.allocate({total}, DType::kFloat32);
  adam_state_ = arena_.allocate({kernels::kAdamStateSize + std::max<int64_t>(1, kernels::sum_squares_partials(total))},
                                DType::kFloat64);
  if (arena_.memory() != kernels::Memory::kHost) {
    rates_ = arena_.allocate({2}, DType::kFloat64);
    step_slot_ = arena_.allocate({1}, DType::kFloat64);  // holds an int64_t (stage_step)
    step_slot_.zero();                                   // step 0 until a step is staged
    // The block a captured step gathers its probes into: the grad norm's squares, the loss's
    // three doubles and a max logit per layer, with room for more probes of plugins' own.
    // A captured logging step adds its layer probes (five a layer) and the layer series' sums (two
    // per parameter of a block, and the parameter norm).
    int64_t block_params = 0;
    for (const auto& p : params_) block_params += layer_of(p->name) >= 0 ? 1 : 0;
    probe_block_ = arena_.allocate({kProbeSlotsFixed + 8 * d.n_layers + 64 + 2 * block_params + 1}, DType::kFloat64);
    const int64_t parts =
        std::max<int64_t>({1, kernels::sum_squares_partials(total), kernels::sum_squares_partials(rows * d.d_model)});
    probe_work_ = arena_.allocate({parts + d.n_layers + 1}, DType::kFloat64);
  }
  int64_t offset = 0;
  const size_t esize = dtype_size(spec_.dtype);
  // A plan's parameters have no storage, as its buffers (Arena): views of nothing.
  const auto view = [&](const Tensor& block, const Param& p) {
    return block.defined() ? Tensor(static_cast<char*>(block.raw()) + offset * esize, spec_.dtype, p.shape)
                           : Tensor(nullptr, spec_.dtype, p.shape);
  };
  for (const auto& p : params_) {
    p->value = view(values_, *p);
    p->grad = view(grads_, *p);
    offset += p->padded_shape().numel();
    if (p->decay) decay_count_ += p->padded_shape().numel();
    param_ptrs_.push_back(p.get());
    n_params_ += p->shape.numel();  // the real rows only: padding is the implementation's
    if (p->group == ParamGroup::kEmbedding) n_params_embedding_ += p->shape.numel();
  }

  if (plan_only) return;
  // Initialization: each parameter from its own stream, keyed by seed and name, so adding a
  // parameter elsewhere never changes another one's initial values. The values are made on the
  // host (in float for a bf16 model's master copy, whose rounding is the bf16 value) and copied
  // into the model's memory once. Padding rows stay zero (the staging is) and draw nothing, so
  // the real values do not depend on the padding.
  std::vector<char> staging(values_.bytes());
  std::vector<float> master(master_.defined() ? static_cast<size_t>(total) : 0);
  dispatch_float(spec_.dtype, [&]<class T>() {
    T* v = reinterpret_cast<T*>(staging.data());
    for (const auto& p : params_) {
      Rng rng(hash_seed(seed, p->name));
      const int64_t begin = p->value.data<T>() - values_.data<T>();
      for (int64_t i = begin; i < begin + p->value.numel(); ++i) {
        double x = 0;
        switch (p->init.kind) {
          case Init::Kind::kNormal:
            x = rng.normal() * p->init.value;
            break;
          case Init::Kind::kZeros:
            x = 0;
            break;
          case Init::Kind::kOnes:
            x = 1;
            break;
          case Init::Kind::kConstant:
            x = p->init.value;
            break;
        }
        v[i] = scalar_as<T>(x);
        if (!master.empty()) master[static_cast<size_t>(i)] = static_cast<float>(x);
      }
    }
  });
  kernels::copy_bytes(values_.raw(), staging.data(), staging.size());
  if (master_.defined()) kernels::copy_bytes(master_.raw(), master.data(), master_.bytes());
}

namespace {
/// Where a model's kernels run: its memory's executor, except that the emulated device (host
/// memory like the CPU's) keeps the emulated-block executor, which composes every launcher as the
/// device does (tile::runs_as_device).
tile::Exec model_exec(tile::Backend backend, kernels::Memory memory) {
  if (backend == tile::Backend::kEmulated) return tile::Exec{tile::Backend::kEmulated, nullptr};
  return memory == kernels::Memory::kHost ? tile::Exec{} : kernels::exec_for(memory);
}
}  // namespace

void Model::bind(RunContext& ctx) const {
  if (arena_.memory() != kernels::Memory::kHost || spec_.backend == tile::Backend::kEmulated)
    ctx.exec = model_exec(spec_.backend, arena_.memory());
  // A captured step reads its step number from the model's memory (stage_step writes it).
  ctx.step_at = ctx.capturing && step_slot_.defined() ? static_cast<const int64_t*>(step_slot_.raw()) : nullptr;
}

Model::~Model() {
  // Components before the registry's libraries (which own their code): members are destroyed
  // in reverse order, and the registry outlives the model by contract.
  head_.reset();
  final_norm_.reset();
  blocks_.clear();
  position_.reset();
  embedding_.reset();
}

namespace {
const ComponentTag model_tag{"", "model", ""};  // the model's own work, outside its components
}  // namespace

LossInfo Model::forward(const int32_t* inputs, const int32_t* targets, RunContext& ctx) {
  const ComponentCall call(model_tag, Pass::kForward);
  try {
    return forward_steps(inputs, targets, ctx);
  } catch (const tile::Unsupported& e) {
    rethrow_unsupported(e);
  }
}

void Model::backward(RunContext& ctx) {
  const ComponentCall call(model_tag, Pass::kBackward);
  try {
    backward_steps(ctx);
  } catch (const tile::Unsupported& e) {
    rethrow_unsupported(e);
  }
}

void Model::rethrow_unsupported(const tile::Unsupported& e) const {
  // A kernel of a plugin's own: the model's components from that plugin.
  std::vector<const Node*> from;
  if (!e.module().empty())
    for (const Node& n : nodes_)
      if (std::filesystem::path(registry_.origin(n.info)).filename() == e.module()) from.push_back(&n);
  std::string who;
  if (!from.empty()) {
    const Node& n = *from.front();
    who = std::string(slot_name(n.slot)) + " '" + n.name + "' at " + n.scope;
    if (from.size() > 1) who += " (and " + std::to_string(from.size() - 1) + " more of its plugin)";
    who += ", plugin " + registry_.origin(n.info);
  } else {
    who = "the model's " + (stage_.empty() ? std::string("step") : stage_);
    for (const Node& n : nodes_)
      if (n.scope == stage_) who = std::string(slot_name(n.slot)) + " '" + n.name + "' at " + n.scope;
  }
  throw Error(who + ": " + e.what());
}

LossInfo Model::forward_steps(const int32_t* inputs, const int32_t* targets, RunContext& ctx) {
  bind(ctx);
  const int32_t* host_targets = targets;
  struct HostInputs {  // for the embedding, which then need not read the device's copy back
    RunContext& ctx;
    ~HostInputs() { ctx.host_inputs = nullptr; }
  } inputs_scope{ctx};
  ctx.host_inputs = inputs;
  if (inputs_.defined() && !ctx.capturing) {  // tokens into the model's memory
    kernels::copy_bytes(inputs_.raw(), inputs, inputs_.bytes());
    kernels::copy_bytes(targets_.raw(), targets, targets_.bytes());
  }
  (void)take_capture_record(ctx);  // a stale one, of a context at the same address
  if (inputs_.defined()) {
    inputs = inputs_.data<int32_t>();
    targets = targets_.data<int32_t>();
  }
  stage_ = "embed";
  embedding_->forward(inputs, acts_[0], ctx);
  stage_ = "pos";
  position_->embed_forward(acts_[0], ctx);
  embedding_dropout(acts_[0], ctx);
  for (size_t i = 0; i < blocks_.size(); ++i) {
    stage_ = "blocks." + std::to_string(i);
    blocks_[i]->forward(acts_[i], acts_[i + 1], ctx);
  }
  stage_.clear();
  if (ctx.probes && ctx.layer_probes) residual_rms_probes(ctx);
  stage_ = "final_norm";
  if (final_norm_) final_norm_->forward(acts_.back(), normed_, ctx);
  stage_ = "head";
  struct HostTargets {  // for the head, which then need not read the device's copy back
    RunContext& ctx;
    ~HostTargets() { ctx.host_targets = nullptr; }
  } scope{ctx};
  ctx.host_targets = host_targets;
  const LossInfo info = head_->forward(normed_, targets, ctx);
  CaptureRecord record = take_capture_record(ctx);
  staging_ = std::move(record.staging);
  if (ctx.capturing) gather_probes(std::move(record.probes));
  return info;
}

void Model::backward_steps(RunContext& ctx) {
  bind(ctx);
  Tensor* d = &grad_a_;
  Tensor* other = &grad_b_;
  stage_ = "head";
  if (final_norm_) {
    head_->backward(*other, ctx);
    stage_ = "final_norm";
    final_norm_->backward(*other, *d, ctx);
  } else {
    head_->backward(*d, ctx);
  }
  for (size_t i = blocks_.size(); i-- > 0;) {
    stage_ = "blocks." + std::to_string(i);
    blocks_[i]->backward(*d, *other, ctx);
    std::swap(d, other);
  }
  embedding_dropout(*d, ctx);  // the same mask on the gradient
  stage_ = "pos";
  position_->embed_backward(*d, ctx);
  stage_ = "embed";
  embedding_->backward(*d, ctx);
  stage_.clear();
}

void Model::zero_grad() { grads_.zero(); }

double Model::grad_norm(RunContext& ctx) const {
  bind(ctx);
  return std::sqrt(ops::sum_squares(ctx, grads_));
}

void Model::stage_optimizer(const OptimizerStep& s) {
  if (!rates_.defined()) return;  // host memory: the step folds them in, as it always has
  const double rates[2] = {s.lr, 1 - s.decay_lr * s.weight_decay};
  if (staged_rates_valid_ && staged_rates_[0] == rates[0] && staged_rates_[1] == rates[1]) return;
  kernels::copy_bytes(rates_.raw(), rates, sizeof rates);
  staged_rates_[0] = rates[0];
  staged_rates_[1] = rates[1];
  staged_rates_valid_ = true;
}

double Model::optimizer_step(const OptimizerStep& s, RunContext& ctx) {
  bind(ctx);
  if (!ctx.capturing) stage_optimizer(s);
  static const ComponentTag optimizer_tag{"optimizer", "optimizer", "adamw"};
  const ComponentCall call(optimizer_tag, Pass::kOptimizer);
  auto* state = static_cast<double*>(adam_state_.raw());
  const int64_t total = values_.numel();
  dispatch_float(spec_.dtype, [&]<class T>() {
    using A = tile::acc_t<T>;
    T* v = values_.data<T>();
    T* g = grads_.data<T>();
    A* m = static_cast<A*>(adam_m_.raw());
    A* sq = static_cast<A*>(adam_v_.raw());
    A* w = master_.defined() ? static_cast<A*>(master_.raw()) : nullptr;
    kernels::sum_of_into<T>(ctx.exec, kernels::SumOf::kSquares, g, total, state + kernels::kAdamStateSize,
                            state + kernels::kAdamSumSquares);
    kernels::adamw_scalars(ctx.exec, state, s.beta1, s.beta2, s.grad_clip);
    // On a device the rates are read where the model is (stage_optimizer wrote them), so that a
    // captured step replays with the schedule's; the decay group reads 1 - decay too, the other
    // none. In host memory they are folded in (the same doubles, rounded once: the same bits).
    kernels::AdamWStep step{s.lr, s.beta1, s.beta2, s.eps, s.decay_lr * s.weight_decay, 0, 1.0, state};
    if (rates_.defined()) {
      step.lr_at = static_cast<const double*>(rates_.raw());
      step.keep_at = step.lr_at + 1;
    }
    kernels::adamw_update<T>(ctx.exec, v, g, m, sq, decay_count_, step, w);
    step.decay = 0;
    step.keep_at = nullptr;
    kernels::adamw_update<T>(ctx.exec, v + decay_count_, g + decay_count_, m + decay_count_, sq + decay_count_,
                             total - decay_count_, step, w != nullptr ? w + decay_count_ : nullptr);
  });
  if (ctx.capturing) {  // the squares into the probe block, for the host to read after the replay
    if (probe_block_.defined())
      kernels::copy_bytes(static_cast<double*>(probe_block_.raw()) + kProbeGradSquares,
                          state + kernels::kAdamSumSquares, sizeof(double));
    return std::nan("");
  }
  double sum_squares = 0;
  kernels::copy_bytes(&sum_squares, state + kernels::kAdamSumSquares, sizeof sum_squares);
  return std::sqrt(sum_squares);
}

std::vector<LayerSquares> Model::squares_by_layer(LayerQuantity what) {
  std::vector<LayerSquares> out(static_cast<size_t>(spec_.dims.n_layers));
  const Tensor& source = what == LayerQuantity::kGradient ? grads_ : master_.defined() ? master_ : values_;
  const size_t esize = dtype_size(spec_.dtype);
  // Element offset of a parameter in the flat blocks (values_, grads_, master_, snapshot_).
  const auto offset_of = [&](const Param& p) {
    return static_cast<int64_t>(static_cast<const char*>(p.value.raw()) - static_cast<const char*>(values_.raw())) /
           static_cast<int64_t>(esize);
  };
  const bool update = what == LayerQuantity::kUpdate;
  if (update && !snapshot_valid_)
    throw Error("squares_by_layer(kUpdate) needs a snapshot_parameters() since the last one");
  const tile::Exec exec = model_exec(spec_.backend, arena_.memory());
  dispatch_float(source.dtype(), [&]<class T>() {
    T* diff = update ? snapshot_.data<T>() : nullptr;
    if (update) {  // snapshot = snapshot - value, in place, over all parameters at once
      kernels::axpy<T>(exec, -1, source.data<T>(), diff, source.numel());
      snapshot_valid_ = false;
    }
    const T* base = update ? diff : source.data<T>();
    for (const auto& p : params_) {
      const int layer = layer_of(p->name);
      if (layer < 0 || layer >= static_cast<int>(out.size())) continue;
      out[static_cast<size_t>(layer)].sum_squares +=
          kernels::sum_of<T>(exec, kernels::SumOf::kSquares, base + offset_of(*p), p->value.numel());
      out[static_cast<size_t>(layer)].count += p->value.numel();
    }
  });
  return out;
}

void Model::embedding_dropout(Tensor& t, const RunContext& ctx) const {
  const double p = spec_.dims.dropout_embedding;
  if (!ctx.training || p <= 0) return;
  const uint64_t seed = kernels::dropout_launch_seed(ctx.seed, ctx.step, -1, ctx.step_at);
  dispatch_float(t.dtype(), [&]<class T>() {
    kernels::dropout_apply<T>(ctx.exec, t.data<T>(), t.data<T>(), t.numel(), p, seed, ctx.step_at);
  });
}

Cost Model::cost() const {
  Cost c;
  for (const auto& n : nodes_) c += n.component->cost();
  return c;
}

ModelPlan Model::plan(const ModelSpec& spec, const Registry& registry) {
  const Model m(spec, registry, Validating{});
  return ModelPlan{m.bytes(), m.cost(), m.n_params(), m.n_params_embedding()};
}

size_t Model::estimate_bytes(const ModelSpec& spec, const Registry& registry) { return plan(spec, registry).bytes; }

std::vector<std::pair<int, const Component*>> Model::components(Slot slot) const {
  std::vector<std::pair<int, const Component*>> out;
  for (const auto& n : nodes_)
    if (n.slot == slot) out.emplace_back(n.layer, n.component);
  return out;
}

std::string Model::describe() const {
  std::ostringstream os;
  for (const auto& n : nodes_) os << n.scope << ": " << slot_name(n.slot) << " '" << n.name << "'\n";
  for (const auto& p : params_)
    os << "  " << p->name << " " << p->shape.str() << (p->decay ? "" : " (no decay)")
       << (p->pad_rows > 0 ? " (stored with " + std::to_string(p->pad_rows) + " zero padding rows)" : "") << "\n";
  return os.str();
}

}  // namespace bench
