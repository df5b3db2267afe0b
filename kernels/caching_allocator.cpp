#include "caching_allocator.h"

#include <cstdlib>
#include <stdexcept>
#include <vector>

namespace bench::kernels {

namespace {

class HostBackend final : public AllocatorBackend {
 public:
  void* allocate(size_t bytes) override { return std::aligned_alloc(CachingAllocator::kRoundBytes, bytes); }
  void release(void* p, size_t /*bytes*/) override { std::free(p); }
  std::string name() const override { return "host"; }
};

size_t round_up(size_t bytes) {
  const size_t b = bytes == 0 ? 1 : bytes;
  return (b + CachingAllocator::kRoundBytes - 1) / CachingAllocator::kRoundBytes * CachingAllocator::kRoundBytes;
}

std::string mib(size_t bytes) { return std::to_string(bytes / (size_t{1024} * 1024)) + " MiB"; }

}  // namespace

std::unique_ptr<AllocatorBackend> make_host_backend() { return std::make_unique<HostBackend>(); }

CachingAllocator::CachingAllocator(std::unique_ptr<AllocatorBackend> backend) : backend_(std::move(backend)) {}

CachingAllocator::~CachingAllocator() {
  const std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
  for (const auto& [p, block] : in_use_) backend_->release(p, block.bytes);
}

void* CachingAllocator::allocate(size_t bytes, const void* stream) {
  const size_t size = round_up(bytes);
  const std::lock_guard<std::mutex> lock(mutex_);
  ++stats_.requests;
  // The smallest cached block of this stream that fits, if it is at most twice the size.
  const auto it = cached_.lower_bound({stream, size});
  void* p = nullptr;
  size_t got = size;
  if (it != cached_.end() && it->first.first == stream && it->first.second <= 2 * size) {
    p = it->second;
    got = it->first.second;
    cached_.erase(it);
    ++stats_.cache_hits;
  } else {
    p = backend_->allocate(size);
    if (p == nullptr && !cached_.empty()) {
      release_cached_locked();
      p = backend_->allocate(size);
    }
    if (p == nullptr)
      throw OutOfMemory(backend_->name() + ": out of memory allocating " + std::to_string(bytes) + " bytes (" +
                        mib(stats_.allocated_bytes) + " allocated, " + mib(stats_.reserved_bytes) +
                        " reserved by this allocator)");
    ++stats_.backend_allocs;
    stats_.reserved_bytes += size;
    stats_.peak_reserved_bytes = std::max(stats_.peak_reserved_bytes, stats_.reserved_bytes);
  }
  in_use_.emplace(p, Block{got, stream});
  stats_.allocated_bytes += got;
  stats_.peak_allocated_bytes = std::max(stats_.peak_allocated_bytes, stats_.allocated_bytes);
  return p;
}

void CachingAllocator::free(void* p) {
  if (p == nullptr) return;
  const std::lock_guard<std::mutex> lock(mutex_);
  const auto it = in_use_.find(p);
  if (it == in_use_.end()) throw std::invalid_argument("CachingAllocator::free: not a block of this allocator");
  stats_.allocated_bytes -= it->second.bytes;
  cached_.emplace(std::make_pair(it->second.stream, it->second.bytes), p);
  in_use_.erase(it);
}

void CachingAllocator::release_cached() {
  const std::lock_guard<std::mutex> lock(mutex_);
  release_cached_locked();
}

void CachingAllocator::release_cached_locked() {
  for (const auto& [key, p] : cached_) {
    backend_->release(p, key.second);
    ++stats_.backend_frees;
    stats_.reserved_bytes -= key.second;
  }
  cached_.clear();
}

AllocatorStats CachingAllocator::stats() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void CachingAllocator::reset_peaks() {
  const std::lock_guard<std::mutex> lock(mutex_);
  stats_.peak_allocated_bytes = stats_.allocated_bytes;
  stats_.peak_reserved_bytes = stats_.reserved_bytes;
}

}  // namespace bench::kernels
