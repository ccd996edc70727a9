// What loading a GPU driver shares between CUDA and HIP, written once: open the vendor library,
// resolve its table (the API's .def through runtime/gpu/symbol_table.inc), refuse it naming
// every missing symbol, and fill a DriverTable whose entries that are the same call on both
// APIs are defined here. Included only by the two loaders (runtime/cuda/cuda_driver.cpp,
// runtime/hip/hip_driver.cpp), each inside its own anonymous namespace.
//
// An API is a struct `A : DriverEntries<A>` with
//   kApi, kKind          "CUDA", "driver": errors say "<library> is not a usable CUDA driver: ..."
//   libraries()          the names to dlopen, in order
//   not_loaded()         the error when none loads
//   fn                   its symbol table (roles named alike in both .def files: Init,
//                        StreamCreate, EventRecord, LaunchKernel, ...)
//   the entries whose calls differ: device_name, device_arch, multiprocessors, warp_size,
//   set_current, mem_alloc, mem_free, memcpy_htod, memcpy_dtoh, memcpy_dtod,
//   graph_instantiate, error_string.
#pragma once
#include "runtime/gpu/driver.h"
#include "runtime/gpu/symbols.h"

namespace runtime::gpu {

// The entries whose CUDA and HIP calls are the same, over A's symbol table.
template <class A>
struct DriverEntries {
  // Flag values, the same on both APIs (HIP mirrors CUDA's enums).
  // CU_STREAM_NON_BLOCKING, hipStreamNonBlocking
  static constexpr unsigned kStreamNonBlocking = 1;
  // CU_EVENT_DEFAULT, hipEventDefault (timing enabled)
  static constexpr unsigned kEventDefault = 0;
  // CU_MEMHOSTALLOC_PORTABLE, hipHostMallocPortable
  static constexpr unsigned kHostAllocPortable = 1;
  // CU_STREAM_CAPTURE_MODE_THREAD_LOCAL, hipStreamCaptureModeThreadLocal
  static constexpr int kCaptureThreadLocal = 1;

  static int init() { return A::fn.Init(0); }
  static int device_count(int* n) { return A::fn.DeviceGetCount(n); }
  static int host_alloc(void** p, size_t n) { return A::fn.HostAlloc(p, n, kHostAllocPortable); }
  static int host_free(void* p) { return A::fn.HostFree(p); }
  static int stream_create(Handle* s) { return A::fn.StreamCreate(s, kStreamNonBlocking); }
  static int stream_synchronize(Handle s) { return A::fn.StreamSynchronize(s); }
  static int event_create(Handle* e) { return A::fn.EventCreate(e, kEventDefault); }
  static int event_record(Handle e, Handle s) { return A::fn.EventRecord(e, s); }
  static int event_synchronize(Handle e) { return A::fn.EventSynchronize(e); }
  static int event_elapsed_ms(float* ms, Handle a, Handle b) {
    return A::fn.EventElapsedTime(ms, a, b);
  }
  static int event_destroy(Handle e) { return A::fn.EventDestroy(e); }
  static int module_load(Handle* m, const void* image) { return A::fn.ModuleLoadData(m, image); }
  static int module_function(Handle* f, Handle m, const char* name) {
    return A::fn.ModuleGetFunction(f, m, name);
  }
  static int launch(Handle f, unsigned grid, unsigned block, Handle s, void** params, unsigned) {
    return A::fn.LaunchKernel(f, grid, 1, 1, block, 1, 1, 0, s, params, nullptr);
  }
  // Thread-local capture: work other threads queue elsewhere meanwhile is unaffected.
  static int begin_capture(Handle s) { return A::fn.StreamBeginCapture(s, kCaptureThreadLocal); }
  static int end_capture(Handle s, Handle* graph) { return A::fn.StreamEndCapture(s, graph); }
  static int graph_launch(Handle exec, Handle s) { return A::fn.GraphLaunch(exec, s); }
  static int graph_exec_destroy(Handle exec) { return A::fn.GraphExecDestroy(exec); }
  static int graph_destroy(Handle graph) { return A::fn.GraphDestroy(graph); }
};

// Sets every entry of t (the rows of runtime/gpu/driver_table.def) to A's function of the same
// name (A's own, or DriverEntries<A>'s); the optional ones (the graphs) only where `optional`.
template <class A>
void fill_driver_table(DriverTable& t, bool optional) {
#define RUNE_DRIVER_ENTRY(field, need, ...) \
  if (Need::need == Need::required || optional) t.field = A::field;
#include "runtime/gpu/driver_table.def"
#undef RUNE_DRIVER_ENTRY
}

// Loads A's library once per process (driver_for calls it under a once flag): a table, or the
// reason there is none. The graph entries are set only where every optional row resolved.
template <class A>
DriverLoad load_driver() {
  DriverLoad out;
  Library lib = Library::open_first(A::libraries());
  if (!lib.handle) {
    out.error = A::not_loaded();
    return out;
  }
  bool graphs = false;
  out.error = bind_table(lib, A::fn, std::string(A::kApi) + " " + A::kKind, &graphs);
  if (!out.error.empty()) return out;
  static DriverTable t;
  t.api = A::kApi;
  t.library = lib.name;
  fill_driver_table<A>(t, graphs);  // graphs: else null, programs launch step by step
  out.table = &t;
  return out;
}

}  // namespace runtime::gpu
