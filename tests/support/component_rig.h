// defines: test::ComponentRig, test::normal_init, test::init_by_kind — components set up outside a
// model, as the model sets them up: from a resolved case's slots, on an arena, with parameters
// named scope.name, buffers, children built from the configured slots, and a RunContext. What
// every plugin test needs to put one component (or a few) under test.
#pragma once

#include <functional>
#include <list>
#include <memory>
#include <string>
#include <string_view>

#include "bench/interfaces.h"
#include "bench/random.h"
#include "model/arena.h"
#include "model/spec.h"
#include "support/toml_case.h"

namespace bench::test {

/// Components of one model spec, set up on the rig's own arena.
class ComponentRig {
 public:
  /// Fills a parameter just declared: `local` is the name the component gave it, p.name the
  /// full one. The default leaves it zero.
  using Filler = std::function<void(Param& p, std::string_view local)>;

  /// How the rig sets components up; built fluently: Options().in("head").with_rows(12).
  struct Options {
    std::string scope;       ///< the top-level components' scope: parameters are named scope.name
    int layer = -1;          ///< SetupContext::layer()
    int64_t rows = -1;       ///< SetupContext::rows(); -1: the spec's tokens per step
    int64_t width = -1;      ///< SetupContext::width(); -1: d_model
    Filler init;             ///< how parameters are filled
    bool plan_only = false;  ///< count sizes only (real-model sizes): SetupContext::planning(), no storage

    Options&& in(std::string s) && { return scope = std::move(s), std::move(*this); }
    Options&& at_layer(int l) && { return layer = l, std::move(*this); }
    Options&& with_rows(int64_t r) && { return rows = r, std::move(*this); }
    Options&& with_width(int64_t w) && { return width = w, std::move(*this); }
    Options&& filled_by(Filler f) && { return init = std::move(f), std::move(*this); }
    Options&& shapes_only(bool yes = true) && { return plan_only = yes, std::move(*this); }
  };

  explicit ComponentRig(ModelSpec spec) : ComponentRig(std::move(spec), Options{}) {}
  ComponentRig(ModelSpec spec, Options options)
      : spec_(std::move(spec)), options_(std::move(options)), arena_(options_.plan_only) {}

  /// The component configured for `slot`, created through the registry and set up as `name`
  /// (under the rig's scope; "" names it by the scope alone). Throws when it lacks interface I.
  template <class I = Component>
  std::unique_ptr<I> build(Slot slot, std::string_view name = "") {
    Context root(*this, options_.scope, rows(), width(), options_.layer, nullptr);
    return root.build_as<I>(slot, name);
  }

  /// What SetupContext::position() and embedding_weight() return (nullptr: none, an error).
  void set_position(Position* p) { position_ = p; }
  void set_embedding(Param* p) { embedding_ = p; }

  /// A parameter by full name or by its name within the rig's scope. Throws when there is none.
  Param& param(std::string_view name) {
    for (Param& p : params_)
      if (p.name == name || p.name == join(options_.scope, name)) return p;
    throw Error("no parameter " + std::string(name));
  }
  const Param& param(std::string_view name) const { return const_cast<ComponentRig*>(this)->param(name); }
  std::list<Param>& params() { return params_; }
  const std::list<Param>& params() const { return params_; }
  /// Elements of every parameter declared so far.
  int64_t n_params() const {
    int64_t n = 0;
    for (const Param& p : params_) n += p.shape.numel();
    return n;
  }
  /// A zeroed tensor of the spec's dtype from the rig's arena (inputs, outputs, gradients).
  Tensor tensor(Shape shape) { return arena_.allocate(shape, spec_.dtype); }
  /// A parameter of the rig's own (a stand-in, e.g. the embedding a tied head reads), with
  /// `pad_rows` zero rows stored after its real ones (Param::pad_rows).
  Param& stand_in(const std::string& name, Shape shape, int64_t pad_rows = 0) {
    Param& p = params_.emplace_back();
    p.name = name;
    p.shape = shape;
    p.pad_rows = pad_rows;
    allocate(p);
    return p;
  }

  const ModelSpec& spec() const { return spec_; }
  const ModelDims& dims() const { return spec_.dims; }
  int64_t rows() const { return options_.rows >= 0 ? options_.rows : spec_.dims.tokens(); }
  int64_t width() const { return options_.width >= 0 ? options_.width : spec_.dims.d_model; }

  /// The run context the test hands to forward and backward.
  RunContext ctx;

