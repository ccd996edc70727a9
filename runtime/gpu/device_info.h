// The one description of a GPU (CUDA:n, HIP:n) that every GPU decision reads: planning and
// lowering take their device description from it (codegen/gpu/device_desc.h), never from a
// dialect's strings. The driver gives the facts (name, arch, multiprocessors, warp size); the
// capabilities follow from the API and the arch (describe_capabilities), and a driver may adjust
// them for a device that is not what its arch says (DriverTable::adjust_info: the test suite's
// fake driver, whose "GPU" is host threads).
#pragma once
#include <string>

#include "runtime/device.h"

namespace runtime::gpu {

struct DeviceInfo {
  DeviceKind kind = DeviceKind::CUDA;
  std::string name;  // "NVIDIA H200"
  std::string arch;  // "sm_90", "gfx90a"
  int multiprocessors = 0;
  int warp_size = 0;
  // 8 consecutive threads exchange values and broadcast one lane's value (warp shuffles):
  // reductions and row kernels run their 8 lanes as 8 threads.
  bool lane_shuffles = false;
  bool vector_loads = false;  // 16-byte vector loads and stores (float4, longlong2, ...)
  bool block_shared = false;  // block-shared arrays and a block barrier: tiled matrix products
  // Warp-level matrix fragments, mma.sync m16n8k8 tf32 and m16n8k16 bf16 (CUDA sm_80 and later).
  bool tensor_cores = false;
  bool async_copy = false;  // asynchronous global -> shared copies, cp.async (CUDA sm_80 and later)
  // Unroll hint for a lane thread's loop: loads each thread keeps in flight.
  int lane_unroll = 0;
};

// Sets info's capabilities from its kind and arch (the other fields are the driver's).
void describe_capabilities(DeviceInfo& info);

// The description of a device of `kind` and `arch` without one at hand (kernels compiled ahead
// of time, tests): the capabilities, and the arch's warp size; no name, no multiprocessors.
DeviceInfo describe(DeviceKind kind, const std::string& arch);

}  // namespace runtime::gpu
