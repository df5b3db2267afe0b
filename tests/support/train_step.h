// defines: bench::test::loss_and_grad_norm — one training forward and backward of a model on a
//          batch, on a given executor
#pragma once

#include <utility>

#include "model/model.h"
#include "support/toml_case.h"

namespace bench::test {

/// Zeroes the gradients of `m`, then runs one training forward and backward on `b` with the
/// executor of `backend` (the model built for it): the loss and the gradient's norm.
inline std::pair<double, double> loss_and_grad_norm(Model& m, const Batch& b,
                                                    tile::Backend backend = tile::Backend::kCpu) {
  RunContext ctx;
  ctx.exec.backend = backend;
  m.zero_grad();
  const double loss = m.forward(b.in.data(), b.tg.data(), ctx).loss;
  m.backward(ctx);
  return {loss, m.grad_norm(ctx)};
}

}  // namespace bench::test
