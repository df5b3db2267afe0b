// defines: bench::kernels::KernelInfo, catalog — the kernels of this tree, for `bench list kernels`
#pragma once

#include <vector>

namespace bench::kernels {

struct KernelInfo {
  const char* name;
  const char* file;
  const char* doc;
};

/// Every kernel with its file and formula.
const std::vector<KernelInfo>& catalog();

}  // namespace bench::kernels
