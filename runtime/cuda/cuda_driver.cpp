// The CUDA driver API behind runtime::gpu::DriverTable, loaded from libcuda.so.1 with dlopen.
// The few types and signatures used are declared here (cuda.h is not needed to build); the
// `_v2` symbols are the ones cuda.h maps the plain names to (64-bit sizes and pointers).
#include <mutex>

#include "runtime/gpu/driver.h"

namespace runtime::gpu {

namespace {

using CUresult = int;
using CUdevice = int;
using CUdeviceptr = unsigned long long;
using CUcontext = void*;
using CUstream = void*;
using CUevent = void*;
using CUmodule = void*;
using CUfunction = void*;

constexpr int kAttrWarpSize = 10;           // CU_DEVICE_ATTRIBUTE_WARP_SIZE
constexpr int kAttrMultiprocessors = 16;    // CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
constexpr int kAttrCcMajor = 75;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
constexpr int kAttrCcMinor = 76;            // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
constexpr unsigned kStreamNonBlocking = 1;  // CU_STREAM_NON_BLOCKING
constexpr unsigned kEventDefault = 0;       // CU_EVENT_DEFAULT (timing enabled)
constexpr unsigned kHostAllocPortable = 1;  // CU_MEMHOSTALLOC_PORTABLE
constexpr int kErrorInvalidValue = 1;       // CUDA_ERROR_INVALID_VALUE

struct Cuda {
  CUresult (*Init)(unsigned);
  CUresult (*DeviceGetCount)(int*);
  CUresult (*DeviceGet)(CUdevice*, int);
  CUresult (*DeviceGetName)(char*, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int*, int, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext*, CUdevice);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*MemAlloc)(CUdeviceptr*, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemHostAlloc)(void**, size_t, unsigned);
  CUresult (*MemFreeHost)(void*);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult (*MemcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*StreamCreate)(CUstream*, unsigned);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*EventCreate)(CUevent*, unsigned);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float*, CUevent, CUevent);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*ModuleLoadData)(CUmodule*, const void*);
  CUresult (*ModuleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void**, void**);
  CUresult (*GetErrorString)(CUresult, const char**);
  // Graphs (optional: CUDA 11.4 and later have every one).
  CUresult (*StreamBeginCapture)(CUstream, int);
  CUresult (*StreamEndCapture)(CUstream, void**);
  CUresult (*GraphInstantiateWithFlags)(void**, void*, unsigned long long);
  CUresult (*GraphLaunch)(void*, CUstream);
  CUresult (*GraphExecDestroy)(void*);
  CUresult (*GraphDestroy)(void*);
  // Primary contexts, one per device, retained once (released at process exit by the driver).
  std::mutex ctx_mu;
  CUcontext ctx[64] = {};
};
Cuda g;

int cu_device(int dev, CUdevice* d) { return g.DeviceGet(d, dev); }

