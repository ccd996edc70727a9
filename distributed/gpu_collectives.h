// The GPU collective libraries rune::distributed loads with dlopen, as the runtime loads the
// CUDA and HIP drivers (runtime/gpu/driver.h): NCCL for CUDA (libnccl.so.2), RCCL for HIP
// (librccl.so.1). No link-time dependency; where a library is absent, using it raises naming the
// names tried and each dlerror. RUNE_NCCL_LIBRARY / RUNE_RCCL_LIBRARY name a file to load instead.
//
// Status: loading, symbol resolution and version queries only; the collectives over them (GPU
// buffers, one communicator per device) are not written yet (docs/distributed.md).
#pragma once
#include <string>

namespace rune::distributed {

enum class GpuCollectives { Nccl, Rccl };

// The entry points rune needs, resolved; a load that failed has `error` set and no entries.
struct GpuCollectiveLibrary {
  std::string name;   // the file that loaded
  std::string error;  // why it did not ("" when loaded)
  int (*get_version)(int*) = nullptr;
  int (*get_unique_id)(void*) = nullptr;
  int (*comm_init_rank)(void**, int, const void*, int) = nullptr;
  int (*comm_destroy)(void*) = nullptr;
  int (*all_reduce)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
  int (*all_gather)(const void*, void*, size_t, int, void*, void*) = nullptr;
  int (*reduce_scatter)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
  int (*broadcast)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
  const char* (*get_error_string)(int) = nullptr;
};

// The library, loaded once per process (RUNE_*_LIBRARY is read at that first call).
const GpuCollectiveLibrary& gpu_collective_library(GpuCollectives which);
// Loads `path` (for tests: a fresh load, not cached).
GpuCollectiveLibrary load_gpu_collective_library(GpuCollectives which, const std::string& path);
// The library's version (NCCL's code: 22703 for 2.27.3); raises distributed_error naming the
// library, the names tried and why each failed, where it is absent or lacks a symbol.
int gpu_collective_version(GpuCollectives which);

}  // namespace rune::distributed
