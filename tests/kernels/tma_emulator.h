// defines: bench::kernels::emulator::TmaChunk, tma_box — what a TMA tensor load
//          (cp.async.bulk.tensor.Nd.shared::cluster.global, PTX ISA 9.7.9.25) writes into shared
//          memory, for the warp emulator (warp_emulator.h: EmulatedThread::tma_load_4d, which
//          owns the mbarrier side: transaction counts, the destination's poison until its phase)
//
// The box at element coordinates c (innermost first) of a tensor described by the arguments of
// cuTensorMapEncodeTiled (kernels/cuda/tma_map.h, the very ones the GPU's map is encoded from):
// elements outside [0, dims) are zeros (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE), the box is laid out
// dimension 0 fastest, and in the 128-byte swizzle the 16-byte chunk at address a lands at
// a ^ ((a >> 7) & 7) << 4: chunk c of 128-byte row r at c ^ (r % 8) in a 1024-byte aligned
// destination. Only what the flash forward uses is emulated (2-byte elements, the 128-byte swizzle
// of 128-byte box rows, no interleave, element strides 1); anything else is a violation.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "cuda/tma_map.h"
#include "cuda/wgmma_layout.cuh"
#include "wgmma_emulator.h"

namespace bench::kernels::emulator {

/// 16 bytes of a TMA load, where they land in shared memory (swizzle applied).
struct TmaChunk {
  uint32_t at;
  uint8_t data[16];
};

/// Appends the box's chunks, in the order of the box (dimension 0 fastest), to `out` and returns
/// its bytes (out-of-bounds elements included: written as zeros, they count toward the mbarrier's
/// transaction bytes); 0 and a violation in `error` for what is not emulated, or a destination
/// that is not 1024-byte aligned or runs past `shared_bytes`.
inline uint64_t tma_box(const tma::TensorMapArgs& map, const int* c, uint32_t rank, uint32_t dst, size_t shared_bytes,
                        std::vector<TmaChunk>& out, std::string& error) {
  if (map.rank != rank || rank > 5 || map.element_bytes != 2) {
    wgmma_error(error, "cp.async.bulk.tensor: the map's rank differs from the instruction's (or not 2-byte elements)");
    return 0;
  }
  if (map.swizzle != tma::kSwizzle128B || map.interleave != tma::kInterleaveNone ||
      map.box[0] * map.element_bytes != 128) {
    wgmma_error(error, "cp.async.bulk.tensor: only the 128-byte swizzle of 128-byte rows, no interleave, is emulated");
    return 0;
  }
  uint64_t elements = 1;
  for (uint32_t i = 0; i < rank; ++i) {
    if (map.element_strides[i] != 1) {
      wgmma_error(error, "cp.async.bulk.tensor: element strides other than 1 are not emulated");
      return 0;
    }
    elements *= map.box[i];
  }
  const uint64_t bytes = elements * map.element_bytes;
  if (dst % wgmma::kSw128Atom != 0 || dst + bytes > shared_bytes) {
    wgmma_error(error,
                "cp.async.bulk.tensor: a 128-byte swizzled destination not 1024-byte aligned, or past shared memory");
    return 0;
  }
  const auto* global = static_cast<const uint8_t*>(map.global);
  for (uint64_t at = 0; at < bytes; at += 16) {
    TmaChunk chunk{};
    for (uint64_t e = at / 2; e < at / 2 + 8; ++e) {
      // The element's coordinates in the box (dimension 0 fastest), then in the tensor.
      uint64_t rest = e, offset = 0;
      bool inside = true;
      for (uint32_t i = 0; i < rank; ++i) {
        const int64_t x = c[i] + static_cast<int64_t>(rest % map.box[i]);
        rest /= map.box[i];
        inside = inside && x >= 0 && static_cast<uint64_t>(x) < map.dims[i];
        offset += static_cast<uint64_t>(x) * (i == 0 ? map.element_bytes : map.strides[i - 1]);
      }
      if (inside) std::memcpy(chunk.data + (e % 8) * 2, global + offset, 2);
    }
    const auto linear = static_cast<uint32_t>(dst + at);
    chunk.at = linear ^ (((linear >> 7) & 7u) << 4);
    out.push_back(chunk);
  }
  return bytes;
}

}  // namespace bench::kernels::emulator
