// defines: add, axpy, scale, SumOf, sum_of, sum_squares, sum_squares_partials, embedding_forward,
//          embedding_buckets, embedding_backward, copy_block, zero_block, and their float64 references
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
//
// add:        out = a + b                    axpy:  y += alpha * x         scale: x *= alpha
// sum_of:     sum of x^2, x or -x ln x (0 for x <= 0: the terms of an entropy) in double, two
//             fixed stages (per-program partials, then an in-order sum), so the result depends on
//             n only, never on the thread count; sum_squares = sum_of(kSquares)
// embedding:  out[i, :] = table[tokens[i], :] * s;  backward dtable[tokens[i], :] += dout[i, :] * s
//             over positions bucketed by token on the host (embedding_buckets); s = 1 (a plain
//             copy and sum) unless given (Gemma's sqrt(d_model))
// blocks:     dst[r, c] = src[r, c] and x[r, c] = 0 over rows x cols, each with its row stride
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "tile/exec.h"
#include "tile/program.h"

namespace bench::kernels {

using tile::acc_t;
using tile::Exec;

/// What sum_of adds up over the elements.
enum class SumOf : uint8_t {
  kSquares,  ///< x^2
  kValues,   ///< x
  kEntropy,  ///< -x ln x for x > 0, else 0 (summed over probabilities: their entropy in nats)
};

/// One term of sum_of, in double.
template <SumOf W>
struct SumTerm {
  /// Its FLOPs (tile::Traffic): x * x; none; -x ln x (a log and a multiply).
  static constexpr int kFlops = W == SumOf::kSquares ? 1 : (W == SumOf::kValues ? 0 : 2);
  BENCH_HD double operator()(double v) const {
    if constexpr (W == SumOf::kSquares) {
      return v * v;
    } else if constexpr (W == SumOf::kValues) {
      return v;
    } else {
      return v > 0 ? -v * tile::math::log(v) : 0.0;
    }
  }
};

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// float64 reference of sum_of.
inline double sum_of_reference(SumOf what, const std::vector<double>& x) {
  double s = 0;
  for (double v : x) {
    if (what == SumOf::kSquares) s += v * v;
    if (what == SumOf::kValues) s += v;
    if (what == SumOf::kEntropy && v > 0) s -= v * std::log(v);
  }
  return s;
}

/// float64 reference of sum_squares.
inline double sum_squares_reference(const std::vector<double>& x) {
  double s = 0;
  for (double v : x) s += v * v;
  return s;
}

/// float64 reference of embedding_forward: out is resized to n_tokens * dim.
inline void embedding_forward_reference(const std::vector<int32_t>& tokens, const std::vector<double>& table,
                                        std::vector<double>& out, int64_t dim, double scale = 1.0) {
  const auto n = static_cast<int64_t>(tokens.size());
  out.assign(static_cast<size_t>(n * dim), 0.0);
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c) out[i * dim + c] = table[tokens[i] * dim + c] * scale;
}

/// float64 reference of embedding_backward: adds into dtable.
inline void embedding_backward_reference(const std::vector<int32_t>& tokens, const std::vector<double>& dout,
                                         std::vector<double>& dtable, int64_t dim, double scale = 1.0) {
  const auto n = static_cast<int64_t>(tokens.size());
  for (int64_t i = 0; i < n; ++i)
    for (int64_t c = 0; c < dim; ++c) dtable[tokens[i] * dim + c] += dout[i * dim + c] * scale;
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// Elements per program of the flat element-wise programs.
inline constexpr int kFlatBlock = 1024;
/// Upper bound of the first-stage grid of sum_squares (the number of partial sums).
inline constexpr int64_t kSumSquaresParts = 256;

/// out = a + b over one chunk of B elements.
template <class T, int B>
struct Add {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* a;
  const T* b;
  T* out;  // may alias a or b: each element is read before it is written, by the same agent
  int64_t n;

  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(3 * n), static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    tl::store(c, out + off, tl::load<B>(c, a + off, rest) + tl::load<B>(c, b + off, rest), rest);
  }
};

