// The HIP dialect of the shared C-like renderer (codegen/c_renderer.h), for hiprtc.
//
// hiprtc declares the HIP device builtins (blockIdx, __float_as_uint, floorf, ...) without any
// include, so the source needs no header. The kernels use no wavefront-level operation
// (grid-stride loops only) except the lane exchange and broadcast of reductions and row kernels,
// which stay inside a group of 8 aligned threads, so nothing depends on the wavefront size (64 on
// CDNA, 32 on RDNA).
//
// Correctly rounded float32 sqrt (measured with hiprtc of ROCm 5.2): sqrtf, __fsqrt_rn and
// __builtin_sqrtf all become a bare v_sqrt_f32 (1 ulp), because hiprtc links the device
// library with correctly_rounded_sqrt off and ignores -fhip-fp32-correctly-rounded-divide-sqrt.
// float64 sqrt is refined to the correctly rounded result (OpenCL requires it). A float32
// square root computed in float64 and rounded once to float32 is correctly rounded (53 >= 2*24+2
// bits: the double rounding is innocuous), so float32 sqrt goes through float64.
#include "codegen/c_renderer.h"

namespace codegen {

const CDialect& hip_dialect() {
  static const CDialect d = [] {
    CDialect c;
    c.name = "hip";
    c.prelude =
        "static __device__ __forceinline__ float rune_hip_sqrt_f32(float x) {\n"
        "  return (float)__dsqrt_rn((double)x);\n"
        "}\n"
        "static __device__ __forceinline__ unsigned rune_shfl_u32(unsigned v, int k) {\n"
        "  return __shfl_down(v, (unsigned)k, 8);\n}\n"
        "static __device__ __forceinline__ unsigned long long rune_shfl_u64(unsigned long long "
        "v, int k) {\n"
        "  return __shfl_down(v, (unsigned)k, 8);\n}\n"
        "static __device__ __forceinline__ unsigned rune_shfl_idx_u32(unsigned v, int k) {\n"
        "  return __shfl(v, k, 8);\n}\n"
        "static __device__ __forceinline__ unsigned long long rune_shfl_idx_u64(unsigned long "
        "long v, int k) {\n"
        "  return __shfl(v, k, 8);\n}\n";
    c.lane_shfl_u32 = "rune_shfl_u32";
    c.lane_shfl_u64 = "rune_shfl_u64";
    c.lane_idx_u32 = "rune_shfl_idx_u32";
    c.lane_idx_u64 = "rune_shfl_idx_u64";
    c.lane_unroll = 16;
    c.vector_loads = true;
    // The tiled product's blocks are 256 threads: 4 wavefronts of 64 or 8 of 32.
    c.shared_kw = "__shared__";
    c.block_sync = "__syncthreads()";
    c.launch_bounds = true;
    c.kernel_qualifier = "extern \"C\" __global__";
    c.device_fn = "static __device__ __forceinline__";
    c.restrict_kw = "__restrict__";
    c.thread_id =
        "((unsigned long long)blockIdx.x * (unsigned long long)blockDim.x + (unsigned long "
        "long)threadIdx.x)";
    c.thread_stride = "((unsigned long long)gridDim.x * (unsigned long long)blockDim.x)";
    c.sqrt_f32 = "rune_hip_sqrt_f32";
    c.sqrt_f64 = "__dsqrt_rn";
    c.f32_as_u32 = "__float_as_uint";
    c.u32_as_f32 = "__uint_as_float";
    c.f64_as_u64 = "__double_as_longlong";
    c.u64_as_f64 = "__longlong_as_double";
    return c;
  }();
  return d;
}

}  // namespace codegen
