// The HIP runtime behind runtime::gpu::DriverTable, loaded from libamdhip64 with dlopen by the
// loader CUDA and HIP share (runtime/gpu/driver_loader.h). The entry points are the rows of
// runtime/hip/hip_driver.def; the few types they use are declared here (no HIP header is needed
// to build). Only the entries whose calls differ from CUDA's are written here.
#include <cctype>
#include <cstring>
#include <vector>

#include "runtime/gpu/driver_loader.h"

namespace runtime::gpu {

namespace {

typedef int hipError_t;
typedef void *hipDeviceptr_t, *hipStream_t, *hipEvent_t, *hipModule_t, *hipFunction_t, *hipGraph_t,
    *hipGraphExec_t;

// hipDeviceAttribute_t values of ROCm >= 5 (the CUDA-compatible range, counted from 0).
constexpr int kAttrMultiprocessors = 63;  // hipDeviceAttributeMultiprocessorCount
constexpr int kAttrWarpSize = 87;         // hipDeviceAttributeWarpSize
constexpr int kErrorInvalidValue = 1;     // hipErrorInvalidValue

void* ptr(DevPtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

struct HipFns {
#define RUNE_GPU_SYMBOLS "runtime/hip/hip_driver.def"
#include "runtime/gpu/symbol_table.inc"
};

struct Hip : DriverEntries<Hip> {
  static constexpr const char* kApi = "HIP";
  static constexpr const char* kKind = "runtime";
  static std::vector<std::string> libraries() {
    return {"libamdhip64.so.5", "libamdhip64.so", "libamdhip64.so.6"};
  }
  static std::string not_loaded() {
    return "libamdhip64.so.5 and libamdhip64.so cannot be loaded (no ROCm HIP runtime on this "
           "machine)";
  }

  static inline HipFns fn;

  static int device_name(int dev, char* buf, int len) { return fn.DeviceGetName(buf, len, dev); }
  // The gcn arch name ("gfx90a:sramecc+:xnack-") sits in hipDeviceProp_t at an offset that
  // changed between ROCm releases (and the struct grew), so the properties land in a large
  // buffer and the name is found by its "gfx" prefix; the device name comes first, so it is
  // skipped.
  static int device_arch(int dev, char* buf, int len) {
    std::vector<char> props(64 * 1024, 0);
    if (int r = fn.GetDeviceProperties(props.data(), dev)) return r;
    for (size_t i = 256; i + 4 < props.size(); ++i) {
      if (std::strncmp(&props[i], "gfx", 3) != 0) continue;
      size_t n = 3;
      while (i + n < props.size() && std::isalnum(static_cast<unsigned char>(props[i + n]))) ++n;
      if (n <= 3 || static_cast<int>(n) >= len) continue;
      std::memcpy(buf, &props[i], n);
      buf[n] = 0;
      return 0;
    }
    return kErrorInvalidValue;
  }
  static int multiprocessors(int dev, int* n) {
    return fn.DeviceGetAttribute(n, kAttrMultiprocessors, dev);
  }
  static int warp_size(int dev, int* n) { return fn.DeviceGetAttribute(n, kAttrWarpSize, dev); }
  static int set_current(int dev) { return fn.SetDevice(dev); }
  static int mem_alloc(DevPtr* p, size_t n) {
    void* d = nullptr;
    int r = fn.MemAlloc(&d, n);
    *p = reinterpret_cast<uintptr_t>(d);
    return r;
  }
  static int mem_free(DevPtr p) { return fn.MemFree(ptr(p)); }
  static int memcpy_htod(DevPtr dst, const void* src, size_t n, Handle s) {
    return fn.MemcpyHtoDAsync(ptr(dst), const_cast<void*>(src), n, s);
  }
  static int memcpy_dtoh(void* dst, DevPtr src, size_t n, Handle s) {
    return fn.MemcpyDtoHAsync(dst, ptr(src), n, s);
  }
  static int memcpy_dtod(DevPtr dst, DevPtr src, size_t n, Handle s) {
    return fn.MemcpyDtoDAsync(ptr(dst), ptr(src), n, s);
  }
  static int graph_instantiate(Handle* exec, Handle graph) {
    return fn.GraphInstantiate(exec, graph, nullptr, nullptr, 0);
  }
  static const char* error_string(int code) {
    const char* s = fn.GetErrorString(code);
    return s ? s : "unrecognised HIP error";
  }
};

}  // namespace

DriverLoad load_hip_driver() { return load_driver<Hip>(); }

}  // namespace runtime::gpu
