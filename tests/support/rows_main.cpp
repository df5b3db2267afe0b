// The main() of kernels_test: GoogleTest's, plus three flags of ours that scripts/gpu-check.sh
// passes on a GPU so that every test writes its row the moment it ends (support/check_table.h):
//   --bench_rows=FILE.md  --bench_json_rows=FILE.jsonl  --bench_section=NAME
// and, where the build has CUDA, a probe after each test that stops the run with the row of the
// test that left the device unusable (a sticky error: an illegal address, a launch failure).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/check_table.h"
#include "support/check_table_listener.h"

#if BENCH_HAVE_CUDA
#include "kernels/device_runtime.h"
#include "kernels/memory.h"
#endif

int main(int argc, char** argv) {
  std::string md, jsonl, section = "kernels";
  std::vector<char*> rest;
  for (int i = 0; i < argc; ++i) {
    const std::string a = argv[i];
    if (a.rfind("--bench_rows=", 0) == 0)
      md = a.substr(13);
    else if (a.rfind("--bench_json_rows=", 0) == 0)
      jsonl = a.substr(18);
    else if (a.rfind("--bench_section=", 0) == 0)
      section = a.substr(16);
    else
      rest.push_back(argv[i]);
  }
  int n = static_cast<int>(rest.size());
  rest.push_back(nullptr);  // argv[argc] is null: GoogleTest's flag parser moves it along (ASan saw the read)
  ::testing::InitGoogleTest(&n, rest.data());
  bench::test::CheckTable table(section, md, jsonl);
  if (!md.empty() || !jsonl.empty()) {
#if BENCH_HAVE_CUDA
    // Only where a device is visible: without one every CUDA call fails, and that is no check's doing.
    if (bench::kernels::cuda_device_count() > 0)
      table.device_probe = [] { return bench::kernels::cuda::sticky_error(); };
#endif
    ::testing::UnitTest::GetInstance()->listeners().Append(new bench::test::CheckTableListener(table));
  }
  return RUN_ALL_TESTS();
}
