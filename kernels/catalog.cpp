#include "catalog.h"

#include <algorithm>
#include <mutex>
#include <string>

#include "cuda_backend.h"

namespace bench::kernels {

namespace {

struct Catalog {
  std::mutex mutex;
  std::vector<KernelInfo> rows;

  KernelInfo& row(std::string_view name) {
    for (KernelInfo& k : rows)
      if (k.name == name) return k;
    rows.push_back(KernelInfo{std::string(name), "", "", 0, 0, nullptr});
    return rows.back();
  }
};

Catalog& the_catalog() {
  static Catalog c;
  return c;
}

/// "kernels/norm.h" from a compiler's "/path/to/kernels/norm.cpp".
std::string header_of(std::string_view file) {
  const size_t at = file.rfind("kernels/");
  std::string f(at == std::string_view::npos ? file : file.substr(at));
  if (const size_t dot = f.rfind('.'); dot != std::string::npos && f.compare(dot, 4, ".cpp") == 0)
    f.replace(dot, 4, ".h");
  return f;
}

std::string type_name(uint8_t type) {
  switch (type) {
    case kF32:
      return "float32";
    case kBf16:
      return "bfloat16";
    case kF64:
      return "float64";
    default:
      return "?";
  }
}

}  // namespace

KernelRegistration::KernelRegistration(const char* name, const char* source_file, const char* doc, uint8_t host_types) {
  Catalog& c = the_catalog();
  const std::lock_guard lock(c.mutex);
  KernelInfo& k = c.row(name);
  k.file = header_of(source_file);
  k.doc = doc;
  k.host_types = host_types;
}

CudaKernelRegistration::CudaKernelRegistration(const char* name, uint8_t cuda_types, std::string (*unavailable)()) {
  Catalog& c = the_catalog();
  const std::lock_guard lock(c.mutex);
  KernelInfo& k = c.row(name);
  k.cuda_types = cuda_types;
  if (unavailable != nullptr) k.cuda_unavailable = unavailable;
}

std::vector<KernelInfo> catalog() {
  Catalog& c = the_catalog();
  std::vector<KernelInfo> out;
  {
    const std::lock_guard lock(c.mutex);
    out = c.rows;
  }
  if (cuda_backend() == nullptr)
    for (KernelInfo& k : out) k.cuda_types = 0;
  std::stable_sort(out.begin(), out.end(), [](const KernelInfo& a, const KernelInfo& b) { return a.file < b.file; });
  return out;
}

bool supports(const tile::Exec& exec, std::string_view kernel, uint8_t type, std::string* why) {
  KernelInfo k;
  bool found = false;
  {
    Catalog& c = the_catalog();
    const std::lock_guard lock(c.mutex);
    for (const KernelInfo& r : c.rows)
      if (r.name == kernel) {
        k = r;
        found = true;
      }
  }
  const auto no = [&](std::string reason) {
    if (why != nullptr) *why = std::move(reason);
    return false;
  };
  if (!found) return no("no kernel of that name in this build");
  if (exec.backend != tile::Backend::kCuda) {
    if (k.host_types == 0) return no("it runs on CUDA only");
    if ((k.host_types & type) == 0) return no("it has no " + type_name(type) + " path on the host executors");
    return true;
  }
  if (cuda_backend() == nullptr)
    return no("this process has no CUDA backend (a build without CUDA, or libbench_cuda not loaded)");
  if (k.cuda_types == 0) return no("it has no CUDA build");
  if ((k.cuda_types & type) == 0)
    return no(type == kF64 ? "float64 has no CUDA path (CUDA runs float and bfloat16)"
                           : "its CUDA build has no " + type_name(type) + " path");
  if (k.cuda_unavailable != nullptr)
    if (std::string r = k.cuda_unavailable(); !r.empty()) return no(std::move(r));
  return true;
}

void require(const tile::Exec& exec, std::string_view kernel, uint8_t type) {
  std::string why;
  if (!supports(exec, kernel, type, &why)) throw tile::Unsupported(std::string(kernel), tile::target_name(exec), why);
}

}  // namespace bench::kernels
