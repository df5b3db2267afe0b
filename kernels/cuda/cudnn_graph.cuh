// defines: bench::kernels::cuda::cudnn::Api, api, loaded_api, check, check_cuda, Desc, Plan,
//          GraphBuilder — cuDNN's backend (graph) API as kernels/cuda/cudnn_attention.cu uses it:
//          the library opened with dlopen and its functions resolved, descriptors owned by RAII,
//          and a builder of tensors, operations, an operation graph and its execution plan.
//
// Include only where <cudnn_graph.h> is available (for its enums and types; the functions
// themselves come from the dlopen'd library, never from linking).
#pragma once

#include <cuda_runtime.h>
#include <cudnn_graph.h>
#include <dlfcn.h>

#include <array>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

namespace bench::kernels::cuda::cudnn {

/// Uids from this one up name the virtual (intermediate) tensors a GraphBuilder makes; the
/// caller's tensors take smaller ones.
inline constexpr int64_t kFirstVirtualUid = 100;

// ---------------------------------------------------------------------------------------------
// the library, loaded once
// ---------------------------------------------------------------------------------------------

/// The functions used, resolved from libcudnn.so.9; `error` says why not when it is not empty.
struct Api {
  std::string error;
  size_t version = 0;
  decltype(&cudnnGetVersion) get_version = nullptr;
  decltype(&cudnnGetErrorString) error_string = nullptr;
  decltype(&cudnnGetLastErrorString) last_error = nullptr;  // detail for messages; may be missing
  decltype(&cudnnCreate) create = nullptr;
  decltype(&cudnnDestroy) destroy = nullptr;
  decltype(&cudnnSetStream) set_stream = nullptr;
  decltype(&cudnnBackendCreateDescriptor) create_descriptor = nullptr;
  decltype(&cudnnBackendDestroyDescriptor) destroy_descriptor = nullptr;
  decltype(&cudnnBackendSetAttribute) set_attribute = nullptr;
  decltype(&cudnnBackendGetAttribute) get_attribute = nullptr;
  decltype(&cudnnBackendFinalize) finalize = nullptr;
  decltype(&cudnnBackendExecute) execute = nullptr;
};

/// "9.19.0" from cuDNN 9's version number (major * 10000 + minor * 100 + patch).
inline std::string version_string(size_t v) {
  return std::to_string(v / 10000) + "." + std::to_string(v / 100 % 100) + "." + std::to_string(v % 100);
}

/// The library, opened at the first call (thread-safe) and never closed: descriptors and handles
/// of any thread may outlive every caller.
inline const Api& api() {
  static const Api loaded = [] {
    Api a;
    void* lib = dlopen("libcudnn.so.9", RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      a.error = std::string("dlopen(\"libcudnn.so.9\") failed: ") + (e != nullptr ? e : "unknown error");
      return a;
    }
    const auto resolve = [&](auto& fn, const char* name, bool required) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && required && a.error.empty()) a.error = std::string("libcudnn.so.9 has no ") + name;
    };
    resolve(a.get_version, "cudnnGetVersion", true);
    resolve(a.error_string, "cudnnGetErrorString", true);
    resolve(a.last_error, "cudnnGetLastErrorString", false);
    resolve(a.create, "cudnnCreate", true);
    resolve(a.destroy, "cudnnDestroy", true);
    resolve(a.set_stream, "cudnnSetStream", true);
    resolve(a.create_descriptor, "cudnnBackendCreateDescriptor", true);
    resolve(a.destroy_descriptor, "cudnnBackendDestroyDescriptor", true);
    resolve(a.set_attribute, "cudnnBackendSetAttribute", true);
    resolve(a.get_attribute, "cudnnBackendGetAttribute", true);
    resolve(a.finalize, "cudnnBackendFinalize", true);
    resolve(a.execute, "cudnnBackendExecute", true);
    if (a.error.empty()) {
      a.version = a.get_version();
      if (a.version < 90000 || a.version >= 100000)
        a.error = "libcudnn.so.9 reports version " + std::to_string(a.version) + ", not cuDNN 9";
    }
    return a;
  }();
  return loaded;
}

/// The library, or std::runtime_error saying why it is not there.
inline const Api& loaded_api() {
  const Api& a = api();
  if (!a.error.empty()) throw std::runtime_error("cuDNN SDPA: cuDNN is not available: " + a.error);
  return a;
}

