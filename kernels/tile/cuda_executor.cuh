// defines: bench::tile::CudaCtx, launch_cuda, cuda_registration, check_launch
//
// The CUDA executor, included by tile/exec.h when nvcc compiles a launcher (the CUDA pass):
// tile::launch then instantiates tile_kernel for the program and registers it
// (cuda_registration), and the CPU-compiled launcher finds it at run time (tile/registry.h).
//
// One program per thread block. Thread `threadIdx.x` owns Layout<N, TH, Run>::kPer elements of
// every tile in registers; each contiguous run (Run elements: 16 bytes of the program's storage
// type when it declares kRun) is moved with vector accesses of up to 16 bytes when the pointer is
// aligned and the run is in bounds (bf16 converted two to a 32-bit word: a shift or a mask up,
// one cvt.rn.bf16x2.f32 down; a bf16 load issues every run's access and returns the raw words,
// a Packed tile (tile/packed.h) that the program's first arithmetic on it unpacks, so that a
// thread has all its runs, and those of the program's next loads, in flight); reductions go
// through cub::BlockReduce and are broadcast to every thread (the barriers live here, never in a
// program). Each thread's loads and stores are tile/thread_access.h's, called with threadIdx.x:
// the emulated-block executor runs that same code for every lane on the CPU, so CI tests it.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <stdexcept>
#include <string>
#include <typeinfo>

#include "defs.h"
#include "layout.h"
#include "packed.h"
#include "registry.h"
#include "thread_access.h"
#include "tile.h"

namespace bench::tile {

/// The thread's lane for tile/thread_access.h: threadIdx.x, read where each index needs it.
struct ThreadLane {
  // NOLINTNEXTLINE(google-explicit-constructor): an int wherever Layout::element takes the lane
  __device__ __forceinline__ operator int() const { return static_cast<int>(threadIdx.x); }
};

template <int TH, int Run = 4>
class CudaCtx {
 public:
  __device__ int64_t program_id(int axis) const {
    return axis == 0 ? blockIdx.x : (axis == 1 ? blockIdx.y : blockIdx.z);
  }
  __device__ int64_t num_programs(int axis) const {
    return axis == 0 ? gridDim.x : (axis == 1 ? gridDim.y : gridDim.z);
  }

  template <int N>
  __device__ Tile<int, N, Layout<N, TH, Run>::kPer> arange() const {
    Tile<int, N, Layout<N, TH, Run>::kPer> r;
#pragma unroll
    for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i) r.v[i] = Layout<N, TH, Run>::element(threadIdx.x, i);
    return r;
  }

  template <int N, class T>
  __device__ Tile<T, N, Layout<N, TH, Run>::kPer> full(T x) const {
    return splat<N, Layout<N, TH, Run>::kPer>(x);
  }

  // A bf16 tile comes back packed (tile/packed.h): unpacked where the program first computes
  // with it, after the program's next loads have been issued.
  template <int N, class T>
  __device__ __forceinline__ auto load(const T* p, int64_t n, acc_t<T> other) const {
    using L = Layout<N, TH, Run>;
    if constexpr (kLoadsPacked<T, L::kVec>) {
      Packed<N, L::kPer, CudaCtx> r;
      r.n = n;
      r.other = other;
      Access::template load_packed<N>(ThreadLane{}, p, n, r.words);
      return r;
    } else {
      Tile<acc_t<T>, N, L::kPer> r;
      Access::template load<N>(ThreadLane{}, p, n, other, r.v);
      return r;
    }
  }

  /// tl::rows: the thread's runs' rows and columns (tile/thread_access.h).
  template <int N>
  using Rows = typename ThreadAccess<TH, Run>::template Rows<N>;

  template <int N>
  __device__ __forceinline__ Rows<N> rows(int64_t width, int64_t first, int64_t n) const {
    return Access::template rows<N>(ThreadLane{}, width, first, n);
  }

  template <class T, int N>
  __device__ __forceinline__ auto load_rows(const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other) const {
    using L = Layout<N, TH, Run>;
    if constexpr (kLoadsPacked<T, L::kVec>) {
      Packed<N, L::kPer, CudaCtx> r;
      r.n = at.n;
      r.other = other;
      Access::template load_rows_packed<N>(ThreadLane{}, p, stride, at, r.words);
      return r;
    } else {
      Tile<acc_t<T>, N, L::kPer> r;
      Access::template load_rows<T, N>(ThreadLane{}, p, stride, at, other, r.v);
      return r;
    }
  }

  template <class T, class U, int N, int P>
  __device__ __forceinline__ void store_rows(T* p, int64_t stride, const Rows<N>& at, const Tile<U, N, P>& x) const {
    static_assert(P == Layout<N, TH, Run>::kPer, "a thread's part of the tile");
    Access::template store_rows<T, U, N>(ThreadLane{}, p, stride, at, x.v);
  }

  template <class T, int N, int P>
  __device__ __forceinline__ Tile<acc_t<T>, N, P> gather(const T* p, const Tile<int, N, P>& idx, int64_t n,
                                                         acc_t<T> other) const {
    static_assert(P == Layout<N, TH, Run>::kPer, "a thread's part of the tile");
    Tile<acc_t<T>, N, P> r;
    Access::template gather<T, N>(ThreadLane{}, p, idx.v, n, other, r.v);
    return r;
  }

  template <class T, class U, int N, int P>
  __device__ __forceinline__ void store(T* p, const Tile<U, N, P>& x, int64_t n) const {
    static_assert(P == Layout<N, TH, Run>::kPer, "a thread's part of the tile");
    Access::template store<T, U, N>(ThreadLane{}, p, x.v, n);
  }

