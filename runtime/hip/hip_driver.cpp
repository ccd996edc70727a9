// The HIP runtime behind runtime::gpu::DriverTable, loaded from libamdhip64 with dlopen. The
// few types and signatures used are declared here (no HIP header is needed to build).
#include <cctype>
#include <cstring>
#include <vector>

#include "runtime/gpu/driver.h"

namespace runtime::gpu {

namespace {

using hipError_t = int;
using hipStream_t = void*;
using hipEvent_t = void*;
using hipModule_t = void*;
using hipFunction_t = void*;

// hipDeviceAttribute_t values of ROCm >= 5 (the CUDA-compatible range, counted from 0).
constexpr int kAttrMultiprocessors = 63;     // hipDeviceAttributeMultiprocessorCount
constexpr int kAttrWarpSize = 87;            // hipDeviceAttributeWarpSize
constexpr unsigned kStreamNonBlocking = 1;   // hipStreamNonBlocking
constexpr unsigned kEventDefault = 0;        // hipEventDefault
constexpr unsigned kHostMallocPortable = 1;  // hipHostMallocPortable
constexpr int kErrorInvalidValue = 1;        // hipErrorInvalidValue

struct Hip {
  hipError_t (*Init)(unsigned);
  hipError_t (*GetDeviceCount)(int*);
  hipError_t (*DeviceGetName)(char*, int, int);
  hipError_t (*DeviceGetAttribute)(int*, int, int);
  hipError_t (*GetDeviceProperties)(void*, int);
  hipError_t (*SetDevice)(int);
  hipError_t (*Malloc)(void**, size_t);
  hipError_t (*Free)(void*);
  hipError_t (*HostMalloc)(void**, size_t, unsigned);
  hipError_t (*HostFree)(void*);
  hipError_t (*MemcpyHtoDAsync)(void*, void*, size_t, hipStream_t);
  hipError_t (*MemcpyDtoHAsync)(void*, void*, size_t, hipStream_t);
  hipError_t (*MemcpyDtoDAsync)(void*, void*, size_t, hipStream_t);
  hipError_t (*StreamCreateWithFlags)(hipStream_t*, unsigned);
  hipError_t (*StreamSynchronize)(hipStream_t);
  hipError_t (*EventCreateWithFlags)(hipEvent_t*, unsigned);
  hipError_t (*EventRecord)(hipEvent_t, hipStream_t);
  hipError_t (*EventSynchronize)(hipEvent_t);
  hipError_t (*EventElapsedTime)(float*, hipEvent_t, hipEvent_t);
  hipError_t (*EventDestroy)(hipEvent_t);
  hipError_t (*ModuleLoadData)(hipModule_t*, const void*);
  hipError_t (*ModuleGetFunction)(hipFunction_t*, hipModule_t, const char*);
  hipError_t (*ModuleLaunchKernel)(hipFunction_t, unsigned, unsigned, unsigned, unsigned, unsigned,
                                   unsigned, unsigned, hipStream_t, void**, void**);
  const char* (*GetErrorString)(hipError_t);
  // Graphs (optional; ROCm 5.2 has them, marked beta).
  hipError_t (*StreamBeginCapture)(hipStream_t, int);
  hipError_t (*StreamEndCapture)(hipStream_t, void**);
  hipError_t (*GraphInstantiate)(void**, void*, void**, char*, size_t);
  hipError_t (*GraphLaunch)(void*, hipStream_t);
  hipError_t (*GraphExecDestroy)(void*);
  hipError_t (*GraphDestroy)(void*);
};
Hip g;

void* ptr(DevPtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

int init() { return g.Init(0); }
int device_count(int* n) { return g.GetDeviceCount(n); }
int device_name(int dev, char* buf, int len) { return g.DeviceGetName(buf, len, dev); }
// The gcn arch name ("gfx90a:sramecc+:xnack-") sits in hipDeviceProp_t at an offset that changed
// between ROCm releases (and the struct grew), so the properties land in a large buffer and the
// name is found by its "gfx" prefix; the device name comes first, so it is skipped.
int device_arch(int dev, char* buf, int len) {
  std::vector<char> props(64 * 1024, 0);
  if (int r = g.GetDeviceProperties(props.data(), dev)) return r;
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
int multiprocessors(int dev, int* n) { return g.DeviceGetAttribute(n, kAttrMultiprocessors, dev); }
int warp_size(int dev, int* n) { return g.DeviceGetAttribute(n, kAttrWarpSize, dev); }
int set_current(int dev) { return g.SetDevice(dev); }
int mem_alloc(DevPtr* p, size_t n) {
  void* d = nullptr;
  int r = g.Malloc(&d, n);
  *p = reinterpret_cast<uintptr_t>(d);
  return r;
}
int mem_free(DevPtr p) { return g.Free(ptr(p)); }
int host_alloc(void** p, size_t n) { return g.HostMalloc(p, n, kHostMallocPortable); }
int host_free(void* p) { return g.HostFree(p); }
int memcpy_htod(DevPtr dst, const void* src, size_t n, Handle s) {
  return g.MemcpyHtoDAsync(ptr(dst), const_cast<void*>(src), n, s);
}
int memcpy_dtoh(void* dst, DevPtr src, size_t n, Handle s) {
  return g.MemcpyDtoHAsync(dst, ptr(src), n, s);
}
int memcpy_dtod(DevPtr dst, DevPtr src, size_t n, Handle s) {
  return g.MemcpyDtoDAsync(ptr(dst), ptr(src), n, s);
}
int stream_create(Handle* s) { return g.StreamCreateWithFlags(s, kStreamNonBlocking); }
int stream_synchronize(Handle s) { return g.StreamSynchronize(s); }
int event_create(Handle* e) { return g.EventCreateWithFlags(e, kEventDefault); }
int event_record(Handle e, Handle s) { return g.EventRecord(e, s); }
int event_synchronize(Handle e) { return g.EventSynchronize(e); }
int event_elapsed_ms(float* ms, Handle a, Handle b) { return g.EventElapsedTime(ms, a, b); }
int event_destroy(Handle e) { return g.EventDestroy(e); }
int module_load(Handle* m, const void* image) { return g.ModuleLoadData(m, image); }
int module_function(Handle* f, Handle m, const char* name) {
  return g.ModuleGetFunction(f, m, name);
}
int launch(Handle f, unsigned grid, unsigned block, Handle s, void** params, unsigned) {
  return g.ModuleLaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, nullptr);
}
constexpr int kCaptureThreadLocal = 1;  // hipStreamCaptureModeThreadLocal
int begin_capture(Handle s) { return g.StreamBeginCapture(s, kCaptureThreadLocal); }
int end_capture(Handle s, Handle* graph) { return g.StreamEndCapture(s, graph); }
int graph_instantiate(Handle* exec, Handle graph) {
  return g.GraphInstantiate(exec, graph, nullptr, nullptr, 0);
}
int graph_launch(Handle exec, Handle s) { return g.GraphLaunch(exec, s); }
int graph_exec_destroy(Handle exec) { return g.GraphExecDestroy(exec); }
int graph_destroy(Handle graph) { return g.GraphDestroy(graph); }
const char* error_string(int code) {
  const char* s = g.GetErrorString(code);
  return s ? s : "unrecognised HIP error";
}

}  // namespace

DriverLoad load_hip_driver() {
  DriverLoad out;
  Library lib = Library::open_first({"libamdhip64.so.5", "libamdhip64.so", "libamdhip64.so.6"});
  if (!lib.handle) {
    out.error =
        "libamdhip64.so.5 and libamdhip64.so cannot be loaded (no ROCm HIP runtime on "
        "this machine)";
    return out;
  }
  std::string missing;
  auto bind = [&](auto& fn, const char* sym) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(lib.symbol(sym, &missing));
  };
  bind(g.Init, "hipInit");
  bind(g.GetDeviceCount, "hipGetDeviceCount");
  bind(g.DeviceGetName, "hipDeviceGetName");
  bind(g.DeviceGetAttribute, "hipDeviceGetAttribute");
  bind(g.GetDeviceProperties, "hipGetDeviceProperties");
  bind(g.SetDevice, "hipSetDevice");
  bind(g.Malloc, "hipMalloc");
  bind(g.Free, "hipFree");
  bind(g.HostMalloc, "hipHostMalloc");
  bind(g.HostFree, "hipHostFree");
  bind(g.MemcpyHtoDAsync, "hipMemcpyHtoDAsync");
  bind(g.MemcpyDtoHAsync, "hipMemcpyDtoHAsync");
  bind(g.MemcpyDtoDAsync, "hipMemcpyDtoDAsync");
  bind(g.StreamCreateWithFlags, "hipStreamCreateWithFlags");
  bind(g.StreamSynchronize, "hipStreamSynchronize");
  bind(g.EventCreateWithFlags, "hipEventCreateWithFlags");
  bind(g.EventRecord, "hipEventRecord");
  bind(g.EventSynchronize, "hipEventSynchronize");
  bind(g.EventElapsedTime, "hipEventElapsedTime");
  bind(g.EventDestroy, "hipEventDestroy");
  bind(g.ModuleLoadData, "hipModuleLoadData");
  bind(g.ModuleGetFunction, "hipModuleGetFunction");
  bind(g.ModuleLaunchKernel, "hipModuleLaunchKernel");
  bind(g.GetErrorString, "hipGetErrorString");
  if (!missing.empty()) {
    out.error = lib.name + " is not a usable HIP runtime: " + missing;
    return out;
  }
  static DriverTable t;
  t.api = "HIP";
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
  // Graphs where the runtime has all of them (else null: step-by-step launches).
  std::string no_graphs;
  auto optional = [&](auto& fn, const char* sym) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(lib.symbol(sym, &no_graphs));
  };
  optional(g.StreamBeginCapture, "hipStreamBeginCapture");
  optional(g.StreamEndCapture, "hipStreamEndCapture");
  optional(g.GraphInstantiate, "hipGraphInstantiate");
  optional(g.GraphLaunch, "hipGraphLaunch");
  optional(g.GraphExecDestroy, "hipGraphExecDestroy");
  optional(g.GraphDestroy, "hipGraphDestroy");
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
