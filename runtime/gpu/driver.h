// The GPU driver as one function table: what CUDA's driver API and HIP's runtime both provide,
// with one signature per entry. Implementations are loaded with dlopen (runtime/cuda,
// runtime/hip), so the library has no link-time dependency on either vendor and builds and runs
// on a machine without them. No vendor header is included anywhere: handles are opaque
// pointers, device memory is a 64-bit address (CUdeviceptr / hipDeviceptr_t).
//
// Every entry returns the vendor's status code (0 is success); error_string names a code.
// Invariant: every entry is non-null in a loaded table, except the graph entries, which a
// driver without stream capture leaves null (programs then launch step by step). The entries
// are the rows of runtime/gpu/driver_table.def, through which every table is filled.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/gpu/device_info.h"
#include "runtime/gpu/symbols.h"  // Library: the dlopen helper the loaders share

namespace runtime::gpu {

using DevPtr = uint64_t;
using Handle = void*;  // a context, stream, event, module or function

struct DriverTable {
  const char* api = "";  // "CUDA" or "HIP": the first word of every driver error
  std::string library;   // the file that was loaded, e.g. "libcuda.so.1"
  // The entries, one function pointer each, from the rows of runtime/gpu/driver_table.def
  // (their signatures and what each does are there).
#define RUNE_DRIVER_ENTRY(field, need, result, ...) result (*field)(__VA_ARGS__) = nullptr;
#include "runtime/gpu/driver_table.def"
#undef RUNE_DRIVER_ENTRY
  // Optional: adjusts the description the runtime derived from the device's kind and arch, for
  // a device that is not what its arch says (the test suite's fake driver). Null for real ones.
  void (*adjust_info)(DeviceInfo& info) = nullptr;
  // Whether every optional entry (the graphs) is set.
  bool has_graphs() const {
    bool all = true;
#define RUNE_DRIVER_ENTRY(field, need, ...) \
  if (Need::need == Need::optional) all = all && field != nullptr;
#include "runtime/gpu/driver_table.def"
#undef RUNE_DRIVER_ENTRY
    return all;
  }
};

// A table and why it is missing: exactly one of `table` and `error` is set.
struct DriverLoad {
  const DriverTable* table = nullptr;
  std::string error;  // e.g. "libcuda.so.1 cannot be loaded (no NVIDIA driver on this machine)"
};

// The driver of a GPU device kind, loaded on first use (thread-safe, once per process).
const DriverLoad& driver_for(DeviceKind kind);
// Replaces the driver of `kind` before its first use (tests: a fake driver on the host).
void set_driver_for_testing(DeviceKind kind, const DriverTable* table);

// Loaders (runtime/cuda/cuda_driver.cpp, runtime/hip/hip_driver.cpp, over the shared
// runtime/gpu/driver_loader.h).
DriverLoad load_cuda_driver();
DriverLoad load_hip_driver();

// "<api>: <what> failed: <error string> (<code>)", for exceptions.
std::string driver_error(const DriverTable& d, const char* what, int code);

}  // namespace runtime::gpu
