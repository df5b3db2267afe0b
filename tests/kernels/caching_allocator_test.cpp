// The caching allocator: a repeated step reaches the backend (cudaMalloc) only in its first
// iteration; sizes, streams, peaks, out-of-memory with the cache released and retried.
#include "caching_allocator.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <set>
#include <vector>

namespace bench::kernels {
namespace caching_allocator_test {
namespace {

/// The heap, counting calls and bytes, with an optional capacity (beyond it: out of memory).
class CountingBackend final : public AllocatorBackend {
 public:
  explicit CountingBackend(size_t capacity = SIZE_MAX, int64_t* allocs = nullptr, size_t* live = nullptr)
      : capacity_(capacity), allocs_(allocs), live_(live) {}
  void* allocate(size_t bytes) override {
    if (*live_ + bytes > capacity_) return nullptr;
    ++*allocs_;
    *live_ += bytes;
    return host_->allocate(bytes);
  }
  void release(void* p, size_t bytes) override {
    *live_ -= bytes;
    host_->release(p, bytes);
  }
  std::string name() const override { return "counting"; }

 private:
  size_t capacity_;
  int64_t* allocs_;
  size_t* live_;
  std::unique_ptr<AllocatorBackend> host_ = make_host_backend();
};

struct Counted {
  int64_t allocs = 0;
  size_t live = 0;
  CachingAllocator make(size_t capacity = SIZE_MAX) {
    return CachingAllocator(std::make_unique<CountingBackend>(capacity, &allocs, &live));
  }
};

/// One "training step": activations of several sizes allocated, used, freed in reverse order.
void step(CachingAllocator& a, const std::vector<size_t>& sizes) {
  std::vector<void*> blocks;
  for (const size_t s : sizes) {
    void* p = a.allocate(s);
    std::memset(p, 0xab, s);  // the memory is really there, and ASan sees any overrun
    blocks.push_back(p);
  }
  for (auto it = blocks.rbegin(); it != blocks.rend(); ++it) a.free(*it);
}

TEST(CachingAllocator, ASteadyStepLoopReachesTheBackendOnlyInItsFirstStep) {
  Counted c;
  CachingAllocator a = c.make();
  const std::vector<size_t> sizes = {4096, 1 << 20, 3 << 20, 777, 1 << 20, 64, 12345};
  step(a, sizes);
  const AllocatorStats first = a.stats();
  EXPECT_EQ(first.backend_allocs, static_cast<int64_t>(sizes.size()));
  for (int i = 0; i < 50; ++i) step(a, sizes);
  const AllocatorStats s = a.stats();
  EXPECT_EQ(s.backend_allocs, first.backend_allocs) << "no cudaMalloc in the step loop";
  EXPECT_EQ(s.backend_frees, 0);
  EXPECT_EQ(s.cache_hits, 50 * static_cast<int64_t>(sizes.size()));
  EXPECT_EQ(s.allocated_bytes, 0U);
  EXPECT_EQ(s.reserved_bytes, first.reserved_bytes);
  EXPECT_EQ(c.allocs, first.backend_allocs);
}

TEST(CachingAllocator, RoundsSizesAndAlignsAndNeverHandsOutABlockTwice) {
  Counted c;
  CachingAllocator a = c.make();
  std::set<void*> seen;
  for (const size_t s : {0UL, 1UL, 511UL, 512UL, 513UL, 100000UL}) {
    void* p = a.allocate(s);
    EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % CachingAllocator::kRoundBytes, 0U) << s;
    EXPECT_TRUE(seen.insert(p).second) << s;
  }
  // 512 + 512 + 512 + 512 + 1024 + 100352
  EXPECT_EQ(a.stats().allocated_bytes, 512U * 4 + 1024 + 100352);
  EXPECT_EQ(a.stats().peak_allocated_bytes, a.stats().allocated_bytes);
}

TEST(CachingAllocator, ACachedBlockServesOnlyItsStreamAndRequestsUpToItsSize) {
  Counted c;
  CachingAllocator a = c.make();
  int stream_a = 0, stream_b = 0;
  void* p = a.allocate(1 << 20, &stream_a);
  a.free(p);
  EXPECT_NE(a.allocate(1 << 20, &stream_b), p) << "another stream may still be using it";
  EXPECT_NE(a.allocate(1 << 22, &stream_a), p) << "too small";
  EXPECT_EQ(a.allocate(1 << 19, &stream_a), p) << "half its size: reused";
  void* q = a.allocate(1 << 20, &stream_a);
  a.free(q);
  EXPECT_NE(a.allocate(1000, &stream_a), q) << "a 1 MiB block is not spent on 1000 bytes";
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheRetriesAndThenSaysHowMuch) {
  Counted c;
  CachingAllocator a = c.make(4 << 20);
  void* p = a.allocate(3 << 20);
  a.free(p);                      // cached: 3 MiB of the 4 reserved
  void* q = a.allocate(2 << 20);  // the cached 3 MiB block serves it
  EXPECT_EQ(q, p);
  EXPECT_EQ(a.stats().cache_hits, 1) << "3 MiB serves 2 MiB (at most twice the size)";
  a.free(q);
  void* big = a.allocate((4 << 20) - 512);  // fits only once the cached block is given back
  EXPECT_NE(big, nullptr);
  EXPECT_EQ(a.stats().backend_frees, 1);
  try {
    (void)a.allocate(1 << 20);
    FAIL() << "over the capacity";
  } catch (const OutOfMemory& e) {
    EXPECT_NE(std::string(e.what()).find("counting: out of memory allocating 1048576 bytes"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("3 MiB allocated"), std::string::npos) << e.what();
  }
  a.free(big);
  a.release_cached();
  EXPECT_EQ(a.stats().reserved_bytes, 0U);
  EXPECT_EQ(c.live, 0U);
}

TEST(CachingAllocator, PeaksAndUnknownPointers) {
  Counted c;
  CachingAllocator a = c.make();
  void* p = a.allocate(1 << 20);
  void* q = a.allocate(1 << 20);
  a.free(p);
  a.free(q);
  EXPECT_EQ(a.stats().peak_allocated_bytes, 2U << 20);
  a.reset_peaks();
  EXPECT_EQ(a.stats().peak_allocated_bytes, 0U);
  EXPECT_EQ(a.stats().peak_reserved_bytes, 2U << 20);
  int not_ours = 0;
  EXPECT_THROW(a.free(&not_ours), std::invalid_argument);
  a.free(nullptr);
}

TEST(CachingAllocator, TheDestructorGivesEverythingBack) {
  Counted c;
  {
    CachingAllocator a = c.make();
    a.free(a.allocate(1 << 20));
    (void)a.allocate(4096);  // still allocated when the allocator goes
  }
  EXPECT_EQ(c.live, 0U);
}

}  // namespace
}  // namespace caching_allocator_test
}  // namespace bench::kernels
