// The flash attention forward and the backward's main kernel on wgmma
// (kernels/cuda/flash_attention_wgmma_kernels.cuh, flash_attention_wgmma_backward_kernels.cuh,
// which describe them) with the hardware as their Thread, and their launchers (flash_attention.cuh:
// flash_attention_wgmma_forward, flash_attention_wgmma_backward, which runs the mma.sync
// backward's prep and dQ kernels around its own). wgmma is an sm_90a feature:
// kernels/CMakeLists.txt compiles this file alone for sm_90a (every other .cu for sm_90); where
// __CUDA_ARCH_FEAT_SM90_ALL is not defined (a device pass for another target) the kernels' bodies
// are empty and the launchers are refused at run time by the device check. Compiled, not run on a
// GPU.
#include <cuda.h>  // CUtensorMap and its enums (types only: the encode is fetched from the driver at run time)
#include <cudaTypedefs.h>

#include <cstdint>
#include <stdexcept>
#include <string>

#include "flash_attention.cuh"
#include "flash_attention_wgmma_backward_kernels.cuh"
#include "flash_attention_wgmma_kernels.cuh"
#include "flash_backward_launch.cuh"
#include "flash_thread.cuh"
#include "tma_map.h"

namespace bench::kernels::cuda {

namespace {

/// CudaThread and the warpgroup MMA of sm_90a (PTX ISA 9.7.15): the Thread of flash_forward_wgmma
/// and flash_backward_wgmma.
struct CudaWgThread : CudaThread {
  __device__ __forceinline__ uint32_t smem_addr(const void* p) const {
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
  }
  __device__ __forceinline__ void fence_proxy_async() const {
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
  }
  __device__ __forceinline__ void wgmma_fence() const { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
  __device__ __forceinline__ void wgmma_commit() const {
    asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
  }
  template <int kPending>
  __device__ __forceinline__ void wgmma_wait() const {
    asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");
  }
  /// The warpgroup index, warp-uniform in ptxas's eyes (a shuffle from lane 0), so that the
  /// branches of the warp-specialized forward on it put no wgmma on a divergent path.
  __device__ __forceinline__ int warpgroup() const {
    return __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 128, 0);
  }
  /// The warp index, warp-uniform in ptxas's eyes (a shuffle from lane 0): what is computed from it
  /// may sit in uniform registers.
  __device__ __forceinline__ int warp_uniform() const {
    const int w = __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / 32, 0);
    __builtin_assume(w >= 0 && w < 32);
    return w;
  }
  /// mbarrier.init.shared::cta.b64 (PTX ISA 9.7.13.15.9): `count` arrivals a phase.
  __device__ __forceinline__ void mbar_init(uint32_t address, int count) const {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(address), "r"(count) : "memory");
  }
  /// mbarrier.arrive.shared::cta.b64 (release semantics at CTA scope, the default).
  __device__ __forceinline__ void mbar_arrive(uint32_t address) const {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(address) : "memory");
  }
  /// cp.async.mbarrier.arrive.noinc.shared::cta.b64: an arrival, counted in the init's count,
  /// once every cp.async this thread issued before it has completed.
  __device__ __forceinline__ void cp_async_mbar_arrive(uint32_t address) const {
    asm volatile("cp.async.mbarrier.arrive.noinc.shared::cta.b64 [%0];\n" ::"r"(address) : "memory");
  }
  /// Until the phase of parity `parity` has completed: mbarrier.try_wait.parity in a loop inside
  /// the asm (acquire semantics at CTA scope, the default), so the compiler sees no branch.
  __device__ __forceinline__ void mbar_wait(uint32_t address, int parity) const {
    asm volatile(
        "{\n.reg .pred done;\nwait_%=:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra wait_%=;\n}\n" ::"r"(address),
        "r"(parity)
        : "memory");
  }
  /// mbarrier.arrive.expect_tx.shared::cta.b64 (PTX ISA 9.7.13.15.11): the current phase's
  /// transaction count += bytes, then one arrival.
  __device__ __forceinline__ void mbar_arrive_expect_tx(uint32_t address, uint32_t bytes) const {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(address), "r"(bytes) : "memory");
  }
  /// cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes (PTX ISA
  /// 9.7.9.25.5.1): the box of the tensor map at `map` (the generic address of a __grid_constant__
  /// CUtensorMap parameter) at element coordinates c0..c3, innermost first, into shared memory at
  /// `dst`; its bytes complete_tx on the mbarrier at `bar`. A CTA's own shared memory is its
  /// cluster's (a launch without clusters is a cluster of one).
  __device__ __forceinline__ void tma_load_4d(uint32_t dst, const void* map, int c0, int c1, int c2, int c3,
                                              uint32_t bar) const {
    asm volatile(
        "cp.async.bulk.tensor.4d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4, %5}], "
        "[%6];\n" ::"r"(dst),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
        : "memory");
  }
  /// bar.sync / bar.arrive with a barrier id and a thread count (named barriers 1-15).
  __device__ __forceinline__ void named_sync(int id, int count) const {
    asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(count) : "memory");
  }
  __device__ __forceinline__ void named_arrive(int id, int count) const {
    asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(count) : "memory");
  }
  /// setmaxnreg (sm_90a): this warpgroup's registers a thread, raised or lowered to kCount.
  template <int kCount>
  __device__ __forceinline__ void setmaxnreg_inc() const {
    asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kCount));
  }
  template <int kCount>
  __device__ __forceinline__ void setmaxnreg_dec() const {
    asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kCount));
  }
  /// st.shared.b32 at a shared-window address (the generic proxy: fence_proxy_async before a
  /// wgmma reads it).
  __device__ __forceinline__ void store_shared_b32(uint32_t address, uint32_t v) const {
    asm volatile("st.shared.b32 [%0], %1;\n" ::"r"(address), "r"(v) : "memory");
  }
  /// st.shared.v2.f32 at a shared-window address (8-byte aligned; the generic proxy, as above).
  __device__ __forceinline__ void store_shared_v2_f32(uint32_t address, float a, float b) const {
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(address), "f"(a), "f"(b) : "memory");
  }
  /// __syncwarp: the lanes of the warp meet, their shared-memory writes ordered before what follows.
  __device__ __forceinline__ void warp_sync() const { __syncwarp(); }
  /// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 (PTX ISA 8.0, sm_90): dst[i] +=
  /// the floats at shared-window address src, `bytes` of them (a multiple of 16, both addresses
  /// 16-byte aligned), read through the async proxy (fence_proxy_async after the stores).
  __device__ __forceinline__ void bulk_reduce_add(float* dst, uint32_t src, uint32_t bytes) const {
    asm volatile("cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [%0], [%1], %2;\n" ::"l"(
                     __cvta_generic_to_global(dst)),
                 "r"(src), "r"(bytes)
                 : "memory");
  }
  /// cp.async.bulk.commit_group: this thread's bulk operations since the last commit, one group.
  __device__ __forceinline__ void bulk_commit() const { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }
  /// cp.async.bulk.wait_group kPending: all but this thread's kPending newest bulk groups complete.
  template <int kPending>
  __device__ __forceinline__ void bulk_wait() const {
    asm volatile("cp.async.bulk.wait_group %0;\n" ::"n"(kPending) : "memory");
  }
  /// cp.async.bulk.wait_group.read kPending: their reads of shared memory complete (the source
  /// may be written again).
  template <int kPending>
  __device__ __forceinline__ void bulk_wait_read() const {
    asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(kPending) : "memory");
  }
  /// Pins registers that an asynchronous wgmma reads or writes: the compiler may not move their
  /// other uses across this point (CUTLASS's warpgroup_fence_operand). Called on the accumulators
  /// after each wait and before each wgmma.fence, on P's fragments before theirs.
  template <int K>
  __device__ __forceinline__ void wgmma_hold(float (&r)[K]) const {
#pragma unroll
    for (int i = 0; i < K; ++i) asm volatile("" : "+f"(r[i])::"memory");
  }
  /// The same on one 32-bit value: the backward holds its shared-memory bases at the top of each
  /// tile, so that the descriptors built from them are recomputed there, not hoisted out of the
  /// loop, and (bulk dQ) its thread index before the staging, for the staging's offsets.
  __device__ __forceinline__ void wgmma_hold(uint32_t& r) const { asm volatile("" : "+r"(r)::"memory"); }
  template <int K, int J>
  __device__ __forceinline__ void wgmma_hold(uint32_t (&r)[K][J]) const {
#pragma unroll
    for (int i = 0; i < K; ++i)
#pragma unroll
      for (int j = 0; j < J; ++j) asm volatile("" : "+r"(r[i][j])::"memory");
  }
  /// d (64 x N, this thread's N / 2) = A B + (accumulate ? d : 0), A and B from shared memory;
  /// B N-major when kTransB, A M-major when kTransA (imm-trans-a: shared-memory A, bf16 or f16).
  template <int N, int kTransB, int kTransA = 0>
  __device__ __forceinline__ void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b, bool accumulate) const {
    static_assert(N == 32 || N == 64 || N == 128, "the shapes the kernels use (32: the backward's dQ at d 64)");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (N == 32) {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
          "%12, %13, %14, %15}, %16, %17, p, 1, 1, %20, %19;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
            "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
          : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB), "n"(kTransA));
    } else if constexpr (N == 64) {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
          "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, %32, "
          "%33, p, 1, 1, %36, %35;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
            "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
            "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
            "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
          : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB), "n"(kTransA));
    } else {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
          "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, "
          "%33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, "
          "%54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1, %68, %67;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
            "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
            "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
            "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
            "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
            "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
            "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
            "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
          : "l"(desc_a), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB), "n"(kTransA));
    }