/// " (<cuDNN's last error message>)" on one line, or "" when it has none.
inline std::string last_error_detail() {
  const Api& a = api();
  if (a.last_error == nullptr) return "";
  std::array<char, 512> detail{};
  a.last_error(detail.data(), detail.size());
  std::string d(detail.data());
  std::replace(d.begin(), d.end(), '\n', ' ');
  return d.empty() ? "" : " (" + d + ")";
}

/// Throws std::runtime_error "cuDNN SDPA: <call> failed: <status> (<cuDNN's last message>)".
[[noreturn]] void fail(const std::string& call, cudnnStatus_t status) {
  throw std::runtime_error("cuDNN SDPA: " + call + " failed: " + api().error_string(status) + last_error_detail());
}

inline void check(cudnnStatus_t status, const std::string& call) {
  if (status != CUDNN_STATUS_SUCCESS) fail(call, status);
}

inline void check_cuda(cudaError_t e, const char* call) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("cuDNN SDPA: ") + call + " failed: " + cudaGetErrorString(e));
}

// ---------------------------------------------------------------------------------------------
// descriptors and graphs
// ---------------------------------------------------------------------------------------------

/// One backend descriptor, destroyed with its owner.
class Desc {
 public:
  Desc(cudnnBackendDescriptorType_t type, const char* name) : name_(name) {
    check(api().create_descriptor(type, &d_), std::string("cudnnBackendCreateDescriptor(") + name + ")");
  }
  ~Desc() {
    if (d_ != nullptr) api().destroy_descriptor(d_);
  }
  Desc(const Desc&) = delete;
  Desc& operator=(const Desc&) = delete;

  cudnnBackendDescriptor_t get() const { return d_; }

  /// cudnnBackendSetAttribute; `attr` names the attribute in the error.
  void set(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendAttributeType_t type, int64_t count,
           const void* values) {
    check(api().set_attribute(d_, attr, type, count, values),
          std::string("cudnnBackendSetAttribute(") + name_ + ", " + attr_name + ")");
  }
  void set_desc(cudnnBackendAttributeName_t attr, const char* attr_name, cudnnBackendDescriptor_t value) {
    set(attr, attr_name, CUDNN_TYPE_BACKEND_DESCRIPTOR, 1, &value);
  }
  void finalize() { check(api().finalize(d_), std::string("cudnnBackendFinalize(") + name_ + ")"); }

 private:
  cudnnBackendDescriptor_t d_ = nullptr;
  const char* name_;
};

// Sets attribute ATTR (named in errors) of descriptor D.
#define BENCH_SET(D, ATTR, TYPE, COUNT, VALUES) (D).set(ATTR, #ATTR, TYPE, COUNT, VALUES)
#define BENCH_SET_DESC(D, ATTR, VALUE) (D).set_desc(ATTR, #ATTR, VALUE)

/// A finalized execution plan and everything it was built from (kept alive with it).
struct Plan {
  std::vector<std::unique_ptr<Desc>> parts;
  Desc* plan = nullptr;
  int64_t workspace = 0;  // bytes
};

using Dims = std::array<int64_t, 4>;

/// An operation graph under construction, then its plan.
class GraphBuilder {
 public:
  /// A tensor descriptor: 16-byte aligned, virtual (intermediate) or bound at execution.
  cudnnBackendDescriptor_t tensor(int64_t uid, cudnnDataType_t type, const Dims& dims, const Dims& strides,
                                  bool is_virtual = false, bool by_value = false) {
    Desc& t = make(CUDNN_BACKEND_TENSOR_DESCRIPTOR, "TENSOR");
    const int64_t alignment = 16;
    BENCH_SET(t, CUDNN_ATTR_TENSOR_UNIQUE_ID, CUDNN_TYPE_INT64, 1, &uid);
    BENCH_SET(t, CUDNN_ATTR_TENSOR_DATA_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &type);
    BENCH_SET(t, CUDNN_ATTR_TENSOR_DIMENSIONS, CUDNN_TYPE_INT64, 4, dims.data());
    BENCH_SET(t, CUDNN_ATTR_TENSOR_STRIDES, CUDNN_TYPE_INT64, 4, strides.data());
    BENCH_SET(t, CUDNN_ATTR_TENSOR_BYTE_ALIGNMENT, CUDNN_TYPE_INT64, 1, &alignment);
    BENCH_SET(t, CUDNN_ATTR_TENSOR_IS_VIRTUAL, CUDNN_TYPE_BOOLEAN, 1, &is_virtual);
    if (by_value) BENCH_SET(t, CUDNN_ATTR_TENSOR_IS_BY_VALUE, CUDNN_TYPE_BOOLEAN, 1, &by_value);
    t.finalize();
    return t.get();
  }
  cudnnBackendDescriptor_t virt(cudnnDataType_t type, const Dims& dims, const Dims& strides) {
    return tensor(next_uid_++, type, dims, strides, true);
  }
  /// A scalar passed by value (its host address goes into the variant pack): float unless said.
  cudnnBackendDescriptor_t scalar(int64_t uid, cudnnDataType_t type = CUDNN_DATA_FLOAT) {
    return tensor(uid, type, {1, 1, 1, 1}, {1, 1, 1, 1}, false, true);
  }