int init() { return g.Init(0); }
int device_count(int* n) { return g.DeviceGetCount(n); }
int device_name(int dev, char* buf, int len) {
  CUdevice d;
  if (int r = cu_device(dev, &d)) return r;
  return g.DeviceGetName(buf, len, d);
}
int device_arch(int dev, char* buf, int len) {
  CUdevice d;
  int major = 0, minor = 0;
  if (int r = cu_device(dev, &d)) return r;
  if (int r = g.DeviceGetAttribute(&major, kAttrCcMajor, d)) return r;
  if (int r = g.DeviceGetAttribute(&minor, kAttrCcMinor, d)) return r;
  std::string s = "sm_" + std::to_string(major) + std::to_string(minor);
  if (len <= static_cast<int>(s.size())) return kErrorInvalidValue;
  s.copy(buf, s.size());
  buf[s.size()] = 0;
  return 0;
}
int attribute(int dev, int attr, int* v) {
  CUdevice d;
  if (int r = cu_device(dev, &d)) return r;
  return g.DeviceGetAttribute(v, attr, d);
}
int multiprocessors(int dev, int* n) { return attribute(dev, kAttrMultiprocessors, n); }
int warp_size(int dev, int* n) { return attribute(dev, kAttrWarpSize, n); }
int set_current(int dev) {
  if (dev < 0 || dev >= 64) return kErrorInvalidValue;
  CUcontext c;
  {
    std::lock_guard l(g.ctx_mu);
    if (!g.ctx[dev]) {
      CUdevice d;
      if (int r = cu_device(dev, &d)) return r;
      if (int r = g.DevicePrimaryCtxRetain(&g.ctx[dev], d)) return r;
    }
    c = g.ctx[dev];
  }
  return g.CtxSetCurrent(c);
}
int mem_alloc(DevPtr* p, size_t n) {
  CUdeviceptr d = 0;
  int r = g.MemAlloc(&d, n);
  *p = d;
  return r;
}
int mem_free(DevPtr p) { return g.MemFree(p); }
int host_alloc(void** p, size_t n) { return g.MemHostAlloc(p, n, kHostAllocPortable); }
int host_free(void* p) { return g.MemFreeHost(p); }
int memcpy_htod(DevPtr dst, const void* src, size_t n, Handle s) {
  return g.MemcpyHtoDAsync(dst, src, n, s);
}
int memcpy_dtoh(void* dst, DevPtr src, size_t n, Handle s) {
  return g.MemcpyDtoHAsync(dst, src, n, s);
}
int memcpy_dtod(DevPtr dst, DevPtr src, size_t n, Handle s) {
  return g.MemcpyDtoDAsync(dst, src, n, s);
}
int stream_create(Handle* s) { return g.StreamCreate(s, kStreamNonBlocking); }
int stream_synchronize(Handle s) { return g.StreamSynchronize(s); }
int event_create(Handle* e) { return g.EventCreate(e, kEventDefault); }
int event_record(Handle e, Handle s) { return g.EventRecord(e, s); }
int event_synchronize(Handle e) { return g.EventSynchronize(e); }
int event_elapsed_ms(float* ms, Handle a, Handle b) { return g.EventElapsedTime(ms, a, b); }
int event_destroy(Handle e) { return g.EventDestroy(e); }
int module_load(Handle* m, const void* image) { return g.ModuleLoadData(m, image); }
int module_function(Handle* f, Handle m, const char* name) {
  return g.ModuleGetFunction(f, m, name);
}
int launch(Handle f, unsigned grid, unsigned block, Handle s, void** params, unsigned) {
  return g.LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, nullptr);
}
// Thread-local capture: work other threads queue elsewhere meanwhile is unaffected.
constexpr int kCaptureThreadLocal = 1;  // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL
int begin_capture(Handle s) { return g.StreamBeginCapture(s, kCaptureThreadLocal); }
int end_capture(Handle s, Handle* graph) { return g.StreamEndCapture(s, graph); }
int graph_instantiate(Handle* exec, Handle graph) {
  return g.GraphInstantiateWithFlags(exec, graph, 0);
}
int graph_launch(Handle exec, Handle s) { return g.GraphLaunch(exec, s); }
int graph_exec_destroy(Handle exec) { return g.GraphExecDestroy(exec); }
int graph_destroy(Handle graph) { return g.GraphDestroy(graph); }
const char* error_string(int code) {
  const char* s = nullptr;
  if (g.GetErrorString(code, &s) != 0 || !s) return "unrecognised CUDA error";
  return s;
}

}  // namespace

