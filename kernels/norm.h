// defines: norm_forward, norm_backward (LayerNorm and RMSNorm, optional weight and bias, the
//          weight optionally an offset from one), norm_backward_workspace, column_sum; their
//          float64 references are in norm_reference.h (included)
//
// Sections, in order: 1. tile programs  2. launchers.
//
// LayerNorm: y = (x - mean(x)) * rstd * w + b,  rstd = 1 / sqrt(var(x) + eps)
// RMSNorm:   y = x * rstd * w + b,              rstd = 1 / sqrt(mean(x^2) + eps)
// Backward, with xhat the normalized input and g = dy * w:
//   dx = rstd * (g - [LayerNorm] mean(g) - xhat * mean(g * xhat)),  dw += sum dy * xhat,  db += sum dy
// Unit offset (Gemma's RMSNorm, Megatron's zero-centred gamma): the gain is 1 + w, w stored as the
// offset from one, so w = 0 is the identity gain; 1 + w is formed in the compute type, and
// everything above holds with 1 + w for w (dw is unchanged: d(1 + w) / dw = 1).
#pragma once

#include <cstdint>
#include <type_traits>
#include <vector>

#include "norm_reference.h"
#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

// ---------------------------------------------------------------------------------------------
// 1. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// `a` as computed, each element rounded on its own: on the host, a product inside `a` is not
/// fused into a later addition (with -march=native GCC contracts `acc + x * y` into one FMA where
/// it sees both, and whether it sees both depends on how the program is written, e.g. whether
/// `acc` lives in registers or is loaded). For running sums whose bits must not depend on that.
/// A no-op on a CUDA device, whose results never matched the CPU's bit for bit.
template <class T, int N, int L>
BENCH_HD BENCH_FORCEINLINE tile::Tile<T, N, L> no_fma(tile::Tile<T, N, L> a) {
#if !defined(__CUDA_ARCH__)
  asm volatile("" : : "g"(&a) : "memory");  // `a` goes through memory: later uses reload it
#endif
  return a;
}

/// The gain a program multiplies by: the loaded weight, or 1 + it (`unit_offset`, Gemma's).
/// A run-time flag, not a template parameter: one program serves both (the branch is uniform
/// across a launch), which halves norm.cpp's compiled programs (its compile time dominated the
/// kernels library's).
template <class Tl>
BENCH_HD BENCH_FORCEINLINE Tl gain(Tl w, bool unit_offset) {
  if (unit_offset) return w + typename Tl::value_type(1);
  return w;
}
/// A packed weight (tile/packed.h) unpacked: a separate overload, so that the host's build of the
/// one above is the same function as before packed tiles.
template <int N, int L, class P>
BENCH_HD BENCH_FORCEINLINE tile::Tile<float, N, L> gain(const tile::Packed<N, L, P>& w, bool unit_offset) {
  return gain(tl::unpacked(w), unit_offset);
}