/// y += alpha * x over one chunk of B elements.
template <class T, int B>
struct Axpy {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  const T* x;
  T* y;
  int64_t n;
  A alpha;

  /// x read, y read and written; one FMA per element.
  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(3 * n), 2 * static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    const int64_t rest = n - off;
    tl::store(c, y + off, tl::load<B>(c, y + off, rest) + tl::load<B>(c, x + off, rest) * alpha, rest);
  }
};

/// x *= alpha over one chunk of B elements.
template <class T, int B>
struct Scale {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  T* x;
  int64_t n;
  A alpha;

  tile::Traffic traffic(const tile::Grid&) const { return {tile::traffic_bytes<T>(2 * n), static_cast<double>(n)}; }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t off = tl::program_id(c, 0) * B;
    tl::store(c, x + off, tl::load<B>(c, x + off, n - off) * alpha, n - off);
  }
};

/// First stage of sum_of: program p sums the terms of its contiguous run of B-wide chunks in
/// double (squares of large floats stay finite; long sums keep their precision) and writes
/// partial[p]. The runs depend only on n and the grid size, never on the thread count.
template <class T, int B, SumOf W>
struct SumTerms {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* x;
  double* partial;  // [parts]
  int64_t n;
  int64_t parts;

  /// x read, the partials written; a term and an add per element.
  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<T>(n) + tile::traffic_bytes<double>(parts),
            static_cast<double>(n) * (SumTerm<W>::kFlops + 1)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t p = tl::program_id(c, 0);
    const int64_t chunks = (n + B - 1) / B;
    const int64_t first = p * chunks / parts;
    const int64_t last = (p + 1) * chunks / parts;
    auto acc = tl::full<B>(c, 0.0);
    for (int64_t k = first; k < last; ++k) {
      const int64_t off = k * B;
      acc = acc + tl::map(SumTerm<W>{}, tl::cast<double>(tl::load<B>(c, x + off, n - off)));
    }
    tl::store_scalar(c, partial + p, tl::sum(c, acc));
  }
};

/// Second stage of sum_of on a device: one program sums the partials (a fixed tree).
template <int B>
struct SumPartials {
  static constexpr int kBlock = B;
  const double* partial;
  double* result;
  int64_t parts;

  tile::Traffic traffic(const tile::Grid&) const {
    return {tile::traffic_bytes<double>(parts + 1), static_cast<double>(parts)};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    tl::store_scalar(c, result, tl::sum(c, tl::load<B>(c, partial, parts)));
  }
};

/// One token per program: copies its table row, in chunks of B columns; kScaled multiplies
/// each element by `scale` in acc_t<T> on the way (rounded once to T).
template <class T, int B, bool kScaled>
struct EmbeddingForward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  const int32_t* tokens;
  const T* table;
  T* out;
  int64_t dim;
  A scale;  // read when kScaled

  /// Per token (a program): its id, its table row (gathered once per token: which rows repeat is
  /// on the device) and its output row; a multiply per element when scaled.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double elements = static_cast<double>(grid.x * dim);
    return {tile::traffic_bytes<int32_t>(grid.x) + tile::traffic_bytes<T>(2 * elements), kScaled ? elements : 0.0};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t i = tl::program_id(c, 0);
    const T* src = table + static_cast<int64_t>(tokens[i]) * dim;
    T* dst = out + i * dim;
    for (int64_t c0 = 0; c0 < dim; c0 += B) {
      if constexpr (kScaled) {
        tl::store(c, dst + c0, tl::load<B>(c, src + c0, dim - c0) * scale, dim - c0);
      } else {
        tl::store(c, dst + c0, tl::load<B>(c, src + c0, dim - c0), dim - c0);
      }
    }
  }
};

