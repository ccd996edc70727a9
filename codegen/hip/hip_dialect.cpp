// The HIP dialect of the shared C-like renderer (codegen/gpu/c_renderer.h), for hiprtc: the SIMT
// dialect CUDA and HIP share (codegen/gpu/simt_dialect.h) with HIP's own words.
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
#include "codegen/gpu/simt_dialect.h"

namespace codegen {

const CDialect& hip_dialect() {
  static const CDialect d = [] {
    // HIP's shuffles take no mask: the group's lanes are active together.
    CDialect c = gpu::simt_dialect("hip", "__shfl_down(v, (unsigned)k, 8)", "__shfl(v, k, 8)");
    c.prelude =
        "static __device__ __forceinline__ float rune_hip_sqrt_f32(float x) {\n"
        "  return (float)__dsqrt_rn((double)x);\n"
        "}\n" +
        c.prelude;
    c.sqrt_f32 = "rune_hip_sqrt_f32";
    c.lane_unroll = 16;
    // Block-shared memory and the barrier are the shared dialect's: the tiled product's blocks
    // are 256 threads, 4 wavefronts of 64 or 8 of 32.
    return c;
  }();
  return d;
}

}  // namespace codegen
