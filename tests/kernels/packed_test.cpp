// Packed bf16 tiles (kernels/tile/packed.h): a bf16 load returns its raw words on CUDA and on the
// emulated-block executor, unpacked where a program first computes with it. Every element-wise
// verb, reduction and store on a packed tile gives the float64 reference of its bf16 values
// (`other` past n), alone and mixed with unpacked tiles and scalars, on the emulated executor; a
// packed tile stored as bf16 keeps every bit of its words.
#include "kernels/tile/packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <string>
#include <type_traits>
#include <vector>

#include "kernel_test_util.h"
#include "kernels/tile/emulated_executor.h"
#include "kernels/tile/program.h"

namespace bench::tile {
namespace packed_test {
namespace {

namespace tl = tile::tl;

constexpr int kN = 64;          // the tile: 8 lanes of 8 bf16, one 16-byte run a lane
constexpr int64_t kValid = 53;  // the tail starts inside lane 6's run
using Ctx = EmulatedCtx<8, 8>;

/// Inputs: a and b of either sign, p positive (for log, sqrt, rsqrt); `other` past kValid.
struct Inputs {
  std::vector<bf16> a = kernels::testing::to_storage<bf16>(kernels::testing::random_vector(kN, 31, 1.5));
  std::vector<bf16> b = kernels::testing::to_storage<bf16>(kernels::testing::random_vector(kN, 32, 1.5, 0.25));
  std::vector<bf16> p = kernels::testing::to_storage<bf16>(kernels::testing::random_vector(kN, 33, 0.5, 2.0));
  float other_a = -3.0F;
  float other_b = 0.5F;
  float other_p = 1.25F;

  /// Element e of a loaded tile in float64: its bf16 value, `other` at or past kValid.
  static double at(const std::vector<bf16>& x, float other, int e) {
    return e < kValid ? static_cast<double>(bf16_to_float(x[e])) : static_cast<double>(other);
  }
};

/// The kN elements of tile t in tile order (the store maps each lane's slots back).
template <class Tl>
std::vector<double> values(const Ctx& c, const Tl& t) {
  using V = typename Tl::value_type;
  std::vector<V> out(kN);
  tl::store(c, out.data(), t, kN);
  return {out.begin(), out.end()};
}

std::vector<double> reference(const std::function<double(int)>& f) {
  std::vector<double> r(kN);
  for (int e = 0; e < kN; ++e) r[e] = f(e);
  return r;
}

class PackedTile : public ::testing::Test {
 protected:
  Inputs in;
  Ctx c{Grid{}, 0};
  double a(int e) const { return Inputs::at(in.a, in.other_a, e); }
  double b(int e) const { return Inputs::at(in.b, in.other_b, e); }
  double p(int e) const { return Inputs::at(in.p, in.other_p, e); }
  auto load_a() const { return tl::load<kN>(c, in.a.data(), kValid, in.other_a); }
  auto load_b() const { return tl::load<kN>(c, in.b.data(), kValid, in.other_b); }
  auto load_p() const { return tl::load<kN>(c, in.p.data(), kValid, in.other_p); }
  /// b loaded as bf16 and unpacked: a Tile<float>.
  Tile<float, kN, kN> tile_b() const { return load_b(); }