 private:
  // value and grad with their padding rows (zero: the arena's allocations are), views of the real rows.
  void allocate(Param& p) {
    p.value = Tensor(arena_.allocate(p.padded_shape(), spec_.dtype).raw(), spec_.dtype, p.shape);
    p.grad = Tensor(arena_.allocate(p.padded_shape(), spec_.dtype).raw(), spec_.dtype, p.shape);
  }

  static std::string join(std::string_view scope, std::string_view name) {
    if (scope.empty()) return std::string(name);
    if (name.empty()) return std::string(scope);
    return std::string(scope) + "." + std::string(name);
  }

  class Context final : public SetupContext {
   public:
    Context(ComponentRig& rig, std::string scope, int64_t rows, int64_t width, int layer, Component* owner)
        : rig_(rig), scope_(std::move(scope)), rows_(rows), width_(width), layer_(layer), owner_(owner) {}
    const ModelDims& dims() const override { return rig_.spec_.dims; }
    DType dtype() const override { return rig_.spec_.dtype; }
    tile::Backend backend() const override { return rig_.spec_.backend; }
    bool planning() const override { return rig_.options_.plan_only; }
    int64_t rows() const override { return rows_; }
    int64_t width() const override { return width_; }
    int layer() const override { return layer_; }
    const std::string& scope() const override { return scope_; }
    Param* add_param(std::string_view name, Shape shape, bench::Init init, ParamGroup group,
                     int64_t pad_rows) override {
      Param& p = rig_.params_.emplace_back();
      p.name = join(scope_, name);
      p.shape = shape;
      p.init = init;
      p.group = group;
      p.pad_rows = pad_rows;
      rig_.allocate(p);
      if (rig_.options_.init && !rig_.options_.plan_only) rig_.options_.init(p, name);
      return &p;
    }
    Tensor buffer(Shape shape, DType dtype) override { return rig_.arena_.allocate(shape, dtype); }
    std::unique_ptr<Component> build(Slot slot, std::string_view name, int64_t rows, int64_t width) override {
      const SlotChoice& choice = rig_.spec_.slot(slot);
      std::unique_ptr<Component> c = builtin_registry().create(*choice.info, choice.params);
      Context child(rig_, join(scope_, name), rows < 0 ? rows_ : rows, width < 0 ? width_ : width, layer_, c.get());
      c->setup(child);
      if (owner_ != nullptr) owner_->adopt(c.get());
      return c;
    }
    Position* position() override {
      if (rig_.position_ == nullptr) throw Error("no position component in this rig");
      return rig_.position_;
    }
    Param* embedding_weight() override {
      if (rig_.embedding_ == nullptr) throw Error("no embedding in this rig");
      return rig_.embedding_;
    }

   private:
    ComponentRig& rig_;
    std::string scope_;
    int64_t rows_, width_;
    int layer_;
    Component* owner_;
  };

  ModelSpec spec_;
  Options options_;
  Arena arena_;
  std::list<Param> params_;  // stable addresses: components keep Param*
  Position* position_ = nullptr;
  Param* embedding_ = nullptr;
};

/// Every parameter from N(0, p.init.value^2), drawn from its own stream keyed by `seed` and `name`.
inline ComponentRig::Filler normal_init(uint64_t seed, bool by_local_name = false, double std = 0) {
  return [=](Param& p, std::string_view local) {
    Rng rng(hash_seed(seed, by_local_name ? std::string(local) : p.name));
    dispatch_float(p.value.dtype(), [&]<class T>() {
      T* v = p.value.data<T>();
      for (int64_t i = 0; i < p.value.numel(); ++i) v[i] = scalar_as<T>(rng.normal() * (std > 0 ? std : p.init.value));
    });
  };
}

/// As the model initializes, from its own stream keyed by `seed` and the full name: normal for
/// Init::kNormal, else the constant (zeros, ones, a value).
inline ComponentRig::Filler init_by_kind(uint64_t seed) {
  return [=](Param& p, std::string_view) {
    Rng rng(hash_seed(seed, p.name));
    dispatch_float(p.value.dtype(), [&]<class T>() {
      T* v = p.value.data<T>();
      for (int64_t i = 0; i < p.value.numel(); ++i)
        v[i] = scalar_as<T>(p.init.kind == Init::Kind::kNormal  ? rng.normal() * p.init.value
                            : p.init.kind == Init::Kind::kZeros ? 0.0
                                                                : p.init.value);
    });
  };
}

}  // namespace bench::test
