// The targets of the kernel tests and the registry behind Backend::kCuda (kernels/tile/registry.h,
// kernels/catalog.h): which targets this process has (the CUDA one is skipped, and says why,
// without a device), that the CUDA pass registered a CUDA build of every tile kernel in a CUDA
// build (checked without a GPU: registration happens when libbench_cuda loads), what the
// supports() queries answer, and that the host targets refuse a device-only tile width.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <stdexcept>
#include <string>

#include "catalog.h"
#include "elementwise.h"
#include "kernel_test_util.h"
#include "norm.h"

namespace bench::kernels {
namespace targets_test {
namespace {

using namespace testing;  // NOLINT: the kernel test helpers

TEST(Targets, Cuda) {
  if (const std::string why = cuda_target_missing(); !why.empty())
    GTEST_SKIP() << "no cuda target: " << why << "; the kernel tests ran on cpu, emulated and guarded only";
  EXPECT_EQ(targets().back().name, "cuda");
  std::printf("cuda target: %s\n", tile::target_name(targets().back().exec()).c_str());
}

TEST(Targets, EveryHostTargetIsThere) {
  ASSERT_GE(targets().size(), 3U);
  EXPECT_EQ(targets()[0].name, "cpu");
  EXPECT_EQ(targets()[1].name, "emulated");
  EXPECT_EQ(targets()[2].name, "guarded");
}

// The catalog is the list of kernels: every launcher registered itself once, with its header, and
// every tile kernel runs on the host executors in every type.
TEST(Catalog, ListsEveryLauncherOnceWithItsHeader) {
  const auto c = catalog();
  for (const char* name : {"norm_forward", "norm_backward", "softmax_forward", "cross_entropy", "rope_apply",
                           "glu_backward", "adamw_update", "sum_of", "copy_block", "attention_forward", "gemm"}) {
    int found = 0;
    for (const KernelInfo& k : c)
      if (k.name == name) {
        ++found;
        EXPECT_EQ(k.host_types, kAllTypes) << name;
        EXPECT_FALSE(k.doc.empty()) << name;
        EXPECT_EQ(k.file.rfind("kernels/", 0), 0U) << name << " in " << k.file;
      }
    EXPECT_EQ(found, 1) << name;
  }
}

// In a CUDA build the CUDA pass of every kernel family registered its launchers and their
// programs' CUDA builds when libbench_cuda loaded: compiled and registered, whether or not a GPU
// is here to run them.
TEST(Catalog, ACudaBuildRegistersEveryTileKernelForCuda) {
  if (!cuda_built()) GTEST_SKIP() << "this build has no CUDA backend";
  const tile::Exec cuda{tile::Backend::kCuda, nullptr};
  for (const KernelInfo& k : catalog()) {
    if (k.host_types == 0) continue;  // CUDA-only kernels (cuDNN, flash) answer for themselves
    EXPECT_EQ(k.cuda_types, kF32 | kBf16) << k.name;
    EXPECT_TRUE(supports<float>(cuda, k.name)) << k.name;
    std::string why;
    EXPECT_FALSE(supports<double>(cuda, k.name, &why)) << k.name;
    EXPECT_NE(why.find("float64 has no CUDA path"), std::string::npos) << why;
  }
  const auto programs = tile::cuda_programs("bench");
  EXPECT_GT(programs.size(), 100U);
  for (const char* p :
       {"bench::kernels::programs::NormForward<float, 1024>",
        "bench::kernels::programs::NormBackward<bench::tile::bf16, 32>",
        "bench::kernels::programs::NormForward<bench::tile::bf16, 4096>",
        "bench::kernels::programs::RopeInterleaved<float, 1024, true>",
        "bench::kernels::programs::EmbeddingForward<bench::tile::bf16, 1024, true>",
        "bench::kernels::programs::EmbeddingBackward<float, 768, true>", "bench::kernels::programs::Block<float, 64>"})
    EXPECT_NE(std::find(programs.begin(), programs.end(), p), programs.end()) << p;
}

TEST(Supports, HostExecutorsRunEveryTileKernelAndNoCudaOnlyOne) {
  for (const Target& t : targets()) {
    if (t.backend == tile::Backend::kCuda) continue;
    EXPECT_TRUE(supports<double>(t.exec(), "norm_forward")) << t.name;
    EXPECT_TRUE(supports<tile::bf16>(t.exec(), "attention_backward")) << t.name;
    std::string why;
    EXPECT_FALSE(supports<tile::bf16>(t.exec(), "attention_cudnn_forward", &why)) << t.name;
    EXPECT_EQ(why, "it runs on CUDA only");
    EXPECT_FALSE(supports<float>(t.exec(), "no_such_kernel", &why));
    EXPECT_EQ(why, "no kernel of that name in this build");
  }
  // A program of this test's own (module "", no CUDA build): the host executors, not CUDA.
  using Add = programs::Add<float, 1024>;
  EXPECT_TRUE(tile::supports<Add>(tile::Exec{tile::Backend::kEmulated}));
  std::string why;
  EXPECT_FALSE(tile::supports<Add>(tile::Exec{tile::Backend::kCuda}, &why));
  EXPECT_FALSE(why.empty());
}

TEST(Supports, RequireThrowsNamingTheKernelTheTargetAndWhy) {
  try {
    require(tile::Exec{tile::Backend::kGuarded}, "attention_cudnn_backward", kBf16);
    ADD_FAILURE() << "no throw";
  } catch (const tile::Unsupported& e) {
    EXPECT_EQ(std::string(e.what()), "kernel attention_cudnn_backward cannot run on guarded: it runs on CUDA only");
  }
}

/// A program of a device-only width (wider than tile::kHostMaxTile); it counts its runs.
struct WideProgram {
  static constexpr int kBlock = 2 * tile::kHostMaxTile;
  std::atomic<int>* runs;
  template <class Ctx>
  void operator()(const Ctx& /*ctx*/) const {
    runs->fetch_add(1);
  }
};

// The host executors never run a tile wider than kHostMaxTile (dispatch_row gives those widths to
// devices only), so launch compiles no CPU build of one: on a host target it throws, naming the
// width and the target; the emulated device runs it.
TEST(Launch, HostTargetsRefuseATileWiderThanTheirWidest) {
  std::atomic<int> runs{0};
  const WideProgram program{&runs};
  const tile::Grid grid{3};
  for (const Target& t : targets()) {
    if (t.backend == tile::Backend::kCuda) continue;
    if (tile::runs_as_device(t.exec())) {
      tile::launch(t.exec(), grid, program);
      EXPECT_EQ(runs.exchange(0), 3) << t.name;
      continue;
    }
    try {
      tile::launch(t.exec(), grid, program);
      ADD_FAILURE() << t.name << ": no throw";
    } catch (const std::logic_error& e) {
      EXPECT_NE(std::string(e.what()).find("a 2048-wide tile runs on devices only, not on " + t.name),
                std::string::npos)
          << e.what();
    }
    EXPECT_EQ(runs.load(), 0) << t.name;
  }
}

}  // namespace
}  // namespace targets_test
}  // namespace bench::kernels
