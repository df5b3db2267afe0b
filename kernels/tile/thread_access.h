// defines: bench::tile::ThreadAccess
//
// One thread's part of the CUDA executor's memory verbs: which of a tile's elements it moves,
// when a run goes as one vector access and when element by element (alignment, the tile's end, a
// row's end), how tl::rows walks a run across rows, how bf16 is packed two to a word and
// unpacked, and what a tail reads. The CUDA executor (tile/cuda_executor.cuh) calls it with
// lane = threadIdx.x; the emulated-block executor (tile/emulated_executor.h) calls it for every
// lane in turn on the CPU. So CI runs the GPU's own addressing and branches, not a restatement of
// them: a slip here fails the emulated target's tests.
//
// Only the machine's primitives differ between the two: a vector access of 4, 8 or 16 bytes
// (device: one load or store of uint32_t, uint2, uint4 or unsigned __int128; host: memcpy of as
// many bytes, and a misaligned one stops the process as it stops a kernel), a word's bits as a float (__uint_as_float;
// memcpy), and two floats to a bf16 pair (cvt.rn.bf16x2.f32 through __floats2bfloat162_rn; on the host round to nearest
// even with a NaN as the canonical 0x7fff, as cuda_bf16.h's own software conversion gives it). Where a run is not one
// access, float_to_bf16 rounds each element on both (a NaN keeps its sign and payload there): the emulated target sees
// the same bits as the GPU on either path.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <type_traits>

#include "defs.h"
#include "layout.h"

#if defined(__CUDA_ARCH__)
#include <cuda_bf16.h>
#endif

namespace bench::tile {

namespace detail {
#if defined(__CUDA_ARCH__)
/// The unsigned word of `Bytes` bytes that a vector access moves (device code).
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
/// as an unsigned __int128, ThreadAccess::store_word).
template <class W>
__device__ __forceinline__ W make_word(const uint32_t* u) {
  if constexpr (std::is_same_v<W, uint2>) {
    return make_uint2(u[0], u[1]);
  } else {
    return u[0];
  }
}
#endif

#if !defined(__CUDA_ARCH__)
/// A vector access of `bytes` at p: on the GPU one not aligned to its size stops the kernel
/// ("misaligned address"); emulated, it stops the process with that message.
inline void check_aligned(const void* p, int bytes) {
  if (reinterpret_cast<uintptr_t>(p) % static_cast<uintptr_t>(bytes) == 0) return;
  std::fprintf(stderr, "emulated CUDA fault: misaligned address (a %d-byte access at %p)\n", bytes, p);
  std::abort();
}
#endif

/// A word's bits as a float.
BENCH_HD BENCH_FORCEINLINE float bits_as_float(uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
#endif
}

/// Two floats as a bf16 pair, `lo` in the low half, each rounded to nearest even.
BENCH_HD BENCH_FORCEINLINE uint32_t bf16x2_rn(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  uint32_t u;
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  memcpy(&u, &h, 4);
  return u;
#else
  const auto half = [](float f) -> uint32_t {
    uint32_t b;
    memcpy(&b, &f, sizeof b);
    if ((b & 0x7fffffffU) > 0x7f800000U) return 0x7fffU;  // any NaN: the canonical one
    return float_to_bf16(f).bits;
  };
  return half(lo) | half(hi) << 16;
#endif
}
}  // namespace detail

/// The per-thread code of the CUDA executor's loads and stores, for blocks of TH threads and
/// runs of Run elements (tile/layout.h). Every function takes the thread's `lane` and its
/// kPer = Layout<N, TH, Run>::kPer registers of the tile (or kPer / 2 words of a packed bf16 one).
template <int TH, int Run = 4>
struct ThreadAccess {
  /// tl::rows for one thread: each of its runs' row and column (a division each, computed once
  /// for every access in this geometry), and whether the run moves as one access: it lies in one
  /// row (col + kVec <= width) and below n; the alignment, which depends on the base, is tested
  /// at each access.
  template <int N>
  struct Rows {
    static constexpr int kRuns = Layout<N, TH, Run>::kPer / Layout<N, TH, Run>::kVec;
    int64_t row[kRuns];
    int64_t col[kRuns];
    bool whole[kRuns];  ///< one_access's row and bounds tests, held where a thread has 2 runs or more
    int64_t width;
    int64_t n;
  };

