// defines: RopeLayout, rope_apply (rotary position embedding, in place, forward or inverse) and
//          its float64 reference
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// Token r has position t = r % seq. The first `rot` elements of each head (all d_head by
// default; fewer is partial rotary, GPT-NeoX's rotary_pct, GPT-J's rotary_dim) form rot / 2 pairs
// (a, b); pair i at position t is rotated by the angle whose cosine and sine are cos[t, i],
// sin[t, i]:
//   (a, b) -> (a cos - b sin, a sin + b cos);   the inverse (and the backward pass) uses -sin.
// The other d_head - rot elements pass unchanged.
// Pairs: kInterleaved (x[2i], x[2i+1]), RoFormer, GPT-J; kHalf (x[i], x[i + rot/2]), Hugging Face
// Llama and GPT-NeoX (rotate_half within the rotated slice).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

/// Which elements of a head form the rotated pairs.
enum class RopeLayout : uint8_t {
  kInterleaved,  ///< (x[2i], x[2i + 1]), as in the RoFormer paper
  kHalf,         ///< (x[i], x[i + d_head / 2]), "rotate_half" of Hugging Face Llama
};

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of rope_apply, in place on x; cos and sin are [seq, rot / 2] (rot = 0: d_head).
inline void rope_reference(std::vector<double>& x, int64_t tokens, int64_t seq, int64_t n_heads, int64_t d_head,
                           int64_t row_stride, const std::vector<double>& cos, const std::vector<double>& sin,
                           RopeLayout layout, bool inverse, int64_t rot = 0) {
  const int64_t half = (rot > 0 ? rot : d_head) / 2;
  for (int64_t r = 0; r < tokens; ++r) {
    const int64_t t = r % seq;
    for (int64_t h = 0; h < n_heads; ++h) {
      double* xh = &x[r * row_stride + h * d_head];
      for (int64_t i = 0; i < half; ++i) {
        const int64_t ia = layout == RopeLayout::kHalf ? i : 2 * i;
        const int64_t ib = layout == RopeLayout::kHalf ? i + half : 2 * i + 1;
        const double c = cos[t * half + i], s = inverse ? -sin[t * half + i] : sin[t * half + i];
        const double a = xh[ia], b = xh[ib];
        xh[ia] = a * c - b * s;
        xh[ib] = a * s + b * c;
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// What a rope program over `tokens` tokens moves and computes: `touched` elements of each
/// token read and written in place, the cos and sin of rot / 2 angles at each of the
/// min(tokens, seq) positions it meets, and 6 FLOPs per rotated pair (a cos - b sin, a sin + b cos),
/// 3 per rotated element (rot is even).
template <class T>
tile::Traffic rope_traffic(int64_t tokens, int64_t seq, int64_t n_heads, int64_t rot, int64_t touched) {
  const double positions = static_cast<double>(tokens < seq ? tokens : seq);
  return {tile::traffic_bytes<T>(2 * static_cast<double>(tokens * touched)) +
              tile::traffic_bytes<acc_t<T>>(positions * static_cast<double>(rot)),
          3 * static_cast<double>(tokens * n_heads * rot)};
}

/// Rotate-half layout, one token per program: the first halves of every head's rotated elements
/// (rot / 2 each, d_head apart) as one tile and the second halves as another, in chunks of B pairs
/// over all the heads (load_rows: a thread's run stays within one head's half and moves as one
/// access), element i of both tiles with the same agent, so in place is safe; the angle tables
/// are read as rows of stride 0. The rest of each head is not touched. One head per chunk (32
/// threads for a 128-wide head, heads in a loop) kept too few bytes in flight on a GPU (issue 31).
template <class T, int B>
struct RopeHalf {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  // Up to 2048 pairs (32 heads of 128): 80 (float) and 72 (bf16) registers by default, 64 at 4
  // blocks without spills; the 4096-pair tile would spill 248-712 bytes there. bf16's 768 and
  // 4096 and float's 512 declare the blocks they held before tl::rows, whose addressing, held for
  // the six accesses, took them 2-14 registers more and a block: no spill there either.
  static constexpr int kMinBlocks =
      std::is_same_v<T, tile::bf16> ? (B == 768 ? 9 : (B == 4096 ? 2 : 4)) : (B == 512 ? 9 : (B == 4096 ? 1 : 4));
  using A = acc_t<T>;
  T* x;
  const A* cos;
  const A* sin;
  int64_t seq;
  int64_t n_heads;
  int64_t d_head;
  int64_t row_stride;
  A sign;       // +1 forward, -1 inverse
  int64_t rot;  // rotated elements per head (even, <= d_head)

  /// grid.x tokens; only the rotated elements are touched.
  tile::Traffic traffic(const tile::Grid& grid) const {
    return rope_traffic<T>(grid.x, seq, n_heads, rot, n_heads * rot);
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const int64_t half = rot / 2;
    const A* ct = cos + (r % seq) * half;
    const A* st = sin + (r % seq) * half;
    T* xa = x + r * row_stride;
    T* xb = xa + half;
    const int64_t pairs = n_heads * half;
    for (int64_t c0 = 0; c0 < pairs; c0 += B) {
      const auto at = tl::rows<B>(c, half, c0, pairs - c0);  // the six accesses' addressing, once
      auto a = tl::load_rows(c, xa, d_head, at);
      auto b = tl::load_rows(c, xb, d_head, at);
      auto co = tl::load_rows(c, ct, 0, at);
      auto si = tl::load_rows(c, st, 0, at) * sign;
      tl::store_rows(c, xa, d_head, at, a * co - b * si);
      tl::store_rows(c, xb, d_head, at, a * si + b * co);
    }
  }
};

/// Interleaved layout, one token per program, over the token's n_heads * d_head contiguous
/// elements in chunks of B: element j takes its partner j ^ 1 by a gather and the angle of its
/// pair (j mod d_head) / 2. In-place is safe because every executor mapping with B >= 64 keeps
/// both elements of a pair with the same agent (runs of at least two consecutive elements per
/// thread, starting at even indices; tile/layout.h), so no agent reads what another writes.
/// kPartial: only the first `rot` elements of each head are rotated; the others are stored back
/// as they were loaded (exactly: a load converts to acc_t<T> without rounding), and their angle
/// index is clamped to 0 so that the table reads stay within the row.
template <class T, int B, bool kPartial>
struct RopeInterleaved {
  static_assert(B >= 64, "pairs must not straddle threads: B >= 64 gives runs of >= 2 elements");
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  T* x;
  const A* cos;
  const A* sin;
  int64_t seq;
  int64_t n_heads;
  int64_t d_head;
  int64_t row_stride;
  A sign;
  int64_t rot;  // rotated elements per head (even, <= d_head); d_head unless kPartial

  /// grid.x tokens; every element of a token's heads is loaded and stored (kPartial too).
  tile::Traffic traffic(const tile::Grid& grid) const {
    return rope_traffic<T>(grid.x, seq, n_heads, rot, n_heads * d_head);
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    const int64_t half = rot / 2;
    const A* ct = cos + (r % seq) * half;
    const A* st = sin + (r % seq) * half;
    T* row = x + r * row_stride;
    const int64_t width = n_heads * d_head;
    const int d = static_cast<int>(d_head);
    for (int64_t c0 = 0; c0 < width; c0 += B) {
      const int64_t n = width - c0;
      auto idx = tl::arange<B>(c);
      auto j = idx + static_cast<int>(c0);  // element within the token
      auto e = j - (j / d) * d;             // element within its head
      auto pair = e / 2;
      auto odd = e - pair * 2;
      if constexpr (kPartial) pair = tl::where(e < static_cast<int>(rot), pair, 0);
      // Unpacked at once: the gathers below are scalar, and deferring the unpack past them took
      // 80 -> 106 registers (bf16, 1024 columns).
      tl::loaded_t<B, Ctx, T> xv = tl::load<B>(c, row + c0, n);
      auto xp = tl::gather(c, row + c0, idx + 1 - odd * 2, n);
      auto co = tl::gather(c, ct, pair, n);
      auto si = tl::gather(c, st, pair, n) * sign;
      // even element a: a cos - b sin; odd element b: b cos + a sin
      auto out = xv * co + xp * si * (tl::cast<A>(odd) * A(2) - A(1));
      if constexpr (kPartial) out = tl::where(e < static_cast<int>(rot), out, xv);
      tl::store(c, row + c0, out, n);
    }
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in rope.cpp)
// ---------------------------------------------------------------------------------------------

/// Rotate, in place, the first `rot` (even, or d_head; 0 = all d_head) elements of the n_heads heads of
/// d_head elements of each of `tokens` rows of x (rows row_stride elements apart, head h at
/// h * d_head); token r is at position r % seq. cos and sin are [seq, rot / 2] tables.
/// inverse = true rotates by the negative angle, which is also the backward pass (the rotation
/// is orthogonal).
template <class T>
void rope_apply(const Exec& exec, T* x, int64_t tokens, int64_t seq, int64_t n_heads, int64_t d_head,
                int64_t row_stride, const acc_t<T>* cos, const acc_t<T>* sin, RopeLayout layout, bool inverse,
                int64_t rot = 0);

}  // namespace bench::kernels
