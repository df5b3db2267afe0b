// defines: bench::ops — tensor-level operations that components are written with
//
// Thin, dtype-dispatching wrappers over the kernels (kernels/*.h): a component calls
// ops::linear_forward(ctx, x, w, y) rather than a GEMM with strides. Tensors are row-major
// [rows, features]; weights are stored [out_features, in_features] (y = x W^T), as in PyTorch.
#pragma once

#include <vector>

#include "bench/component.h"
#include "bench/tensor.h"

namespace bench::ops {

/// y[rows, out] = x[rows, in] * w[out, in]^T
void linear_forward(const RunContext& ctx, const Tensor& x, const Tensor& w, Tensor& y);
/// dx[rows, in] = dy * w (skipped when dx is null); dw[out, in] += dy^T * x (skipped when dw is null).
void linear_backward(const RunContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor* dx, Tensor* dw);
/// y[rows, out] = x w^T + b, b [out] added to every row by the GEMM's epilogue
/// (kernels::gemm_epilogue kBias: cuBLASLt's BIAS on CUDA, the bias program elsewhere).
void linear_forward(const RunContext& ctx, const Tensor& x, const Tensor& w, const Tensor& b, Tensor& y);
/// linear_backward with a bias: dw += dy^T x and db[out] += the column sums of dy, taken beside
/// dw by the GEMM's epilogue (kBiasGrad: cuBLASLt's BGRADB on CUDA) into `scratch` [out], which
/// is then added to db (the epilogue writes, gradients accumulate).
void linear_backward(const RunContext& ctx, const Tensor& dy, const Tensor& x, const Tensor& w, Tensor* dx, Tensor& dw,
                     Tensor& db, Tensor& scratch);
/// out = a + b, element-wise (out may alias a or b).
void add(const RunContext& ctx, const Tensor& a, const Tensor& b, Tensor& out);
/// y += alpha * x
void axpy(const RunContext& ctx, double alpha, const Tensor& x, Tensor& y);
/// dst = src (each in host or device memory).
void copy(const Tensor& src, Tensor& dst);
/// `t` itself when it is in host memory, else a copy of it in `storage` (resized): how host
/// code reads a tensor that may be in device memory (kernels/memory.h), which it never
/// dereferences. To write one from the host, copy() from a Tensor over host memory.
Tensor on_host(const Tensor& t, std::vector<char>& storage);
/// Sum of squares of all elements (deterministic).
double sum_squares(const RunContext& ctx, const Tensor& x);
/// Largest |element| (NaN if any element is NaN); copies device memory to the host first.
double max_abs(const Tensor& x);

}  // namespace bench::ops
