#include "memory.h"

#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <stdexcept>
#include <string>

#include "caching_allocator.h"
#include "cuda_backend.h"

namespace bench::kernels {

namespace {

constexpr size_t kAlign = 256;

struct Region {
  size_t bytes;
  Memory memory;
};

/// Every live allocation, by start address.
class Regions {
 public:
  void add(void* p, size_t bytes, Memory m) {
    const std::unique_lock lock(mutex_);
    map_[reinterpret_cast<uintptr_t>(p)] = Region{bytes, m};
  }
  Region remove(void* p) {
    const std::unique_lock lock(mutex_);
    const auto it = map_.find(reinterpret_cast<uintptr_t>(p));
    if (it == map_.end()) throw std::invalid_argument("device_free: not an allocation of device_allocate");
    const Region r = it->second;
    map_.erase(it);
    return r;
  }
  Memory find(const void* p) const {
    const auto a = reinterpret_cast<uintptr_t>(p);
    const std::shared_lock lock(mutex_);
    auto it = map_.upper_bound(a);
    if (it == map_.begin()) return Memory::kHost;
    --it;
    return a < it->first + it->second.bytes ? it->second.memory : Memory::kHost;
  }

 private:
  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Region> map_;
};

Regions& regions() {
  static Regions r;
  return r;
}

// The reservation of guarded memory, for the fault handler (set once, before it is installed).
char* g_guarded_base = nullptr;
size_t g_guarded_size = 0;
struct sigaction g_previous_segv;

/// SIGSEGV inside guarded memory is host code touching the model's device memory: say so in one
/// line, then give the fault back to whoever handled it before (the default: a crash; or a
/// sanitizer), which runs when the instruction faults again. Only async-signal-safe calls.
void on_guarded_fault(int sig, siginfo_t* info, void* context) {
  const auto* a = static_cast<const char*>(info->si_addr);
  if (a >= g_guarded_base && a < g_guarded_base + g_guarded_size) {
    char msg[256] = "bench: guarded device: host code touched the model's device memory at 0x";
    size_t n = std::strlen(msg);
    const auto v = reinterpret_cast<uintptr_t>(a);
    for (int shift = 60; shift >= 0; shift -= 4) msg[n++] = "0123456789abcdef"[(v >> shift) & 0xf];
    const char tail[] =
        " outside a kernel or a copy (on a GPU this reads garbage or crashes); read and write model tensors "
        "with kernels, ops::copy and ops::on_host (docs/plugins.md)\n";
    std::memcpy(msg + n, tail, std::min(sizeof tail, sizeof msg - n - 1));
    n = std::strlen(msg);
    (void)!write(STDERR_FILENO, msg, n);
  }
  sigaction(SIGSEGV, &g_previous_segv, nullptr);
  (void)sig;
  (void)context;
}

/// Guarded memory: one reservation of address space, handed out by a bump pointer and reused
/// for a later allocation of the same rounded size (so that a test allocating and freeing many
/// buffers keeps the region, and every mprotect of it, small), PROT_NONE while no HostAccess is
/// open.
class GuardedPool {
 public:
  static constexpr size_t kReserve = size_t{1} << 36;  // 64 GiB of address space, committed on use