/// One row per program; columns in chunks of B. `center` (LayerNorm: the row's mean subtracted;
/// RMSNorm: not, the mean taken as 0) is a run-time member, as `unit_offset` is: one program serves
/// both, and RMSNorm's x - 0 is x exactly, so its results are those of a program compiled without
/// the subtraction; half the programs to compile (norm.cpp was the kernels' longest compile).
template <class T, int B>
struct NormForward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  static constexpr int kFillSm =
      2048 / tile::threads_for_tile(B, kRun) < 32 ? 2048 / tile::threads_for_tile(B, kRun) : 32;
  // Without the chunk loops (NormForwardWide's), the 4096-wide tile fits 4 blocks an SM in bf16
  // (64 registers) and 3 in float (80; 100 by default, 2 blocks), without spills; with them it
  // took 79 (3) and 108 (2). bf16 2048 and narrower: 3. Float tiles up to 1024 wide fill the SM
  // (2,048 threads, at most 32 blocks) in 32 registers without spills (the affine's weight and
  // bias, in flight together, took them to 33-37 by default: 1024 columns, 6 blocks, not 8).
  static constexpr int kMinBlocks =
      std::is_same_v<T, tile::bf16> ? (B == 4096 ? 4 : 3) : (B <= 1024 ? kFillSm : (B == 4096 ? 3 : 1));
  using A = acc_t<T>;
  const T* x;
  const T* w;  // may be null
  const T* b;  // may be null
  T* y;
  A* mean;  // per row, may be null
  A* rstd;  // per row
  int64_t cols;
  A eps;
  // The residual stream's adds folded in (norm_forward_residual), each null when not:
  const T* x2 = nullptr;     // the input is x + x2, written to `sum` (post-norm: norm(x + f(x)))
  T* sum = nullptr;          // [rows, cols], with x2
  const T* res = nullptr;    // y = res + norm(x) (a norm on a sublayer's output, added to the stream)
  bool unit_offset = false;  // the gain is 1 + w (Gemma's RMSNorm)
  bool center = true;        // LayerNorm (the mean subtracted); RMSNorm: false

  /// One row per program. Per element: the mean's add and the subtraction (LayerNorm), the
  /// square and its add, xhat's multiply, the gain's multiply (and its 1 +), the bias; per row:
  /// the mean's division, the variance's division and + eps, the rsqrt. The folded adds: x + x2
  /// read, written and read back; y written, read back with res and written again; an add each.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double rows = static_cast<double>(grid.x), elements = rows * static_cast<double>(cols);
    const int affine_ops = (w != nullptr ? (unit_offset ? 2 : 1) : 0) + (b != nullptr ? 1 : 0);
    const double params = static_cast<double>(cols) * ((w != nullptr ? 1 : 0) + (b != nullptr ? 1 : 0));
    const double folded = (x2 != nullptr ? 3 : 0) + (res != nullptr ? 3 : 0);
    return {tile::traffic_bytes<T>((2 + folded) * elements + params) +
                tile::traffic_bytes<A>(rows * (mean != nullptr ? 2 : 1)),
            elements * (3 + (center ? 2 : 0) + affine_ops + (x2 != nullptr ? 1 : 0) + (res != nullptr ? 1 : 0)) +
                rows * (center ? 4 : 3)};
  }

  /// Rows of at most B columns, the row held in registers (NormForwardWide takes wider ones).
  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t row = tl::program_id(c, 0);
    auto xv = tl::load<B>(c, input(c, row), cols);
    A mu = A(0);
    if (center) mu = tl::sum(c, xv) / A(cols);
    auto d = tl::where(tl::arange<B>(c) < static_cast<int>(cols), xv - mu, A(0));
    const A rs = tile::math::rsqrt(tl::sum(c, d * d) / A(cols) + eps);
    tl::store(c, y + row * cols, affine(c, d * rs, 0), cols);
    add_residual(c, row);
    finish(c, row, mu, rs);
  }

  /// Rows of more than B columns, chunk by chunk: x read again for each pass (the mean with
  /// LayerNorm, the variance, y).
  template <class Ctx>
  BENCH_HD void wide(Ctx& c) const {
    const int64_t row = tl::program_id(c, 0);
    const T* xr = input(c, row);
    T* yr = y + row * cols;
    A mu = A(0);
    if (center) {
      auto acc = tl::full<B>(c, A(0));
      for (int64_t c0 = 0; c0 < cols; c0 += B) acc = acc + tl::load<B>(c, xr + c0, cols - c0);
      mu = tl::sum(c, acc) / A(cols);
    }
    auto acc = tl::full<B>(c, A(0));
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      auto d = tl::load<B>(c, xr + c0, cols - c0, mu) - mu;  // masked elements contribute 0
      acc = acc + d * d;
    }
    const A rs = tile::math::rsqrt(tl::sum(c, acc) / A(cols) + eps);
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      auto xhat = (tl::load<B>(c, xr + c0, cols - c0) - mu) * rs;
      tl::store(c, yr + c0, affine(c, xhat, c0), cols - c0);
    }
    add_residual(c, row);
    finish(c, row, mu, rs);
  }

  /// The row the norm reads: x's, or with x2 the sum x + x2, rounded to T as a separate add would
  /// round it, written to `sum` and read back from there (each agent reads back the elements it
  /// wrote).
  template <class Ctx>
  BENCH_HD const T* input(Ctx& c, int64_t row) const {
    const T* xr = x + row * cols;
    if (x2 == nullptr) return xr;
    T* sr = sum + row * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += B)
      tl::store(c, sr + c0, tl::load<B>(c, xr + c0, cols - c0) + tl::load<B>(c, x2 + row * cols + c0, cols - c0),
                cols - c0);
    return sr;
  }

  /// y += res on the row, from y as stored (rounded to T, as a separate add would read it).
  template <class Ctx>
  BENCH_HD void add_residual(Ctx& c, int64_t row) const {
    if (res == nullptr) return;
    T* yr = y + row * cols;
    for (int64_t c0 = 0; c0 < cols; c0 += B)
      tl::store(c, yr + c0, tl::load<B>(c, yr + c0, cols - c0) + tl::load<B>(c, res + row * cols + c0, cols - c0),
                cols - c0);
  }

  /// v * gain + bias. With both, both loads are issued before either is read: loaded one after
  /// the other, the weight's multiply (and a packed weight's unpack) sat between their branches,
  /// and the bias's loads waited for the weight's data. On the host the product is rounded before
  /// the bias is added (no_fma), as it was when the two were separate statements: written as one
  /// expression, GCC fused them into an FMA in the small tiles (float, 32-128 wide), which moved
  /// the CPU's results.
  template <class Ctx, class Tl>
  BENCH_HD Tl affine(Ctx& c, Tl v, int64_t c0) const {
    if (w != nullptr && b != nullptr) {
      auto wv = tl::load<B>(c, w + c0, cols - c0);
      auto bv = tl::load<B>(c, b + c0, cols - c0);
      return no_fma(v * gain(wv, unit_offset)) + bv;  // the host rounds the product, as before
    }
    if (w != nullptr) return v * gain(tl::load<B>(c, w + c0, cols - c0), unit_offset);
    if (b != nullptr) return v + tl::load<B>(c, b + c0, cols - c0);
    return v;
  }

  template <class Ctx>
  BENCH_HD void finish(Ctx& c, int64_t row, A mu, A rs) const {
    if (mean != nullptr) tl::store_scalar(c, mean + row, mu);
    tl::store_scalar(c, rstd + row, rs);
  }
};

