#include "parallel.h"

#include <omp.h>

#include <algorithm>

namespace bench::tile {

void parallel_for(int64_t n, RangeFn fn, void* arg) {
  if (n <= 0) return;
  const int threads = omp_in_parallel() ? 1 : static_cast<int>(std::min<int64_t>(omp_get_max_threads(), n));
  if (threads <= 1) {
    fn(arg, 0, n);
    return;
  }
#pragma omp parallel num_threads(threads)
  {
    const int64_t t = omp_get_thread_num();
    const int64_t nt = omp_get_num_threads();
    const int64_t begin = n * t / nt;
    const int64_t end = n * (t + 1) / nt;
    if (begin < end) fn(arg, begin, end);
  }
}

int num_threads() { return omp_get_max_threads(); }

void set_num_threads(int n) { omp_set_num_threads(n > 0 ? n : omp_get_num_procs()); }

}  // namespace bench::tile
