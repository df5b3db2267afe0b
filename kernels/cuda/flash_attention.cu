// Flash attention forward (kernels/cuda/flash_attention.cuh). One thread block of 4 warps takes 64
// queries of one (batch, head); each warp owns 16 of them. For every tile of 64 keys the block
// stages K and V in shared memory, each warp computes its 16 x 64 scores with mma.sync, masks,
// soft-caps and folds them into a running max and sum (online softmax), and accumulates P V with
// mma.sync again, the probabilities going from the score accumulators straight into A fragments.
//
// Fragment layouts of mma.sync.m16n8k16 (PTX ISA, "Matrix fragments for mma.m16n8k16"), with
// g = lane / 4 and t = lane % 4: A (16x16, row-major) a0 = (g, 2t..2t+1), a1 = (g+8, 2t..),
// a2 = (g, 2t+8..), a3 = (g+8, 2t+8..); B (16x8, k x n) b0 = (k 2t..2t+1, n g), b1 = (k 2t+8.., n g);
// C (16x8) c0,c1 = (g, 2t..2t+1), c2,c3 = (g+8, 2t..2t+1). Two bf16 per 32-bit register, the lower
// index in the lower half.
#include <cstdint>

#include "flash_attention.cuh"

namespace bench::kernels::cuda {

namespace {

constexpr int kBlockM = 64;  // queries per block
constexpr int kBlockN = 64;  // keys per tile
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;

__device__ __forceinline__ uint32_t pack(uint16_t lo, uint16_t hi) {
  return static_cast<uint32_t>(lo) | (static_cast<uint32_t>(hi) << 16);
}

__device__ __forceinline__ uint32_t pack_floats(float lo, float hi) {
  return pack(tile::float_to_bf16(lo).bits, tile::float_to_bf16(hi).bits);
}

__device__ __forceinline__ void mma_bf16(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/// Copies rows [row0, row0 + 64) of one head (d elements at `col` of rows `width` apart) into
/// shared memory, zeros past the sequence's end. 16-byte accesses: head offsets are multiples of
/// 8 elements (d is 64 or 128) and rows are 16-byte aligned when the base pointer is.
template <int D>
__device__ void load_tile(uint16_t (*dst)[D], const uint16_t* base, int64_t row0, int64_t rows, int64_t width) {
  constexpr int kChunks = D / 8;  // 8 bf16 = 16 bytes
  for (int c = threadIdx.x; c < kBlockM * kChunks; c += kThreads) {
    const int r = c / kChunks, k = (c % kChunks) * 8;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (row0 + r < rows) v = *reinterpret_cast<const uint4*>(base + (row0 + r) * width + k);
    *reinterpret_cast<uint4*>(&dst[r][k]) = v;
  }
}

template <int D>
__global__ void __launch_bounds__(kThreads)
    flash_forward(const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out, float* __restrict__ row_max,
                  float* __restrict__ lse, int64_t n_t, int n_h, int n_kv, float scale, float softcap, int64_t window,
                  bool causal) {
  __shared__ __align__(16) uint16_t q_s[kBlockM][D];
  __shared__ __align__(16) uint16_t k_s[kBlockN][D];
  __shared__ __align__(16) uint16_t v_s[kBlockN][D];

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int64_t m0 = static_cast<int64_t>(blockIdx.x) * kBlockM;
  const int bh = blockIdx.y, b = bh / n_h, h = bh % n_h, kv = h / (n_h / n_kv);
  const int64_t width = static_cast<int64_t>(n_h + 2 * n_kv) * D;
  const uint16_t* seq = qkv + static_cast<int64_t>(b) * n_t * width;

  load_tile<D>(q_s, seq + static_cast<int64_t>(h) * D, m0, n_t, width);

  // This thread's two query rows (g and g + 8 of its warp's 16), their running max and sum.
  const int64_t qi[2] = {m0 + warp * 16 + g, m0 + warp * 16 + g + 8};
  float m[2] = {-INFINITY, -INFINITY}, l[2] = {0.f, 0.f};
  float o[D / 8][4];
#pragma unroll
  for (int i = 0; i < D / 8; ++i) o[i][0] = o[i][1] = o[i][2] = o[i][3] = 0.f;

  // Key tiles this block needs: up to its last query (causal), from its first query's window.
  const int64_t block_end = m0 + kBlockM < n_t ? m0 + kBlockM : n_t;
  const int64_t n_end = causal ? block_end : n_t;
  const int64_t first_key = window > 0 && m0 + 1 - window > 0 ? m0 + 1 - window : 0;
  const int64_t n_begin = first_key / kBlockN * kBlockN;
  for (int64_t n0 = n_begin; n0 < n_end; n0 += kBlockN) {
    __syncthreads();  // the previous tile's K and V are no longer read
    load_tile<D>(k_s, seq + static_cast<int64_t>(n_h + kv) * D, n0, n_t, width);
    load_tile<D>(v_s, seq + static_cast<int64_t>(n_h + n_kv + kv) * D, n0, n_t, width);
    __syncthreads();

    // S = Q K^T for this warp's 16 queries and the tile's 64 keys: 8 accumulators of 16 x 8.
    float s[kBlockN / 8][4];
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j) s[j][0] = s[j][1] = s[j][2] = s[j][3] = 0.f;
#pragma unroll
    for (int kk = 0; kk < D / 16; ++kk) {
      const int r = warp * 16 + g, c = kk * 16 + 2 * t;
      const uint32_t a[4] = {
          *reinterpret_cast<const uint32_t*>(&q_s[r][c]), *reinterpret_cast<const uint32_t*>(&q_s[r + 8][c]),
          *reinterpret_cast<const uint32_t*>(&q_s[r][c + 8]), *reinterpret_cast<const uint32_t*>(&q_s[r + 8][c + 8])};
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) {
        const int key = j * 8 + g;
        mma_bf16(s[j], a, *reinterpret_cast<const uint32_t*>(&k_s[key][c]),
                 *reinterpret_cast<const uint32_t*>(&k_s[key][c + 8]));
      }
    }

    // Scale, soft-cap, mask; the tile's row maxima.
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e / 2;
        const int64_t key = n0 + j * 8 + 2 * t + (e % 2), query = qi[row];
        float x = s[j][e] * scale;
        if (softcap > 0.f) x = softcap * tanhf(x / softcap);
        const bool visible = key < n_t && (!causal || key <= query) && (window <= 0 || key > query - window);
        s[j][e] = visible ? x : -INFINITY;
        tile_max[row] = fmaxf(tile_max[row], s[j][e]);
      }
    float alpha[2];
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      // The four threads of a quad hold one row between them.
      tile_max[row] = fmaxf(tile_max[row], __shfl_xor_sync(0xffffffffu, tile_max[row], 1));
      tile_max[row] = fmaxf(tile_max[row], __shfl_xor_sync(0xffffffffu, tile_max[row], 2));
      const float m_new = fmaxf(m[row], tile_max[row]);
      // A row with nothing visible yet keeps max -inf: exponentiate against 0 so that no NaN appears.
      alpha[row] = m_new == -INFINITY ? 1.f : __expf(m[row] - m_new);
      m[row] = m_new;
    }
#pragma unroll
    for (int j = 0; j < kBlockN / 8; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int row = e / 2;
        const float base = m[row] == -INFINITY ? 0.f : m[row];
        s[j][e] = __expf(s[j][e] - base);  // exp(-inf) = 0 for masked keys
      }
#pragma unroll
    for (int row = 0; row < 2; ++row) {
      float sum = 0.f;
#pragma unroll
      for (int j = 0; j < kBlockN / 8; ++j) sum += s[j][2 * row] + s[j][2 * row + 1];
      l[row] = l[row] * alpha[row] + sum;  // this thread's share; the quad's shares are added at the end
    }
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      o[i][0] *= alpha[0];
      o[i][1] *= alpha[0];
      o[i][2] *= alpha[1];
      o[i][3] *= alpha[1];
    }

    // O += P V: P's accumulators of keys 16 ks .. 16 ks + 15 are exactly an A fragment.