#else
    (void)d, (void)desc_a, (void)desc_b, (void)accumulate;
#endif
  }
  /// The same with A from registers (this thread's m16n8k16 A fragment of its warp's 16 rows).
  template <int N, int kTransB>
  __device__ __forceinline__ void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[4], uint64_t desc_b,
                                           bool accumulate) const {
    static_assert(N == 64 || N == 128, "the shapes the forward uses");
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    if constexpr (N == 64) {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
          "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, "
          "%33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
            "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
            "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
            "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB));
    } else {
      asm volatile(
          "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
          "wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, "
          "%12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, "
          "%33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, "
          "%54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1, %70;\n}\n"
          : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
            "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),
            "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),
            "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),
            "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),
            "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),
            "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),
            "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
          : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc_b), "r"(static_cast<int>(accumulate)), "n"(kTransB));
    }
#else
    (void)d, (void)a, (void)desc_b, (void)accumulate;
#endif
  }
};

/// The forward at key tile kN (flash::wgmma_forward_key_tile chooses it: 64 in step;
/// warp-specialized 64 or 128: docs/flash-forward.md, "Key tiles of 128").
template <int D, bool kDropout, bool kWs, int kN>
__global__ void __launch_bounds__(flash::wgmma_forward_threads<kWs>(), 1)
    flash_forward_wgmma(const uint16_t* __restrict__ qkv, uint16_t* __restrict__ out, float* __restrict__ row_max,
                        float* __restrict__ lse, int64_t n_t, int n_h, int n_kv, float scale, float softcap,
                        int64_t window, bool causal, float dropout, uint64_t seed, const int64_t* step_at) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  CudaWgThread th;
  flash::flash_forward_wgmma<D, kDropout, kWs, false, kN>(th, qkv, out, row_max, lse, n_t, n_h, n_kv, scale, softcap,
                                                          window, causal, dropout, dropout_seed_of(seed, step_at));