  void* allocate(size_t bytes) {
    const std::lock_guard lock(mutex_);
    if (base_ == nullptr) {
      void* p = mmap(nullptr, kReserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (p == MAP_FAILED) throw std::runtime_error("guarded memory: cannot reserve address space");
      base_ = static_cast<char*>(p);
      g_guarded_base = base_;
      g_guarded_size = kReserve;
      struct sigaction sa {};
      sa.sa_sigaction = on_guarded_fault;
      sa.sa_flags = SA_SIGINFO;
      sigemptyset(&sa.sa_mask);
      sigaction(SIGSEGV, &sa, &g_previous_segv);
    }
    const auto page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    const size_t rounded = (bytes + page - 1) / page * page;
    if (const auto it = free_.find(rounded); it != free_.end()) {  // a freed block: zeroed again
      char* p = it->second;
      free_.erase(it);
      if (open_ == 0) protect(p, rounded, true);
      std::memset(p, 0, rounded);
      if (open_ == 0) protect(p, rounded, false);
      return p;
    }
    if (used_ + rounded > kReserve) throw std::runtime_error("guarded memory: 64 GiB reservation exhausted");
    char* p = base_ + used_;
    used_ += rounded;
    if (open_ > 0) protect(p, rounded, true);
    return p;
  }
  /// A block of `bytes` (as allocated) for reuse.
  void release(void* p, size_t bytes) {
    const auto page = static_cast<size_t>(sysconf(_SC_PAGE_SIZE));
    const std::lock_guard lock(mutex_);
    free_.emplace((bytes + page - 1) / page * page, static_cast<char*>(p));
  }
  void open() {
    const std::lock_guard lock(mutex_);
    if (open_++ == 0 && used_ > 0) protect(base_, used_, true);
  }
  void close() {
    const std::lock_guard lock(mutex_);
    if (--open_ == 0 && used_ > 0) protect(base_, used_, false);
  }

 private:
  static void protect(char* p, size_t n, bool rw) {
    if (mprotect(p, n, rw ? PROT_READ | PROT_WRITE : PROT_NONE) != 0)
      throw std::runtime_error(std::string("guarded memory: mprotect: ") + std::strerror(errno));
  }
  std::mutex mutex_;
  char* base_ = nullptr;
  size_t used_ = 0;
  int open_ = 0;
  std::multimap<size_t, char*> free_;  // freed blocks by size
};

GuardedPool& guarded_pool() {
  static GuardedPool pool;
  return pool;
}

/// Guarded memory open for the host while it exists, when `open` (the copies' and tile::HostAccess's
/// one way of doing it).
class GuardedOpen {
 public:
  explicit GuardedOpen(bool open) : open_(open) {
    if (open_) guarded_pool().open();
  }
  ~GuardedOpen() {
    if (open_) guarded_pool().close();
  }
  GuardedOpen(const GuardedOpen&) = delete;
  GuardedOpen& operator=(const GuardedOpen&) = delete;