  /// A packed tile stored as bf16: each run's words as loaded (a copy's unpack and cvt.rn.bf16x2
  /// skipped); at or past x.n the tile reads `other`, rounded as a float's store rounds it.
  template <int N, int P>
  __device__ __forceinline__ void store(bf16* p, const Packed<N, P, CudaCtx>& x, int64_t n) const {
    static_assert(P == Layout<N, TH, Run>::kPer, "a thread's part of the tile");
    Access::template store_packed<N>(ThreadLane{}, p, x, n);
  }

  template <class U, int N, int P>
  __device__ U sum(const Tile<U, N, P>& x) const {
    return reduce(local_sum(x), SumOp{});
  }

  template <class U, int N, int P>
  __device__ U max(const Tile<U, N, P>& x) const {
    return reduce(local_max(x), MaxOp{});
  }

  template <class T, class U>
  __device__ void store_scalar(T* p, U v) const {
    if (threadIdx.x == 0) *p = from_acc<T>(static_cast<acc_t<T>>(v));
  }

  /// The thread's raw words of a packed tile as floats (the low half shifted up, the high one
  /// masked: exact), and `other` for its elements at or past n (Packed's conversion).
  template <int N, int P>
  __device__ __forceinline__ static Tile<float, N, P> unpack(const uint32_t* raw, int64_t n, float other) {
    static_assert(P == Layout<N, TH, Run>::kPer, "a thread's part of the tile");
    Tile<float, N, P> r;
    Access::template unpack<N>(ThreadLane{}, raw, n, other, r.v);
    return r;
  }

 private:
  using Access = ThreadAccess<TH, Run>;

  struct SumOp {
    template <class U>
    __device__ U operator()(U a, U b) const {
      return a + b;
    }
  };
  struct MaxOp {
    template <class U>
    __device__ U operator()(U a, U b) const {
      return a > b ? a : b;
    }
  };

  template <class U, class Op>
  __device__ U reduce(U local, Op op) const {
    using Reduce = cub::BlockReduce<U, TH>;
    __shared__ typename Reduce::TempStorage temp;
    __shared__ U result;
    const U r = Reduce(temp).Reduce(local, op);
    if (threadIdx.x == 0) result = r;
    __syncthreads();
    const U out = result;
    __syncthreads();  // `temp` and `result` may be reused by the next reduction
    return out;
  }
};

template <int TH, int Run, class Program>
__global__ void __launch_bounds__(TH) tile_kernel(const Program program) {
  CudaCtx<TH, Run> ctx;
  program(ctx);
}

/// tile_kernel for a program that declares kMinBlocks (layout.h, min_blocks_of). A separate
/// kernel, not __launch_bounds__(TH, 1) for the others: ptxas allocates differently with an
/// explicit 1 (GluBackward's bf16 build: 56 registers without it, 61 with it).
template <int TH, int Run, int MinBlocks, class Program>
__global__ void __launch_bounds__(TH, MinBlocks) tile_kernel_blocks(const Program program) {
  CudaCtx<TH, Run> ctx;
  program(ctx);
}

/// Launch one thread block per program of `grid` on `stream`. An empty grid launches nothing; a
/// grid beyond CUDA's limits (2^31 - 1 blocks in x, 65535 in y and z) is
/// cudaErrorInvalidConfiguration.
template <class Program>
cudaError_t launch_cuda(const Grid& grid, const Program& program, cudaStream_t stream) {
  constexpr int kRun = run_of<Program>();
  constexpr int kThreads = threads_for_tile(Program::kBlock, kRun);
  if (grid.x <= 0 || grid.y <= 0 || grid.z <= 0) return cudaSuccess;
  if (grid.x > 2147483647 || grid.y > 65535 || grid.z > 65535) return cudaErrorInvalidConfiguration;
  const dim3 blocks(static_cast<unsigned>(grid.x), static_cast<unsigned>(grid.y), static_cast<unsigned>(grid.z));
  if constexpr (min_blocks_of<Program>() > 1) {
    tile_kernel_blocks<kThreads, kRun, min_blocks_of<Program>(), Program><<<blocks, kThreads, 0, stream>>>(program);
  } else {
    tile_kernel<kThreads, kRun, Program><<<blocks, kThreads, 0, stream>>>(program);
  }
  return cudaGetLastError();
}

/// Throws std::runtime_error naming the program when `err` is not success.
inline void check_launch(cudaError_t err, const char* type) {
  if (err != cudaSuccess)
    throw std::runtime_error("CUDA launch of " + program_name(type) + ": " + cudaGetErrorString(err));
}

/// The registered CUDA build of Program: what the CPU-compiled tile::launch calls.
template <class Program>
const char* cuda_entry(const Grid& grid, const void* program, void* stream) {
  const cudaError_t err = launch_cuda(grid, *static_cast<const Program*>(program), static_cast<cudaStream_t>(stream));
  return err == cudaSuccess ? nullptr : cudaGetErrorString(err);
}

/// Registers Program's CUDA build while its library is loaded.
template <class Program>
struct CudaRegistration {
  CudaRegistration() { register_cuda_program(BENCH_KERNEL_MODULE, typeid(Program).name(), &cuda_entry<Program>); }
  ~CudaRegistration() { unregister_cuda_program(BENCH_KERNEL_MODULE, typeid(Program).name()); }
  CudaRegistration(const CudaRegistration&) = delete;
  CudaRegistration& operator=(const CudaRegistration&) = delete;
};
/// Odr-used by tile::launch in the CUDA pass: one per program type, constructed at load.
template <class Program>
inline CudaRegistration<Program> cuda_registration{};

}  // namespace bench::tile