#else
  (void)qkv, (void)out, (void)row_max, (void)lse, (void)n_t, (void)n_h, (void)n_kv, (void)scale, (void)softcap;
  (void)window, (void)causal, (void)dropout, (void)seed, (void)step_at;
#endif
}

template <int D, bool kDropout, bool kWs, int kN>
cudaError_t launch_forward_wgmma(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv, uint16_t* out,
                                 float* row_max, float* lse) {
  constexpr size_t smem = flash::wgmma_forward_smem_bytes<D, kWs, false, kN>();
  const cudaError_t err = cudaFuncSetAttribute(flash_forward_wgmma<D, kDropout, kWs, kN>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  int64_t x = 0, y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, x, y);
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
  flash_forward_wgmma<D, kDropout, kWs, kN><<<grid, flash::wgmma_forward_threads<kWs>(), smem, stream>>>(
      qkv, out, row_max, lse, a.seq, static_cast<int>(a.n_heads), static_cast<int>(a.n_kv_heads),
      static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal, static_cast<float>(a.dropout),
      a.dropout_seed, a.dropout_step_at);
  return cudaGetLastError();
}

// tma::TensorMapArgs carries the driver's enum values without including <cuda.h>.
static_assert(tma::kDataTypeBfloat16 == static_cast<uint32_t>(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16) &&
                  tma::kInterleaveNone == static_cast<uint32_t>(CU_TENSOR_MAP_INTERLEAVE_NONE) &&
                  tma::kSwizzle128B == static_cast<uint32_t>(CU_TENSOR_MAP_SWIZZLE_128B) &&
                  tma::kL2Promotion128B == static_cast<uint32_t>(CU_TENSOR_MAP_L2_PROMOTION_L2_128B) &&
                  tma::kOobFillNone == static_cast<uint32_t>(CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
              "tma_map.h's enum values are the driver's");

/// The warp-specialized forward with TMA loads: the tensor map is a __grid_constant__ parameter
/// (the ISA's tensor-map operand may be the generic address of a kernel parameter so declared).
template <int D, bool kDropout, int kN>
__global__ void __launch_bounds__(flash::kWsThreads, 1)
    flash_forward_wgmma_tma(const __grid_constant__ CUtensorMap map, const uint16_t* __restrict__ qkv,
                            uint16_t* __restrict__ out, float* __restrict__ row_max, float* __restrict__ lse,
                            int64_t n_t, int n_h, int n_kv, float scale, float softcap, int64_t window, bool causal,
                            float dropout, uint64_t seed, const int64_t* step_at) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  CudaWgThread th;
  flash::flash_forward_wgmma<D, kDropout, true, true, kN>(th, qkv, out, row_max, lse, n_t, n_h, n_kv, scale, softcap,
                                                          window, causal, dropout, dropout_seed_of(seed, step_at),
                                                          &map);
#else
  (void)map, (void)qkv, (void)out, (void)row_max, (void)lse, (void)n_t, (void)n_h, (void)n_kv, (void)scale;
  (void)softcap, (void)window, (void)causal, (void)dropout, (void)seed, (void)step_at;
#endif
}

