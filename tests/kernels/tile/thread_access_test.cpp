// The CUDA executor's per-thread loads and stores (kernels/tile/thread_access.h), run for every
// lane by the emulated-block executor, against their definition (kernels/tile/program.h): tile
// element e of a flat load is p[e], of tl::rows' geometry (width, first) p[(f / width) * stride +
// f % width] with f = first + e; elements at or past n read `other`; a store writes its first n
// elements and nothing else. Every block shape the CUDA executor builds (runs of 1 to 8 elements,
// 1 to 4 runs a thread, float, bf16 packed and double), bases aligned and not, n through the
// tails, rows narrower than a run (each run crosses rows) and wider, strides with gaps. The GPU's
// own branch code runs here: a slip in it (a bound one off, a row walk's step, a half of a word)
// fails this test in seconds, where the kernels' tests need the whole library rebuilt.
#include "kernels/tile/thread_access.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/tile/emulated_executor.h"
#include "kernels/tile/program.h"

namespace bench::tile {
namespace thread_access_test {
namespace {

namespace tl = tile::tl;

/// The bits of a storage value, to compare stores exactly (a NaN's payload included).
template <class T>
uint64_t bits(T x) {
  uint64_t u = 0;
  std::memcpy(&u, &x, sizeof x);
  return u;
}

/// Random storage values: bf16 from random bits of normal floats, float and double in (-4, 4).
template <class T>
std::vector<T> random_storage(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> d(-4.0, 4.0);
  std::vector<T> v(n);
  for (auto& x : v) x = from_acc<T>(static_cast<acc_t<T>>(d(rng)));
  return v;
}

/// slope * e + shift for e < n, computed once (both sides of a comparison read the same values).
template <class A>
std::vector<A> values_of(int n, double slope, double shift) {
  std::vector<A> v(n);
  for (int e = 0; e < n; ++e) v[e] = static_cast<A>(slope * e + shift);
  return v;
}

template <class T>
T sentinel() {
  return from_acc<T>(static_cast<acc_t<T>>(-1234.5));
}

/// A program shape: storage T, tile N, runs of Run (the CUDA executor's TH threads for them).
template <class T, int N, int Run>
struct Shape {
  using Storage = T;
  static constexpr int kN = N;
  static constexpr int kThreads = threads_for_tile(N, Run);
  using Ctx = EmulatedCtx<kThreads, Run>;
  using L = Layout<N, kThreads, Run>;
};

/// Tile element e's value in a tile of the emulated executor: slot lane * kPer + i holds element
/// Layout::element(lane, i).
template <class S, class Tl>
acc_t<typename S::Storage> element(const Tl& t, int e) {
  static const std::vector<int> slot = [] {
    std::vector<int> r(S::kN, -1);
    for (int lane = 0; lane < S::kThreads; ++lane)
      for (int i = 0; i < S::L::kPer; ++i) r[S::L::element(lane, i)] = lane * S::L::kPer + i;
    return r;
  }();
  return t.v[slot[e]];
}

/// A float tile whose element e is `value(e)`, built through arange (the executor's own slots).
template <class S, class F>
auto tile_of(const typename S::Ctx& c, F value) {
  const auto idx = tl::arange<S::kN>(c);
  Tile<acc_t<typename S::Storage>, S::kN, S::kN> t;
  for (int s = 0; s < S::kN; ++s) t.v[s] = value(idx.v[s]);
  return t;
}

/// The counts of valid elements a case tries: none, one, the first run's edges, the middle, the
/// last run's edges, all.
template <int N, int Vec>
std::vector<int64_t> counts() {
  std::vector<int64_t> n = {0, 1, Vec - 1, Vec, Vec + 1, N / 2 + 1, N - Vec, N - 1, N};
  std::vector<int64_t> r;
  for (int64_t x : n)
    if (x >= 0 && x <= N && (r.empty() || r.back() != x)) r.push_back(x);
  return r;
}

// Flat load and store at every offset from the aligned base below one run of 16 bytes.
template <class S>
void check_flat() {
  using T = typename S::Storage;
  using A = acc_t<T>;
  const typename S::Ctx c(Grid{}, 0);
  const auto src = random_storage<T>(S::kN + 16, 7);
  const A other = static_cast<A>(-2.5);
  const auto ramp = values_of<A>(S::kN, 0.3, -7.0);
  for (int off = 0; off < 16 / static_cast<int>(sizeof(T)) + 1; ++off)
    for (int64_t n : counts<S::kN, S::L::kVec>()) {
      SCOPED_TRACE("offset " + std::to_string(off) + ", n " + std::to_string(n));
      const T* p = src.data() + off;
      const tl::loaded_t<S::kN, typename S::Ctx, T> x = tl::load<S::kN>(c, p, n, other);
      for (int e = 0; e < S::kN; ++e)
        ASSERT_EQ(bits(element<S>(x, e)), bits(e < n ? to_acc(p[e]) : other)) << "load, element " << e;

      // A float tile stored: the first n elements rounded (to nearest even for bf16), no other.
      std::vector<T> dst(S::kN + 16, sentinel<T>());
      const auto values = tile_of<S>(c, [&](int e) { return ramp[e]; });
      tl::store(c, dst.data() + off, values, n);
      for (int k = 0; k < static_cast<int>(dst.size()); ++k) {
        const int e = k - off;
        const T want = e >= 0 && e < n ? from_acc<T>(ramp[e]) : sentinel<T>();
        ASSERT_EQ(bits(dst[k]), bits(want)) << "store, element " << e;
      }

      // A loaded tile stored as it came (packed for bf16): its bits, `other` at or past its n.
      for (int64_t m : {n, static_cast<int64_t>(S::kN)}) {
        std::vector<T> out(S::kN + 16, sentinel<T>());
        tl::store(c, out.data() + off, tl::load<S::kN>(c, p, n, other), m);
        for (int k = 0; k < static_cast<int>(out.size()); ++k) {
          const int e = k - off;
          const T want = e < 0 || e >= m ? sentinel<T>() : (e < n ? p[e] : from_acc<T>(other));
          ASSERT_EQ(bits(out[k]), bits(want)) << "copy of " << m << ", element " << e;
        }
      }
    }
}

// tl::rows: rows narrower than a run, as wide, wider than the tile; first inside a row; strides
// with a gap after each row (which no store may touch).
template <class S>
void check_rows() {
  using T = typename S::Storage;
  using A = acc_t<T>;
  const typename S::Ctx c(Grid{}, 0);
  const A other = static_cast<A>(3.25);
  const auto ramp = values_of<A>(S::kN, 0.75, 1.0);
  const int vec = S::L::kVec;
  for (int64_t width : {int64_t{1}, int64_t{3}, int64_t{vec}, int64_t{2 * vec + 1}, int64_t{100}, int64_t{S::kN + 5}})
    for (int64_t gap : {int64_t{0}, int64_t{3}, int64_t{vec}})
      for (int64_t first : {int64_t{0}, int64_t{5}, width - 1, 2 * width + 1})
        for (int64_t n : counts<S::kN, S::L::kVec>()) {
          if (first < 0) continue;
          SCOPED_TRACE("width " + std::to_string(width) + ", gap " + std::to_string(gap) + ", first " +
                       std::to_string(first) + ", n " + std::to_string(n));
          const int64_t stride = width + gap;
          const int64_t rows = (first + S::kN) / width + 2;
          const auto src = random_storage<T>(static_cast<size_t>(rows * stride + 16), 11);
          const auto at = tl::rows<S::kN>(c, width, first, n);
          const auto where = [&](int e) {
            const int64_t f = first + e;
            return (f / width) * stride + f % width;
          };
          const tl::loaded_t<S::kN, typename S::Ctx, T> x = tl::load_rows(c, src.data(), stride, at, other);
          for (int e = 0; e < S::kN; ++e)
            ASSERT_EQ(bits(element<S>(x, e)), bits(e < n ? to_acc(src[where(e)]) : other))
                << "load_rows, element " << e;

          std::vector<T> dst(src.size(), sentinel<T>());
          const auto values = tile_of<S>(c, [&](int e) { return ramp[e]; });
          tl::store_rows(c, dst.data(), stride, at, values);
          std::vector<T> want(src.size(), sentinel<T>());
          for (int e = 0; e < n; ++e) want[where(e)] = from_acc<T>(ramp[e]);
          for (size_t k = 0; k < dst.size(); ++k) ASSERT_EQ(bits(dst[k]), bits(want[k])) << "store_rows, index " << k;
        }
}

// gather: element e reads p[idx[e]] below n, `other` past it.
template <class S>
void check_gather() {
  using T = typename S::Storage;
  using A = acc_t<T>;
  const typename S::Ctx c(Grid{}, 0);
  const auto src = random_storage<T>(3 * S::kN, 5);
  const auto idx = tile_of<S>(c, [](int e) { return static_cast<A>((e * 7 + 3) % (3 * S::kN)); });
  Tile<int, S::kN, S::kN> at;
  for (int s = 0; s < S::kN; ++s) at.v[s] = static_cast<int>(idx.v[s]);
  for (int64_t n : counts<S::kN, S::L::kVec>()) {
    const auto x = c.gather(src.data(), at, n, static_cast<A>(9));
    for (int e = 0; e < S::kN; ++e)
      ASSERT_EQ(bits(element<S>(x, e)), bits(e < n ? to_acc(src[(e * 7 + 3) % (3 * S::kN)]) : static_cast<A>(9)))
          << "n " << n << ", element " << e;
  }
}

template <class S>
void check_all() {
  check_flat<S>();
  check_rows<S>();
  check_gather<S>();
}

// Threads and runs the CUDA executor gives each: 16 threads of 1 (a tile under a warp), a warp of
// 2-element runs (float 64: kPer 2), one 16-byte run a thread (float 1024, bf16 1024), several
// (float 4096: 4 runs, bf16 4096: 2), 96 threads (768), double's 2-element runs.
TEST(ThreadAccess, FloatMatchesDefinition) {
  check_all<Shape<float, 16, 4>>();
  check_all<Shape<float, 64, 4>>();
  check_all<Shape<float, 768, 4>>();
  check_all<Shape<float, 1024, 4>>();
  check_all<Shape<float, 4096, 4>>();
}

TEST(ThreadAccess, Bf16MatchesDefinition) {
  check_all<Shape<bf16, 16, 8>>();  // runs of one: loaded unpacked
  check_all<Shape<bf16, 64, 8>>();  // runs of two: one word
  check_all<Shape<bf16, 128, 4>>();
  check_all<Shape<bf16, 768, 8>>();
  check_all<Shape<bf16, 1024, 8>>();
  check_all<Shape<bf16, 4096, 8>>();
}

TEST(ThreadAccess, DoubleMatchesDefinition) {
  check_all<Shape<double, 64, 2>>();
  check_all<Shape<double, 1024, 2>>();
}

// A float tile stored as bf16 rounds each element to nearest even; a NaN becomes the canonical
// 0x7fff where a run moves as one access (cvt.rn.bf16x2.f32, as cuda_bf16.h's own conversion
// gives it) and keeps its sign and payload element by element (float_to_bf16): the emulated
// target sees the bits the GPU stores on either path.
TEST(ThreadAccess, Bf16StoreRoundsAsTheDevice) {
  using S = Shape<bf16, 64, 8>;  // 32 lanes, runs of 2: one 4-byte word
  const S::Ctx c(Grid{}, 0);
  uint32_t nan_bits = 0xffc12345U;  // a negative NaN with a payload
  float nan;
  std::memcpy(&nan, &nan_bits, sizeof nan);
  const auto values = tile_of<S>(c, [&](int e) {
    if (e % 4 == 1) return nan;
    return 1.0F + static_cast<float>(e) * 0x1p-9F;  // ties and near-ties of bf16's 8 bits
  });
  for (int off : {0, 1}) {  // aligned: every run one word; off by one: element by element
    std::vector<bf16> dst(S::kN + 2, sentinel<bf16>());
    tl::store(c, dst.data() + off, values, S::kN);
    for (int e = 0; e < S::kN; ++e) {
      const uint16_t want = e % 4 == 1 ? (off == 0 ? uint16_t{0x7fff} : float_to_bf16(nan).bits)
                                       : float_to_bf16(1.0F + static_cast<float>(e) * 0x1p-9F).bits;
      ASSERT_EQ(dst[off + e].bits, want) << "offset " << off << ", element " << e;
    }
  }
}

// tl::rows past 2^31 elements (a flat index of 8 GB of float) and rows wider than 2^31:
// split_row's 64-bit division, where the 32-bit one would wrap. No memory is touched.
TEST(ThreadAccess, RowsPast31Bits) {
  constexpr int kN = 4096;
  using A = ThreadAccess<256, 4>;
  using L = Layout<kN, 256, 4>;
  for (int64_t width : {int64_t{3}, int64_t{4096}, int64_t{100003}, int64_t{0x80000001}})
    for (int64_t first : {int64_t{0}, int64_t{0x7fffffff} - 100, int64_t{1} << 31, (int64_t{1} << 32) + 5,
                          int64_t{3'000'000'007}, int64_t{1} << 40})
      for (int lane = 0; lane < 256; ++lane) {
        const auto r = A::rows<kN>(lane, width, first, kN - 3);
        for (int k = 0; k < A::Rows<kN>::kRuns; ++k) {
          const int e = L::element(lane, k * L::kVec);
          const int64_t f = first + e;
          ASSERT_EQ(r.row[k], f / width) << "width " << width << ", first " << first << ", lane " << lane;
          ASSERT_EQ(r.col[k], f % width) << "width " << width << ", first " << first << ", lane " << lane;
          ASSERT_EQ(r.whole[k], f % width + L::kVec <= width && e + L::kVec <= kN - 3);
        }
      }
}

}  // namespace
}  // namespace thread_access_test
}  // namespace bench::tile