  /// y = mode(x[, b[, t]]) elementwise, computed in `prec`; `axis` for GEN_INDEX.
  void pointwise(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
                 cudnnBackendDescriptor_t t, cudnnBackendDescriptor_t y, cudnnDataType_t prec = CUDNN_DATA_FLOAT,
                 int64_t axis = -1) {
    Desc& pw = make(CUDNN_BACKEND_POINTWISE_DESCRIPTOR, "POINTWISE");
    BENCH_SET(pw, CUDNN_ATTR_POINTWISE_MODE, CUDNN_TYPE_POINTWISE_MODE, 1, &mode);
    BENCH_SET(pw, CUDNN_ATTR_POINTWISE_MATH_PREC, CUDNN_TYPE_DATA_TYPE, 1, &prec);
    if (axis >= 0) BENCH_SET(pw, CUDNN_ATTR_POINTWISE_AXIS, CUDNN_TYPE_INT64, 1, &axis);
    pw.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_POINTWISE_DESCRIPTOR, "OPERATION_POINTWISE");
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_PW_DESCRIPTOR, pw.get());
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_XDESC, x);
    if (b != nullptr) BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_BDESC, b);
    if (t != nullptr) BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_TDESC, t);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_POINTWISE_YDESC, y);
    op.finalize();
    ops_.push_back(op.get());
  }
  void unary(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    pointwise(mode, x, nullptr, nullptr, y);
  }
  void binary(cudnnPointwiseMode_t mode, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t b,
              cudnnBackendDescriptor_t y) {
    pointwise(mode, x, b, nullptr, y);
  }

  /// y = op over the dimensions where y is smaller than x (float accumulation).
  void reduction(cudnnReduceTensorOp_t reduce, cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Desc& r = make(CUDNN_BACKEND_REDUCTION_DESCRIPTOR, "REDUCTION");
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    BENCH_SET(r, CUDNN_ATTR_REDUCTION_OPERATOR, CUDNN_TYPE_REDUCTION_OPERATOR_TYPE, 1, &reduce);
    BENCH_SET(r, CUDNN_ATTR_REDUCTION_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    r.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_REDUCTION_DESCRIPTOR, "OPERATION_REDUCTION");
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_REDUCTION_XDESC, x);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_REDUCTION_YDESC, y);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_REDUCTION_DESC, r.get());
    op.finalize();
    ops_.push_back(op.get());
  }

  /// c = a b over the last two dimensions, batched (and broadcast over heads) in the first two.
  void matmul(cudnnBackendDescriptor_t a, cudnnBackendDescriptor_t b, cudnnBackendDescriptor_t c) {
    Desc& mm = make(CUDNN_BACKEND_MATMUL_DESCRIPTOR, "MATMUL");
    const cudnnDataType_t comp = CUDNN_DATA_FLOAT;
    BENCH_SET(mm, CUDNN_ATTR_MATMUL_COMP_TYPE, CUDNN_TYPE_DATA_TYPE, 1, &comp);
    mm.finalize();
    Desc& op = make(CUDNN_BACKEND_OPERATION_MATMUL_DESCRIPTOR, "OPERATION_MATMUL");
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_MATMUL_ADESC, a);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_MATMUL_BDESC, b);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_MATMUL_CDESC, c);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_MATMUL_DESC, mm.get());
    op.finalize();
    ops_.push_back(op.get());
  }

  /// y: x's elements under y's dimensions and strides (a transpose, for a product's operand).
  void reshape(cudnnBackendDescriptor_t x, cudnnBackendDescriptor_t y) {
    Desc& op = make(CUDNN_BACKEND_OPERATION_RESHAPE_DESCRIPTOR, "OPERATION_RESHAPE");
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_RESHAPE_XDESC, x);
    BENCH_SET_DESC(op, CUDNN_ATTR_OPERATION_RESHAPE_YDESC, y);
    op.finalize();
    ops_.push_back(op.get());
  }

  /// The operation graph, cuDNN's heuristic (mode A) list of engine configs for it, and the plan
  /// of the first config that finalizes. `what` names the graph in errors.
  std::unique_ptr<Plan> build(cudnnHandle_t handle, const std::string& what) {
    Desc& graph = make(CUDNN_BACKEND_OPERATIONGRAPH_DESCRIPTOR, "OPERATIONGRAPH");
    BENCH_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_OPS, CUDNN_TYPE_BACKEND_DESCRIPTOR, static_cast<int64_t>(ops_.size()),
              ops_.data());
    BENCH_SET(graph, CUDNN_ATTR_OPERATIONGRAPH_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
    if (const cudnnStatus_t s = api().finalize(graph.get()); s != CUDNN_STATUS_SUCCESS)
      fail("cudnnBackendFinalize(OPERATIONGRAPH) of the " + what + " graph", s);
    Desc& heur = make(CUDNN_BACKEND_ENGINEHEUR_DESCRIPTOR, "ENGINEHEUR");
    const cudnnBackendHeurMode_t mode = CUDNN_HEUR_MODE_A;
    BENCH_SET_DESC(heur, CUDNN_ATTR_ENGINEHEUR_OPERATION_GRAPH, graph.get());
    BENCH_SET(heur, CUDNN_ATTR_ENGINEHEUR_MODE, CUDNN_TYPE_HEUR_MODE, 1, &mode);
    heur.finalize();
    int64_t count = 0;
    check(api().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, 0, &count,
                              nullptr),
          "cudnnBackendGetAttribute(ENGINEHEUR, CUDNN_ATTR_ENGINEHEUR_RESULTS) count");
    const auto no_engine = [&] {
      return std::runtime_error("cuDNN SDPA: cuDNN " + version_string(api().version) +
                                "'s heuristics (mode A) offer no engine config for the " + what + " graph" +
                                last_error_detail());
    };
    if (count <= 0) throw no_engine();
    std::vector<cudnnBackendDescriptor_t> configs;
    for (int64_t i = 0; i < count; ++i) configs.push_back(make(CUDNN_BACKEND_ENGINECFG_DESCRIPTOR, "ENGINECFG").get());
    int64_t got = 0;
    check(api().get_attribute(heur.get(), CUDNN_ATTR_ENGINEHEUR_RESULTS, CUDNN_TYPE_BACKEND_DESCRIPTOR, count, &got,
                              configs.data()),
          "cudnnBackendGetAttribute(ENGINEHEUR, CUDNN_ATTR_ENGINEHEUR_RESULTS)");
    if (got <= 0) throw no_engine();  // listed, but none could be set up (e.g. no driver to compile)
    cudnnStatus_t last = CUDNN_STATUS_NOT_SUPPORTED;
    for (int64_t i = 0; i < got; ++i) {
      auto plan = std::make_unique<Desc>(CUDNN_BACKEND_EXECUTION_PLAN_DESCRIPTOR, "EXECUTION_PLAN");
      BENCH_SET(*plan, CUDNN_ATTR_EXECUTION_PLAN_HANDLE, CUDNN_TYPE_HANDLE, 1, &handle);
      BENCH_SET_DESC(*plan, CUDNN_ATTR_EXECUTION_PLAN_ENGINE_CONFIG, configs[static_cast<size_t>(i)]);
      last = api().finalize(plan->get());
      if (last != CUDNN_STATUS_SUCCESS) continue;  // this engine refuses the graph: try the next
      auto result = std::make_unique<Plan>();
      check(api().get_attribute(plan->get(), CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE, CUDNN_TYPE_INT64, 1, nullptr,
                                &result->workspace),
            "cudnnBackendGetAttribute(EXECUTION_PLAN, CUDNN_ATTR_EXECUTION_PLAN_WORKSPACE_SIZE)");
      result->plan = plan.get();
      result->parts = std::move(descs_);
      result->parts.push_back(std::move(plan));
      return result;
    }
    fail("cudnnBackendFinalize(EXECUTION_PLAN) of each of the " + std::to_string(got) + " engine configs for the " +
             what + " graph",
         last);
  }

 private:
  Desc& make(cudnnBackendDescriptorType_t type, const char* name) {
    descs_.push_back(std::make_unique<Desc>(type, name));
    return *descs_.back();
  }

  std::vector<std::unique_ptr<Desc>> descs_;
  std::vector<cudnnBackendDescriptor_t> ops_;
  int64_t next_uid_ = kFirstVirtualUid;
};

}  // namespace bench::kernels::cuda::cudnn
