#include "runtime/gpu/device_info.h"

#include <cstdlib>

namespace runtime::gpu {

namespace {

// The compute capability of a CUDA arch ("sm_90" -> 90); 0 when the name is not of that form.
int cuda_capability(const std::string& arch) {
  if (arch.rfind("sm_", 0) != 0) return 0;
  return std::atoi(arch.c_str() + 3);
}

}  // namespace

void describe_capabilities(DeviceInfo& info) {
  // Both APIs have warp shuffles, CUDA's vector types and block-shared memory.
  info.lane_shuffles = true;
  info.vector_loads = true;
  info.block_shared = true;
  if (info.kind == DeviceKind::CUDA) {
    // mma.sync .tf32 / .bf16 and cp.async need sm_80; an arch of another form is taken as
    // recent (the driver reports sm_<major><minor>).
    const int cc = cuda_capability(info.arch);
    info.tensor_cores = info.async_copy = cc == 0 || cc >= 80;
    info.lane_unroll = 32;
  } else {
    info.tensor_cores = info.async_copy = false;
    info.lane_unroll = 16;
  }
}

DeviceInfo describe(DeviceKind kind, const std::string& arch) {
  DeviceInfo info;
  info.kind = kind;
  info.arch = arch;
  // CDNA (gfx9) wavefronts are 64 wide, RDNA's (gfx10 and later) 32; NVIDIA's warps 32.
  info.warp_size = kind == DeviceKind::HIP && arch.rfind("gfx9", 0) == 0 ? 64 : 32;
  describe_capabilities(info);
  return info;
}

}  // namespace runtime::gpu
