// defines: bench::kernels::wgmma — the shared-memory layout and matrix descriptors of Hopper's
//          warpgroup MMA (wgmma.mma_async), shared by the wgmma flash forward
//          (flash_attention_wgmma_kernels.cuh) and the CPU warp emulator that decodes them
//          (tests/kernels/warp_emulator.h)
//
// PTX ISA 9.7.15.5.1.2, "Shared Memory Matrix Layout" and "Matrix Descriptor Format". A matrix in
// shared memory is made of core matrices of 8 rows of 16 bytes (8 bf16). Without swizzling (the
// "interleaved" mode, swizzle bits 0) a core matrix is 128 contiguous bytes, so the tensor core
// reads each in one wavefront of all 32 banks: no bank conflict by construction, which is why this
// layout is the one used here (128-byte swizzling, FlashAttention-3's, reaches the same for tiles
// that TMA writes row by row; with cp.async writing 16-byte chunks the interleaved layout needs no
// swizzle to be conflict-free). The canonical layouts, T = 8 bf16 per 16 bytes, in elements:
//   K-major  ((8, m), (T, 2k)) : ((T, SBO), (1, LBO))   row r, column c (c along K)
//   MN-major ((T, 1, m), (8, k)) : ((1, T, SBO), (T, LBO))   n along MN, k along K
// so K-major: LBO steps between the two core matrices along K of a k16 step, SBO between groups
// of 8 rows; MN-major: SBO steps between groups of 8 along N, LBO between groups of 8 along K.
//
// The tiles of this tree (`core_offset`): a tile of R rows of D elements stores core matrix
// (row / 8, column / 8) at ((row / 8) (D / 8) + column / 8) 128 bytes, row % 8 of it 16 bytes in.
// Chunk u of 16 bytes, with row 8 (u / D) + u % 8 and columns 8 ((u / 8) % (D / 8)), lands at
// byte 16 u: threads that copy consecutive chunks write consecutive bytes. The same bytes serve as
//   - K-major (rows = M or N, columns = K): LBO = 128, SBO = 16 D  (Q as A, K as B of Q K^T)
//   - MN-major (rows = K, columns = N):     LBO = 16 D, SBO = 128  (V as B of P V, keys as K)
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define BENCH_WGMMA_FN __host__ __device__ __forceinline__
#else
#define BENCH_WGMMA_FN inline
#endif

