// Copies between host memory and a GPU's memory, in the device's stream order.
#pragma once
#include <cstddef>

#include "runtime/gpu/context.h"

namespace runtime::gpu {

// Host -> device. Small copies go straight from the source (the driver stages pageable memory
// itself and returns once the source was read, without waiting for the device); large ones go
// through pinned staging blocks, waiting for each block's copy before the block is refilled.
// The source may be reused as soon as this returns.
void copy_to_device(Context& c, void* dst, const void* src, size_t n);
// Device -> host: waits for the device work queued before it (driver errors throw; the
// stream's recorded failures are left for its next wait).
void copy_to_host(Context& c, void* dst, const void* src, size_t n);
// Device -> device on the same device, queued (no wait).
void copy_on_device(Context& c, void* dst, const void* src, size_t n);

}  // namespace runtime::gpu