DriverLoad load_cuda_driver() {
  DriverLoad out;
  Library lib = Library::open_first({"libcuda.so.1", "libcuda.so"});
  if (!lib.handle) {
    out.error = "libcuda.so.1 cannot be loaded (no NVIDIA driver on this machine)";
    return out;
  }
  std::string missing;
  auto bind = [&](auto& fn, const char* sym) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(lib.symbol(sym, &missing));
  };
  bind(g.Init, "cuInit");
  bind(g.DeviceGetCount, "cuDeviceGetCount");
  bind(g.DeviceGet, "cuDeviceGet");
  bind(g.DeviceGetName, "cuDeviceGetName");
  bind(g.DeviceGetAttribute, "cuDeviceGetAttribute");
  bind(g.DevicePrimaryCtxRetain, "cuDevicePrimaryCtxRetain");
  bind(g.CtxSetCurrent, "cuCtxSetCurrent");
  bind(g.MemAlloc, "cuMemAlloc_v2");
  bind(g.MemFree, "cuMemFree_v2");
  bind(g.MemHostAlloc, "cuMemHostAlloc");
  bind(g.MemFreeHost, "cuMemFreeHost");
  bind(g.MemcpyHtoDAsync, "cuMemcpyHtoDAsync_v2");
  bind(g.MemcpyDtoHAsync, "cuMemcpyDtoHAsync_v2");
  bind(g.MemcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  bind(g.StreamCreate, "cuStreamCreate");
  bind(g.StreamSynchronize, "cuStreamSynchronize");
  bind(g.EventCreate, "cuEventCreate");
  bind(g.EventRecord, "cuEventRecord");
  bind(g.EventSynchronize, "cuEventSynchronize");
  // CUDA 12.8 added cuEventElapsedTime_v2 (cuda.h 13 maps the plain name to it); older drivers
  // have only the plain symbol, which newer drivers keep.
  std::string no_v2;
  g.EventElapsedTime =
      reinterpret_cast<decltype(g.EventElapsedTime)>(lib.symbol("cuEventElapsedTime_v2", &no_v2));
  if (!g.EventElapsedTime) bind(g.EventElapsedTime, "cuEventElapsedTime");
  bind(g.EventDestroy, "cuEventDestroy_v2");
  bind(g.ModuleLoadData, "cuModuleLoadData");
  bind(g.ModuleGetFunction, "cuModuleGetFunction");
  bind(g.LaunchKernel, "cuLaunchKernel");
  bind(g.GetErrorString, "cuGetErrorString");
  if (!missing.empty()) {
    out.error = lib.name + " is not a usable CUDA driver: " + missing;
    return out;
  }
  static DriverTable t;
  t.api = "CUDA";
  t.library = lib.name;
  t.init = init;
  t.device_count = device_count;
  t.device_name = device_name;
  t.device_arch = device_arch;
  t.multiprocessors = multiprocessors;
  t.warp_size = warp_size;
  t.set_current = set_current;
  t.mem_alloc = mem_alloc;
  t.mem_free = mem_free;
  t.host_alloc = host_alloc;
  t.host_free = host_free;
  t.memcpy_htod = memcpy_htod;
  t.memcpy_dtoh = memcpy_dtoh;
  t.memcpy_dtod = memcpy_dtod;
  t.stream_create = stream_create;
  t.stream_synchronize = stream_synchronize;
  t.event_create = event_create;
  t.event_record = event_record;
  t.event_synchronize = event_synchronize;
  t.event_elapsed_ms = event_elapsed_ms;
  t.event_destroy = event_destroy;
  t.module_load = module_load;
  t.module_function = module_function;
  t.launch = launch;
  t.error_string = error_string;
  // Graphs where the driver has all of them (else null: step-by-step launches).
  std::string no_graphs;
  auto optional = [&](auto& fn, const char* sym) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(lib.symbol(sym, &no_graphs));
  };
  optional(g.StreamBeginCapture, "cuStreamBeginCapture_v2");
  optional(g.StreamEndCapture, "cuStreamEndCapture");
  optional(g.GraphInstantiateWithFlags, "cuGraphInstantiateWithFlags");
  optional(g.GraphLaunch, "cuGraphLaunch");
  optional(g.GraphExecDestroy, "cuGraphExecDestroy");
  optional(g.GraphDestroy, "cuGraphDestroy");
  if (no_graphs.empty()) {
    t.begin_capture = begin_capture;
    t.end_capture = end_capture;
    t.graph_instantiate = graph_instantiate;
    t.graph_launch = graph_launch;
    t.graph_exec_destroy = graph_exec_destroy;
    t.graph_destroy = graph_destroy;
  }
  out.table = &t;
  return out;
}

}  // namespace runtime::gpu