/// NormForward on rows wider than its tile (cols > B), the same arithmetic, as a program of its
/// own: its chunk loops took registers that the one-tile program, which every row of up to 4096
/// columns runs on a device, then does not pay (float 4096: 108 registers, 2 blocks an SM, with
/// them; 80, 3 blocks, without).
template <class T, int B>
struct NormForwardWide : NormForward<T, B> {
  // bf16: 80 registers, no spill, the 3 blocks the one program held (94 by default, 2).
  static constexpr int kMinBlocks = std::is_same_v<T, tile::bf16> ? 3 : 1;

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    this->wide(c);
  }
};

/// A group of `per_group` rows per program (kRowsPerGroup on the host; a multiple of it on a
/// device, norm_backward_rows_per_group): writes dx for its rows and its own row of the partial
/// sums of dy * xhat (and dy) for the weight (and bias) gradients. The partial sums stay in
/// registers over the group's rows and are stored once. A row that fits one tile (cols <= B: this
/// program) is read once and kept in registers; wider rows (NormBackwardWide, below: a kernel of
/// its own on a device, so that its registers do not count against this one's) take two passes
/// per kRowsPerGroup rows of the group: the row
/// means of g and g xhat for those rows, then, chunk by chunk, dx and the partial sums of the
/// chunk over them (added to what the earlier rows of the group stored). Either way each partial
/// sum adds its rows in increasing order, starting from zero, and each product dy xhat rounded on
/// its own (no_fma), as when the partials were loaded, added and stored per row: the CPU's results
/// are bit for bit those of that form.
template <class T, int B>
struct NormBackward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  // Software pipelining (one_tile): where a thread's x and dy of the next row fit beside this
  // row's, i.e. a tile of at most 32 bytes a thread (bf16 up to 4096 columns, float up to 2048),
  // and the tile is wide enough that a row's loads, not its reductions, are most of its time
  // (1024 and up). Float's 4096-wide tile (64 bytes a thread) would spill at 2 blocks an SM
  // (128 registers, 160-420 B) and keeps its two blocks instead.
  static constexpr bool kAhead = B >= 1024 && B / tile::threads_for_tile(B, kRun) * sizeof(T) <= 32;
  static constexpr int64_t kRowsPerGroup = 32;
  // Registers without spills (ptxas -v, sm_90): 4096-wide, 2 blocks an SM: float 122, bf16 115
  // (pipelined; 123 before), where the compiler's choice was 141 and 168 (1 block); 2048-wide,
  // 3 blocks: float 80, bf16 70 (pipelined; 83 at 2 blocks and 80 at 3 before).
  static constexpr int kMinBlocks = B == 2048 ? 3 : 2;
  using A = acc_t<T>;
  const T* dy;
  const T* x;
  const T* w;  // may be null
  const A* mean;
  const A* rstd;
  T* dx;
  A* dw_part;  // [groups, cols], may be null
  A* db_part;  // [groups, cols], may be null
  int64_t rows;
  int64_t cols;
  int64_t per_group = kRowsPerGroup;  // rows per program, a multiple of kRowsPerGroup
  const T* dres = nullptr;            // dx = dres + the norm's gradient (norm_backward_residual); may be null
  bool unit_offset = false;           // the gain is 1 + w (Gemma's RMSNorm)
  bool center = true;                 // LayerNorm (mean and mean g subtracted); RMSNorm: false

  /// grid.x groups. Per element: xhat (its subtraction with LayerNorm, its multiply), g = dy w
  /// (and w's 1 +), the sums of g (LayerNorm) and of g xhat, dx = (g - mean g - xhat mean gx)
  /// rstd, and the partials dy xhat (an FMA) and dy; per row: the two divisions by cols.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double elements = static_cast<double>(rows * cols), parts = static_cast<double>(grid.x * cols);
    const int gain_ops = w != nullptr ? (unit_offset ? 2 : 1) : 0;
    const double stats = static_cast<double>(rows) * (center && mean != nullptr ? 2 : 1);
    // Wide rows store a group's partials once per kRowsPerGroup rows and read them back after.
    const int64_t subgroups = per_group / kRowsPerGroup;
    const double passes = cols > B ? 2.0 * static_cast<double>(subgroups) - 1 : 1.0;
    const double partials = passes * parts * ((dw_part != nullptr ? 1 : 0) + (db_part != nullptr ? 1 : 0));
    // The folded residual gradient: dx read back with dres and written again, an add.
    const double folded = dres != nullptr ? 3 : 0;
    return {tile::traffic_bytes<T>((3 + folded) * elements + (w != nullptr ? static_cast<double>(cols) : 0)) +
                tile::traffic_bytes<A>(stats + partials),
            elements * (6 + (center ? 3 : 0) + gain_ops + (dw_part != nullptr ? 2 : 0) + (db_part != nullptr ? 1 : 0) +
                        (dres != nullptr ? 1 : 0)) +
                static_cast<double>(rows) * (center ? 2 : 1)};
  }

  /// Rows of at most B columns (NormBackwardWide takes wider ones).
  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t group = tl::program_id(c, 0);
    const int64_t r0 = group * per_group;
    const int64_t r1 = r0 + per_group < rows ? r0 + per_group : rows;
    one_tile(c, group, r0, r1);
    add_residual(c, r0, r1);
  }

  /// Rows of more than B columns.
  template <class Ctx>
  BENCH_HD void wide(Ctx& c) const {
    const int64_t group = tl::program_id(c, 0);
    const int64_t r0 = group * per_group;
    const int64_t r1 = r0 + per_group < rows ? r0 + per_group : rows;
    for (int64_t s0 = r0; s0 < r1; s0 += kRowsPerGroup)
      chunked(c, group, s0, s0 + kRowsPerGroup < r1 ? s0 + kRowsPerGroup : r1, s0 > r0);
    add_residual(c, r0, r1);
  }

  /// dx as stored (rounded to T, as a separate add would read it) + dres, for rows [r0, r1).
  template <class Ctx>
  BENCH_HD void add_residual(Ctx& c, int64_t r0, int64_t r1) const {
    if (dres == nullptr) return;
    for (int64_t r = r0; r < r1; ++r)
      for (int64_t c0 = 0; c0 < cols; c0 += B)
        tl::store(c, dx + r * cols + c0,
                  tl::load<B>(c, dx + r * cols + c0, cols - c0) + tl::load<B>(c, dres + r * cols + c0, cols - c0),
                  cols - c0);
  }

  /// The group's rows, each loaded once. With kAhead (software pipelining) row r + 1's x and dy
  /// are loaded before row r's two block reductions, so that on a device a thread has the next
  /// row's accesses in flight while its block reduces, computes and stores this one (the last
  /// row's "next" loads nothing: n 0), and the weight is loaded again each row (from L1 or L2, in
  /// the shadow of the next row's loads) instead of held: the next row's tiles take its
  /// registers. Without, a row's loads come right before its arithmetic, the weight held.
  template <class Ctx>
  BENCH_HD void one_tile(Ctx& c, int64_t group, int64_t r0, int64_t r1) const {
    auto dw_acc = tl::full<B>(c, A(0));
    auto db_acc = tl::full<B>(c, A(0));
    if constexpr (kAhead) {
      A mu = center ? mean[r0] : A(0);
      A rs = rstd[r0];
      auto xv = tl::load<B>(c, x + r0 * cols, cols, mu);  // masked elements: mu, so xhat 0
      auto dyv = tl::load<B>(c, dy + r0 * cols, cols);
      for (int64_t r = r0; r < r1; ++r) {
        const bool more = r + 1 < r1;
        const int64_t next = more ? r + 1 : r;
        const A mu_next = center ? mean[next] : A(0);
        const A rs_next = rstd[next];
        auto x_next = tl::load<B>(c, x + next * cols, more ? cols : 0, mu_next);
        auto dy_next = tl::load<B>(c, dy + next * cols, more ? cols : 0);
        one_row(
            c, r, xv, dyv, [&] { return gain(tl::load<B>(c, w, cols), unit_offset); }, mu, rs, dw_acc, db_acc);
        xv = x_next;
        dyv = dy_next;
        mu = mu_next;
        rs = rs_next;
      }
    } else {
      auto wv = tl::full<B>(c, A(1));
      if (w != nullptr) wv = gain(tl::load<B>(c, w, cols), unit_offset);
      for (int64_t r = r0; r < r1; ++r) {
        const A mu = center ? mean[r] : A(0);
        const A rs = rstd[r];
        // Both loads before any arithmetic on them: on a device a thread then has x's and dy's
        // accesses in flight together (xhat computed between them waited for x).
        auto xv = tl::load<B>(c, x + r * cols, cols, mu);  // masked elements: mu, so xhat 0
        auto dyv = tl::load<B>(c, dy + r * cols, cols);
        one_row(
            c, r, xv, dyv, [&] { return wv; }, mu, rs, dw_acc, db_acc);
      }
    }
    if (dw_part != nullptr) tl::store(c, dw_part + group * cols, dw_acc, cols);
    if (db_part != nullptr) tl::store(c, db_part + group * cols, db_acc, cols);
  }

  /// Row r's arithmetic on its loaded x and dy: dx stored, dy xhat and dy added to the partials.
  /// `gain_of()` gives the weight's gain (called only with a weight).
  template <class Ctx, class Tx, class Tdy, class Gain, class Acc>
  BENCH_HD BENCH_FORCEINLINE void one_row(Ctx& c, int64_t r, const Tx& xv, const Tdy& dyv, const Gain& gain_of, A mu,
                                          A rs, Acc& dw_acc, Acc& db_acc) const {
    auto xhat = (xv - mu) * rs;
    auto g = w != nullptr ? dyv * gain_of() : dyv;
    const A mean_g = center ? tl::sum(c, tl::full<B>(c, A(0)) + g) / A(cols) : A(0);
    const A mean_gx = tl::sum(c, tl::full<B>(c, A(0)) + g * xhat) / A(cols);
    tl::store(c, dx + r * cols, (g - mean_g - xhat * mean_gx) * rs, cols);
    if (dw_part != nullptr) dw_acc = dw_acc + no_fma(dyv * xhat);
    if (db_part != nullptr) db_acc = db_acc + dyv;
  }

  /// Rows [r0, r1) (at most kRowsPerGroup) of the group; `more`: the group's partials already
  /// hold its earlier rows' sums, which these rows add to.
  template <class Ctx>
  BENCH_HD void chunked(Ctx& c, int64_t group, int64_t r0, int64_t r1, bool more) const {
    A mean_g[kRowsPerGroup];
    A mean_gx[kRowsPerGroup];
    for (int64_t r = r0; r < r1; ++r) {
      const T* xr = x + r * cols;
      const T* dyr = dy + r * cols;
      const A mu = center ? mean[r] : A(0);
      const A rs = rstd[r];
      auto sum_g = tl::full<B>(c, A(0));
      auto sum_gx = tl::full<B>(c, A(0));
      for (int64_t c0 = 0; c0 < cols; c0 += B) {
        const int64_t n = cols - c0;
        // dy unpacked at its load, as x is by its first use: packed until its later uses, the
        // bf16 wide program took 128 -> 167 registers (4096-wide chunks; 72 -> 80 at 1024).
        auto xhat = (tl::load<B>(c, xr + c0, n, mu) - mu) * rs;
        tl::loaded_t<B, Ctx, T> dyv = tl::load<B>(c, dyr + c0, n);
        auto g = w != nullptr ? dyv * gain(tl::load<B>(c, w + c0, n), unit_offset) : dyv;
        sum_g = sum_g + g;
        sum_gx = sum_gx + g * xhat;
      }
      mean_g[r - r0] = center ? tl::sum(c, sum_g) / A(cols) : A(0);
      mean_gx[r - r0] = tl::sum(c, sum_gx) / A(cols);
    }
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      const int64_t n = cols - c0;
      auto dw_acc = tl::full<B>(c, A(0));
      auto db_acc = tl::full<B>(c, A(0));
      if (more && dw_part != nullptr) dw_acc = tl::load<B>(c, dw_part + group * cols + c0, n);
      if (more && db_part != nullptr) db_acc = tl::load<B>(c, db_part + group * cols + c0, n);
      for (int64_t r = r0; r < r1; ++r) {
        const A mu = center ? mean[r] : A(0);
        const A rs = rstd[r];
        auto xhat = (tl::load<B>(c, x + r * cols + c0, n, mu) - mu) * rs;
        tl::loaded_t<B, Ctx, T> dyv = tl::load<B>(c, dy + r * cols + c0, n);
        auto g = w != nullptr ? dyv * gain(tl::load<B>(c, w + c0, n), unit_offset) : dyv;
        tl::store(c, dx + r * cols + c0, (g - mean_g[r - r0] - xhat * mean_gx[r - r0]) * rs, n);
        if (dw_part != nullptr) dw_acc = dw_acc + no_fma(dyv * xhat);
        if (db_part != nullptr) db_acc = db_acc + dyv;
      }
      if (dw_part != nullptr) tl::store(c, dw_part + group * cols + c0, dw_acc, n);
      if (db_part != nullptr) tl::store(c, db_part + group * cols + c0, db_acc, n);
    }
  }
};

