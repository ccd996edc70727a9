// The CUDA dialect of the shared C-like renderer (codegen/gpu/c_renderer.h), for NVRTC: the SIMT
// dialect CUDA and HIP share (codegen/gpu/simt_dialect.h) with CUDA's own words: the warp
// shuffles with a mask, the correctly rounded float32 sqrt and fma intrinsics, the tensor-core
// and cp.async helpers of sm_80 and later.
#include <cstdlib>

#include "codegen/gpu/simt_dialect.h"

namespace codegen {

const CDialect& cuda_dialect() {
  static const CDialect d = [] {
    // The 8 lanes of a group sit in one warp (blocks are whole warps, groups 8-aligned); the
    // mask names exactly the group, whose threads are active together.
    CDialect c =
        gpu::simt_dialect("cuda", "__shfl_down_sync(0xffu << (threadIdx.x & 24u), v, k, 8)",
                          "__shfl_sync(0xffu << (threadIdx.x & 24u), v, k, 8)");
    c.sqrt_f32 = "__fsqrt_rn";
    c.fma_f32 = "__fmaf_rn";
    c.fma_f64 = "__fma_rn";
    // 32 loads in flight per lane thread: a 256M-element sum has only 8 threads per 65,536
    // elements (the documented order), about 256 per SM on an H200, and needs ~20 KiB of loads
    // in flight per SM to reach the memory's bandwidth.
    c.lane_unroll = 32;
    // Tensor cores (sm_80 and later; the backend drops them for an older arch, so these are
    // never called there).
    c.prelude +=
        "static __device__ __forceinline__ void rune_mma_tf32(float& d0, float& d1, float& d2, "
        "float& d3,\n"
        "    unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {\n"
        "#if __CUDA_ARCH__ >= 800\n"
        "  asm volatile(\"mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
        "      : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n"
        "      : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
        "#else\n"
        "  __trap();\n"
        "#endif\n}\n"
        "static __device__ __forceinline__ void rune_mma_bf16(float& d0, float& d1, float& d2, "
        "float& d3,\n"
        "    unsigned a0, unsigned a1, unsigned a2, unsigned a3, unsigned b0, unsigned b1) {\n"
        "#if __CUDA_ARCH__ >= 800\n"
        "  asm volatile(\"mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, "
        "{%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\"\n"
        "      : \"+f\"(d0), \"+f\"(d1), \"+f\"(d2), \"+f\"(d3)\n"
        "      : \"r\"(a0), \"r\"(a1), \"r\"(a2), \"r\"(a3), \"r\"(b0), \"r\"(b1));\n"
        "#else\n"
        "  __trap();\n"
        "#endif\n}\n";
    c.mma_tf32 = "rune_mma_tf32";
    c.mma_bf16 = "rune_mma_bf16";
    // Asynchronous copies global -> shared (sm_80 and later: cp.async, .cg for 16 bytes (it
    // bypasses L1: a slice is read once per block), .ca for 8; src-size 0 zero-fills); older
    // archs never get the plan part (the device description, runtime/gpu/device_info.h), the
    // fallback only keeps the source valid.
    c.prelude +=
        "template <int N> static __device__ __forceinline__ void rune_cp_async(void* dst, "
        "const void* src, bool ok) {\n"
        "#if __CUDA_ARCH__ >= 800\n"
        "  const unsigned d = (unsigned)__cvta_generic_to_shared(dst);\n"
        "  if (N == 16)\n"
        "    asm volatile(\"cp.async.cg.shared.global [%0], [%1], 16, %2;\" :: \"r\"(d), "
        "\"l\"(src), \"r\"(ok ? 16 : 0) : \"memory\");\n"
        "  else\n"
        "    asm volatile(\"cp.async.ca.shared.global [%0], [%1], %2, %3;\" :: \"r\"(d), "
        "\"l\"(src), \"n\"(N), \"r\"(ok ? N : 0) : \"memory\");\n"
        "#else\n"
        "  for (int i = 0; i < N; ++i)\n"
        "    ((unsigned char*)dst)[i] = ok ? ((const unsigned char*)src)[i] : (unsigned char)0;\n"
        "#endif\n}\n"
        "static __device__ __forceinline__ void rune_cp_async_wait() {\n"
        "#if __CUDA_ARCH__ >= 800\n"
        "  asm volatile(\"cp.async.commit_group;\\n\\tcp.async.wait_group 0;\" ::: \"memory\");\n"
        "#endif\n}\n";
    c.async_copy = "rune_cp_async";
    c.async_wait = "rune_cp_async_wait";
    // cp.async of 16 bytes needs a 16-byte aligned destination.
    c.shared_kw = "__shared__ __align__(16)";
    return c;
  }();
  return d;
}

}  // namespace codegen
