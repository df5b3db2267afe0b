// defines: position_table_add, position_table_backward — the tile programs of the absolute
//          encodings (a [seq, width] table added to every sequence of a batch) and their
//          float64 references; the plugin's CUDA pass builds them for CUDA (cmake/BenchPlugin.cmake)
//
// Sections, in order: 1. float64 reference  2. tile programs  3. launchers.
#pragma once

#include <cstdint>
#include <vector>

#include "kernels/tile/exec.h"
#include "kernels/tile/program.h"

namespace bench::position {

// ---------------------------------------------------------------------------------------------
// 1. float64 reference
// ---------------------------------------------------------------------------------------------

/// h[r, :] += table[r % seq, :] for every row r of h [tokens, width].
inline void position_table_add_reference(std::vector<double>& h, const std::vector<double>& table, int64_t tokens,
                                         int64_t seq, int64_t width) {
  for (int64_t r = 0; r < tokens; ++r)
    for (int64_t c = 0; c < width; ++c) h[r * width + c] += table[(r % seq) * width + c];
}

// ---------------------------------------------------------------------------------------------
// 2. tile programs
// ---------------------------------------------------------------------------------------------

namespace programs {
namespace tl = tile::tl;

/// One token row per program, in chunks of B columns.
template <class T, int B>
struct PositionTableAdd {
  static constexpr int kBlock = B;
  T* h;
  const T* table;
  int64_t seq;
  int64_t width;

  /// grid.x token rows read and written, the table rows of min(tokens, seq) positions read; an
  /// add per element (tile::Traffic).
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double w = static_cast<double>(width), rows = static_cast<double>(grid.x);
    return {tile::traffic_bytes<T>((2 * rows + static_cast<double>(grid.x < seq ? grid.x : seq)) * w), rows * w};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t r = tl::program_id(c, 0);
    T* row = h + r * width;
    const T* pos = table + (r % seq) * width;
    for (int64_t c0 = 0; c0 < width; c0 += B) {
      const int64_t n = width - c0;
      tl::store(c, row + c0, tl::load<B>(c, row + c0, n) + tl::load<B>(c, pos + c0, n), n);
    }
  }
};

/// One position per program: dtable[t, :] += sum over the batch of dh[b * seq + t, :], in batch
/// order, so every element has one writer and a fixed summation order.
template <class T, int B>
struct PositionTableBackward {
  static constexpr int kBlock = B;
  const T* dh;
  T* dtable;
  int64_t batch;
  int64_t seq;
  int64_t width;

  /// grid.x positions: their rows of every sequence of dh read, of dtable read and written; an
  /// add per dh element.
  tile::Traffic traffic(const tile::Grid& grid) const {
    const double w = static_cast<double>(width), summed = static_cast<double>(batch * grid.x) * w;
    return {tile::traffic_bytes<T>(summed + 2 * static_cast<double>(grid.x) * w), summed};
  }

  template <class Ctx>
  BENCH_HD void operator()(Ctx& c) const {
    const int64_t t = tl::program_id(c, 0);
    T* out = dtable + t * width;
    for (int64_t c0 = 0; c0 < width; c0 += B) {
      const int64_t n = width - c0;
      tl::loaded_t<B, Ctx, T> acc = tl::load<B>(c, out + c0, n);  // a sum: a float tile
      for (int64_t b = 0; b < batch; ++b) acc = acc + tl::load<B>(c, dh + (b * seq + t) * width + c0, n);
      tl::store(c, out + c0, acc, n);
    }
  }
};

}  // namespace programs

// ---------------------------------------------------------------------------------------------
// 3. launchers
// ---------------------------------------------------------------------------------------------

/// h[r, :] += table[r % seq, :] for the `tokens` rows of h [tokens, width].
template <class T>
void position_table_add(const tile::Exec& exec, T* h, const T* table, int64_t tokens, int64_t seq, int64_t width) {
  if (tokens <= 0 || width <= 0) return;
  tile::dispatch_block(width, [&]<int B>() {
    tile::launch(exec, tile::Grid{tokens}, programs::PositionTableAdd<T, B>{h, table, seq, width});
  });
}

/// dtable[t, :] += sum_b dh[b * seq + t, :] for t < seq (dh is [batch * seq, width]).
template <class T>
void position_table_backward(const tile::Exec& exec, const T* dh, T* dtable, int64_t batch, int64_t seq,
                             int64_t width) {
  if (seq <= 0 || width <= 0) return;
  tile::dispatch_block(width, [&]<int B>() {
    tile::launch(exec, tile::Grid{seq}, programs::PositionTableBackward<T, B>{dh, dtable, batch, seq, width});
  });
}

}  // namespace bench::position
