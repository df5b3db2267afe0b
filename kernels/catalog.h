// defines: bench::kernels::KernelInfo, catalog, supports, KernelRegistration,
//          CudaKernelRegistration, BENCH_KERNEL, BENCH_CUDA_KERNEL
//
// The list of kernels exists once: each launcher's file registers it with BENCH_KERNEL, next to
// its definition. The C++ compilation registers its name, file, formula and the types the host
// executors run; the CUDA pass of the same file (tile/registry.h) registers that the loaded CUDA
// backend runs it too, for float and bf16. `bench list kernels` prints this catalog, and
// supports() answers from it (the ggml query): whether a target runs a kernel, and why not.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "tile/exec.h"

namespace bench::kernels {

/// Element types as bits: which ones a target runs a kernel in.
enum TypeBits : uint8_t { kF32 = 1, kBf16 = 2, kF64 = 4, kAllTypes = 7 };

/// The bit of storage type T.
template <class T>
constexpr uint8_t type_bit() {
  if constexpr (std::is_same_v<T, double>) {
    return kF64;
  } else if constexpr (std::is_same_v<T, tile::bf16>) {
    return kBf16;
  } else {
    return kF32;
  }
}

/// One kernel of the catalog.
struct KernelInfo {
  std::string name;        ///< the launcher ("norm_forward")
  std::string file;        ///< its header ("kernels/norm.h")
  std::string doc;         ///< the formula, in one line
  uint8_t host_types = 0;  ///< types the host executors (cpu, emulated, guarded) run; 0: none
  uint8_t cuda_types = 0;  ///< types the loaded CUDA backend runs; 0: none (or no CUDA backend)
  /// Why the CUDA kernel cannot run in this process ("" when it can), e.g. cuDNN not loading;
  /// null: nothing beyond the build.
  std::string (*cuda_unavailable)() = nullptr;
};

/// Every registered kernel, ordered by file, then as registered.
std::vector<KernelInfo> catalog();

/// Whether exec's target runs `kernel` in storage type `type` (one TypeBits bit); `why` (may be
/// null) receives the reason when it does not. An unknown kernel is not supported.
bool supports(const tile::Exec& exec, std::string_view kernel, uint8_t type, std::string* why = nullptr);
template <class T>
bool supports(const tile::Exec& exec, std::string_view kernel, std::string* why = nullptr) {
  return supports(exec, kernel, type_bit<T>(), why);
}

/// Throws tile::Unsupported naming the kernel, the target and why, unless supports() holds.
void require(const tile::Exec& exec, std::string_view kernel, uint8_t type);

/// What BENCH_KERNEL defines: the host side of a kernel (its catalog row).
struct KernelRegistration {
  KernelRegistration(const char* name, const char* source_file, const char* doc, uint8_t host_types);
};
/// What the CUDA side of a kernel registers: the types it runs on CUDA, and an availability check.
struct CudaKernelRegistration {
  CudaKernelRegistration(const char* name, uint8_t cuda_types, std::string (*unavailable)() = nullptr);
};

}  // namespace bench::kernels

#define BENCH_KERNEL_CAT2(a, b) a##b
#define BENCH_KERNEL_CAT(a, b) BENCH_KERNEL_CAT2(a, b)

/// Registers launcher NAME of this file with its formula DOC, run by every executor: in the C++
/// compilation, on the host executors in every type; in the CUDA pass, on CUDA in float and bf16.
#if defined(BENCH_CUDA_PASS)
#define BENCH_KERNEL(NAME, DOC)                                                                \
  static const ::bench::kernels::CudaKernelRegistration BENCH_KERNEL_CAT(bench_kernel_, NAME)( \
      #NAME, ::bench::kernels::kF32 | ::bench::kernels::kBf16)
#else
#define BENCH_KERNEL(NAME, DOC)                                                                                 \
  static const ::bench::kernels::KernelRegistration BENCH_KERNEL_CAT(bench_kernel_, NAME)(#NAME, __FILE__, DOC, \
                                                                                          ::bench::kernels::kAllTypes)
#endif

/// Registers a kernel with explicit host targets: HOST_TYPES for the host executors (0: a
/// CUDA-only kernel, whose CUDA side registers with CudaKernelRegistration). Nothing in the CUDA
/// pass.
#if defined(BENCH_CUDA_PASS)
#define BENCH_KERNEL_TYPES(NAME, DOC, HOST_TYPES) static_assert(true, "")
#else
#define BENCH_KERNEL_TYPES(NAME, DOC, HOST_TYPES)                                                               \
  static const ::bench::kernels::KernelRegistration BENCH_KERNEL_CAT(bench_kernel_, NAME)(#NAME, __FILE__, DOC, \
                                                                                          HOST_TYPES)
#endif

/// X(T) for every storage type a launcher is instantiated for: float, bf16 and (host only: the
/// CUDA pass leaves it out) double.
#if defined(BENCH_CUDA_PASS)
#define BENCH_FOR_EACH_TYPE(X) X(float) X(::bench::tile::bf16)
#else
#define BENCH_FOR_EACH_TYPE(X) X(float) X(double) X(::bench::tile::bf16)
#endif
