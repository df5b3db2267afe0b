// defines: bench::kernels::tma::TensorMapArgs, flash_tensor_map — the arguments of a TMA tensor
//          map (cuTensorMapEncodeTiled's, CUDA driver API 6.30 "Tensor Map Object Management")
//          for the flash forward's K/V and Q tiles, derived from the attention shapes by one pure
//          function that the GPU launch (flash_attention_wgmma.cu, which encodes them) and the CPU
//          emulator's TMA (tests/kernels/warp_emulator.h, which reads them) both call
//
// Plain C++ (no CUDA header): the enums carry the values of the driver's CUtensorMap* enums, which
// flash_attention_wgmma.cu static_asserts against <cuda.h>.
#pragma once

#include <cstdint>

namespace bench::kernels::tma {

/// The values of CUtensorMapSwizzle, CUtensorMapInterleave, CUtensorMapL2promotion and
/// CUtensorMapFloatOOBfill that the flash forward uses (and the data type, bf16).
constexpr uint32_t kDataTypeBfloat16 = 9;  // CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
constexpr uint32_t kInterleaveNone = 0;    // CU_TENSOR_MAP_INTERLEAVE_NONE
constexpr uint32_t kSwizzle128B = 3;       // CU_TENSOR_MAP_SWIZZLE_128B
constexpr uint32_t kL2Promotion128B = 2;   // CU_TENSOR_MAP_L2_PROMOTION_L2_128B
constexpr uint32_t kOobFillNone = 0;       // CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE: out-of-bounds elements read as zeros

/// cuTensorMapEncodeTiled's arguments but the map itself: dims[0] the innermost (contiguous)
/// dimension, strides[i] the byte stride of dimension i + 1 (rank - 1 of them), box[i] the
/// elements a load copies along dimension i, element_strides[i] the step between them.
struct TensorMapArgs {
  uint32_t data_type = kDataTypeBfloat16;
  uint32_t rank = 0;
  const void* global = nullptr;
  uint64_t dims[5] = {};
  uint64_t strides[4] = {};
  uint32_t box[5] = {};
  uint32_t element_strides[5] = {};
  uint32_t interleave = kInterleaveNone;
  uint32_t swizzle = kSwizzle128B;
  uint32_t l2_promotion = kL2Promotion128B;
  uint32_t oob_fill = kOobFillNone;
  uint32_t element_bytes = 2;
};

/// Columns and rows of one box of the flash forward: 64 bf16 (128 bytes, the widest row the
/// 128-byte swizzle takes) of 64 rows (kBlockN keys, half of the 128 queries of a block; a tile of
/// 128 keys, the warp-specialized forward's, is two boxes a column block).
constexpr uint32_t kFlashBoxColumns = 64, kFlashBoxRows = 64;

/// The tensor map of the flash forward's qkv ([batch, time, n_heads + 2 n_kv, d_head] bf16 rows,
/// q heads first, then the K heads, then the V heads): rank 4, dimensions (d_head, heads, time,
/// batch) innermost first, a box of (64 columns, 1 head, 64 rows, 1 batch). Time is a dimension
/// of its own (not folded with the batch), so that the rows of a tile past its sequence's end are
/// out of bounds, zeros, not the next sequence's first rows. Element strides 1, no interleave,
/// the 128-byte swizzle, L2 promotion of 128 bytes, out-of-bounds elements zeros. The wgmma
/// backward's TMA variant takes Q from this map of qkv and dO from the map of dout ([batch, time,
/// n_heads, d_head]) as n_kv 0 makes it.
inline TensorMapArgs flash_tensor_map(const void* qkv, int64_t batch, int64_t seq, int n_heads, int n_kv, int d_head) {
  TensorMapArgs m;
  m.rank = 4;
  m.global = qkv;
  const uint64_t heads = static_cast<uint64_t>(n_heads) + 2 * static_cast<uint64_t>(n_kv);
  m.dims[0] = static_cast<uint64_t>(d_head);
  m.dims[1] = heads;
  m.dims[2] = static_cast<uint64_t>(seq);
  m.dims[3] = static_cast<uint64_t>(batch);
  m.strides[0] = static_cast<uint64_t>(d_head) * m.element_bytes;
  m.strides[1] = heads * m.strides[0];
  m.strides[2] = static_cast<uint64_t>(seq) * m.strides[1];
  m.box[0] = kFlashBoxColumns;
  m.box[1] = 1;
  m.box[2] = kFlashBoxRows;
  m.box[3] = 1;
  for (uint32_t i = 0; i < m.rank; ++i) m.element_strides[i] = 1;
  return m;
}

/// Bytes one box copies (out-of-bounds elements included: they are written, as zeros, and count
/// toward the mbarrier's transaction bytes).
inline uint32_t box_bytes(const TensorMapArgs& m) {
  uint32_t n = m.element_bytes;
  for (uint32_t i = 0; i < m.rank; ++i) n *= m.box[i];
  return n;
}

}  // namespace bench::kernels::tma
