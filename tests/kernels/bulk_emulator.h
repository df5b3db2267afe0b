// defines: bench::kernels::emulator::BulkOp, BulkState, BulkLog and the functions behind
//          EmulatedThread's bulk_* members (warp_emulator.h): sm_90's bulk asynchronous reduction
//          from shared to global memory (cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32)
//          and its bulk groups (cp.async.bulk.commit_group, cp.async.bulk.wait_group{.read}) on
//          the CPU
//
// A thread's bulk reduction reads `bytes` of floats from shared memory through the async proxy
// and adds them, element by element and each atomically, to global memory, at some time between
// its issue and the cp.async.bulk.wait_group that completes its group. The emulator:
// - reads the source at the issue, and checks the ISA's operand rules there: both addresses
//   16-byte aligned, the size a non-zero multiple of 16, the source inside shared memory;
// - requires every source byte to be visible to the async proxy: a byte written by st.shared
//   (store_shared_b32 / store_shared_v2_f32) that no fence.proxy.async of its writer has made
//   visible since is a violation, as for wgmma's reads (the same per-byte map, Block::unfenced);
// - adds into global memory when the group is committed or only at the wait that completes it,
//   by turns (a thread's commits alternate, neighbouring threads start apart), never before the
//   issue: so a kernel that reads the destination before the wait sees either;
// - at the cp.async.bulk.wait_group.read (or wait_group) that completes a group's reads,
//   compares the source with what it held at the issue: shared memory written again before that
//   wait (the staging buffer reused too early, a barrier missing) is a violation. Such a wait
//   first lets every other thread of the block run as far as it can (FiberTeam::yield_last): the
//   reads take time on the hardware, so a thread that the waiting one has let go (an mbarrier
//   arrival before the wait, a wait skipped elsewhere) may write the source meanwhile;
// - at the kernel's end, a bulk reduction not completed by a cp.async.bulk.wait_group (not only
//   .read), committed or not, is a violation. (Stricter than the ISA needs for the writes, which
//   the hardware finishes after an exit; kernels here wait for them with wait_group 0.)
// A test may record every destination range (BulkLog) to check that none leaves its rows.
// What it cannot check: the order of the additions of concurrent blocks (floats added in the
// emulator's order), the .L2::cache_hint, and the speed of anything.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "wgmma_emulator.h"

namespace bench::kernels::emulator {

/// One bulk reduction of one thread, from its issue to the wait that completes it.
struct BulkOp {
  float* dst = nullptr;
  uint32_t src = 0;           // shared-memory offset of the source
  std::vector<float> values;  // the source as read at the issue
  int group = -1;             // the bulk group (-1: not yet committed)
  bool read = false;          // a wait_group{.read} has completed its reads
  bool added = false;         // its additions have reached global memory
};

/// A thread's bulk reductions not yet completed, in issue order.
struct BulkState {
  std::vector<BulkOp> ops;
  int groups = 0;   // groups committed so far
  int commits = 0;  // this thread's commits, for the turns of early additions
};

/// A destination range of one bulk reduction: `floats` floats from `dst`.
struct BulkRecord {
  const float* dst;
  size_t floats;
};

/// While one exists, every bulk reduction issued appends its destination range to it (tests only:
/// the emulator's fibers run on one OS thread).
class BulkLog {
 public:
  BulkLog() { current() = this; }
  ~BulkLog() { current() = nullptr; }
  BulkLog(const BulkLog&) = delete;
  BulkLog& operator=(const BulkLog&) = delete;
  std::vector<BulkRecord> records;
  static BulkLog*& current() {
    static BulkLog* log = nullptr;
    return log;
  }
};

inline void bulk_add(BulkOp& op) {
  if (op.added) return;
  for (size_t i = 0; i < op.values.size(); ++i) std::atomic_ref<float>(op.dst[i]).fetch_add(op.values[i]);
  op.added = true;
}

/// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [dst], [src], bytes: checked and
/// queued (uncommitted) with the source as it is now.
inline void bulk_issue(BulkState& s, float* dst, uint32_t src, uint32_t bytes, const uint8_t* shared,
                       size_t shared_bytes, const uint8_t* unfenced, std::string& error) {
  if (bytes == 0 || bytes % 16 != 0 || src % 16 != 0 || reinterpret_cast<uintptr_t>(dst) % 16 != 0) {
    wgmma_error(error, "cp.reduce.async.bulk: an address not 16-byte aligned or a size not a multiple of 16");
    return;
  }
  if (static_cast<size_t>(src) + bytes > shared_bytes) {
    wgmma_error(error, "cp.reduce.async.bulk: a source outside shared memory");
    return;
  }
  for (uint32_t i = 0; i < bytes; ++i)
    if (unfenced[src + i] != 0) {
      wgmma_error(error, "cp.reduce.async.bulk: reads a st.shared write that no fence.proxy.async made visible");
      break;
    }
  BulkOp op;
  op.dst = dst;
  op.src = src;
  op.values.resize(bytes / sizeof(float));
  std::memcpy(op.values.data(), shared + src, bytes);
  if (BulkLog* log = BulkLog::current()) log->records.push_back({dst, op.values.size()});
  s.ops.push_back(std::move(op));
}

/// cp.async.bulk.commit_group: the reductions issued since the last commit form a group, whose
/// additions land now or at its wait, by turns.
inline void bulk_commit(BulkState& s, int tid) {
  const bool now = (s.commits++ + tid) % 2 == 0;
  for (BulkOp& op : s.ops)
    if (op.group < 0) {
      op.group = s.groups;
      if (now) bulk_add(op);
    }
  ++s.groups;
}

/// Whether a cp.async.bulk.wait_group{.read} `pending` completes the reads of some reduction
/// (a committed group older than the `pending` newest, not yet read).
inline bool bulk_reads_complete(const BulkState& s, int pending) {
  const int limit = s.groups - pending;
  for (const BulkOp& op : s.ops)
    if (op.group >= 0 && op.group < limit && !op.read) return true;
  return false;
}

/// cp.async.bulk.wait_group{.read} pending: the committed groups older than the `pending` newest
/// have completed their reads (their source must be what it was at the issue) and, without
/// .read, their additions.
inline void bulk_wait(BulkState& s, int pending, bool read_only, const uint8_t* shared, std::string& error) {
  const int limit = s.groups - pending;
  std::vector<BulkOp> left;
  for (BulkOp& op : s.ops) {
    if (op.group < 0 || op.group >= limit) {
      left.push_back(std::move(op));
      continue;
    }
    if (!op.read && std::memcmp(shared + op.src, op.values.data(), op.values.size() * sizeof(float)) != 0)
      wgmma_error(error,
                  "cp.reduce.async.bulk: shared memory it reads was written again before its "
                  "cp.async.bulk.wait_group.read");
    op.read = true;
    if (read_only)
      left.push_back(std::move(op));
    else
      bulk_add(op);
  }
  s.ops = std::move(left);
}

/// At the kernel's end: every reduction must have been completed by a wait_group (its additions
/// still land, as the hardware's would).
inline void bulk_finish(BulkState& s, std::string& error) {
  if (!s.ops.empty())
    wgmma_error(error,
                "cp.reduce.async.bulk: the kernel ended with a bulk reduction outstanding (no "
                "cp.async.bulk.wait_group 0, or one not committed)");
  for (BulkOp& op : s.ops) bulk_add(op);
  s.ops.clear();
}

}  // namespace bench::kernels::emulator
