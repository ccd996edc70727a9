// The GPU collective libraries rune::distributed loads with dlopen, as the runtime loads the
// CUDA and HIP drivers (runtime/gpu/driver.h): NCCL for CUDA (libnccl.so.2), RCCL for HIP
// (librccl.so.1). No link-time dependency; where a library is absent, using it raises naming the
// names tried and each dlerror. RUNE_NCCL_LIBRARY / RUNE_RCCL_LIBRARY name a file to load instead.
//
// This file: loading, symbol resolution, version queries and the communicator's unique id
// (which needs no GPU: it is the address of the bootstrap rank 0 opens), shared over a rune
// communicator. The communicators and collectives built on it: distributed/gpu/gpu_communicator.h.
#pragma once
#include <array>
#include <cstdint>
#include <string>

#include "distributed/communicator.h"

namespace rune::distributed {

enum class GpuCollectives { Nccl, Rccl };

// NCCL's ncclUniqueId: 128 opaque bytes every rank of one GPU communicator must share. A struct
// because ncclCommInitRank takes it by value (on the stack under the x86-64 ABI, not a pointer).
struct NcclUniqueId {
  char internal[128];
};

// The entry points rune needs, resolved; a load that failed has `error` set and no entries.
// Signatures are NCCL's (nccl.h 2.x; RCCL exports the same): handles (ncclComm_t, cudaStream_t)
// are opaque pointers, ncclDataType_t / ncclRedOp_t / ncclResult_t ints.
struct GpuCollectiveLibrary {
  std::string name;   // the file that loaded
  std::string error;  // why it did not ("" when loaded)
  int (*get_version)(int*) = nullptr;
  int (*get_unique_id)(void*) = nullptr;
  int (*comm_init_rank)(void**, int, NcclUniqueId, int) = nullptr;
  int (*comm_init_all)(void**, int, const int*) = nullptr;
  int (*comm_destroy)(void*) = nullptr;
  int (*group_start)() = nullptr;
  int (*group_end)() = nullptr;
  int (*all_reduce)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
  int (*all_gather)(const void*, void*, size_t, int, void*, void*) = nullptr;
  int (*reduce_scatter)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
  int (*broadcast)(const void*, void*, size_t, int, int, void*, void*) = nullptr;
  const char* (*get_error_string)(int) = nullptr;
  // Optional (NCCL >= 2.13): the detail of the last failure, or nullptr where not exported.
  const char* (*get_last_error)(void*) = nullptr;
};

// NCCL's ncclUniqueId: 128 opaque bytes every rank of one GPU communicator must share.
using GpuUniqueId = std::array<uint8_t, 128>;

// The library, loaded once per process (RUNE_*_LIBRARY is read at that first call).
const GpuCollectiveLibrary& gpu_collective_library(GpuCollectives which);
// Loads `path` (for tests: a fresh load, not cached).
GpuCollectiveLibrary load_gpu_collective_library(GpuCollectives which, const std::string& path);
// The library's version (NCCL's code: 22703 for 2.27.3); raises distributed_error naming the
// library, the names tried and why each failed, where it is absent or lacks a symbol.
int gpu_collective_version(GpuCollectives which);
// A fresh unique id (ncclGetUniqueId: rank 0 of the GPU communicator-to-be opens its bootstrap
// listener and describes it in the id). Raises naming the library and NCCL's error.
GpuUniqueId gpu_collective_unique_id(GpuCollectives which);
// Rank 0 of `comm` makes the id and broadcasts it: every rank returns rank 0's bytes (the step
// before ncclCommInitRank). Only rank 0 loads the library for it; a failure there raises on
// rank 0, and the others then time out in the broadcast (the launcher usually ends the job first).
GpuUniqueId gpu_collective_unique_id(const Communicator& comm, GpuCollectives which);

}  // namespace rune::distributed