/// cuTensorMapEncodeTiled on tma::TensorMapArgs, fetched from the driver through the runtime
/// (cudaGetDriverEntryPointByVersion, the non-deprecated form of cudaGetDriverEntryPoint: no link
/// against libcuda). cudaErrorNotSupported where the driver has no such entry point or refuses
/// the arguments.
cudaError_t encode_tensor_map(const tma::TensorMapArgs& m, CUtensorMap& map) {
  static PFN_cuTensorMapEncodeTiled_v12000 encode = [] {
    void* fn = nullptr;
    cudaDriverEntryPointQueryResult found{};
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000, cudaEnableDefault, &found) !=
            cudaSuccess ||
        found != cudaDriverEntryPointSuccess)
      fn = nullptr;
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(fn);
  }();
  if (encode == nullptr) return cudaErrorNotSupported;
  cuuint64_t dims[5] = {}, strides[4] = {};
  cuuint32_t box[5] = {}, element_strides[5] = {};
  for (uint32_t i = 0; i < m.rank; ++i) {
    dims[i] = m.dims[i];
    box[i] = m.box[i];
    element_strides[i] = m.element_strides[i];
    if (i + 1 < m.rank) strides[i] = m.strides[i];
  }
  const CUresult r = encode(
      &map, static_cast<CUtensorMapDataType>(m.data_type), m.rank, const_cast<void*>(m.global), dims, strides, box,
      element_strides, static_cast<CUtensorMapInterleave>(m.interleave), static_cast<CUtensorMapSwizzle>(m.swizzle),
      static_cast<CUtensorMapL2promotion>(m.l2_promotion), static_cast<CUtensorMapFloatOOBfill>(m.oob_fill));
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorNotSupported;
}

template <int D, bool kDropout, int kN>
cudaError_t launch_forward_wgmma_tma(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv, uint16_t* out,
                                     float* row_max, float* lse) {
  CUtensorMap map;
  const cudaError_t enc = encode_tensor_map(
      tma::flash_tensor_map(qkv, a.batch, a.seq, static_cast<int>(a.n_heads), static_cast<int>(a.n_kv_heads), D), map);
  if (enc != cudaSuccess) return enc;
  constexpr size_t smem = flash::wgmma_forward_smem_bytes<D, true, true, kN>();
  const cudaError_t err = cudaFuncSetAttribute(flash_forward_wgmma_tma<D, kDropout, kN>,
                                               cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  int64_t x = 0, y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, x, y);
  const dim3 grid(static_cast<unsigned>(x), static_cast<unsigned>(y));
  flash_forward_wgmma_tma<D, kDropout, kN><<<grid, flash::kWsThreads, smem, stream>>>(
      map, qkv, out, row_max, lse, a.seq, static_cast<int>(a.n_heads), static_cast<int>(a.n_kv_heads),
      static_cast<float>(a.scale), static_cast<float>(a.softcap), a.window, a.causal, static_cast<float>(a.dropout),
      a.dropout_seed, a.dropout_step_at);
  return cudaGetLastError();
}

