// A GPU as planning sees it (codegen/plan.h's DeviceDesc), from the runtime's one description of
// the device (runtime/gpu/device_info.h): every GPU decision of optimise and lower reads this,
// never a dialect's strings; renderers only spell what the lowered kernel says.
#pragma once
#include <string>

#include "codegen/plan.h"
#include "runtime/gpu/device_info.h"

namespace codegen {

// The planning description of `info`, with the current matmul precision.
DeviceDesc gpu_device_desc(const runtime::gpu::DeviceInfo& info);
// The same for a device of `kind` and `arch` described without one at hand (ahead-of-time
// compiles, tests): runtime::gpu::describe(kind, arch).
DeviceDesc gpu_device_desc(runtime::DeviceKind kind, const std::string& arch);

}  // namespace codegen