/// Program (bucket, chunk) of embedding_backward: the row of dtable of one distinct token, B of
/// its columns. It adds the rows of dout at that token's positions, in increasing position
/// order, in registers (in acc_t<T>), and stores once. Each element of dtable has one writer and
/// the summation order of a serial walk over the tokens, so the result is race-free and exact to
/// reproduce, whatever the grid is split into. kScaled adds each row times `scale` (the
/// product rounded on its own in acc_t<T>, as the forward's was).
template <class T, int B, bool kScaled>
struct EmbeddingBackward {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  using A = acc_t<T>;
  const int32_t* buckets;  // embedding_buckets' layout
  const T* dout;
  T* dtable;
  int64_t n_tokens;
  int64_t dim;
  A scale;                     // read when kScaled
  const int32_t* n_unique_at;  // when set, the distinct tokens' count (programs past it do nothing)

  /// grid.x distinct tokens: the buckets (positions, starts, tokens), every row of dout, and each
  /// distinct token's row of dtable read and written; an add (and a multiply) per dout element.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double unique = static_cast<double>(grid.x), added = static_cast<double>(n_tokens * dim);
    return {tile::traffic_bytes<int32_t>(static_cast<double>(n_tokens) + 2 * unique + 1) +
                tile::traffic_bytes<T>(added + 2 * unique * static_cast<double>(dim)),
            kScaled ? 2 * added : added};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t u = tl::program_id(c, 0);
    if (n_unique_at != nullptr && u >= *n_unique_at) return;
    const int64_t c0 = tl::program_id(c, 1) * B;
    const int64_t rest = dim - c0;
    const int32_t* positions = buckets;
    const int32_t* start = buckets + n_tokens;
    const int32_t* token = buckets + 2 * n_tokens + 1;
    T* row = dtable + static_cast<int64_t>(token[u]) * dim + c0;
    tl::loaded_t<B, Ctx, T> acc = tl::load<B>(c, row, rest);  // a sum: a float tile
    for (int64_t k = start[u]; k < start[u + 1]; ++k) {
      if constexpr (kScaled) {
        acc = acc + tl::load<B>(c, dout + static_cast<int64_t>(positions[k]) * dim + c0, rest) * scale;
      } else {
        acc = acc + tl::load<B>(c, dout + static_cast<int64_t>(positions[k]) * dim + c0, rest);
      }
    }
    tl::store(c, row, acc, rest);
  }
};

/// One row per program: dst[r, c] = src[r, c] (copy_block), or 0 without a source (zero_block),
/// for the first `cols` columns, in chunks of B.
template <class T, int B>
struct Block {
  static constexpr int kBlock = B;
  static constexpr int kRun = tile::kRun16<T>;  // 16-byte runs
  const T* src;                                 // null: zeros
  int64_t src_ld;
  T* dst;
  int64_t dst_ld;
  int64_t cols;

