#include "rope.h"

#include <algorithm>
#include <stdexcept>
#include <string>

#include "catalog.h"

namespace bench::kernels {

BENCH_KERNEL(rope_apply,
             "rotate (interleaved or half) feature pairs of q/k by t * theta_i, all or the first rot per head; "
             "inverse for backward");

template <class T>
void rope_apply(const Exec& exec, T* x, int64_t tokens, int64_t seq, int64_t n_heads, int64_t d_head,
                int64_t row_stride, const acc_t<T>* cos, const acc_t<T>* sin, RopeLayout layout, bool inverse,
                int64_t rot) {
  // rot = d_head is the whole head, as without partial rotary (an odd head keeps its last element).
  if (rot <= 0 || rot == d_head)
    rot = d_head;
  else if (rot > d_head || rot % 2 != 0)
    throw std::invalid_argument("rope_apply: " + std::to_string(rot) + " rotated elements of a head of " +
                                std::to_string(d_head) + " (an even number, at most d_head, is needed)");
  if (tokens <= 0 || n_heads <= 0 || rot < 2) return;
  using A = acc_t<T>;
  const A sign = inverse ? A(-1) : A(1);
  const tile::Grid grid{tokens};
  if (layout == RopeLayout::kHalf) {
    // Every head's pairs in one tile where they fit (4,096 on a device: 32 heads of 128).
    tile::dispatch_row(exec, n_heads * (rot / 2), [&]<int B>() {
      tile::launch(exec, grid, programs::RopeHalf<T, B>{x, cos, sin, seq, n_heads, d_head, row_stride, sign, rot});
    });
  } else {
    tile::dispatch_block(std::max<int64_t>(n_heads * d_head, 64), [&]<int B>() {
      if constexpr (B >= 64) {
        if (rot == d_head) {
          tile::launch(
              exec, grid,
              programs::RopeInterleaved<T, B, false>{x, cos, sin, seq, n_heads, d_head, row_stride, sign, rot});
        } else {
          tile::launch(exec, grid,
                       programs::RopeInterleaved<T, B, true>{x, cos, sin, seq, n_heads, d_head, row_stride, sign, rot});
        }
      }
    });
  }
}

#define BENCH_INSTANTIATE(T)                                                                                 \
  template void rope_apply<T>(const Exec&, T*, int64_t, int64_t, int64_t, int64_t, int64_t, const acc_t<T>*, \
                              const acc_t<T>*, RopeLayout, bool, int64_t);
BENCH_FOR_EACH_TYPE(BENCH_INSTANTIATE)
#undef BENCH_INSTANTIATE

}  // namespace bench::kernels
