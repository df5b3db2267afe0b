// defines: bench::kernels::CachingAllocator, AllocatorBackend, AllocatorStats — device memory that
// is obtained from the driver once and then reused, so a training step allocates nothing
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>

namespace bench::kernels {

/// Where the memory comes from: cudaMalloc/cudaFree for a GPU (kernels/cuda/runtime.cu), the
/// heap for tests. allocate returns nullptr when the memory is not there (out of memory).
class AllocatorBackend {
 public:
  virtual ~AllocatorBackend() = default;
  virtual void* allocate(size_t bytes) = 0;
  virtual void release(void* p, size_t bytes) = 0;
  /// For messages: "cuda:0", "host".
  virtual std::string name() const = 0;
};

/// The heap (aligned_alloc), for tests and CPU builds.
std::unique_ptr<AllocatorBackend> make_host_backend();

/// Counters of a CachingAllocator. "Allocated" is what callers hold; "reserved" is what the backend
/// gave (allocated + cached); backend_* count the calls that reach the backend (cudaMalloc/cudaFree):
/// in a steady-state step loop they stay constant.
struct AllocatorStats {
  size_t allocated_bytes = 0, reserved_bytes = 0;
  size_t peak_allocated_bytes = 0, peak_reserved_bytes = 0;
  int64_t backend_allocs = 0, backend_frees = 0;
  int64_t requests = 0, cache_hits = 0;
};

/// A caching allocator: a freed block goes to a free list instead of back to the backend, and a
/// later request of a similar size on the same stream takes it. Sizes are rounded up to
/// kRoundBytes; a cached block serves a request when it is at most twice as large (so a big block
/// is not spent on a small request). When the backend is out of memory, the cache is released and
/// the request retried once; then an Error with the numbers is thrown. Blocks are tied to the
/// stream they were allocated for: memory freed on one stream is not handed to another, whose
/// kernels could still be using it (use on other streams needs an event, which callers arrange).
/// Thread-safe.
class CachingAllocator {
 public:
  static constexpr size_t kRoundBytes = 512;

  explicit CachingAllocator(std::unique_ptr<AllocatorBackend> backend);
  ~CachingAllocator();  ///< releases every block it holds; blocks still allocated are released too
  CachingAllocator(const CachingAllocator&) = delete;
  CachingAllocator& operator=(const CachingAllocator&) = delete;

  /// `bytes` (0 allowed: a distinct pointer of one round unit) for `stream` (an opaque id; 0 is the
  /// default stream), aligned to kRoundBytes. Throws bench::kernels::OutOfMemory when it cannot.
  void* allocate(size_t bytes, const void* stream = nullptr);
  /// Returns a block from allocate to the cache. nullptr is ignored; an unknown pointer throws.
  void free(void* p);
  /// Gives every cached (free) block back to the backend.
  void release_cached();
  AllocatorStats stats() const;
  /// Starts the peaks over from the current values.
  void reset_peaks();
  const AllocatorBackend& backend() const { return *backend_; }

 private:
  struct Block {
    size_t bytes;
    const void* stream;
  };
  void release_cached_locked();

  std::unique_ptr<AllocatorBackend> backend_;
  mutable std::mutex mutex_;
  std::unordered_map<void*, Block> in_use_;
  std::multimap<std::pair<const void*, size_t>, void*> cached_;  // (stream, bytes) -> block
  AllocatorStats stats_;
};

/// What CachingAllocator::allocate throws when the backend cannot give the memory.
class OutOfMemory : public std::exception {
 public:
  explicit OutOfMemory(std::string what) : what_(std::move(what)) {}
  const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

}  // namespace bench::kernels