template <int D, bool kDropout, bool kBulkDq>
__global__ void __launch_bounds__(flash::kWgThreads, 1)
    flash_backward_wgmma(const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                         const float* __restrict__ lse, const float* __restrict__ dvec, float* __restrict__ dq_accum,
                         uint16_t* __restrict__ dqkv, int64_t n_t, int n_h, int n_kv, float scale, float softcap,
                         int64_t window, bool causal, float dropout, uint64_t seed, const int64_t* step_at,
                         bool heaviest_first) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  CudaWgThread th;
  flash::flash_backward_wgmma<D, kDropout, kBulkDq, false>(th, qkv, dout, lse, dvec, dq_accum, dqkv, n_t, n_h, n_kv,
                                                           scale, softcap, window, causal, dropout,
                                                           dropout_seed_of(seed, step_at), heaviest_first);
#else
  (void)qkv, (void)dout, (void)lse, (void)dvec, (void)dq_accum, (void)dqkv, (void)n_t, (void)n_h, (void)n_kv;
  (void)scale, (void)softcap, (void)window, (void)causal, (void)dropout, (void)seed, (void)step_at;
  (void)heaviest_first;
#endif
}

/// The body of the two TMA kernels below (flash_backward_wgmma_tma, flash_backward_wgmma_ws),
/// which differ in their register attributes and kWs only; the tensor maps stay references to
/// the kernels' __grid_constant__ parameters.
template <int D, bool kDropout, bool kBulkDq, bool kWs>
__device__ __forceinline__ void backward_wgmma_tma_body(const CUtensorMap& q_map, const CUtensorMap& do_map,
                                                        const uint16_t* __restrict__ qkv,
                                                        const uint16_t* __restrict__ dout,
                                                        const float* __restrict__ lse, const float* __restrict__ dvec,
                                                        float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv,
                                                        int64_t n_t, int n_h, int n_kv, float scale, float softcap,
                                                        int64_t window, bool causal, float dropout, uint64_t seed,
                                                        const int64_t* step_at, bool heaviest_first) {
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
  CudaWgThread th;
  flash::flash_backward_wgmma<D, kDropout, kBulkDq, true, kWs>(
      th, qkv, dout, lse, dvec, dq_accum, dqkv, n_t, n_h, n_kv, scale, softcap, window, causal, dropout,
      dropout_seed_of(seed, step_at), heaviest_first, &q_map, &do_map);
#else
  (void)q_map, (void)do_map, (void)qkv, (void)dout, (void)lse, (void)dvec, (void)dq_accum, (void)dqkv, (void)n_t;
  (void)n_h, (void)n_kv, (void)scale, (void)softcap, (void)window, (void)causal, (void)dropout, (void)seed;
  (void)step_at, (void)heaviest_first;
#endif
}

/// The same with Q and dO loaded by TMA: the tensor maps of qkv and dout, __grid_constant__
/// parameters (as the forward's). Capped at flash::wgmma_backward_tma_max_regs registers (240 at
/// d 128 without dropout, warp specialization's consumer budget) rather than by
/// __launch_bounds__(kWgThreads, 1) (the two cannot both be given; one block an SM either way).
template <int D, bool kDropout, bool kBulkDq>
__global__ void __maxnreg__((flash::wgmma_backward_tma_max_regs<D, kDropout>()))
    flash_backward_wgmma_tma(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap do_map,
                             const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                             const float* __restrict__ lse, const float* __restrict__ dvec,
                             float* __restrict__ dq_accum, uint16_t* __restrict__ dqkv, int64_t n_t, int n_h, int n_kv,
                             float scale, float softcap, int64_t window, bool causal, float dropout, uint64_t seed,
                             const int64_t* step_at, bool heaviest_first) {
  backward_wgmma_tma_body<D, kDropout, kBulkDq, false>(q_map, do_map, qkv, dout, lse, dvec, dq_accum, dqkv, n_t, n_h,
                                                       n_kv, scale, softcap, window, causal, dropout, seed, step_at,
                                                       heaviest_first);
}

