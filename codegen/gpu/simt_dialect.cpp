#include "codegen/gpu/simt_dialect.h"

namespace codegen::gpu {

CDialect simt_dialect(const std::string& name, const std::string& shfl_down,
                      const std::string& shfl_idx) {
  CDialect c;
  c.name = name;
  // No includes: NVRTC and hiprtc declare the device builtins used here.
  c.kernel_qualifier = "extern \"C\" __global__";
  c.device_fn = "static __device__ __forceinline__";
  c.restrict_kw = "__restrict__";
  c.thread_id =
      "((unsigned long long)blockIdx.x * (unsigned long long)blockDim.x + (unsigned long "
      "long)threadIdx.x)";
  c.thread_stride = "((unsigned long long)gridDim.x * (unsigned long long)blockDim.x)";
  c.sqrt_f64 = "__dsqrt_rn";
  c.f32_as_u32 = "__float_as_uint";
  c.u32_as_f32 = "__uint_as_float";
  c.f64_as_u64 = "__double_as_longlong";
  c.u64_as_f64 = "__longlong_as_double";
  c.lane_shfl_u32 = "rune_shfl_u32";
  c.lane_shfl_u64 = "rune_shfl_u64";
  c.lane_idx_u32 = "rune_shfl_idx_u32";
  c.lane_idx_u64 = "rune_shfl_idx_u64";
  struct Helper {
    const std::string& fn;
    const char* type;
    const std::string& call;
  };
  for (const Helper& h : {Helper{c.lane_shfl_u32, "unsigned", shfl_down},
                          Helper{c.lane_shfl_u64, "unsigned long long", shfl_down},
                          Helper{c.lane_idx_u32, "unsigned", shfl_idx},
                          Helper{c.lane_idx_u64, "unsigned long long", shfl_idx}})
    c.prelude += c.device_fn + " " + h.type + " " + h.fn + "(" + h.type +
                 " v, int k) {\n  return " + h.call + ";\n}\n";
  c.vector_loads = true;
  c.shared_kw = "__shared__";
  c.block_sync = "__syncthreads()";
  c.launch_bounds = true;
  return c;
}

}  // namespace codegen::gpu