/// NormBackward on rows wider than its tile (cols > B), the same arithmetic, as a program of its
/// own: its per-row means (kRowsPerGroup of them a pass) and chunk loops take registers that the
/// one-tile program, which every row of up to 4096 columns runs on a device, then does not pay.
template <class T, int B>
struct NormBackwardWide : NormBackward<T, B> {
  static constexpr int kMinBlocks = 1;

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    this->wide(c);
  }
};

/// Stage one of the device column sum: program (chunk, slice) adds rows [slice * per_slice,
/// (slice + 1) * per_slice) of part, in order, for its B columns, and writes the result over the
/// slice's first row (which only it reads).
template <class T, int B>
struct ColumnSumSlices {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  A* part;
  int64_t parts;
  int64_t cols;
  int64_t per_slice;

  /// Every row of part read; each slice's sum written over its first row; an add per row
  /// beyond a slice's first.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double c = static_cast<double>(cols), slices = static_cast<double>(grid.y);
    return {tile::traffic_bytes<A>((static_cast<double>(parts) + slices) * c),
            (static_cast<double>(parts) - slices) * c};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t c0 = tl::program_id(c, 0) * B;
    const int64_t p0 = tl::program_id(c, 1) * per_slice;
    const int64_t p1 = p0 + per_slice < parts ? p0 + per_slice : parts;
    A* first = part + p0 * cols + c0;
    tl::loaded_t<B, Ctx, A> acc = tl::load<B>(c, first, cols - c0);  // a sum: a float tile
    for (int64_t p = p0 + 1; p < p1; ++p) acc = acc + tl::load<B>(c, part + p * cols + c0, cols - c0);
    tl::store(c, first, acc, cols - c0);
  }
};

