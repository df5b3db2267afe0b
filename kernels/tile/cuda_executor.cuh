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
// program).
#pragma once

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cub/block/block_reduce.cuh>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>

#include "defs.h"
#include "layout.h"
#include "packed.h"
#include "registry.h"
#include "tile.h"

namespace bench::tile {

namespace detail {
/// The unsigned word of `Bytes` bytes that a vector access moves.
template <int Bytes>
struct Word;
template <>
struct Word<2> {
  using type = uint16_t;
};
template <>
struct Word<4> {
  using type = uint32_t;
};
template <>
struct Word<8> {
  using type = uint2;
};
template <>
struct Word<16> {
  using type = uint4;
};
/// The word of a 4- or 8-byte vector access from its 32-bit components (16-byte ones are stored
/// as an unsigned __int128, CudaCtx::store_vec).
template <class W>
__device__ __forceinline__ W make_word(const uint32_t* u) {
  if constexpr (std::is_same_v<W, uint2>) {
    return make_uint2(u[0], u[1]);
  } else {
    return u[0];
  }
}
}  // namespace detail

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
  __device__ auto load(const T* p, int64_t n, acc_t<T> other) const {
    using L = Layout<N, TH, Run>;
    if constexpr (kLoadsPacked<T, L::kVec>) {
      Packed<N, L::kPer, CudaCtx> r;
      r.n = n;
      r.other = other;
      uint32_t* raw = r.words;
#pragma unroll
      for (int i = 0; i < L::kPer; i += L::kVec) {
        const int e = L::element(threadIdx.x, i);
        if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {
          load_raw<L::kVec>(p + e, &raw[i / 2]);
        } else {
#pragma unroll
          for (int j = 0; j < L::kVec; ++j) set_half(raw, i + j, e + j < n ? p[e + j].bits : uint16_t{0});
        }
      }
      return r;
    } else {
      Tile<acc_t<T>, N, L::kPer> r;
#pragma unroll
      for (int i = 0; i < L::kPer; i += L::kVec) {
        const int e = L::element(threadIdx.x, i);
        if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {
          load_vec<T, L::kVec>(p + e, &r.v[i]);
        } else {
#pragma unroll
          for (int j = 0; j < L::kVec; ++j) r.v[i + j] = e + j < n ? to_acc(p[e + j]) : other;
        }
      }
      return r;
    }
  }

  /// tl::rows: each of the thread's runs' row and column (a division each, computed once for
  /// every access in this geometry), and whether the run moves as one access: it lies in one row
  /// (col + kVec <= width) and below n; the alignment, which depends on the base, is tested at
  /// each access.
  template <int N>
  struct Rows {
    static constexpr int kRuns = Layout<N, TH, Run>::kPer / Layout<N, TH, Run>::kVec;
    int64_t row[kRuns];
    int64_t col[kRuns];
    bool whole[kRuns];  ///< one_access's row and bounds tests, held where a thread has 2 runs or more
    int64_t width;
    int64_t n;
  };

  template <int N>
  __device__ Rows<N> rows(int64_t width, int64_t first, int64_t n) const {
    using L = Layout<N, TH, Run>;
    Rows<N> r;
    r.width = width;
    r.n = n;
#pragma unroll
    for (int k = 0; k < Rows<N>::kRuns; ++k) {
      const int e = L::element(threadIdx.x, k * L::kVec);
      split_row(first + e, width, r.row[k], r.col[k]);
      if constexpr (Rows<N>::kRuns >= 2) r.whole[k] = r.col[k] + L::kVec <= width && e + L::kVec <= n;
    }
    return r;
  }

