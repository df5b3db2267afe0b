// defines: bench::ResidualNorm, folding_norm — a norm that folds the residual stream's add into its own launches
//
// A norm position (slot norm_position: pre, post, double, output) adds the residual stream to a
// norm's input or output, and its gradient to the norm's input gradient: one elementwise launch
// each on a device. A norm (slot norm) that also implements ResidualNorm can do that add in the
// same launch; the position asks through folding_norm on the norm it built (the harness's wrapper
// answers for the norm inside it) and adds itself when the answer is null. Optional: a norm that
// does not implement it loses nothing but the launches.
#pragma once

#include "bench/component.h"

namespace bench {

class ResidualNorm {
 public:
  virtual ~ResidualNorm();
  /// Whether the calls below run on ctx's target; when false the position adds itself, with
  /// forward and backward.
  virtual bool folds_residual(const RunContext& ctx) const = 0;
  /// s = a + b, then y = norm(s); the norm keeps s for its backward, as forward(s, y) would.
  virtual void forward_of_sum(const Tensor& a, const Tensor& b, Tensor& s, Tensor& y, RunContext& ctx) = 0;
  /// y = res + norm(x).
  virtual void forward_plus(const Tensor& x, const Tensor& res, Tensor& y, RunContext& ctx) = 0;
  /// dx = dres + the norm's gradient at dy (parameter gradients added into, as backward does).
  virtual void backward_plus(const Tensor& dy, const Tensor& dres, Tensor& dx, RunContext& ctx) = 0;
};

/// `norm` as a ResidualNorm that folds on ctx's target, or null.
inline ResidualNorm* folding_norm(Component* norm, const RunContext& ctx) {
  auto* r = dynamic_cast<ResidualNorm*>(norm);
  return r != nullptr && r->folds_residual(ctx) ? r : nullptr;
}

}  // namespace bench
