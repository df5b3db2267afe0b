// defines: bench::kernels::cuda::cublaslt::Api, api, loaded_api — cuBLASLt opened with dlopen at
//          its first use and the functions kernels/cuda/gemm.cu and runtime.cu call resolved from it
//
// libcublasLt.so.13 is not linked: loading it costs about 0.2 s of CPU time (hundreds of
// thousands of relocations over half a gigabyte of library), paid by every process that links it,
// GPU or not: each `bench` command, each test process. Opened at the first cuBLASLt call instead,
// it costs nothing on the CPU and once on a GPU. Its header is still needed at build time, for the
// types and enums.
#pragma once

#include <cublasLt.h>
#include <dlfcn.h>

#include <stdexcept>
#include <string>
#include <type_traits>

namespace bench::kernels::cuda::cublaslt {

/// The functions used, resolved from libcublasLt.so.13; `error` says why not when it is not empty.
struct Api {
  std::string error;
  decltype(&cublasLtGetVersion) get_version = nullptr;
  decltype(&cublasLtGetStatusString) status_string = nullptr;
  decltype(&cublasLtCreate) create = nullptr;
  decltype(&cublasLtDestroy) destroy = nullptr;
  decltype(&cublasLtMatmul) matmul = nullptr;
  decltype(&cublasLtMatmulAlgoGetHeuristic) algo_get_heuristic = nullptr;
  decltype(&cublasLtMatmulDescCreate) desc_create = nullptr;
  decltype(&cublasLtMatmulDescDestroy) desc_destroy = nullptr;
  decltype(&cublasLtMatmulDescSetAttribute) desc_set_attribute = nullptr;
  decltype(&cublasLtMatmulPreferenceCreate) preference_create = nullptr;
  decltype(&cublasLtMatmulPreferenceDestroy) preference_destroy = nullptr;
  decltype(&cublasLtMatmulPreferenceSetAttribute) preference_set_attribute = nullptr;
  decltype(&cublasLtMatrixLayoutCreate) layout_create = nullptr;
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy = nullptr;
  decltype(&cublasLtMatrixLayoutSetAttribute) layout_set_attribute = nullptr;
};

/// The library, opened at the first call (thread-safe) and never closed: handles and descriptors
/// of any thread may outlive every caller.
inline const Api& api() {
  static const Api loaded = [] {
    Api a;
    constexpr const char* kLibrary = "libcublasLt.so.13";
    void* lib = dlopen(kLibrary, RTLD_NOW | RTLD_LOCAL);
    if (lib == nullptr) {
      const char* e = dlerror();
      a.error = std::string("dlopen(\"") + kLibrary + "\") failed: " + (e != nullptr ? e : "unknown error");
      return a;
    }
    const auto resolve = [&](auto& fn, const char* name) {
      fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(dlsym(lib, name));
      if (fn == nullptr && a.error.empty()) a.error = std::string(kLibrary) + " has no " + name;
    };
    resolve(a.get_version, "cublasLtGetVersion");
    resolve(a.status_string, "cublasLtGetStatusString");
    resolve(a.create, "cublasLtCreate");
    resolve(a.destroy, "cublasLtDestroy");
    resolve(a.matmul, "cublasLtMatmul");
    resolve(a.algo_get_heuristic, "cublasLtMatmulAlgoGetHeuristic");
    resolve(a.desc_create, "cublasLtMatmulDescCreate");
    resolve(a.desc_destroy, "cublasLtMatmulDescDestroy");
    resolve(a.desc_set_attribute, "cublasLtMatmulDescSetAttribute");
    resolve(a.preference_create, "cublasLtMatmulPreferenceCreate");
    resolve(a.preference_destroy, "cublasLtMatmulPreferenceDestroy");
    resolve(a.preference_set_attribute, "cublasLtMatmulPreferenceSetAttribute");
    resolve(a.layout_create, "cublasLtMatrixLayoutCreate");
    resolve(a.layout_destroy, "cublasLtMatrixLayoutDestroy");
    resolve(a.layout_set_attribute, "cublasLtMatrixLayoutSetAttribute");
    return a;
  }();
  return loaded;
}

/// The library, or std::runtime_error saying why it is not there.
inline const Api& loaded_api() {
  const Api& a = api();
  if (!a.error.empty()) throw std::runtime_error("cuBLASLt is not available: " + a.error);
  return a;
}

}  // namespace bench::kernels::cuda::cublaslt