namespace bench::kernels::wgmma {

/// Swizzle modes of a descriptor's bits 62-63.
enum Swizzle : uint32_t { kNoSwizzle = 0, kSwizzle128 = 1, kSwizzle64 = 2, kSwizzle32 = 3 };

/// matrix-descriptor-encode(x) = (x & 0x3FFFF) >> 4: 14 bits of a 16-byte-aligned value.
BENCH_WGMMA_FN uint64_t encode(uint32_t x) { return static_cast<uint64_t>((x & 0x3FFFFu) >> 4); }

/// The 64-bit matrix descriptor: start address (bits 0-13), leading-dimension byte offset
/// (16-29), stride-dimension byte offset (32-45), base offset (49-51, 0 here: no swizzle, or
/// patterns that start on their 1024-byte boundary) and swizzle mode (62-63). `address` is the
/// shared-window address (cvta.to.shared), all three 16-byte aligned.
BENCH_WGMMA_FN uint64_t descriptor(uint32_t address, uint32_t lbo, uint32_t sbo, Swizzle swizzle = kNoSwizzle) {
  return encode(address) | encode(lbo) << 16 | encode(sbo) << 32 | static_cast<uint64_t>(swizzle) << 62;
}

/// Element offset of (row, column) in a tile of rows of D elements laid out as core matrices
/// (see above): ((row / 8) (D / 8) + column / 8) 64 + (row % 8) 8 + column % 8.
template <int D>
BENCH_WGMMA_FN int core_offset(int row, int column) {
  return ((row / 8) * (D / 8) + column / 8) * 64 + (row % 8) * 8 + column % 8;
}

/// Descriptor of the k16 step `kk` of a K-major operand whose rows start at `address` (a tile
/// of D-element rows in core_offset's layout, starting at a row that is a multiple of 8): the two
/// core matrices along K of the step are 128 bytes apart, groups of 8 rows 16 D bytes.
template <int D>
BENCH_WGMMA_FN uint64_t k_major(uint32_t address, int kk) {
  return descriptor(address + static_cast<uint32_t>(kk) * 256u, 128u, 16u * D);
}

/// Descriptor of the k16 step `kk` of an MN-major B operand (K = the tile's rows, N = its D
/// columns) in core_offset's layout: k rows 16 kk .. 16 kk + 15 start 2 groups of 8 rows (32 D
/// bytes) a step further; along K the groups are 16 D bytes apart (LBO), along N the core
/// matrices 128 bytes (SBO).
template <int D>
BENCH_WGMMA_FN uint64_t mn_major(uint32_t address, int kk) {
  return descriptor(address + static_cast<uint32_t>(kk) * 32u * D, 16u * D, 128u);
}

// --- 128-byte swizzle (the tiles TMA writes: flash_forward_wgmma's kTma variant) ---
//
// Source: PTX ISA 9.7.15.5.1.2 ("Shared Memory Matrix Layout": a swizzled operand is made of
// "swizzle layout atoms", for the 128-byte mode 8 rows of 128 bytes, 1024 bytes; "Matrix
// Descriptor Format": base offset 0 when the repeating pattern starts on a 1024-byte boundary)
// and the strides table of the same layouts (9.7.16.3, tcgen05's, which words them explicitly:
// K-major swizzled, the leading-dimension offset "not used, assumed to be 1"; MN-major swizzled,
// "stride from the first (swizzle-byte-size/16) rows to the next", i.e. between 64-element blocks
// along MN). TMA's 128-byte swizzle (CU_TENSOR_MAP_SWIZZLE_128B; cp.async.bulk.tensor, PTX ISA
// 9.7.9.25) writes the same pattern: in a destination aligned to 1024 bytes, the 16-byte chunk c
// of 128-byte row r lands at chunk c ^ (r % 8), i.e. address bits 4-6 ^= bits 7-9.
//
// The tiles here: a tile of R rows of D bf16 is D / 64 column blocks of R rows x 128 bytes (one
// TMA box of 64 columns each: the 128-byte swizzle spans 128 bytes at most), block c at
// c R 128 bytes; within a block, element (row, col) at row 128 + 2 col before the XOR
// (sw128_offset). The convention used by k_major_sw128 and mn_major_sw128, and decoded by the
// emulator (tests/kernels/wgmma_emulator.h, wgmma_element_address):
//   K-major (rows = M or N, K along the 64 columns of a block; Q and K of S = Q K^T):
//     address(mn, k) = start + (mn % 8) 128 + (mn / 8) SBO + 2 k, then the XOR; SBO = 1024 (the
//     next 8 rows), LBO unused (encoded as 16 bytes: "assumed 1"). k16 step kk starts at column
//     block kk / 4, 32 (kk % 4) bytes into the row: the start address advances inside the atom,
//     and since the XOR is of the address bits, base offset 0 stays right (CUTLASS and DeepGEMM
//     advance it the same way).
//   MN-major (rows = K, MN along the columns; V as the B of O = P V, the transpose bit):
//     address(mn, k) = start + 2 (mn % 64) + (mn / 64) LBO + (k % 8) 128 + (k / 8) SBO, then the
//     XOR; LBO = R 128 (the next column block), SBO = 1024 (the next 8 rows of K). k16 step kk
//     starts 16 kk rows (2048 kk bytes) in.
// tests/kernels/tma_emulation_test.cpp shows that an SBO off by one atom or the XOR dropped fails.

/// Bytes of one 128-byte swizzle atom (8 rows of 128 bytes): the alignment of a swizzled tile.
constexpr uint32_t kSw128Atom = 1024;

/// Byte offset of (row, column) in a tile of kRows rows in the 128-byte swizzle above (column
/// block column / 64), relative to a 1024-byte aligned start.
template <int kRows>
BENCH_WGMMA_FN uint32_t sw128_offset(int row, int column) {
  const auto linear = static_cast<uint32_t>((column / 64) * kRows * 128 + row * 128 + (column % 64) * 2);
  return linear ^ (((linear >> 7) & 7u) << 4);
}

/// Descriptor of the k16 step `kk` of a K-major operand in a tile of kRows rows in the 128-byte
/// swizzle, whose rows start at `address` (1024-byte aligned plus a multiple of 8 rows).
template <int kRows>
BENCH_WGMMA_FN uint64_t k_major_sw128(uint32_t address, int kk) {
  return descriptor(address + static_cast<uint32_t>(kk / 4) * kRows * 128u + static_cast<uint32_t>(kk % 4) * 32u, 16u,
                    kSw128Atom, kSwizzle128);
}

/// Descriptor of the k16 step `kk` of an MN-major B operand (K = the tile's kRows rows, N = its
/// columns) in the 128-byte swizzle, the tile at `address` (1024-byte aligned).
template <int kRows>
BENCH_WGMMA_FN uint64_t mn_major_sw128(uint32_t address, int kk) {
  return descriptor(address + static_cast<uint32_t>(kk) * 2048u, kRows * 128u, kSw128Atom, kSwizzle128);
}

}  // namespace bench::kernels::wgmma
