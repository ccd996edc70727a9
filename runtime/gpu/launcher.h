// The launcher of a GPU (CUDA:n, HIP:n; one class: the driver table says which API it drives):
// steps are queued on the device's one driver stream from the caller's thread, temporaries are
// aligned to 256 bytes, check reads are host tasks of the device's runtime::Stream, run at the
// next wait. See runtime/launcher.h for the contract.
#pragma once
#include "runtime/gpu/driver.h"
#include "runtime/launcher.h"

namespace runtime::gpu {

// The launcher of GPU `d`, made with its context on first use. Throws std::invalid_argument
// "<api>: device CUDA:0 is unavailable: <why>" when the device does not exist here.
const Launcher& launcher_for(Device d, const char* api);

// Queues kernel step `step` (not a library step) on `stream` with pointer params `bufs` and n =
// step.items, as every GPU launch does; returns the driver's status.
int queue_kernel(const DriverTable& d, const Step& step, char* const* bufs, Handle stream);

}  // namespace runtime::gpu