/// out[c] += sum over `parts` rows of part[row, c], in row order, for one chunk of B columns per
/// program; the rows summed are `stride` rows apart.
template <class T, int B>
struct ColumnSum {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  const A* part;
  T* out;
  int64_t parts;
  int64_t cols;
  int64_t stride;

  /// `parts` rows of part read, out read and written; an add per part element.
  tile::Traffic traffic(const tile::Grid&) const {
    const double summed = static_cast<double>(parts * cols);
    return {tile::traffic_bytes<A>(summed) + tile::traffic_bytes<T>(2 * static_cast<double>(cols)), summed};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t c0 = tl::program_id(c, 0) * B;
    tl::loaded_t<B, Ctx, T> acc = tl::load<B>(c, out + c0, cols - c0);  // a sum: a float tile
    for (int64_t p = 0; p < parts; ++p) acc = acc + tl::load<B>(c, part + p * stride * cols + c0, cols - c0);
    tl::store(c, out + c0, acc, cols - c0);
  }
};

/// The device's gradient sums of norm_backward, both in one launch: program (chunk, i) adds the
/// `parts` rows of part_i into out_i for kCols columns (i = 0, 1; grid.y is the number of sums,
/// out_1 unused with one). Its tile holds kParts = B / kCols parts of its columns at a time
/// (element e: part e / kCols, column e % kCols), gathered from the rows: kCols floats are one
/// 32-byte sector of a row, and a thread has every gather of its B / 256 elements in flight at
/// once, where a program walking the parts one row at a time waits a memory latency per part.
/// Each column's sum is then one block reduction over its parts (a fixed order, so reproducible).
template <class T, int B>
struct ColumnSums {
  static constexpr int kBlock = B;
  static constexpr int kCols = 8;
  static constexpr int kParts = B / kCols;
  static constexpr int kMinBlocks = 4;  // bf16: 107 registers by default, 64
  using A = acc_t<T>;
  const A* part0;
  T* out0;
  const A* part1;
  T* out1;
  int64_t parts;
  int64_t cols;

