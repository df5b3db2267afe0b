// defines: bench::kernels::cuda::CudaThread — the hardware behind the `Thread` of the flash
//          attention kernels (flash_attention_kernels.cuh, flash_attention_backward_kernels.cuh,
//          flash_attention_wgmma_kernels.cuh): the intrinsics that the CPU warp emulator
//          (tests/kernels/warp_emulator.h) stands in for. Shared by flash_attention.cu and
//          flash_attention_wgmma.cu.
#pragma once

#include <cstdint>

namespace bench::kernels::cuda {

extern __shared__ __align__(16) uint8_t g_shared[];

/// The hardware behind flash_attention_kernels.cuh's Thread.
struct CudaThread {
  __device__ __forceinline__ int tid() const { return static_cast<int>(threadIdx.x); }
  __device__ __forceinline__ int block_x() const { return static_cast<int>(blockIdx.x); }
  __device__ __forceinline__ int block_y() const { return static_cast<int>(blockIdx.y); }
  __device__ __forceinline__ int block_dim() const { return static_cast<int>(blockDim.x); }
  __device__ __forceinline__ void sync() const { __syncthreads(); }
  __device__ __forceinline__ float shfl_xor(float v, int mask) const { return __shfl_xor_sync(0xffffffffu, v, mask); }
  __device__ __forceinline__ void mma(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) const {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
  __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const uint16_t* row) const {
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const uint16_t* row) const {
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
                 : "r"(addr));
  }
  __device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool valid) const {
    const auto addr = static_cast<uint32_t>(__cvta_generic_to_shared(dst));
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(addr), "l"(src), "r"(valid ? 16 : 0)
                 : "memory");
  }
  __device__ __forceinline__ void cp_async_commit() const { asm volatile("cp.async.commit_group;\n" ::: "memory"); }
  __device__ __forceinline__ void cp_async_wait(int pending) const {
    if (pending == 0)
      asm volatile("cp.async.wait_group 0;\n" ::: "memory");
    else
      asm volatile("cp.async.wait_group 1;\n" ::: "memory");
  }
  /// 2^x by the SFU (ex2.approx: relative error about 2^-22; -inf gives +0).
  __device__ __forceinline__ float exp2(float x) const {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
  }
  __device__ __forceinline__ uint8_t* shared() const { return g_shared; }
  /// p[0] += a and p[1] += b in one red.global.add.v2.f32 (sm_90; p 8-byte aligned, global memory).
  __device__ __forceinline__ void atomic_add2(float* p, float a, float b) const {
    asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(__cvta_generic_to_global(p)), "f"(a), "f"(b)
                 : "memory");
  }
};

}  // namespace bench::kernels::cuda