/// The same warp-specialized (AttentionArgs::flash_backward_ws, flash_backward_wgmma's kWs): a
/// producer warpgroup issues the TMA loads of Q and dO into a ring of three stages at
/// setmaxnreg.dec 24, the two consumer warpgroups compute at setmaxnreg.inc 240 (what
/// __launch_bounds__(kWsThreads, 1)'s 168 a thread gives them), every variant (dropout at d 128
/// too: docs/flash-backward.md, "Warp-specialized backward" and "Dropout at d 128 in 240
/// registers").
template <int D, bool kDropout, bool kBulkDq>
__global__ void __launch_bounds__(flash::kWsThreads, 1)
    flash_backward_wgmma_ws(const __grid_constant__ CUtensorMap q_map, const __grid_constant__ CUtensorMap do_map,
                            const uint16_t* __restrict__ qkv, const uint16_t* __restrict__ dout,
                            const float* __restrict__ lse, const float* __restrict__ dvec, float* __restrict__ dq_accum,
                            uint16_t* __restrict__ dqkv, int64_t n_t, int n_h, int n_kv, float scale, float softcap,
                            int64_t window, bool causal, float dropout, uint64_t seed, const int64_t* step_at,
                            bool heaviest_first) {
  backward_wgmma_tma_body<D, kDropout, kBulkDq, true>(q_map, do_map, qkv, dout, lse, dvec, dq_accum, dqkv, n_t, n_h,
                                                      n_kv, scale, softcap, window, causal, dropout, seed, step_at,
                                                      heaviest_first);
}

/// The wgmma main kernel as flash_attention_backward_with's FlashBackwardMain; dQ by bulk
/// reductions with a.flash_backward_bulk_dq (dq_accum, the workspace's start, is 16-byte aligned:
/// flash_attention_backward_with checks it); Q and dO by TMA with a.flash_backward_tma (qkv and
/// dout, the tensor maps' global addresses, are 16-byte aligned: flash_attention_backward_with
/// checks them too; cudaErrorNotSupported where the driver encodes no map); warp-specialized (by
/// TMA too) with a.flash_backward_ws.
cudaError_t backward_wgmma_main(cudaStream_t stream, const AttentionArgs& a, const uint16_t* qkv, const uint16_t* dout,
                                const float* lse, const float* dvec, float* dq_accum, uint16_t* dqkv) {
  return by_head_and_dropout(a, [&]<int D, bool kDropout>() {
    const auto launch = [&]<bool kBulkDq>() {
      if (!a.flash_backward_tma && !a.flash_backward_ws)
        return launch_backward_main(flash_backward_wgmma<D, kDropout, kBulkDq>,
                                    flash::wgmma_backward_smem_bytes<D, kBulkDq>(), flash::kWgThreads, stream, a, qkv,
                                    dout, lse, dvec, dq_accum, dqkv);
      const int n_h = static_cast<int>(a.n_heads);
      CUtensorMap q_map, do_map;
      cudaError_t err =
          encode_tensor_map(tma::flash_tensor_map(qkv, a.batch, a.seq, n_h, static_cast<int>(a.n_kv_heads), D), q_map);
      if (err == cudaSuccess) err = encode_tensor_map(tma::flash_tensor_map(dout, a.batch, a.seq, n_h, 0, D), do_map);
      if (err != cudaSuccess) return err;
      if (a.flash_backward_ws)
        return launch_backward_main(flash_backward_wgmma_ws<D, kDropout, kBulkDq>,
                                    flash::wgmma_backward_smem_bytes<D, kBulkDq, true, true>(), flash::kWsThreads,
                                    stream, a, qkv, dout, lse, dvec, dq_accum, dqkv, q_map, do_map);
      return launch_backward_main(flash_backward_wgmma_tma<D, kDropout, kBulkDq>,
                                  flash::wgmma_backward_smem_bytes<D, kBulkDq, true>(), flash::kWgThreads, stream, a,
                                  qkv, dout, lse, dvec, dq_accum, dqkv, q_map, do_map);
    };
    return a.flash_backward_bulk_dq ? launch.template operator()<true>() : launch.template operator()<false>();
  });
}

