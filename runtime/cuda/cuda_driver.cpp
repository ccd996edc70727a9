// The CUDA driver API behind runtime::gpu::DriverTable, loaded from libcuda.so.1 with dlopen by
// the loader CUDA and HIP share (runtime/gpu/driver_loader.h). The entry points are the rows of
// runtime/cuda/cuda_driver.def; the few types they use are declared here (cuda.h is not needed
// to build). Only the entries whose calls differ from HIP's are written here.
#include <mutex>

#include "runtime/gpu/driver_loader.h"

namespace runtime::gpu {

namespace {

typedef int CUresult, CUdevice;
typedef unsigned long long CUdeviceptr;
typedef void *CUcontext, *CUstream, *CUevent, *CUmodule, *CUfunction, *CUgraph, *CUgraphExec;

constexpr int kAttrWarpSize = 10;         // CU_DEVICE_ATTRIBUTE_WARP_SIZE
constexpr int kAttrMultiprocessors = 16;  // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;          // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;          // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr int kErrorInvalidValue = 1;     // CUDA_ERROR_INVALID_VALUE

struct CudaFns {
#define RUNE_GPU_SYMBOLS "runtime/cuda/cuda_driver.def"
#include "runtime/gpu/symbol_table.inc"
};

struct Cuda : DriverEntries<Cuda> {
  static constexpr const char* kApi = "CUDA";
  static constexpr const char* kKind = "driver";
  static std::vector<std::string> libraries() { return {"libcuda.so.1", "libcuda.so"}; }
  static std::string not_loaded() {
    return "libcuda.so.1 cannot be loaded (no NVIDIA driver on this machine)";
  }

  static inline CudaFns fn;
  // Primary contexts, one per device, retained once (released at process exit by the driver).
  static inline std::mutex ctx_mu;
  static inline CUcontext ctx[64] = {};

  static int device_name(int dev, char* buf, int len) {
    CUdevice d;
    if (int r = fn.DeviceGet(&d, dev)) return r;
    return fn.DeviceGetName(buf, len, d);
  }
  static int device_arch(int dev, char* buf, int len) {
    int major = 0, minor = 0;
    if (int r = attribute(dev, kAttrCcMajor, &major)) return r;
    if (int r = attribute(dev, kAttrCcMinor, &minor)) return r;
    std::string s = "sm_" + std::to_string(major) + std::to_string(minor);
    if (len <= static_cast<int>(s.size())) return kErrorInvalidValue;
    s.copy(buf, s.size());
    buf[s.size()] = 0;
    return 0;
  }
  static int attribute(int dev, int attr, int* v) {
    CUdevice d;
    if (int r = fn.DeviceGet(&d, dev)) return r;
    return fn.DeviceGetAttribute(v, attr, d);
  }
  static int multiprocessors(int dev, int* n) { return attribute(dev, kAttrMultiprocessors, n); }
  static int warp_size(int dev, int* n) { return attribute(dev, kAttrWarpSize, n); }
  static int set_current(int dev) {
    if (dev < 0 || dev >= 64) return kErrorInvalidValue;
    CUcontext c;
    {
      std::lock_guard l(ctx_mu);
      if (!ctx[dev]) {
        CUdevice d;
        if (int r = fn.DeviceGet(&d, dev)) return r;
        if (int r = fn.DevicePrimaryCtxRetain(&ctx[dev], d)) return r;
      }
      c = ctx[dev];
    }
    return fn.CtxSetCurrent(c);
  }
  static int mem_alloc(DevPtr* p, size_t n) {
    CUdeviceptr d = 0;
    int r = fn.MemAlloc(&d, n);
    *p = d;
    return r;
  }
  static int mem_free(DevPtr p) { return fn.MemFree(p); }
  static int memcpy_htod(DevPtr dst, const void* src, size_t n, Handle s) {
    return fn.MemcpyHtoDAsync(dst, src, n, s);
  }
  static int memcpy_dtoh(void* dst, DevPtr src, size_t n, Handle s) {
    return fn.MemcpyDtoHAsync(dst, src, n, s);
  }
  static int memcpy_dtod(DevPtr dst, DevPtr src, size_t n, Handle s) {
    return fn.MemcpyDtoDAsync(dst, src, n, s);
  }
  static int graph_instantiate(Handle* exec, Handle graph) {
    return fn.GraphInstantiate(exec, graph, 0);
  }
  static const char* error_string(int code) {
    const char* s = nullptr;
    if (fn.GetErrorString(code, &s) != 0 || !s) return "unrecognised CUDA error";
    return s;
  }
};

}  // namespace

DriverLoad load_cuda_driver() { return load_driver<Cuda>(); }

}  // namespace runtime::gpu