 private:
  bool open_;
};

CachingAllocator& cuda_allocator() {
  static CachingAllocator allocator(require_cuda_backend("device memory \"cuda\"").make_allocator());
  return allocator;
}

thread_local int capture_depth = 0;

/// Throws when this thread is inside a CaptureScope.
void not_while_capturing(const char* what) {
  if (capture_depth > 0)
    throw std::logic_error(std::string(what) +
                           " while a step is captured into a CUDA graph: it would wait for the device or allocate");
}

const CudaBackend& cuda() { return require_cuda_backend("device memory \"cuda\""); }

}  // namespace

std::string_view memory_name(Memory m) {
  switch (m) {
    case Memory::kHost:
      return "host";
    case Memory::kCuda:
      return "cuda";
    case Memory::kGuarded:
      return "guarded";
  }
  return "?";
}

Memory memory_for(tile::Backend backend) {
  switch (backend) {
    case tile::Backend::kCuda:
      return Memory::kCuda;
    case tile::Backend::kGuarded:
      return Memory::kGuarded;
    case tile::Backend::kCpu:
    case tile::Backend::kEmulated:
      break;
  }
  return Memory::kHost;
}

tile::Exec exec_for(Memory m) {
  switch (m) {
    case Memory::kCuda: {
      const CudaBackend* b = cuda_backend();  // without one, the launchers say so
      return tile::Exec{tile::Backend::kCuda, b != nullptr ? b->thread_stream() : nullptr};
    }
    case Memory::kGuarded:
      return tile::Exec{tile::Backend::kGuarded, nullptr};
    case Memory::kHost:
      break;
  }
  return tile::Exec{};
}

void* device_allocate(Memory m, size_t bytes) {
  not_while_capturing("device_allocate");
  const size_t rounded = (bytes == 0 ? 1 : bytes + kAlign - 1) / kAlign * kAlign;
  void* p = nullptr;
  switch (m) {
    case Memory::kHost:
      p = std::aligned_alloc(kAlign, rounded);
      if (p == nullptr) throw std::runtime_error("out of memory allocating " + std::to_string(bytes) + " bytes");
      std::memset(p, 0, rounded);
      break;
    case Memory::kGuarded:
      p = guarded_pool().allocate(rounded);  // fresh pages: already zero
      break;
    case Memory::kCuda:
      try {
        // Keyed by this thread's stream: a block freed by another thread is not handed out here
        // while that thread's kernels may still use it.
        p = cuda_allocator().allocate(rounded, cuda().thread_stream());
      } catch (const OutOfMemory& e) {
        throw std::runtime_error(e.what());
      }
      cuda().zero(p, rounded, nullptr);
      break;
  }
  regions().add(p, rounded, m);
  return p;
}

void device_free(void* p) {
  if (p == nullptr) return;
  const Region r = regions().remove(p);
  if (r.memory == Memory::kGuarded) guarded_pool().release(p, r.bytes);
  if (r.memory == Memory::kHost) std::free(p);
  if (r.memory == Memory::kCuda) cuda_allocator().free(p);
}

Memory memory_of(const void* p) { return regions().find(p); }

void copy_bytes(void* dst, const void* src, size_t bytes) {
  if (bytes == 0 || dst == src) return;
  const Memory md = memory_of(dst), ms = memory_of(src);
  const bool crosses = (md == Memory::kHost) != (ms == Memory::kHost);
  if (crosses) not_while_capturing("copy_bytes between the host and a device");
  if (md == Memory::kCuda || ms == Memory::kCuda) {
    cuda().copy(dst, src, bytes, /*wait=*/crosses);
    return;
  }
  const GuardedOpen open(md == Memory::kGuarded || ms == Memory::kGuarded);
  std::memmove(dst, src, bytes);
}

void copy_2d(void* dst, size_t dst_pitch, const void* src, size_t src_pitch, size_t width, size_t rows) {
  if (width == 0 || rows == 0) return;
  const Memory md = memory_of(dst), ms = memory_of(src);
  const bool crosses = (md == Memory::kHost) != (ms == Memory::kHost);
  if (crosses) not_while_capturing("copy_2d between the host and a device");
  if (md == Memory::kCuda || ms == Memory::kCuda) {
    cuda().copy_2d(dst, dst_pitch, src, src_pitch, width, rows, /*wait=*/crosses);
    return;
  }
  const GuardedOpen open(md == Memory::kGuarded || ms == Memory::kGuarded);
  for (size_t r = 0; r < rows; ++r)
    std::memcpy(static_cast<char*>(dst) + r * dst_pitch, static_cast<const char*>(src) + r * src_pitch, width);
}

void zero_bytes(void* p, size_t bytes) {
  if (bytes == 0) return;
  switch (memory_of(p)) {
    case Memory::kCuda:
      cuda().zero(p, bytes, nullptr);
      return;
    case Memory::kGuarded:
    case Memory::kHost: {
      const GuardedOpen open(memory_of(p) == Memory::kGuarded);
      std::memset(p, 0, bytes);
      return;
    }
  }
}

void synchronize(const tile::Exec& exec) {
  not_while_capturing("synchronize");
  if (exec.backend != tile::Backend::kCuda) return;
  cuda().synchronize(exec.stream);
}

CaptureScope::CaptureScope() { ++capture_depth; }
CaptureScope::~CaptureScope() { --capture_depth; }
bool CaptureScope::active() { return capture_depth > 0; }

bool cuda_built() { return cuda_backend() != nullptr; }

size_t cuda_memory_available() {
  const CudaBackend* b = cuda_backend();
  return b != nullptr ? b->memory_available() : 0;
}

int cuda_device_count() {
  const CudaBackend* b = cuda_backend();
  return b != nullptr ? b->device_count() : 0;
}

}  // namespace bench::kernels

namespace bench::tile {

HostAccess::HostAccess(const Exec& exec) : open_(exec.backend == Backend::kGuarded) {
  if (open_) kernels::guarded_pool().open();
}

HostAccess::~HostAccess() {
  if (open_) kernels::guarded_pool().close();
}

}  // namespace bench::tile