/// What both wgmma kernels refuse, `what` naming which: the variants the mma.sync kernels refuse,
/// a device that is not compute capability 9.0 (sm_90a code runs there alone), a grid y past 65535.
std::string wgmma_refusal(const AttentionArgs& a, const char* what, int64_t grid_y) {
  const std::string name = what;
  if (a.dropout < 0 || a.dropout >= 1 || (a.d_head != 64 && a.d_head != 128) || (a.window > 0 && !a.causal) ||
      a.n_kv_heads <= 0 || a.n_heads % a.n_kv_heads != 0)
    return name +
           " takes what the mma.sync one does: d_head 64 or 128, a window only when causal, "
           "H a multiple of Hkv, a dropout rate in [0, 1)";
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device) != cudaSuccess ||
      cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device) != cudaSuccess)
    return name + ": no CUDA device";
  if (major != 9 || minor != 0)
    return name + " needs an sm_90a device (compute capability 9.0, Hopper); this one is " + std::to_string(major) +
           "." + std::to_string(minor);
  if (grid_y > kernels::kCudaMaxGridY) return name + ": grid y of " + std::to_string(grid_y) + " > 65535";
  return "";
}

}  // namespace

int flash_attention_wgmma_key_tile(const AttentionArgs& a, bool warp_specialized) {
  return flash::wgmma_forward_key_tile(a.flash_forward_key_tile, warp_specialized);
}

std::string flash_attention_wgmma_refusal(const AttentionArgs& a) {
  const int key_tile = a.flash_forward_key_tile;
  if (key_tile != 0 && key_tile != flash::kBlockN && key_tile != flash::kWsBlockN)
    return "the wgmma flash forward takes key tiles of 64 or 128 (0: its choice), not " + std::to_string(key_tile);
  int64_t x = 0, y = 0;
  flash::forward_grid(a.seq, a.batch * a.n_heads, a.causal, x, y);
  return wgmma_refusal(a, "the wgmma flash forward", y);
}

std::string flash_attention_wgmma_backward_refusal(const AttentionArgs& a) {
  return wgmma_refusal(a, "the wgmma flash backward", a.batch * a.n_kv_heads);
}

cudaError_t flash_attention_wgmma_backward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                           const tile::bf16* out, const tile::bf16* dout, const float* lse,
                                           tile::bf16* dqkv, void* workspace) {
  if (!flash_attention_wgmma_backward_refusal(a).empty()) return cudaErrorNotSupported;
  return flash_attention_backward_with(stream, a, qkv, out, dout, lse, dqkv, workspace, backward_wgmma_main);
}

cudaError_t flash_attention_wgmma_forward(cudaStream_t stream, const AttentionArgs& a, const tile::bf16* qkv,
                                          tile::bf16* out, float* row_max, float* lse, bool warp_specialized,
                                          bool tma) {
  if (!flash_attention_wgmma_refusal(a).empty()) return cudaErrorNotSupported;
  if (a.batch == 0 || a.seq == 0) return cudaSuccess;
  if (reinterpret_cast<uintptr_t>(qkv) % 16 != 0 || reinterpret_cast<uintptr_t>(out) % 16 != 0)
    throw std::invalid_argument("flash_attention_wgmma_forward: qkv and out must be 16-byte aligned");
  const auto* in = reinterpret_cast<const uint16_t*>(qkv);
  auto* o = reinterpret_cast<uint16_t*>(out);
  const int kn = flash_attention_wgmma_key_tile(a, warp_specialized);
  if (kn == 0 || (tma && !warp_specialized)) return cudaErrorNotSupported;
  // The kernel of d_head and dropout for the variant (kWs, kTma) at key tile kN.
  const auto by_shape = [&]<bool kWs, bool kTma, int kN>() {
    const auto launch = [&]<int D, bool kDropout>() {
      if constexpr (kTma)
        return launch_forward_wgmma_tma<D, kDropout, kN>(stream, a, in, o, row_max, lse);
      else
        return launch_forward_wgmma<D, kDropout, kWs, kN>(stream, a, in, o, row_max, lse);
    };
    if (a.dropout > 0)
      return a.d_head == 64 ? launch.template operator()<64, true>() : launch.template operator()<128, true>();
    return a.d_head == 64 ? launch.template operator()<64, false>() : launch.template operator()<128, false>();
  };
  constexpr int k64 = flash::kBlockN, k128 = flash::kWsBlockN;
  if (!warp_specialized) return by_shape.template operator()<false, false, k64>();
  if (tma)
    return kn == k64 ? by_shape.template operator()<true, true, k64>()
                     : by_shape.template operator()<true, true, k128>();
  return kn == k64 ? by_shape.template operator()<true, false, k64>()
                   : by_shape.template operator()<true, false, k128>();
}

}  // namespace bench::kernels::cuda
