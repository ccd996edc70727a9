// The GPU driver as one function table: what CUDA's driver API and HIP's runtime both provide,
// with one signature per entry. Implementations are loaded with dlopen (runtime/cuda,
// runtime/hip), so the library has no link-time dependency on either vendor and builds and runs
// on a machine without them. No vendor header is included anywhere: handles are opaque
// pointers, device memory is a 64-bit address (CUdeviceptr / hipDeviceptr_t).
//
// Every entry returns the vendor's status code (0 is success); error_string names a code.
// Invariant: every entry is non-null in a loaded table, except the graph entries, which a
// driver without stream capture leaves null (programs then launch step by step).
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
  const char* api = "";     // "CUDA" or "HIP": the first word of every driver error
  std::string library;      // the file that was loaded, e.g. "libcuda.so.1"
  int (*init)() = nullptr;  // cuInit(0) / hipInit(0)
  int (*device_count)(int* n) = nullptr;
  int (*device_name)(int dev, char* buf, int len) = nullptr;
  // "sm_90" (CUDA: compute capability) or "gfx90a" (HIP: the gcn arch name without features).
  int (*device_arch)(int dev, char* buf, int len) = nullptr;
  int (*multiprocessors)(int dev, int* n) = nullptr;
  int (*warp_size)(int dev, int* n) = nullptr;
  // Makes dev current on the calling thread (CUDA: its primary context; HIP: hipSetDevice).
  int (*set_current)(int dev) = nullptr;
  int (*mem_alloc)(DevPtr* p, size_t n) = nullptr;
  int (*mem_free)(DevPtr p) = nullptr;
  int (*host_alloc)(void** p, size_t n) = nullptr;  // page-locked host memory
  int (*host_free)(void* p) = nullptr;
  int (*memcpy_htod)(DevPtr dst, const void* src, size_t n, Handle stream) = nullptr;
  int (*memcpy_dtoh)(void* dst, DevPtr src, size_t n, Handle stream) = nullptr;
  int (*memcpy_dtod)(DevPtr dst, DevPtr src, size_t n, Handle stream) = nullptr;
  int (*stream_create)(Handle* s) = nullptr;  // non-blocking w.r.t. the legacy default stream
  int (*stream_synchronize)(Handle s) = nullptr;
  int (*event_create)(Handle* e) = nullptr;  // with timing
  int (*event_record)(Handle e, Handle s) = nullptr;
  int (*event_synchronize)(Handle e) = nullptr;
  int (*event_elapsed_ms)(float* ms, Handle start, Handle end) = nullptr;
  int (*event_destroy)(Handle e) = nullptr;
  int (*module_load)(Handle* m, const void* image) = nullptr;  // a cubin / code object
  int (*module_function)(Handle* f, Handle m, const char* name) = nullptr;
  // A 1-D launch; params[i] points at kernel argument i (n_params of them: implementations
  // that need no count ignore it).
  int (*launch)(Handle f, unsigned grid, unsigned block, Handle stream, void** params,
                unsigned n_params) = nullptr;
  const char* (*error_string)(int code) = nullptr;
  // Graphs (runtime/gpu/graphs.h): work queued on a capturing stream is recorded, not run
  // (cuStreamBeginCapture in thread-local mode / hipStreamBeginCapture); end_capture returns
  // the recording, instantiate makes it launchable, graph_launch queues it all on a stream.
  // Null together where the driver lacks them.
  int (*begin_capture)(Handle stream) = nullptr;
  int (*end_capture)(Handle stream, Handle* graph) = nullptr;
  int (*graph_instantiate)(Handle* exec, Handle graph) = nullptr;
  int (*graph_launch)(Handle exec, Handle stream) = nullptr;
  int (*graph_exec_destroy)(Handle exec) = nullptr;
  int (*graph_destroy)(Handle graph) = nullptr;
  // Optional: adjusts the description the runtime derived from the device's kind and arch, for
  // a device that is not what its arch says (the test suite's fake driver). Null for real ones.
  void (*adjust_info)(DeviceInfo& info) = nullptr;
  bool has_graphs() const {
    return begin_capture && end_capture && graph_instantiate && graph_launch &&
           graph_exec_destroy && graph_destroy;
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