  /// Arithmetic on exact bf16 values: the float result is the float64 one rounded once; the
  /// functions (exp, tanh, ...) within a few float ulps.
  template <class Tl>
  void expect(const std::string& what, const Tl& t, const std::function<double(int)>& ref, double rtol = 6e-8) {
    EXPECT_TRUE(kernels::testing::all_near(values(c, t), reference(ref), 1e-30, rtol)) << what;
  }
};

TEST_F(PackedTile, LoadsPackedAndUnpacksExactly) {
  static_assert(kAnyPacked<decltype(load_a())>, "the emulated executor packs bf16 as CUDA does");
  static_assert(std::is_same_v<unpacked_t<decltype(load_a())>, Tile<float, kN, kN>>);
  static_assert(std::is_same_v<unpacked_t<Tile<float, kN, kN>>, Tile<float, kN, kN>>);
  static_assert(!kAnyPacked<decltype(tl::load<kN>(c, static_cast<const float*>(nullptr), 0))>);
  expect(
      "unpacked", tl::unpacked(load_a()), [&](int e) { return a(e); }, 0);
  expect(
      "converted", tile_b(), [&](int e) { return b(e); }, 0);
  // The rows verb: rows of 5 elements 7 apart, from element 3 (the rows' tail past the data).
  std::vector<bf16> rows(static_cast<size_t>(kN) * 2);
  for (size_t i = 0; i < rows.size(); ++i) rows[i] = in.a[i % kN];
  const auto r = tl::load_rows(c, rows.data(), 7, tl::rows<kN>(c, 5, 3, kValid), in.other_a);
  static_assert(kAnyPacked<decltype(r)>);
  expect(
      "load_rows", r,
      [&](int e) {
        const int f = 3 + e;
        return e < kValid ? static_cast<double>(bf16_to_float(rows[(f / 5) * 7 + f % 5])) : in.other_a;
      },
      0);
}

TEST_F(PackedTile, Arithmetic) {
  const auto pa = load_a();
  const auto pb = load_b();
  const auto tb = tile_b();
  expect("P + P", pa + pb, [&](int e) { return a(e) + b(e); });
  expect("P - T", pa - tb, [&](int e) { return a(e) - b(e); });
  expect("T - P", tb - pa, [&](int e) { return b(e) - a(e); });
  expect("P * s", pa * 0.75F, [&](int e) { return a(e) * 0.75; });
  expect("s / P", 2.0F / pb, [&](int e) { return 2.0 / b(e); });
  expect("P / P", pa / pb, [&](int e) { return a(e) / b(e); });
  expect("s - P", 1.0F - pa, [&](int e) { return 1.0 - a(e); });
  expect("-P", -pa, [&](int e) { return -a(e); });
  expect(
      "P < P", cast<float>(pa < pb), [&](int e) { return a(e) < b(e) ? 1.0 : 0.0; }, 0);
  expect(
      "P >= s", cast<float>(pa >= 0.0F), [&](int e) { return a(e) >= 0 ? 1.0 : 0.0; }, 0);
  expect(
      "T == P", cast<float>(tb == pb), [&](int) { return 1.0; }, 0);
}

TEST_F(PackedTile, Functions) {
  const auto pa = load_a();
  const auto pp = load_p();
  const double f = 4e-7;  // a few float ulps
  expect(
      "exp", tl::exp(pa), [&](int e) { return std::exp(a(e)); }, f);
  expect(
      "log", tl::log(pp), [&](int e) { return std::log(p(e)); }, f);
  expect(
      "sqrt", tl::sqrt(pp), [&](int e) { return std::sqrt(p(e)); }, f);
  expect(
      "rsqrt", tl::rsqrt(pp), [&](int e) { return 1.0 / std::sqrt(p(e)); }, f);
  expect(
      "tanh", tl::tanh(pa), [&](int e) { return std::tanh(a(e)); }, f);
  expect(
      "erf", tl::erf(pa), [&](int e) { return std::erf(a(e)); }, f);
  expect(
      "abs", tl::abs(pa), [&](int e) { return std::abs(a(e)); }, 0);
  expect(
      "sigmoid", tl::sigmoid(pa), [&](int e) { return 1.0 / (1.0 + std::exp(-a(e))); }, f);
  expect(
      "maximum P P", tl::maximum(pa, load_b()), [&](int e) { return std::max(a(e), b(e)); }, 0);
  expect(
      "maximum P s", tl::maximum(pa, 0.0F), [&](int e) { return std::max(a(e), 0.0); }, 0);
  expect(
      "minimum T P", tl::minimum(tile_b(), pa), [&](int e) { return std::min(b(e), a(e)); }, 0);
}

TEST_F(PackedTile, SelectCastMap) {
  const auto pa = load_a();
  const auto pb = load_b();
  const auto even = tl::arange<kN>(c) - (tl::arange<kN>(c) / 2) * 2 == 0;
  expect(
      "where P P", tl::where(even, pa, pb), [&](int e) { return e % 2 == 0 ? a(e) : b(e); }, 0);
  expect(
      "where T P", tl::where(even, tile_b(), pa), [&](int e) { return e % 2 == 0 ? b(e) : a(e); }, 0);
  expect(
      "where P s", tl::where(even, pa, 7.0F), [&](int e) { return e % 2 == 0 ? a(e) : 7.0; }, 0);
  expect(
      "cast<double>", tl::cast<double>(pa), [&](int e) { return a(e); }, 0);
  const auto fma = [](float x, float y) { return x * 2.0F + y; };
  expect("map P P", tl::map(fma, pa, pb), [&](int e) { return a(e) * 2 + b(e); });
  expect("map T P", tl::map(fma, tile_b(), pa), [&](int e) { return b(e) * 2 + a(e); });
  expect("map P", tl::map([](float x) { return x * x; }, pa), [&](int e) { return a(e) * a(e); });
}

TEST_F(PackedTile, ReductionsAndStores) {
  const auto pa = load_a();
  double sum = 0;
  double max = -1e300;
  for (int e = 0; e < kN; ++e) {
    sum += a(e);
    max = std::max(max, a(e));
  }
  EXPECT_NEAR(tl::sum(c, pa), sum, 1e-5 * kN);
  EXPECT_EQ(tl::max(c, pa), max);
  // A packed tile stored back as bf16 keeps its bits; elements past n are not written.
  constexpr uint16_t kUntouched = 0x7fc1;  // a NaN no store writes
  std::vector<bf16> out(kN, bf16{kUntouched});
  tl::store(c, out.data(), pa, kValid);
  for (int e = 0; e < kN; ++e) EXPECT_EQ(out[e].bits, e < kValid ? in.a[e].bits : kUntouched) << e;
  std::vector<bf16> rows(static_cast<size_t>(kN) * 2, bf16{kUntouched});
  tl::store_rows(c, rows.data(), 7, tl::rows<kN>(c, 5, 3, kValid), pa);
  for (int e = 0; e < kValid; ++e) EXPECT_EQ(rows[((3 + e) / 5) * 7 + (3 + e) % 5].bits, in.a[e].bits) << e;
}

TEST_F(PackedTile, StoredAsBf16MovesItsWords) {
  // A tile loaded and stored unchanged as bf16 (a copy) stores its words: every bit kept, a
  // signaling NaN's too (an unpack and a re-round would quiet it, 0x7f81 -> 0x7fc1); `other`,
  // rounded, where the store covers elements at or past the load's n; nothing past the store's n.
  std::vector<bf16> x = in.a;
  x[3] = bf16{uint16_t{0x7f81}};   // signaling NaN
  x[10] = bf16{uint16_t{0xff81}};  // negative signaling NaN
  x[20] = bf16{uint16_t{0x0001}};  // the smallest subnormal
  constexpr float kOther = 0.3F;   // not a bf16: stored rounded
  const auto t = tl::load<kN>(c, x.data(), kValid, kOther);
  static_assert(kAnyPacked<decltype(t)>);
  constexpr uint16_t kUntouched = 0x1234;
  for (const int64_t n : {int64_t{kN}, kValid, kValid - 3, int64_t{1}}) {
    std::vector<bf16> out(kN, bf16{kUntouched});
    tl::store(c, out.data(), t, n);
    for (int e = 0; e < kN; ++e) {
      const uint16_t want = e >= n ? kUntouched : (e < kValid ? x[e].bits : float_to_bf16(kOther).bits);
      EXPECT_EQ(out[e].bits, want) << "n " << n << ", element " << e;
    }
  }
}

}  // namespace
}  // namespace packed_test
}  // namespace bench::tile