  template <int N, class Lane>
  BENCH_HD static Rows<N> rows(Lane lane, int64_t width, int64_t first, int64_t n) {
    using L = Layout<N, TH, Run>;
    Rows<N> r;
    r.width = width;
    r.n = n;
    BENCH_UNROLL
    for (int k = 0; k < Rows<N>::kRuns; ++k) {
      const int e = L::element(lane, k * L::kVec);
      split_row(first + e, width, r.row[k], r.col[k]);
      if constexpr (Rows<N>::kRuns >= 2) r.whole[k] = r.col[k] + L::kVec <= width && e + L::kVec <= n;
    }
    return r;
  }

  /// The thread's elements e < n of p as bf16 words, two to a word, 0 at or past n.
  template <int N, class Lane>
  BENCH_HD static void load_packed(Lane lane, const bf16* p, int64_t n, uint32_t* raw) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int e = L::element(lane, i);
      if (vector_ok<bf16, L::kVec>(p + e) && e + L::kVec <= n) {
        load_raw<L::kVec>(p + e, &raw[i / 2]);
      } else {
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j) set_half(raw, i + j, e + j < n ? p[e + j].bits : uint16_t{0});
      }
    }
  }

  /// The thread's elements e < n of p, `other` at or past n.
  template <int N, class T, class Lane>
  BENCH_HD static void load(Lane lane, const T* p, int64_t n, acc_t<T> other, acc_t<T>* v) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int e = L::element(lane, i);
      if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {
        load_vec<T, L::kVec>(p + e, &v[i]);
      } else {
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j) v[i + j] = e + j < n ? to_acc(p[e + j]) : other;
      }
    }
  }

  // A run starts at a multiple of kVec within the tile; it moves as one access when at.whole and
  // aligned, else element by element.
  template <int N, class Lane>
  BENCH_HD static void load_rows_packed(Lane lane, const bf16* p, int64_t stride, const Rows<N>& at, uint32_t* raw) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int k = i / L::kVec;
      const bf16* q = p + at.row[k] * stride + at.col[k];
      if (one_access<bf16, N>(at, k, L::element(lane, i), q)) {
        load_raw<L::kVec>(q, &raw[i / 2]);
      } else {
        const int e = L::element(lane, i);
        int64_t col = at.col[k];
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j, ++col, ++q) {  // the run's elements, row by row: no division
          if (col == at.width) q += stride - at.width, col = 0;
          set_half(raw, i + j, e + j < at.n ? q->bits : uint16_t{0});
        }
      }
    }
  }

  template <class T, int N, class Lane>
  BENCH_HD static void load_rows(Lane lane, const T* p, int64_t stride, const Rows<N>& at, acc_t<T> other,
                                 acc_t<T>* v) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int k = i / L::kVec;
      const T* q = p + at.row[k] * stride + at.col[k];
      if (one_access<T, N>(at, k, L::element(lane, i), q)) {
        load_vec<T, L::kVec>(q, &v[i]);
      } else {
        const int e = L::element(lane, i);
        int64_t col = at.col[k];
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j, ++col, ++q) {  // the run's elements, row by row: no division
          if (col == at.width) q += stride - at.width, col = 0;
          v[i + j] = e + j < at.n ? to_acc(*q) : other;
        }
      }
    }
  }

  template <class T, class U, int N, class Lane>
  BENCH_HD static void store_rows(Lane lane, T* p, int64_t stride, const Rows<N>& at, const U* x) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int k = i / L::kVec;
      T* q = p + at.row[k] * stride + at.col[k];
      if (one_access<T, N>(at, k, L::element(lane, i), q)) {
        store_vec<T, L::kVec>(q, &x[i]);
      } else {
        const int e = L::element(lane, i);
        int64_t col = at.col[k];
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j, ++col, ++q) {  // the run's elements, row by row: no division
          if (col == at.width) q += stride - at.width, col = 0;
          if (e + j < at.n) *q = from_acc<T>(x[i + j]);
        }
      }
    }
  }

  template <class T, int N, class Lane>
  BENCH_HD static void gather(Lane lane, const T* p, const int* idx, int64_t n, acc_t<T> other, acc_t<T>* v) {
    BENCH_UNROLL
    for (int i = 0; i < Layout<N, TH, Run>::kPer; ++i)
      v[i] = Layout<N, TH, Run>::element(lane, i) < n ? to_acc(p[idx[i]]) : other;
  }

  template <class T, class U, int N, class Lane>
  BENCH_HD static void store(Lane lane, T* p, const U* x, int64_t n) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int e = L::element(lane, i);
      if (vector_ok<T, L::kVec>(p + e) && e + L::kVec <= n) {
        store_vec<T, L::kVec>(p + e, &x[i]);
      } else {
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j)
          if (e + j < n) p[e + j] = from_acc<T>(x[i + j]);
      }
    }
  }

  /// A packed tile stored as bf16 to its first n elements: each run's words as loaded (a copy's
  /// unpack and cvt.rn.bf16x2 skipped); at or past x.n the tile reads x.other, rounded as a
  /// float's store rounds it. X: the thread's part of a Packed tile (its words, n, other, bits).
  template <int N, class X, class Lane>
  BENCH_HD static void store_packed(Lane lane, bf16* p, const X& x, int64_t n) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int e = L::element(lane, i);
      if (vector_ok<bf16, L::kVec>(p + e) && e + L::kVec <= n && e + L::kVec <= x.n) {
        constexpr int kBytes = kWord<bf16, L::kVec>;
        BENCH_UNROLL
        for (int w = 0; w < L::kVec * 2 / kBytes; ++w) store_word<kBytes>(p + e, w, &x.words[i / 2 + w * (kBytes / 4)]);
      } else {
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j)
          if (e + j < n) p[e + j] = e + j < x.n ? bf16{x.bits(i + j)} : from_acc<bf16>(x.other);
      }
    }
  }

  /// The thread's raw words of a packed tile as floats (the low half shifted up, the high one
  /// masked: exact), and `other` for its elements at or past n (Packed's conversion).
  template <int N, class Lane>
  BENCH_HD static void unpack(Lane lane, const uint32_t* raw, int64_t n, float other, float* v) {
    using L = Layout<N, TH, Run>;
    BENCH_UNROLL
    for (int k = 0; k < L::kPer / 2; ++k) {
      // NOLINTNEXTLINE(bugprone-implicit-widening-of-multiplication-result): k < kPer, an index
      v[2 * k] = detail::bits_as_float(raw[k] << 16);
      v[2 * k + 1] = detail::bits_as_float(raw[k] & 0xffff0000u);
    }
    BENCH_UNROLL
    for (int i = 0; i < L::kPer; i += L::kVec) {
      const int e = L::element(lane, i);
      if (e + L::kVec > n) {
        BENCH_UNROLL
        for (int j = 0; j < L::kVec; ++j)
          if (e + j >= n) v[i + j] = other;
      }
    }
  }

 private:
  // Whether run k of the thread (tile element e) at q moves as one access: it lies in one row,
  // is aligned and below n. With 2 runs a thread or more, the row and bounds tests are held from
  // tl::rows (RopeHalf tested at each access: float 4096 142 registers and one block an SM, 128
  // and two held; bf16 4096 spilled 4 bytes), else tested at each access (held, bf16's 768-wide
  // RopeHalf spilled 12 bytes at its 9 blocks an SM; tested, 72 registers and none).
  template <class T, int N, class Q>
  BENCH_HD static bool one_access(const Rows<N>& at, int k, int e, Q* q) {
    constexpr int kVec = Layout<N, TH, Run>::kVec;
    if constexpr (Rows<N>::kRuns >= 2) {
      return at.whole[k] && vector_ok<T, kVec>(q);
    } else {
      return at.col[k] + kVec <= at.width && vector_ok<T, kVec>(q) && e + kVec <= at.n;
    }
  }

  // Row and column of flat element f in rows of `width`: one 32-bit division where both fit (a
  // 64-bit division is a software routine of some 70 instructions), 64-bit otherwise; tl::rows
  // calls it once a run for all the accesses in its geometry. Its divisor is width's low half,
  // not zero for any width below 2^32 (a row of 4 G elements).
  BENCH_HD static void split_row(int64_t f, int64_t width, int64_t& row, int64_t& col) {
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
  BENCH_HD static void set_half(uint32_t* raw, int k, uint16_t bits) {
    if (k % 2 == 0) {
      raw[k / 2] = bits;
    } else {
      raw[k / 2] |= static_cast<uint32_t>(bits) << 16;
    }
  }

  template <class T, int V>
  BENCH_HD static bool vector_ok(const T* p) {
    constexpr int kBytes = kWord<T, V>;
    return kBytes >= 4 && (kBytes & (kBytes - 1)) == 0 && reinterpret_cast<uintptr_t>(p) % kBytes == 0;
  }

  // Word w of kBytes (4, 8 or 16) at p as its 32-bit components.
  template <int kBytes, class T>
  BENCH_HD BENCH_FORCEINLINE static void load_word(const T* p, int w, uint32_t* u) {
#if defined(__CUDA_ARCH__)
    using W = typename detail::Word<kBytes>::type;
    const W q = reinterpret_cast<const W*>(p)[w];
    memcpy(u, &q, kBytes);
#else
    detail::check_aligned(p, kBytes);
    memcpy(u, reinterpret_cast<const unsigned char*>(p) + static_cast<ptrdiff_t>(w) * kBytes, kBytes);
#endif
  }

  // A run of V bf16 at p (aligned) into V / 2 raw words, as kWord-byte accesses.
  template <int V>
  BENCH_HD static void load_raw(const bf16* p, uint32_t* raw) {
    constexpr int kBytes = kWord<bf16, V>;
    BENCH_UNROLL
    // NOLINTNEXTLINE(bugprone-implicit-widening-of-multiplication-result): w < 4, an index
    for (int w = 0; w < V * 2 / kBytes; ++w) load_word<kBytes>(p, w, raw + w * (kBytes / 4));
  }

  template <class T, int V>
  BENCH_HD static void load_vec(const T* p, acc_t<T>* out) {
    constexpr int kBytes = kWord<T, V>;
    constexpr int kEach = kBytes / static_cast<int>(sizeof(T));  // elements per word
    static_assert(V % kEach == 0, "a run is a whole number of words");
    BENCH_UNROLL
    for (int w = 0; w < V / kEach; ++w) {
      if constexpr (std::is_same_v<T, bf16> && kBytes >= 4) {
        // Two bf16 a 32-bit word: the low one shifted up, the high one masked, one instruction each.
        uint32_t u[kBytes / 4];
        load_word<kBytes>(p, w, u);
        BENCH_UNROLL
        for (int k = 0; k < kBytes / 4; ++k) {
          out[w * kEach + 2 * k] = detail::bits_as_float(u[k] << 16);
          out[w * kEach + 2 * k + 1] = detail::bits_as_float(u[k] & 0xffff0000u);
        }
      } else {
#if defined(__CUDA_ARCH__)
        using W = typename detail::Word<kBytes>::type;
        static_assert(sizeof(W) == kBytes, "a word of kBytes");
        const W q = reinterpret_cast<const W*>(p)[w];
        const T* t = reinterpret_cast<const T*>(&q);
#else
        detail::check_aligned(p, kBytes);
        T t[kEach];
        memcpy(t, reinterpret_cast<const unsigned char*>(p) + static_cast<ptrdiff_t>(w) * kBytes, kBytes);
#endif
        BENCH_UNROLL
        for (int j = 0; j < kEach; ++j) out[w * kEach + j] = to_acc(t[j]);
      }
    }
  }

  // Word w of kBytes (4, 8 or 16) at p, from its 32-bit components (why so, and why a 16-byte one
  // as an unsigned __int128: store_vec).
  template <int kBytes, class T>
  BENCH_HD static void store_word(T* p, int w, const uint32_t* u) {
#if defined(__CUDA_ARCH__)
    if constexpr (kBytes == 16) {
      using U128 = unsigned __int128;
      reinterpret_cast<U128*>(p)[w] = U128{u[0]} | (U128{u[1]} << 32) | (U128{u[2]} << 64) | (U128{u[3]} << 96);
    } else {
      using W = typename detail::Word<kBytes>::type;
      reinterpret_cast<W*>(p)[w] = detail::make_word<W>(u);
    }
#else
    detail::check_aligned(p, kBytes);
    memcpy(reinterpret_cast<unsigned char*>(p) + static_cast<ptrdiff_t>(w) * kBytes, u, kBytes);
#endif
  }

  template <class T, int V, class U>
  BENCH_HD static void store_vec(T* p, const U* in) {
    constexpr int kBytes = kWord<T, V>;
    constexpr int kEach = kBytes / static_cast<int>(sizeof(T));
    static_assert(V % kEach == 0, "a run is a whole number of words");
    BENCH_UNROLL
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
          BENCH_UNROLL
          for (int k = 0; k < kBytes / 4; ++k)
            u[k] = detail::bf16x2_rn(in[w * kEach + 2 * k], in[w * kEach + 2 * k + 1]);
        } else {
          BENCH_UNROLL
          for (int j = 0; j < kEach; ++j) {
            const T t = from_acc<T>(in[w * kEach + j]);
            memcpy(reinterpret_cast<unsigned char*>(u) + j * sizeof(T), &t, sizeof(T));
          }
        }
        store_word<kBytes>(p, w, u);
      } else {
        // A run narrower than 4 bytes (one bf16): never aligned enough for vector_ok, so never
        // reached; it stores element by element as the fallback does.
        BENCH_UNROLL
        for (int j = 0; j < V; ++j) p[j] = from_acc<T>(in[j]);
      }
    }
  }
};

}  // namespace bench::tile