#pragma unroll
    for (int ks = 0; ks < kBlockN / 16; ++ks) {
      const uint32_t a[4] = {pack_floats(s[2 * ks][0], s[2 * ks][1]), pack_floats(s[2 * ks][2], s[2 * ks][3]),
                             pack_floats(s[2 * ks + 1][0], s[2 * ks + 1][1]),
                             pack_floats(s[2 * ks + 1][2], s[2 * ks + 1][3])};
      const int key = ks * 16 + 2 * t;
#pragma unroll
      for (int i = 0; i < D / 8; ++i) {
        const int d = i * 8 + g;
        mma_bf16(o[i], a, pack(v_s[key][d], v_s[key + 1][d]), pack(v_s[key + 8][d], v_s[key + 9][d]));
      }
    }
  }

  // Normalize and write this thread's rows.
#pragma unroll
  for (int row = 0; row < 2; ++row) {
    l[row] += __shfl_xor_sync(0xffffffffu, l[row], 1);
    l[row] += __shfl_xor_sync(0xffffffffu, l[row], 2);
    const int64_t query = qi[row];
    if (query >= n_t) continue;
    const float inv = l[row] > 0.f ? 1.f / l[row] : 0.f;
    uint16_t* dst = out + (static_cast<int64_t>(b) * n_t + query) * n_h * D + static_cast<int64_t>(h) * D;
#pragma unroll
    for (int i = 0; i < D / 8; ++i) {
      const int d = i * 8 + 2 * t;
      *reinterpret_cast<uint32_t*>(dst + d) = pack_floats(o[i][2 * row] * inv, o[i][2 * row + 1] * inv);
    }
    if (t == 0) {
      const int64_t at = (static_cast<int64_t>(b) * n_h + h) * n_t + query;
      if (row_max != nullptr) row_max[at] = m[row];
      if (lse != nullptr) lse[at] = l[row] > 0.f ? m[row] + logf(l[row]) : -INFINITY;
    }
  }
}

}  // namespace

cudaError_t flash_attention_forward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv, tile::bf16* out,
                                    float* row_max, float* lse) {
  if (a.dropout > 0 || (a.d_head != 64 && a.d_head != 128) || (a.window > 0 && !a.causal) || a.n_kv_heads <= 0 ||
      a.n_heads % a.n_kv_heads != 0)
    return cudaErrorNotSupported;
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  const dim3 grid(static_cast<unsigned>((a.seq + kBlockM - 1) / kBlockM), static_cast<unsigned>(a.batch * a.n_heads));
  const auto* in = reinterpret_cast<const uint16_t*>(qkv);
  auto* o = reinterpret_cast<uint16_t*>(out);
  const int n_h = static_cast<int>(a.n_heads), n_kv = static_cast<int>(a.n_kv_heads);
  if (a.d_head == 64)
    flash_forward<64><<<grid, kThreads, 0, stream>>>(in, o, row_max, lse, a.seq, n_h, n_kv, static_cast<float>(a.scale),
                                                     static_cast<float>(a.softcap), a.window, a.causal);
  else
    flash_forward<128><<<grid, kThreads, 0, stream>>>(in, o, row_max, lse, a.seq, n_h, n_kv,
                                                      static_cast<float>(a.scale), static_cast<float>(a.softcap),
                                                      a.window, a.causal);
  return cudaGetLastError();
}

}  // namespace bench::kernels::cuda