  /// Per sum: `parts` rows of its part read, its out read and written; an add per part element.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double sums = static_cast<double>(grid.y), summed = static_cast<double>(parts * cols);
    return {sums * (tile::traffic_bytes<A>(summed) + tile::traffic_bytes<T>(2 * static_cast<double>(cols))),
            sums * summed};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t c0 = tl::program_id(c, 0) * kCols;
    const bool second = tl::program_id(c, 1) == 1;
    const A* part = second ? part1 : part0;
    T* out = second ? out1 : out0;
    const int width = cols - c0 < kCols ? static_cast<int>(cols - c0) : kCols;
    const auto e = tl::arange<B>(c);
    const auto col = e - (e / kCols) * kCols;
    // Columns past the last are read at column 0 (in bounds) and never summed.
    const auto idx = (e / kCols) * static_cast<int>(cols) + tl::where(col < width, col, 0);
    auto acc = tl::full<B>(c, A(0));
    for (int64_t p0 = 0; p0 < parts; p0 += kParts)
      acc = acc + tl::gather(c, part + p0 * cols + c0, idx, (parts - p0) * kCols);
    for (int j = 0; j < width; ++j) {
      const A s = tl::sum(c, tl::where(col == j, acc, A(0)));
      tl::store_scalar(c, out + c0 + j, tile::to_acc(out[c0 + j]) + s);
    }
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 2. launchers (float, double and bf16 storage are instantiated in norm.cpp)
// ---------------------------------------------------------------------------------------------

/// Normalize each of `rows` rows of `cols` elements. `center` selects LayerNorm (true) or
/// RMSNorm (false). `weight`/`bias` may be null. Writes per-row rstd and, for LayerNorm, the mean
/// (`mean` may be null for RMSNorm); backward needs them. With `unit_offset` the gain is
/// 1 + weight (Gemma).
template <class T>
void norm_forward(const Exec& exec, bool center, const T* x, const T* weight, const T* bias, T* y, acc_t<T>* mean,
                  acc_t<T>* rstd, int64_t rows, int64_t cols, double eps, bool unit_offset = false);

/// norm_forward with the residual stream's add folded into the same launch, as the unfused
/// composition (kernels::add, then norm_forward, or the other way round) would compute it, bit
/// for bit: with x2 (may be null) the input is x + x2, rounded to T and written to `sum` (the
/// input that norm_backward then needs); with res (may be null) y = res + norm(input), the norm's
/// output rounded to T before the add. Each is one launch fewer on a device.
template <class T>
void norm_forward_residual(const Exec& exec, bool center, const T* x, const T* x2, T* sum, const T* res,
                           const T* weight, const T* bias, T* y, acc_t<T>* mean, acc_t<T>* rstd, int64_t rows,
                           int64_t cols, double eps, bool unit_offset = false);

/// Elements of acc_t<T> that norm_backward needs as scratch for `rows` x `cols` (on any target).
int64_t norm_backward_workspace(int64_t rows, int64_t cols);

/// Rows per program of norm_backward on exec's target: 32 on the host (whose gain and bias
/// gradients are bit for bit those of groups of 32 rows); on a device (tile::runs_as_device) the
/// smallest multiple of 32 that makes at most 512 groups: 32 up to 16,384 rows, so that a
/// backward of 16,384 rows runs 512 programs (about 4 to an SM of an H200, where 64 groups left
/// half the SMs idle), and one launch sums the groups' partials for both gradients (2 launches a
/// backward in all, whatever the rows).
int64_t norm_backward_rows_per_group(const Exec& exec, int64_t rows);

/// Gradient of norm_forward (with the same `unit_offset`). Writes dx; adds into dweight and dbias
/// (either may be null), summed over groups of norm_backward_rows_per_group rows: on the host one
/// launch per gradient sums the groups in order; on a device one launch sums both (in a fixed
/// order too, so reproducible, though it differs from the host's by rounding).
template <class T>
void norm_backward(const Exec& exec, bool center, const T* dy, const T* x, const T* weight, const acc_t<T>* mean,
                   const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows, int64_t cols, acc_t<T>* workspace,
                   bool unit_offset = false);

/// norm_backward with dx = dres + the norm's gradient (rounded to T first, as kernels::add after
/// norm_backward would read it): the residual stream's gradient added in the same launch.
template <class T>
void norm_backward_residual(const Exec& exec, bool center, const T* dy, const T* dres, const T* x, const T* weight,
                            const acc_t<T>* mean, const acc_t<T>* rstd, T* dx, T* dweight, T* dbias, int64_t rows,
                            int64_t cols, acc_t<T>* workspace, bool unit_offset = false);

/// out[c] += sum_r part[r, c] for a row-major [parts, cols] matrix.
template <class T>
void column_sum(const Exec& exec, const acc_t<T>* part, T* out, int64_t parts, int64_t cols);

}  // namespace bench::kernels
