// defines: bench::kernels::emulator::Mbarrier, Mbarriers and the functions behind EmulatedThread's
//          mbar_* and tma_load_4d members (warp_emulator.h): sm_90's mbarriers (PTX ISA 9.7.13.15:
//          init, arrive, arrive.expect_tx, try_wait.parity, cp.async.mbarrier.arrive.noinc) and
//          the TMA tensor loads that complete their transactions on one, on the CPU
//
// An mbarrier is a 64-bit object in shared memory: its expected arrival count, the arrivals still
// pending in the current phase, and the phases completed. Only its initializing thread sees it
// until a __syncthreads publishes it; a second init in one block, a count outside [1, 2^20 - 1]
// or more arrivals than its count in one phase is a violation. A release of a phase runs the
// fibers that waited on it first, so a consumer that lets a producer go too early meets the
// producer's writes at once.
//
// The cp.async writes that a cp.async.mbarrier.arrive tracks go with the phase (`incoming`, then
// `published`): a thread that has waited for that phase may make them visible to wgmma with its
// fence.proxy.async.
//
// TMA (PTX ISA 9.7.9.25, cp.async.bulk.tensor.Nd.shared::cluster.global.mbarrier::complete_tx
// ::bytes): mbarrier.arrive.expect_tx adds bytes to the phase's transaction count, and a phase
// completes when its pending arrivals AND its transaction count are both 0. A tensor load reads
// its box through the map's arguments (kernels/cuda/tma_map.h: the ones the GPU's
// cuTensorMapEncodeTiled gets; tma_emulator.h: the box and its swizzle). At the issue its
// destination holds a poison (0xff bytes: bf16 NaNs) and is flagged unreadable for wgmma
// (kTmaInFlight), and its bytes are in flight: they are counted (complete_tx, 16 bytes at a time)
// only when a thread waits on the mbarrier (as late as the hardware may deliver them), and land
// (poison and flag gone) when the phase that counted them completes. So a consumer reading before
// its wait reads NaN (a wgmma: a violation), an expect_tx short of the bytes completes the phase
// early and leaves the rest unreadable in the next one, and one past them never completes: the
// waiters' hang is reported as an exception.
#pragma once

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "cuda/tma_map.h"
#include "support/fibers.h"
#include "tma_emulator.h"
#include "wgmma_emulator.h"

namespace bench::kernels::emulator {

/// Per byte of shared memory (Block::unfenced), the destination of a TMA load whose mbarrier phase
/// has not completed (1 is a cp.async write not yet fenced).
inline constexpr uint8_t kTmaInFlight = 2;

/// One mbarrier of a block.
struct Mbarrier {
  Mbarrier(test::FiberTeam& team, int expected) : event(team, 1, false, true), count(expected), pending(expected) {}
  test::FiberTeam::Barrier event;  // released at each phase's completion
  int count, pending;
  int init_tid = 0;      // the thread that initialized it, alone in seeing it until a __syncthreads
  bool visible = false;  // a __syncthreads since the init
  uint64_t phase = 0;
  std::vector<std::pair<size_t, size_t>> incoming, published;  // cp.async ranges, this and the last phase
  int64_t tx = 0;                  // the current phase's transaction count (expect_tx adds, complete_tx takes)
  std::vector<TmaChunk> inflight;  // TMA bytes issued, not yet counted
  std::vector<TmaChunk> tma;       // TMA bytes counted in the current phase, landing at its completion
};

/// The shared memory that mbarriers and TMA write: the block's bytes, its per-byte flags
/// (Block::unfenced) and its first violation.
struct MbarrierMemory {
  uint8_t* shared;
  uint8_t* unfenced;
  size_t bytes;
  std::string& error;
};

/// A block's mbarriers, by shared-memory offset.
class Mbarriers {
 public:
  explicit Mbarriers(test::FiberTeam& team) : team_(team) {}

