// kernels/memory.h: the memories a model's tensors live in. Guarded memory must really be
// inaccessible to host code outside kernels and copies (the point of the "guarded" device), and
// the copies and zeroing must move the right bytes between any two memories.
#include "memory.h"

#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "elementwise.h"
#include "gemm.h"

namespace bench::kernels {
namespace memory_test {
namespace {

TEST(Memory, MemoryOfFindsEveryByteOfAnAllocationAndNothingElse) {
  for (Memory m : {Memory::kHost, Memory::kGuarded}) {
    auto* p = static_cast<char*>(device_allocate(m, 1000));
    EXPECT_EQ(memory_of(p), m);
    EXPECT_EQ(memory_of(p + 999), m);
    // Rounded to 256: the allocation's own bytes end at 1024.
    EXPECT_EQ(memory_of(p + 1024), Memory::kHost);
    int on_stack = 0;
    EXPECT_EQ(memory_of(&on_stack), Memory::kHost);
    device_free(p);
    EXPECT_EQ(memory_of(p), Memory::kHost);
  }
  int not_allocated = 0;
  EXPECT_THROW(device_free(&not_allocated), std::invalid_argument);
}

TEST(Memory, CopiesAndZeroingMoveTheBytesBetweenAnyTwoMemories) {
  std::vector<float> src(300), back(300, -1.f);
  std::iota(src.begin(), src.end(), 1.f);
  const size_t bytes = src.size() * sizeof(float);
  void* g = device_allocate(Memory::kGuarded, bytes);
  void* h = device_allocate(Memory::kHost, bytes);
  copy_bytes(g, src.data(), bytes);  // host -> guarded
  copy_bytes(h, g, bytes);           // guarded -> host allocation
  copy_bytes(back.data(), h, bytes);
  EXPECT_EQ(back, src);
  // Strided: every other run of 3 floats, from rows of 6.
  std::vector<float> packed(150, 0.f);
  copy_2d(packed.data(), 3 * sizeof(float), g, 6 * sizeof(float), 3 * sizeof(float), 50);
  for (size_t r = 0; r < 50; ++r)
    for (size_t c = 0; c < 3; ++c) ASSERT_EQ(packed[r * 3 + c], src[r * 6 + c]);
  zero_bytes(g, bytes / 2);
  copy_bytes(back.data(), g, bytes);
  for (size_t i = 0; i < src.size(); ++i) ASSERT_EQ(back[i], i < 150 ? 0.f : src[i]) << i;
  device_free(g);
  device_free(h);
}

TEST(Memory, KernelsOnGuardedMemoryComputeWhatTheCpuComputes) {
  const int64_t n = 64;
  std::vector<float> a(n * n), b(n * n), want(n * n), got(n * n);
  for (int64_t i = 0; i < n * n; ++i) {
    a[static_cast<size_t>(i)] = static_cast<float>((i * 37) % 11) - 5.f;
    b[static_cast<size_t>(i)] = static_cast<float>((i * 13) % 7) - 3.f;
  }
  gemm<float>(false, true, n, n, n, 1.f, a.data(), n, b.data(), n, 0.f, want.data(), n);
  add<float>(tile::Exec{}, want.data(), a.data(), want.data(), n * n);
  const size_t bytes = a.size() * sizeof(float);
  auto* ga = static_cast<float*>(device_allocate(Memory::kGuarded, bytes));
  auto* gb = static_cast<float*>(device_allocate(Memory::kGuarded, bytes));
  auto* gc = static_cast<float*>(device_allocate(Memory::kGuarded, bytes));
  copy_bytes(ga, a.data(), bytes);
  copy_bytes(gb, b.data(), bytes);
  const tile::Exec exec = exec_for(Memory::kGuarded);
  gemm<float>(exec, false, true, n, n, n, 1.f, ga, n, gb, n, 0.f, gc, n);
  add<float>(exec, gc, ga, gc, n * n);
  EXPECT_EQ(sum_squares<float>(exec, gc, n * n), sum_squares<float>(tile::Exec{}, want.data(), n * n));
  copy_bytes(got.data(), gc, bytes);
  EXPECT_EQ(got, want);
  for (float* p : {ga, gb, gc}) device_free(p);
}

// Backend::kCuda never falls through to CPU code on device pointers: without a GPU (or without
// CUDA in the build) a launch says which kernel cannot run where and why, float64 has no CUDA
// path, and a tile program with no CUDA build (this test's own module registers none) is
// refused as unsupported.
TEST(Memory, CudaLaunchesWithoutAGpuFailWithAMessage) {
  if (cuda_device_count() > 0) GTEST_SKIP() << "a CUDA device is visible";
  const tile::Exec cuda{tile::Backend::kCuda, nullptr};
  std::vector<float> x(64, 1.f), y(64);
  std::vector<double> xd(64, 1.0), yd(64);
  EXPECT_THROW(add<float>(cuda, x.data(), x.data(), y.data(), 64), std::exception);
  EXPECT_THROW(add<double>(cuda, xd.data(), xd.data(), yd.data(), 64), tile::Unsupported);
  EXPECT_THROW(gemm<float>(cuda, false, false, 8, 8, 8, 1.f, x.data(), 8, x.data(), 8, 0.f, y.data(), 8),
               std::exception);
  try {
    add<float>(cuda, x.data(), x.data(), y.data(), 64);
  } catch (const std::exception& e) {
    // The program, the device, and why: no CUDA backend in this build, or CUDA's own error.
    EXPECT_NE(std::string(e.what()).find("programs::Add<float, 1024>"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("cuda"), std::string::npos) << e.what();
  }
  try {
    tile::launch(cuda, tile::Grid{1}, programs::Add<float, 1024>{x.data(), x.data(), y.data(), 64});
    ADD_FAILURE() << "launched a program with no CUDA build";
  } catch (const tile::Unsupported& e) {
    EXPECT_EQ(e.kernel(), "bench::kernels::programs::Add<float, 1024>");
    EXPECT_EQ(e.target().rfind("cuda", 0), 0U) << e.target();
    EXPECT_FALSE(e.why().empty());
  }
  EXPECT_EQ(y, std::vector<float>(64, 0.f));  // nothing ran on the CPU instead
}

using MemoryDeathTest = ::testing::Test;

TEST_F(MemoryDeathTest, HostCodeThatTouchesGuardedMemoryFaults) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto* p = static_cast<volatile float*>(device_allocate(Memory::kGuarded, 64));
  EXPECT_DEATH(p[3] = 1.f, "guarded device: host code touched the model's device memory at 0x");
  EXPECT_DEATH((void)p[0], "");
  {
    const tile::HostAccess open(exec_for(Memory::kGuarded));  // what a launcher holds while it runs
    p[3] = 2.f;
    EXPECT_EQ(p[3], 2.f);
  }
  EXPECT_DEATH((void)p[3], "");  // closed again
  // Host memory and the CPU executors are unaffected.
  const tile::HostAccess none(tile::Exec{});
  EXPECT_DEATH((void)p[3], "");
  device_free(const_cast<float*>(p));
}

}  // namespace
}  // namespace memory_test
}  // namespace bench::kernels