  tile::Traffic traffic(const tile::Grid& grid) const {
    return {tile::traffic_bytes<T>(static_cast<double>(grid.x * cols) * (src != nullptr ? 2 : 1)), 0.0};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    for (int64_t c0 = 0; c0 < cols; c0 += B) {
      const int64_t n = cols - c0;
      if (src != nullptr) {
        tl::store(c, dst + r * dst_ld + c0, tl::load<B>(c, src + r * src_ld + c0, n), n);
      } else {
        tl::store(c, dst + r * dst_ld + c0, tl::full<B>(c, acc_t<T>(0)), n);
      }
    }
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers (float, double and bf16 storage are instantiated in elementwise.cpp)
// ---------------------------------------------------------------------------------------------

/// out = a + b for n elements; out may alias a or b.
template <class T>
void add(const Exec& exec, const T* a, const T* b, T* out, int64_t n);

/// y += alpha * x for n elements.
template <class T>
void axpy(const Exec& exec, acc_t<T> alpha, const T* x, T* y, int64_t n);

/// x *= alpha for n elements.
template <class T>
void scale(const Exec& exec, acc_t<T> alpha, T* x, int64_t n);

/// Number of first-stage partial sums sum_of uses for n elements (a function of n only).
int64_t sum_squares_partials(int64_t n);

/// Sum of the `what` terms of n elements, accumulated in double in a fixed order that does not
/// depend on the thread count. NaN or inf when a term is. On CUDA the sum is made on the device
/// and only the result comes back.
template <class T>
double sum_of(const Exec& exec, SumOf what, const T* x, int64_t n);

/// Sum of x^2 over n elements, accumulated in double in a fixed order that does not depend on
/// the thread count. NaN or inf when any element is non-finite.
template <class T>
double sum_squares(const Exec& exec, const T* x, int64_t n);

/// sum_of without the trip to the host: `partial` (sum_squares_partials(n) doubles, at least one)
/// and `result` (one double) are in exec's memory, and the partials are summed by one program in
/// a fixed tree, on every backend, so the result does not depend on the thread count and is the
/// same on the CPU and on a device. Waits for nothing (a CUDA graph may capture it).
template <class T>
void sum_of_into(const Exec& exec, SumOf what, const T* x, int64_t n, double* partial, double* result);

/// out[i, :] = table[tokens[i], :] * scale for n_tokens rows of dim elements; tokens must index
/// rows of table. scale = 1 copies the rows exactly (no multiply).
template <class T>
void embedding_forward(const Exec& exec, const int32_t* tokens, const T* table, T* out, int64_t n_tokens, int64_t dim,
                       acc_t<T> scale = acc_t<T>(1));

/// int32 elements of the buckets of n_tokens tokens (embedding_buckets): 3 n_tokens + 1.
int64_t embedding_buckets_size(int64_t n_tokens);

/// Groups the positions of n_tokens tokens by token, on the host, for embedding_backward: fills
/// `buckets` (embedding_buckets_size(n_tokens) int32s in host memory) and returns the number of
/// distinct tokens u. Layout: [0, n) the positions, ordered by token and, within a token, by
/// position; [n, n + u] where each distinct token's positions start, then n; [2n + 1, 2n + 1 + u)
/// the distinct tokens, ascending. A counting sort, O(n_tokens + vocab). Throws
/// std::out_of_range naming the position of a token outside [0, vocab).
int64_t embedding_buckets(const int32_t* tokens, int64_t n_tokens, int64_t vocab, int32_t* buckets);

/// dtable[tokens[i], :] += dout[i, :] for n_tokens rows of dim elements, given the tokens'
/// buckets (embedding_buckets, copied into exec's memory) and their number of distinct tokens:
/// one program per (distinct token, column chunk), each adding its token's rows in position
/// order, the order of a serial walk over the tokens (deterministic, no atomics). bf16 tables
/// are rounded once per call, after the sum in float. With scale != 1 each row of dout is
/// multiplied by scale before it is added (the gradient of embedding_forward with that scale).
/// With n_unique_at (an int32 in exec's memory: the distinct tokens' count, written before the
/// kernel runs) n_unique is only a bound (e.g. min(n_tokens, vocab)) and the programs past the
/// count do nothing, so that a captured step adds each replay's batch, not the captured one's.
template <class T>
void embedding_backward(const Exec& exec, const int32_t* buckets, int64_t n_unique, const T* dout, T* dtable,
                        int64_t n_tokens, int64_t dim, acc_t<T> scale = acc_t<T>(1),
                        const int32_t* n_unique_at = nullptr);

/// dst[r, 0:cols] = src[r, 0:cols] for r < rows, rows src_ld apart in src and dst_ld in dst (a
/// strided 2-D copy in exec's memory, e.g. heads out of fused rows); the two must not overlap.
template <class T>
void copy_block(const Exec& exec, const T* src, int64_t src_ld, T* dst, int64_t dst_ld, int64_t rows, int64_t cols);

/// x[r, 0:cols] = 0 for r < rows, rows ld apart.
template <class T>
void zero_block(const Exec& exec, T* x, int64_t ld, int64_t rows, int64_t cols);

}  // namespace bench::kernels