  // A run starts at a multiple of kVec within the tile; it moves as one access when at.whole and
  // aligned, else element by element.
  template <class T, int N>
  __device__ auto load_rows(const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other) const {
    using L = Layout<N, TH, Run>;
    if constexpr (kLoadsPacked<T, L::kVec>) {
      Packed<N, L::kPer, CudaCtx> r;
      r.n = at.n;
      r.other = other;
      uint32_t* raw = r.words;
#pragma unroll
      for (int i = 0; i < L::kPer; i += L::kVec) {
        const int k = i / L::kVec;
        const T* q = p + at.row[k] * stride + at.col[k];
        if (one_access<T, N>(at, k, L::element(threadIdx.x, i), q)) {
          load_raw<L::kVec>(q, &raw[i / 2]);
        } else {
          const int e = L::element(threadIdx.x, i);
          int64_t col = at.col[k];
#pragma unroll
          for (int j = 0; j < L::kVec; ++j, ++col, ++q) {  // the run's elements, row by row: no division
            if (col == at.width) q += stride - at.width, col = 0;
            set_half(raw, i + j, e + j < at.n ? q->bits : uint16_t{0});
          }
        }
      }
      return r;
    } else {
      Tile<acc_t<T>, N, L::kPer> r;
#pragma unroll
      for (int i = 0; i < L::kPer; i += L::kVec) {
        const int k = i / L::kVec;
        const T* q = p + at.row[k] * stride + at.col[k];
        if (one_access<T, N>(at, k, L::element(threadIdx.x, i), q)) {
          load_vec<T, L::kVec>(q, &r.v[i]);
        } else {
          const int e = L::element(threadIdx.x, i);
          int64_t col = at.col[k];
#pragma unroll
          for (int j = 0; j < L::kVec; ++j, ++col, ++q) {  // the run's elements, row by row: no division
            if (col == at.width) q += stride - at.width, col = 0;
            r.v[i + j] = e + j < at.n ? to_acc(*q) : other;
          }
        }
      }
      return r;
    }
  }

  // Whether run k of the thread (tile element e) at q moves as one access: it lies in one row,
  // is aligned and below n. With 2 runs a thread or more, the row and bounds tests are held from
  // tl::rows (RopeHalf tested at each access: float 4096 142 registers and one block an SM, 128
  // and two held; bf16 4096 spilled 4 bytes), else tested at each access (held, bf16's 768-wide
  // RopeHalf spilled 12 bytes at its 9 blocks an SM; tested, 72 registers and none).
  template <class T, int N, class Q>
  __device__ static bool one_access(const Rows<N>& at, int k, int e, Q* q) {
    constexpr int kVec = Layout<N, TH, Run>::kVec;
    if constexpr (Rows<N>::kRuns >= 2) {
      return at.whole[k] && vector_ok<T, kVec>(q);
    } else {
      return at.col[k] + kVec <= at.width && vector_ok<T, kVec>(q) && e + kVec <= at.n;
    }
  }

  template <class T, class U, int N, int P>
  __device__ void store_rows(T* p, int64_t stride, const Rows<N>& at, const Tile<U, N, P>& x) const {
    using L = Layout<N, TH, Run>;
#pragma unroll
    for (int i = 0; i < P; i += L::kVec) {
      const int k = i / L::kVec;
      T* q = p + at.row[k] * stride + at.col[k];
      if (one_access<T, N>(at, k, L::element(threadIdx.x, i), q)) {
        store_vec<T, L::kVec>(q, &x.v[i]);
      } else {
        const int e = L::element(threadIdx.x, i);
        int64_t col = at.col[k];
#pragma unroll
        for (int j = 0; j < L::kVec; ++j, ++col, ++q) {  // the run's elements, row by row: no division
          if (col == at.width) q += stride - at.width, col = 0;
          if (e + j < at.n) *q = from_acc<T>(x.v[i + j]);
        }
      }
    }
  }

  template <class T, int N, int P>
  __device__ Tile<acc_t<T>, N, P> gather(const T* p, const Tile<int, N, P>& idx, int64_t n, acc_t<T> other) const {
    Tile<acc_t<T>, N, P> r;
#pragma unroll
    for (int i = 0; i < P; ++i) r.v[i] = Layout<N, TH, Run>::element(threadIdx.x, i) < n ? to_acc(p[idx.v[i]]) : other;
    return r;
  }

  template <class T, class U, int N, int P>
  __device__ void store(T* p, const Tile<U, N, P>& x, int64_t n) const {
    using L = Layout<N, TH, Run>;
#pragma unroll
    for (int i = 0; i < P; i += L::kVec) {
      const int e = L::element(threadIdx.x, i);
      if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {
        store_vec<T, L::kVec>(p + e, &x.v[i]);
      } else {
#pragma unroll
        for (int j = 0; j < L::kVec; ++j)
          if (e + j < n) p[e + j] = from_acc<T>(x.v[i + j]);
      }
    }
  }

