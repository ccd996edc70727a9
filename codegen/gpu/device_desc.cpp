#include "codegen/gpu/device_desc.h"

namespace codegen {

DeviceDesc gpu_device_desc(const runtime::gpu::DeviceInfo& info) {
  DeviceDesc r;
  r.gpu = true;
  r.lane_exchange = info.lane_shuffles;
  r.lane_bcast = info.lane_shuffles;
  r.vector_types = info.vector_loads;
  r.lane_unroll = info.lane_unroll;
  r.block_tiles = info.block_shared;
  r.mma = info.tensor_cores;
  r.precision = matmul_precision();
  r.async_copy = info.async_copy;
  return r;
}

DeviceDesc gpu_device_desc(runtime::DeviceKind kind, const std::string& arch) {
  return gpu_device_desc(runtime::gpu::describe(kind, arch));
}

}  // namespace codegen
