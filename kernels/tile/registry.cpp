#include "registry.h"

#include <cxxabi.h>

#include <algorithm>
#include <cstdlib>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <utility>

#include "../cuda_backend.h"
#include "exec.h"

namespace bench::tile {

namespace {

/// Every CUDA build ever registered, by (module, type). Entries are never removed, only
/// emptied: tile::launch caches pointers to them.
class Programs {
 public:
  CudaProgram* get(const std::string& module, const std::string& type, bool create) {
    {
      const std::shared_lock lock(mutex_);
      const auto it = map_.find({module, type});
      if (it != map_.end() || !create) return it == map_.end() ? nullptr : it->second;
    }
    const std::unique_lock lock(mutex_);
    CudaProgram*& slot = map_[{module, type}];
    if (slot == nullptr) {
      auto& e = entries_.emplace_back();
      e.module = module;
      e.type = type;
      slot = &e;
    }
    return slot;
  }
  template <class F>
  void each(F&& f) const {
    const std::shared_lock lock(mutex_);
    for (const auto& e : entries_) f(e);
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<std::pair<std::string, std::string>, CudaProgram*> map_;
  std::deque<CudaProgram> entries_;
};

Programs& programs() {
  static Programs p;
  return p;
}

/// Why a CUDA build of `type` is not there.
std::string missing_reason(const char* module, const char* type) {
  if (kernels::cuda_backend() == nullptr)
    return "this process has no CUDA backend (a build without CUDA, or libbench_cuda not loaded)";
  const std::string name = program_name(type);
  if (name.find("double") != std::string::npos) return "float64 has no CUDA path (CUDA runs float and bfloat16)";
  if (!cuda_module_loaded(module))
    return std::string(*module != 0 ? module : "its library") +
           " has no CUDA build loaded: it was built without CUDA (rebuild it with nvcc on the PATH)";
  return "no CUDA build of this program was compiled into " + std::string(module);
}

}  // namespace

void register_cuda_program(const char* module, const char* type, CudaLaunch launch) {
  programs().get(module, type, true)->launch.store(launch);
}

void unregister_cuda_program(const char* module, const char* type) {
  if (CudaProgram* e = programs().get(module, type, false)) e->launch.store(nullptr);
}

CudaProgram* find_cuda_program(const char* module, const char* type) { return programs().get(module, type, false); }

bool cuda_module_loaded(const char* module) {
  bool found = false;
  programs().each([&](const CudaProgram& e) { found = found || (e.module == module && e.launch.load() != nullptr); });
  return found;
}

std::vector<std::string> cuda_programs(const char* module) {
  std::vector<std::string> out;
  programs().each([&](const CudaProgram& e) {
    if (e.module == module && e.launch.load() != nullptr) out.push_back(program_name(e.type.c_str()));
  });
  std::sort(out.begin(), out.end());
  return out;
}

std::string program_name(const char* type) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> name(abi::__cxa_demangle(type, nullptr, nullptr, &status), std::free);
  return status == 0 && name ? std::string(name.get()) : std::string(type);
}

Unsupported::Unsupported(std::string kernel, std::string target, std::string why, std::string module)
    : std::runtime_error("kernel " + kernel + " cannot run on " + target + ": " + why),
      kernel_(std::move(kernel)),
      target_(std::move(target)),
      why_(std::move(why)),
      module_(std::move(module)) {}

Unsupported::~Unsupported() = default;

std::string target_name(const Exec& exec) {
  switch (exec.backend) {
    case Backend::kCpu:
      return "cpu";
    case Backend::kEmulated:
      return "emulated";
    case Backend::kGuarded:
      return "guarded";
    case Backend::kCuda:
      break;
  }
  const kernels::CudaBackend* cuda = kernels::cuda_backend();
  return cuda != nullptr ? cuda->device_name() : "cuda";
}

namespace detail {

void launch_cuda_program(const Exec& exec, const Grid& grid, const void* program, const char* module, const char* type,
                         std::atomic<CudaProgram*>& entry) {
  // The cache is a function-local static of tile::launch<Program>: where two libraries launch
  // the same program type with default visibility, the dynamic linker may give them one cache
  // (vague linkage), so an entry is used only for the module it belongs to.
  CudaProgram* e = entry.load(std::memory_order_acquire);
  if (e == nullptr || e->module != module) {
    CudaProgram* found = find_cuda_program(module, type);
    if (e == nullptr && found != nullptr) entry.store(found, std::memory_order_release);
    e = found;
  }
  const CudaLaunch launch = e != nullptr ? e->launch.load(std::memory_order_acquire) : nullptr;
  if (launch == nullptr) throw Unsupported(program_name(type), target_name(exec), missing_reason(module, type), module);
  if (const char* err = launch(grid, program, exec.stream))
    throw std::runtime_error("CUDA launch of " + program_name(type) + " on " + target_name(exec) + ": " + err);
}

bool cuda_program_loaded(const char* module, const char* type, std::string* why) {
  const CudaProgram* e = find_cuda_program(module, type);
  if (e != nullptr && e->launch.load() != nullptr && kernels::cuda_backend() != nullptr) return true;
  if (why != nullptr) *why = missing_reason(module, type);
  return false;
}

}  // namespace detail

}  // namespace bench::tile