  /// The mbarrier at `at`: nullptr (and a violation) if none was initialized there in this block,
  /// or if only another thread has initialized it and no __syncthreads has published it since.
  Mbarrier* find(uint32_t at, int tid, std::string& error) {
    const auto it = all_.find(at);
    if (it != all_.end() && (it->second->visible || it->second->init_tid == tid)) return it->second.get();
    wgmma_error(error, "mbarrier: used before its mbarrier.init (or before the barrier that publishes it)");
    return nullptr;
  }
  /// At a __syncthreads: every mbarrier initialized before it is visible to every thread.
  void publish() {
    for (auto& [at, m] : all_) m->visible = true;
  }
  void init(uint32_t at, int count, int tid, size_t shared_bytes, std::string& error) {
    if (at % 8 != 0 || at + 8 > shared_bytes)
      wgmma_error(error, "mbarrier.init: not an 8-byte aligned object in shared memory");
    else if (count < 1 || count > (1 << 20) - 1)
      wgmma_error(error, "mbarrier.init: a count outside [1, 2^20 - 1]");
    else if (auto [it, fresh] = all_.emplace(at, std::make_unique<Mbarrier>(team_, count)); !fresh)
      wgmma_error(error, "mbarrier.init: initialized twice in one block");
    else
      it->second->init_tid = tid;
  }
  /// After every thread of a block has ended: transaction bytes outstanding are a violation, the
  /// TMA flags are cleared, and the next block starts without mbarriers.
  void end_block(uint8_t* unfenced, size_t bytes, std::string& error) {
    for (const auto& [at, m] : all_)
      if (m->tx != 0 || !m->tma.empty() || !m->inflight.empty())
        wgmma_error(error,
                    "mbarrier: transaction bytes outstanding at the block's end (an expect_tx or a TMA "
                    "load that no completed phase accounts for)");
    for (size_t i = 0; i < bytes; ++i)
      if (unfenced[i] == kTmaInFlight) unfenced[i] = 0;
    all_.clear();
  }

 private:
  test::FiberTeam& team_;
  std::map<uint32_t, std::unique_ptr<Mbarrier>> all_;
};

/// Completes the current phase if its arrivals and its transaction count are both done: its TMA
/// bytes land, its waiters run.
inline void mbar_complete(Mbarrier& m, const MbarrierMemory& mem) {
  if (m.pending > 0 || m.tx != 0) return;
  for (const TmaChunk& c : m.tma) {
    std::memcpy(mem.shared + c.at, c.data, sizeof c.data);
    std::memset(mem.unfenced + c.at, 0, sizeof c.data);
  }
  m.tma.clear();
  m.pending = m.count;
  ++m.phase;
  m.published = std::move(m.incoming);
  m.incoming.clear();
  m.event.release();
}

/// One arrival on the current phase.
inline void mbar_count(Mbarrier& m, const MbarrierMemory& mem) {
  if (--m.pending < 0) wgmma_error(mem.error, "mbarrier: more arrivals than its count in one phase");
  mbar_complete(m, mem);
}

/// mbarrier.arrive.expect_tx: the current phase's transaction count += bytes, then one arrival.
inline void mbar_expect_tx(Mbarrier& m, uint32_t bytes, const MbarrierMemory& mem) {
  if (bytes > (1u << 20) - 1) wgmma_error(mem.error, "mbarrier.expect_tx: a count past 2^20 - 1");
  m.tx += bytes;
  mbar_count(m, mem);
}

/// mbarrier.try_wait.parity in a loop, until the phase of parity `parity` has completed; while
/// the TMA bytes in flight have not been counted, the waiter counts them (complete_tx, 16 bytes at
/// a time, in issue order).
inline void mbar_wait(Mbarrier& m, int parity, const MbarrierMemory& mem) {
  while (static_cast<int>(m.phase & 1) == (parity & 1)) {
    if (m.inflight.empty()) {
      m.event.wait_release();
      continue;
    }
    const std::vector<TmaChunk> chunks = std::exchange(m.inflight, {});
    for (const TmaChunk& c : chunks) {
      m.tma.push_back(c);
      m.tx -= 16;
      mbar_complete(m, mem);
    }
  }
}

/// cp.async.bulk.tensor.Nd ... .mbarrier::complete_tx::bytes: the box of `map` at element
/// coordinates c into shared memory at `dst`, in flight on `m` (poisoned and flagged until its
/// phase completes).
inline void tma_issue(Mbarrier& m, const tma::TensorMapArgs& map, const int* c, uint32_t rank, uint32_t dst,
                      const MbarrierMemory& mem) {
  const uint64_t bytes = tma_box(map, c, rank, dst, mem.bytes, m.inflight, mem.error);
  std::memset(mem.shared + dst, 0xff, bytes);
  std::memset(mem.unfenced + dst, kTmaInFlight, bytes);
  m.event.release();  // its waiters count the bytes (mbar_wait); a release leaves the phase as it is
}

}  // namespace bench::kernels::emulator
