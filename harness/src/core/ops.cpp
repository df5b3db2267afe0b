#include "bench/ops.h"

#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/elementwise.h"
#include "kernels/gemm.h"
#include "kernels/gemm_epilogue.h"
#include "kernels/memory.h"

namespace bench::ops {

namespace {
void check_same(const Tensor& a, const Tensor& b, const char* what) {
  if (a.numel() != b.numel() || a.dtype() != b.dtype())
    throw Error(std::string(what) + ": tensors of shape " + a.shape().str() + " and " + b.shape().str() +
                " or dtypes differ");
}
int64_t cols(const Tensor& t) { return t.size(t.shape().rank() - 1); }
}  // namespace

void linear_forward(const RunContext& ctx, const Tensor& x, const Tensor& w, Tensor& y) {
  const int64_t in = cols(x), out = w.size(0), rows = x.numel() / in;
  if (w.size(1) != in || y.numel() != rows * out)
    throw Error("linear_forward: x " + x.shape().str() + ", w " + w.shape().str() + ", y " + y.shape().str());
  dispatch_float(x.dtype(), [&]<class T>() {
    kernels::gemm<T>(ctx.exec, false, true, rows, out, in, 1, x.data<T>(), in, w.data<T>(), in, 0, y.data<T>(), out);
  });
}

void linear_backward(const RunContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor* dx,
                     Tensor* dw) {
  const int64_t in = cols(x), out = w.size(0), rows = x.numel() / in;
  if (w.size(1) != in || dy.numel() != rows * out)
    throw Error("linear_backward: dy " + dy.shape().str() + ", x " + x.shape().str() + ", w " + w.shape().str());
  dispatch_float(x.dtype(), [&]<class T>() {
    if (dx != nullptr)
      kernels::gemm<T>(ctx.exec, false, false, rows, in, out, 1, dy.data<T>(), out, w.data<T>(), in, 0, dx->data<T>(),
                       in);
    if (dw != nullptr)
      kernels::gemm<T>(ctx.exec, true, false, out, in, rows, 1, dy.data<T>(), out, x.data<T>(), in, 1, dw->data<T>(),
                       in);
  });
}

void linear_forward(const RunContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y) {
  const int64_t in = cols(x), out = w.size(0), rows = x.numel() / in;
  if (w.size(1) != in || y.numel() != rows * out || b.numel() != out || b.dtype() != x.dtype())
    throw Error("linear_forward: x " + x.shape().str() + ", w " + w.shape().str() + ", b " + b.shape().str() + ", y " +
                y.shape().str());
  dispatch_float(x.dtype(), [&]<class T>() {
    kernels::Epilogue<T> e;
    e.kind = kernels::EpilogueKind::kBias;
    e.bias = b.data<T>();
    kernels::gemm_epilogue<T>(ctx.exec, false, true, rows, out, in, 1, x.data<T>(), in, w.data<T>(), in, 0, y.data<T>(),
                              out, e);
  });
}

void linear_backward(const RunContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor* dx, Tensor& dw,
                     Tensor& db, Tensor& scratch) {
  const int64_t in = cols(x), out = w.size(0), rows = x.numel() / in;
  if (w.size(1) != in || dy.numel() != rows * out || db.numel() != out || scratch.numel() < out ||
      db.dtype() != dy.dtype() || scratch.dtype() != dy.dtype())
    throw Error("linear_backward: dy " + dy.shape().str() + ", x " + x.shape().str() + ", w " + w.shape().str() +
                ", db " + db.shape().str() + ", scratch " + scratch.shape().str());
  linear_backward(ctx, dy, x, w, dx, nullptr);
  dispatch_float(x.dtype(), [&]<class T>() {
    kernels::Epilogue<T> e;
    e.kind = kernels::EpilogueKind::kBiasGrad;
    e.bias_grad = scratch.data<T>();
    kernels::gemm_epilogue<T>(ctx.exec, true, false, out, in, rows, 1, dy.data<T>(), out, x.data<T>(), in, 1,
                              dw.data<T>(), in, e);
    kernels::add<T>(ctx.exec, db.data<T>(), scratch.data<T>(), db.data<T>(), out);
  });
}

void add(const RunContext& ctx, const Tensor& a, const Tensor& b, Tensor& out) {
  check_same(a, b, "add");
  check_same(a, out, "add");
  dispatch_float(a.dtype(),
                 [&]<class T>() { kernels::add<T>(ctx.exec, a.data<T>(), b.data<T>(), out.data<T>(), a.numel()); });
}

void axpy(const RunContext& ctx, double alpha, const Tensor& x, Tensor& y) {
  check_same(x, y, "axpy");
  dispatch_float(x.dtype(), [&]<class T>() {
    kernels::axpy<T>(ctx.exec, static_cast<tile::acc_t<T>>(alpha), x.data<T>(), y.data<T>(), x.numel());
  });
}

void copy(const Tensor& src, Tensor& dst) {
  check_same(src, dst, "copy");
  kernels::copy_bytes(dst.raw(), src.raw(), src.bytes());
}

double sum_squares(const RunContext& ctx, const Tensor& x) {
  return dispatch_float(x.dtype(),
                        [&]<class T>() { return kernels::sum_squares<T>(ctx.exec, x.data<T>(), x.numel()); });
}

Tensor on_host(const Tensor& t, std::vector<char>& storage) {
  if (kernels::memory_of(t.raw()) == kernels::Memory::kHost) return t;
  storage.resize(t.bytes());
  kernels::copy_bytes(storage.data(), t.raw(), t.bytes());
  return Tensor(storage.data(), t.dtype(), t.shape());
}

double max_abs(const Tensor& t) {
  std::vector<char> storage;
  const Tensor x = on_host(t, storage);
  return dispatch_float(x.dtype(), [&]<class T>() {
    const T* p = x.data<T>();
    double m = 0;
    for (int64_t i = 0; i < x.numel(); ++i) {
      const double v = std::abs(scalar_value(p[i]));
      if (std::isnan(v)) return v;
      m = v > m ? v : m;
    }
    return m;
  });
}

}  // namespace bench::ops