  /// A packed tile stored as bf16: each run's words as loaded (a copy's unpack and cvt.rn.bf16x2
  /// skipped); at or past x.n the tile reads `other`, rounded as a float's store rounds it.
  template <int N, int P>
  __device__ void store(bf16* p, const Packed<N, P, CudaCtx>& x, int64_t n) const {
    using L = Layout<N, TH, Run>;
#pragma unroll
    for (int i = 0; i < P; i += L::kVec) {
      const int e = L::element(threadIdx.x, i);
      if (vector_ok<bf16, L::kVec>(p + e) && e + L::kVec <= n && e + L::kVec <= x.n) {
        constexpr int kBytes = kWord<bf16, L::kVec>;
#pragma unroll
        for (int w = 0; w < L::kVec * 2 / kBytes; ++w) store_word<kBytes>(p + e, w, &x.words[i / 2 + w * (kBytes / 4)]);
      } else {
#pragma unroll
        for (int j = 0; j < L::kVec; ++j)
          if (e + j < n) p[e + j] = e + j < x.n ? bf16{x.bits(i + j)} : from_acc<bf16>(x.other);
      }
    }
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
  __device__ static Tile<float, N, P> unpack(const uint32_t* raw, int64_t n, float other) {
    using L = Layout<N, TH, Run>;
    Tile<float, N, P> r;
#pragma unroll
    for (int k = 0; k < P / 2; ++k) {
      r.v[2 * k] = __uint_as_float(raw[k] << 16);
      r.v[2 * k + 1] = __uint_as_float(raw[k] & 0xffff0000u);
    }
#pragma unroll
    for (int i = 0; i < P; i += L::kVec) {
      const int e = L::element(threadIdx.x, i);
      if (e + L::kVec > n) {
#pragma unroll
        for (int j = 0; j < L::kVec; ++j)
          if (e + j >= n) r.v[i + j] = other;
      }
    }
    return r;
  }

 private:
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

  // Row and column of flat element f in rows of `width`: one 32-bit division where both fit (a
  // 64-bit division is a software routine of some 70 instructions), 64-bit otherwise; tl::rows
  // calls it once a run for all the accesses in its geometry. Its divisor is width's low half,
  // not zero for any width below 2^32 (a row of 4 G elements).
  __device__ static void split_row(int64_t f, int64_t width, int64_t& row, int64_t& col) {
    const uint32_t q = static_cast<uint32_t>(f) / static_cast<uint32_t>(width);
    if (f <= 0x7fffffff && width <= 0x7fffffff) {
      row = q;
    } else {
      row = f / width;
    }
    col = f - row * width;
  }

  // A run of V elements of T moves as V * sizeof(T) / kWord words of kWord bytes (at most 16).
  template <class T, int V>
  static constexpr int kWord = sizeof(T) * V >= 16 ? 16 : static_cast<int>(sizeof(T) * V);

  // Element k of a thread's raw bf16 words: the low half of word k / 2 when k is even.
  __device__ static void set_half(uint32_t* raw, int k, uint16_t bits) {
    if (k % 2 == 0) {
      raw[k / 2] = bits;
    } else {
      raw[k / 2] |= static_cast<uint32_t>(bits) << 16;
    }
  }

  // A run of V bf16 at p (aligned) into V / 2 raw words, as kWord-byte accesses.
  template <int V>
  __device__ static void load_raw(const bf16* p, uint32_t* raw) {
    constexpr int kBytes = kWord<bf16, V>;
    using W = typename detail::Word<kBytes>::type;
#pragma unroll
    for (int w = 0; w < V * 2 / kBytes; ++w) {
      const W q = reinterpret_cast<const W*>(p)[w];
      memcpy(raw + w * (kBytes / 4), &q, kBytes);
    }
  }

  template <class T, int V>
  __device__ static bool vector_ok(const T* p) {
    constexpr int kBytes = kWord<T, V>;
    return kBytes >= 4 && (kBytes & (kBytes - 1)) == 0 && reinterpret_cast<uintptr_t>(p) % kBytes == 0;
  }

  template <class T, int V>
  __device__ static void load_vec(const T* p, acc_t<T>* out) {
    constexpr int kBytes = kWord<T, V>;
    constexpr int kEach = kBytes / static_cast<int>(sizeof(T));  // elements per word
    using W = typename detail::Word<kBytes>::type;
    static_assert(sizeof(W) == kBytes && V % kEach == 0, "a run is a whole number of words");
#pragma unroll
    for (int w = 0; w < V / kEach; ++w) {
      const W q = reinterpret_cast<const W*>(p)[w];
      if constexpr (std::is_same_v<T, bf16> && kBytes >= 4) {
        // Two bf16 a 32-bit word: the low one shifted up, the high one masked, one instruction each.
        uint32_t u[kBytes / 4];
        memcpy(u, &q, kBytes);
#pragma unroll
        for (int k = 0; k < kBytes / 4; ++k) {
          out[w * kEach + 2 * k] = __uint_as_float(u[k] << 16);
          out[w * kEach + 2 * k + 1] = __uint_as_float(u[k] & 0xffff0000u);
        }
      } else {
        const T* t = reinterpret_cast<const T*>(&q);
#pragma unroll
        for (int j = 0; j < kEach; ++j) out[w * kEach + j] = to_acc(t[j]);
      }
    }
  }

  // Word w of kBytes (4, 8 or 16) at p, from its 32-bit components (why so, and why a 16-byte one
  // as an unsigned __int128: store_vec).
  template <int kBytes, class T>
  __device__ static void store_word(T* p, int w, const uint32_t* u) {
    if constexpr (kBytes == 16) {
      using U128 = unsigned __int128;
      reinterpret_cast<U128*>(p)[w] = U128{u[0]} | (U128{u[1]} << 32) | (U128{u[2]} << 64) | (U128{u[3]} << 96);
    } else {
      using W = typename detail::Word<kBytes>::type;
      reinterpret_cast<W*>(p)[w] = detail::make_word<W>(u);
    }
  }

  template <class T, int V, class U>
  __device__ static void store_vec(T* p, const U* in) {
    constexpr int kBytes = kWord<T, V>;
    constexpr int kEach = kBytes / static_cast<int>(sizeof(T));
    using W = typename detail::Word<kBytes>::type;
    static_assert(sizeof(W) == kBytes && V % kEach == 0, "a run is a whole number of words");
#pragma unroll
    for (int w = 0; w < V / kEach; ++w) {
      if constexpr (kBytes >= 4) {
        // The word is built from its 32-bit components (not written through a T* into a W), and
        // a 16-byte one is stored as one unsigned __int128 (st.global.v2.u64, STG.E.128): as a
        // uint4 (a struct to NVVM) some were split into four 4-byte stores (GluForward's and
        // GluBackward's) or two 8-byte ones (CrossEntropy's float). Storing with __stwb
        // (st.global.wb.v4) fixed that too but, as an asm with a memory clobber, took the bf16
        // LayerNorm backward from 128 registers to 169 (one block an SM, not two).
        uint32_t u[kBytes / 4];
        if constexpr (std::is_same_v<T, bf16> && std::is_same_v<U, float>) {
          // Two floats to a bf16 pair in one cvt.rn.bf16x2.f32: round to nearest even, as
          // float_to_bf16 (a NaN becomes the canonical NaN, where float_to_bf16 keeps its sign
          // and high payload bits); the software rounding costs about a dozen instructions an
          // element.
#pragma unroll
          for (int k = 0; k < kBytes / 4; ++k) {
            const __nv_bfloat162 h = __floats2bfloat162_rn(in[w * kEach + 2 * k], in[w * kEach + 2 * k + 1]);
            memcpy(&u[k], &h, 4);
          }
        } else {
#pragma unroll
          for (int j = 0; j < kEach; ++j) {
            const T t = from_acc<T>(in[w * kEach + j]);
            memcpy(reinterpret_cast<unsigned char*>(u) + j * sizeof(T), &t, sizeof(T));
          }
        }
        store_word<kBytes>(p, w, u);
      } else {
        W q;
        T* t = reinterpret_cast<T*>(&q);
#pragma unroll
        for (int j = 0; j < kEach; ++j) t[j] = from_acc<T>(in[w * kEach + j]);
        reinterpret_cast<W*>(p)[w] = q;
      }
    }
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
