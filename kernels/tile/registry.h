// defines: bench::tile::CudaLaunch, CudaProgram, register_cuda_program, unregister_cuda_program,
//          find_cuda_program, cuda_module_loaded, cuda_programs, program_name, Unsupported,
//          BENCH_KERNEL_MODULE
//
// The registry of the CUDA builds of tile programs: how one source runs on every target.
//
// A kernel family (kernels/<name>.cpp) or a plugin is compiled twice. The C++ compiler builds
// everything that runs on the host, the launchers included; nvcc builds the same source again
// (the "CUDA pass", BENCH_CUDA_PASS), where tile::launch instantiates the CUDA kernel of every
// program the launchers can launch and registers it here when its library loads (libbench_cuda
// for the kernels of this tree, lib<plugin>_cuda.so for a plugin's). At run time tile::launch
// with Backend::kCuda finds the program's entry by (module, type name) and calls it: the
// launcher, with its grid, workspace and dispatch, runs once, on the host, for every executor.
//
// The module (BENCH_KERNEL_MODULE, set by the build to the library's file name) keeps two
// plugins' programs of the same name apart. Plain C++: no CUDA header is needed to use it.
#pragma once

#include <atomic>
#include <stdexcept>
#include <string>
#include <vector>

#include "defs.h"

#ifndef BENCH_KERNEL_MODULE
/// The library a translation unit's programs belong to (CMake: "libbench_api.so",
/// "libbench_<plugin>.so"); both compilations of a source must agree on it.
#define BENCH_KERNEL_MODULE ""
#endif

namespace bench::tile {

/// Launches the CUDA kernel of one program type on `stream` (a cudaStream_t); `program` points
/// to the program object. Returns nullptr, or the CUDA error's description.
using CudaLaunch = const char* (*)(const Grid& grid, const void* program, void* stream);

/// One registered CUDA build of a program. Entries live as long as the process; `launch` is
/// null while the library that registered it is unloaded.
struct CudaProgram {
  std::string module;
  std::string type;  ///< typeid(Program).name(), mangled
  std::atomic<CudaLaunch> launch{nullptr};
};

/// Called by the CUDA pass when its library loads / unloads.
void register_cuda_program(const char* module, const char* type, CudaLaunch launch);
void unregister_cuda_program(const char* module, const char* type);

/// The entry of `type` in `module`, or nullptr when no CUDA build of it was ever registered.
CudaProgram* find_cuda_program(const char* module, const char* type);
/// Whether some CUDA build of `module`'s programs is loaded (its CUDA library was built and loaded).
bool cuda_module_loaded(const char* module);
/// The demangled names of the programs of `module` that have a CUDA build loaded, sorted.
std::vector<std::string> cuda_programs(const char* module);

/// A readable name of a program type from its mangled typeid name ("relu2::Relu2Forward<float>").
std::string program_name(const char* type);

/// Thrown when a target cannot run a kernel: names the kernel, the target (device) and why.
/// `module` is the library the kernel belongs to ("" for named launchers), so that the harness
/// can say which component's plugin it comes from.
class __attribute__((visibility("default"))) Unsupported : public std::runtime_error {
 public:
  Unsupported(std::string kernel, std::string target, std::string why, std::string module = "");
  /// Out of line: the key function, so that the class's type information lives in libbench_api
  /// and an Unsupported thrown in a plugin is caught as one in the harness.
  ~Unsupported() override;
  Unsupported(const Unsupported&) = default;
  Unsupported& operator=(const Unsupported&) = default;
  const std::string& kernel() const { return kernel_; }
  const std::string& target() const { return target_; }
  const std::string& why() const { return why_; }
  const std::string& module() const { return module_; }

 private:
  std::string kernel_, target_, why_, module_;
};

}  // namespace bench::tile
