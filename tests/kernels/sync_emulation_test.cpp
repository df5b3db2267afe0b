// The warp emulator's sm_90 synchronization primitives (tests/kernels/warp_emulator.h), which the
// warp-specialized wgmma forward uses, against their PTX ISA semantics: mbarrier phases and
// try_wait.parity (9.7.13.15), cp.async.mbarrier.arrive.noinc, named barriers (bar.sync /
// bar.arrive with a thread count, 9.7.13.4) and setmaxnreg's constraints (9.7.19.x). Each test
// writes what it observes into a log and compares it with the order the ISA prescribes.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <vector>

#include "warp_emulator.h"

namespace bench::kernels {
namespace {

using emulator::EmulatedThread;
using emulator::launch;

// A fresh mbarrier is in phase 0: try_wait.parity 1 (the phase "before" it) returns at once, and
// parity 0 waits for phase 0 to complete: `count` arrivals. Over three phases, warp 1 (the
// waiter) sees each value that warp 0 wrote before its arrivals, and the parity alternates.
TEST(SyncEmulation, MbarrierPhasesAndParity) {
  std::vector<int> seen;
  launch(1, 1, 64, 64, [&](EmulatedThread& th) {
    auto* value = reinterpret_cast<int*>(th.shared() + 16);
    if (th.tid() == 0) {
      th.mbar_init(0, 32);
      th.mbar_init(8, 32);
    }
    th.sync();
    if (th.tid() < 32) {
      for (int round = 0; round < 3; ++round) {
        if (th.tid() == 0) *value = 10 + round;
        th.mbar_arrive(0);
        th.mbar_wait(8, round & 1);  // the waiter has read this round's value (count 32: warp 1)
      }
    } else {
      for (int round = 0; round < 3; ++round) {
        th.mbar_wait(0, round & 1);
        if (th.tid() == 32) seen.push_back(*value);
        th.mbar_arrive(8);
      }
    }
  });
  EXPECT_EQ(seen, (std::vector<int>{10, 11, 12}));
}

// Waiting on the parity of a phase that never completes (too few arrivals) is a hang on the GPU,
// an exception here; parity 1 on a fresh barrier returns at once.
TEST(SyncEmulation, MbarrierShortOfArrivalsHangs) {
  EXPECT_NO_THROW(launch(1, 1, 32, 64, [&](EmulatedThread& th) {
    if (th.tid() == 0) th.mbar_init(0, 1);
    th.sync();
    th.mbar_wait(0, 1);
  }));
  EXPECT_THROW(launch(1, 1, 64, 64,
                      [&](EmulatedThread& th) {
                        if (th.tid() == 0) th.mbar_init(0, 64);
                        th.sync();
                        if (th.tid() != 7) th.mbar_arrive(0);
                        th.mbar_wait(0, 0);
                      }),
               std::logic_error);
}

// An mbarrier used before a __syncthreads has published its init, or initialized twice, is a
// violation.
TEST(SyncEmulation, MbarrierInitRules) {
  EXPECT_THROW(launch(1, 1, 32, 64,
                      [&](EmulatedThread& th) {
                        if (th.tid() == 0) th.mbar_init(0, 1);
                        th.mbar_arrive(0);  // lanes 1..31: no barrier since the init
                      }),
               std::logic_error);
  EXPECT_THROW(launch(1, 1, 32, 64,
                      [&](EmulatedThread& th) {
                        if (th.tid() < 2) th.mbar_init(0, 1);
                      }),
               std::logic_error);
}

// cp.async.mbarrier.arrive.noinc: the arrival comes once the thread's copies have landed, and
// counts in the init's count; a waiter then reads the copied bytes.
TEST(SyncEmulation, CpAsyncArriveNoinc) {
  std::vector<uint16_t> src(32 * 8);
  for (size_t i = 0; i < src.size(); ++i) src[i] = static_cast<uint16_t>(3 * i + 1);
  std::vector<uint16_t> got(src.size());
  launch(1, 1, 64, 1024, [&](EmulatedThread& th) {
    auto* data = reinterpret_cast<uint16_t*>(th.shared() + 64);
    if (th.tid() == 0) th.mbar_init(0, 32);
    th.sync();
    if (th.tid() < 32) {
      th.cp_async_16(data + 8 * th.tid(), src.data() + 8 * th.tid(), true);
      th.cp_async_mbar_arrive(0);
    } else {
      th.mbar_wait(0, 0);
      for (int i = 0; i < 8; ++i) got[static_cast<size_t>(8 * (th.tid() - 32) + i)] = data[8 * (th.tid() - 32) + i];
    }
  });
  EXPECT_EQ(got, src);
}

// bar.arrive counts without waiting, bar.sync waits for `count` threads in all: the consumer
// warpgroups' ping-pong in small, warp 1's sync on barrier 1 (64: its 32 and warp 0's arrive)
// returns only after warp 0's arrive, and warp 0's sync on barrier 2 only after warp 1's,
// whichever warp runs first, over three rounds.
TEST(SyncEmulation, NamedBarrierPingPong) {
  std::vector<int> log;
  launch(1, 1, 96, 0, [&](EmulatedThread& th) {
    const int warp = th.tid() / 32;
    for (int round = 0; round < 3; ++round) {
      if (warp == 0) {
        if (th.tid() == 0) log.push_back(round);
        th.named_arrive(1, 64);
        th.named_sync(2, 64);
      } else if (warp == 1) {
        th.named_sync(1, 64);
        if (th.tid() == 32) log.push_back(100 + round);
        th.named_arrive(2, 64);
      }
    }
  });
  EXPECT_EQ(log, (std::vector<int>{0, 100, 1, 101, 2, 102}));
}

// One id with two counts, an id outside 1-15, a count not a multiple of 32, or an arrival left
// without its sync at the block's end is a violation.
TEST(SyncEmulation, NamedBarrierRules) {
  const auto run = [](auto body) { launch(1, 1, 64, 0, body); };
  EXPECT_THROW(run([](EmulatedThread& th) {
                 if (th.tid() < 32)
                   th.named_arrive(2, 64);
                 else
                   th.named_sync(2, 96);
               }),
               std::logic_error);
  EXPECT_THROW(run([](EmulatedThread& th) { th.named_arrive(16, 64); }), std::logic_error);
  EXPECT_THROW(run([](EmulatedThread& th) { th.named_sync(3, 48); }), std::logic_error);
  EXPECT_THROW(run([](EmulatedThread& th) {
                 if (th.tid() < 32) th.named_arrive(4, 64);
               }),
               std::logic_error);
  EXPECT_NO_THROW(run([](EmulatedThread& th) { th.named_sync(5, 64); }));
}

// setmaxnreg: the same count across the warpgroup, a multiple of 8 in [24, 256], .inc up and
// .dec down from what the warpgroup holds (168 a thread for 384 threads), the block's registers
// not exceeded: 128 x 24 + 256 x 240 = 384 x 168 passes, 248 for the consumers does not.
TEST(SyncEmulation, SetmaxnregRules) {
  const auto run = [](int consumer) {
    launch(1, 1, 384, 0, [consumer](EmulatedThread& th) {
      if (th.warpgroup() == 2) {
        th.setmaxnreg_dec<24>();
      } else if (consumer == 248) {
        th.setmaxnreg_inc<248>();
      } else if (consumer == 164) {
        th.setmaxnreg_inc<164>();  // not a multiple of 8, and below 168
      } else if (consumer == 0 && th.tid() == 5) {
        th.setmaxnreg_inc<232>();  // one thread differs from its warpgroup
      } else {
        th.setmaxnreg_inc<240>();
      }
    });
  };
  EXPECT_NO_THROW(run(240));
  EXPECT_THROW(run(248), std::logic_error);
  EXPECT_THROW(run(164), std::logic_error);
  EXPECT_THROW(run(0), std::logic_error);
  EXPECT_THROW(launch(1, 1, 128, 0, [](EmulatedThread& th) { th.setmaxnreg_dec<16>(); }), std::logic_error);
  // 128 threads hold 256 registers each at launch: .inc to 240 is a decrease, .dec to 240 is fine.
  EXPECT_THROW(launch(1, 1, 128, 0, [](EmulatedThread& th) { th.setmaxnreg_inc<240>(); }), std::logic_error);
  EXPECT_NO_THROW(launch(1, 1, 128, 0, [](EmulatedThread& th) { th.setmaxnreg_dec<240>(); }));
}

}  // namespace
}  // namespace bench::kernels
