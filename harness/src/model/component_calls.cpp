#include "model/component_calls.h"

#include <utility>

#include "bench/interfaces.h"
#include "bench/residual_norm.h"

namespace bench {

// ----------------------------------------------------------------------------
// the listener

namespace {
thread_local ComponentListener* t_listener = nullptr;
}  // namespace

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "forward";
    case Pass::kBackward:
      return "backward";
    case Pass::kOptimizer:
      return "optimizer";
    case Pass::kStep:
      return "step";
  }
  return "?";
}

ComponentListener::~ComponentListener() = default;

ComponentListener* listen_components(ComponentListener* listener) {
  ComponentListener* before = t_listener;
  t_listener = listener;
  return before;
}

ComponentListener* component_listener() { return t_listener; }

// ----------------------------------------------------------------------------
// the wrappers: one per slot interface, each call a ComponentCall, the rest passed through

namespace {

/// What every wrapper passes through: validation, setup (already done when wrapped), costs and
/// accounting facts; and it adopts the wrapped component's children.
template <class I>
class Wrapped : public I {
 public:
  Wrapped(std::unique_ptr<Component> inner, ComponentTag tag) : owner_(std::move(inner)), tag_(std::move(tag)) {
    inner_ = dynamic_cast<I*>(owner_.get());
    for (Component* child : owner_->children()) this->adopt(child);
  }
  void validate(const ModelDims& dims) const override { inner_->validate(dims); }
  void setup(SetupContext& ctx) override { inner_->setup(ctx); }
  Cost cost() const override { return inner_->cost(); }
  AccountingFacts accounting() const override { return inner_->accounting(); }

 protected:
  std::unique_ptr<Component> owner_;
  I* inner_ = nullptr;
  ComponentTag tag_;
};

/// Also a ResidualNorm: the wrapped norm's folded adds, each a call of its pass, where it has
/// them (folds_residual false otherwise, as for every sublayer that is not such a norm).
class WrappedSublayer final : public Wrapped<Sublayer>, public ResidualNorm {
 public:
  WrappedSublayer(std::unique_ptr<Component> inner, ComponentTag tag)
      : Wrapped(std::move(inner), std::move(tag)), fused_(dynamic_cast<ResidualNorm*>(owner_.get())) {}
  void forward(const Tensor& x, Tensor& y, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    inner_->forward(x, y, ctx);
  }
  void backward(const Tensor& dy, Tensor& dx, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    inner_->backward(dy, dx, ctx);
  }
  bool folds_residual(const RunContext& ctx) const override { return fused_ != nullptr && fused_->folds_residual(ctx); }
  void forward_of_sum(const Tensor& a, const Tensor& b, Tensor& s, Tensor& y, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    fused_->forward_of_sum(a, b, s, y, ctx);
  }
  void forward_plus(const Tensor& x, const Tensor& res, Tensor& y, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    fused_->forward_plus(x, res, y, ctx);
  }
  void backward_plus(const Tensor& dy, const Tensor& dres, Tensor& dx, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    fused_->backward_plus(dy, dres, dx, ctx);
  }

 private:
  ResidualNorm* fused_;
};

class WrappedResidual final : public Wrapped<Residual> {
 public:
  using Wrapped::Wrapped;
  void forward(const Tensor& x, Tensor& y, Sublayer& f, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    inner_->forward(x, y, f, ctx);
  }
  void backward(const Tensor& dy, Tensor& dx, Sublayer& f, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    inner_->backward(dy, dx, f, ctx);
  }
  bool wants_final_norm() const override { return inner_->wants_final_norm(); }
};

class WrappedPosition final : public Wrapped<Position> {
 public:
  using Wrapped::Wrapped;
  void embed_forward(Tensor& h, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    inner_->embed_forward(h, ctx);
  }
  void embed_backward(const Tensor& dh, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    inner_->embed_backward(dh, ctx);
  }
  void rotate_forward(const QkView& qk, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    inner_->rotate_forward(qk, ctx);
  }
  void rotate_backward(const QkView& qk, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    inner_->rotate_backward(qk, ctx);
  }
  double attention_scale() const override { return inner_->attention_scale(); }
};

class WrappedEmbedding final : public Wrapped<Embedding> {
 public:
  using Wrapped::Wrapped;
  void forward(const int32_t* tokens, Tensor& h, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    inner_->forward(tokens, h, ctx);
  }
  void backward(const Tensor& dh, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    inner_->backward(dh, ctx);
  }
  Param* weight() override { return inner_->weight(); }
};

class WrappedHead final : public Wrapped<Head> {
 public:
  using Wrapped::Wrapped;
  LossInfo forward(const Tensor& h, const int32_t* targets, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kForward);
    return inner_->forward(h, targets, ctx);
  }
  void backward(Tensor& dh, RunContext& ctx) override {
    const ComponentCall c(tag_, Pass::kBackward);
    inner_->backward(dh, ctx);
  }
  const Tensor* logits() const override { return inner_->logits(); }
};

}  // namespace

std::unique_ptr<Component> wrap_component(Slot slot, std::unique_ptr<Component> inner, ComponentTag tag) {
  switch (slot) {
    case Slot::kEmbedding:
      return std::make_unique<WrappedEmbedding>(std::move(inner), std::move(tag));
    case Slot::kPosition:
      return std::make_unique<WrappedPosition>(std::move(inner), std::move(tag));
    case Slot::kNormPosition:
      return std::make_unique<WrappedResidual>(std::move(inner), std::move(tag));
    case Slot::kHead:
      return std::make_unique<WrappedHead>(std::move(inner), std::move(tag));
    case Slot::kDataset:
      return inner;
    default:
      return std::make_unique<WrappedSublayer>(std::move(inner), std::move(tag));
  }
}

}  // namespace bench
