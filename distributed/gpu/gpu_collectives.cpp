#include "distributed/gpu/gpu_collectives.h"

#include <algorithm>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/nx.h"
#include "distributed/collectives.h"
#include "distributed/communicator.h"
#include "ir/env.h"
#include "runtime/gpu/driver.h"

namespace rune::distributed {

namespace {
const char* label(GpuCollectives which) { return which == GpuCollectives::Nccl ? "NCCL" : "RCCL"; }

std::vector<std::string> candidates(GpuCollectives which) {
  // Read once, at the library's first load (gpu_collective_library loads it once).
  const std::optional<std::string>& env = ir::env::value(
      which == GpuCollectives::Nccl ? ir::env::Var::NcclLibrary : ir::env::Var::RcclLibrary);
  if (env && !env->empty()) return {*env};
  if (which == GpuCollectives::Nccl)
    return {"libnccl.so.2", "libnccl.so", "/usr/local/cuda/lib64/libnccl.so.2"};
  return {"librccl.so.1", "librccl.so", "/opt/rocm/lib/librccl.so.1"};
}

GpuCollectiveLibrary load(GpuCollectives which, const std::vector<std::string>& names) {
  GpuCollectiveLibrary lib;
  runtime::gpu::Library so = runtime::gpu::Library::open_first(names);
  if (!so.handle) {
    lib.error = std::string(label(which)) + " is not available; tried:" + so.tried;
    return lib;
  }
  // The library stays loaded for the life of the process (handles are never closed).
  std::string missing;
  auto get = [&](auto& fn, const char* sym) {
    fn = reinterpret_cast<std::remove_reference_t<decltype(fn)>>(so.symbol(sym, &missing));
  };
  // RCCL exports NCCL's names.
  get(lib.get_version, "ncclGetVersion");
  get(lib.get_unique_id, "ncclGetUniqueId");
  get(lib.comm_init_rank, "ncclCommInitRank");
  get(lib.comm_init_all, "ncclCommInitAll");
  get(lib.comm_destroy, "ncclCommDestroy");
  get(lib.group_start, "ncclGroupStart");
  get(lib.group_end, "ncclGroupEnd");
  get(lib.all_reduce, "ncclAllReduce");
  get(lib.all_gather, "ncclAllGather");
  get(lib.reduce_scatter, "ncclReduceScatter");
  get(lib.broadcast, "ncclBroadcast");
  get(lib.get_error_string, "ncclGetErrorString");
  {
    std::string optional;  // absent before NCCL 2.13: no detail, not an error
    lib.get_last_error =
        reinterpret_cast<const char* (*)(void*)>(so.symbol("ncclGetLastError", &optional));
  }
  if (!missing.empty()) {
    lib = GpuCollectiveLibrary{};
    lib.error = std::string(label(which)) + " library " + so.name + " is unusable: " + missing;
    return lib;
  }
  lib.name = so.name;
  return lib;
}
}  // namespace

GpuCollectiveLibrary load_gpu_collective_library(GpuCollectives which, const std::string& path) {
  return load(which, {path});
}

const GpuCollectiveLibrary& gpu_collective_library(GpuCollectives which) {
  static std::once_flag once[2];
  static GpuCollectiveLibrary libs[2];
  const int i = which == GpuCollectives::Nccl ? 0 : 1;
  std::call_once(once[i], [&] { libs[i] = load(which, candidates(which)); });
  return libs[i];
}

int gpu_collective_version(GpuCollectives which) {
  const GpuCollectiveLibrary& lib = gpu_collective_library(which);
  const std::string api = "rune::distributed::gpu_collective_version";
  if (!lib.error.empty()) throw distributed_error(api + ": " + lib.error);
  int v = 0;
  if (int rc = lib.get_version(&v); rc != 0)
    throw distributed_error(api + ": ncclGetVersion failed: " + lib.get_error_string(rc) + " (" +
                            std::to_string(rc) + ")");
  return v;
}

GpuUniqueId gpu_collective_unique_id(GpuCollectives which) {
  const GpuCollectiveLibrary& lib = gpu_collective_library(which);
  const std::string api = "rune::distributed::gpu_collective_unique_id";
  if (!lib.error.empty()) throw distributed_error(api + ": " + lib.error);
  GpuUniqueId id{};
  if (int rc = lib.get_unique_id(id.data()); rc != 0) {
    const char* detail = lib.get_last_error ? lib.get_last_error(nullptr) : nullptr;
    throw distributed_error(api + ": ncclGetUniqueId failed in " + lib.name + ": " +
                            lib.get_error_string(rc) + " (" + std::to_string(rc) + ")" +
                            (detail && *detail ? std::string(": ") + detail : ""));
  }
  return id;
}

GpuUniqueId gpu_collective_unique_id(const Communicator& comm, GpuCollectives which) {
  GpuUniqueId id{};
  if (comm.rank() == 0) id = gpu_collective_unique_id(which);
  std::vector<double> bytes(id.begin(), id.end());
  nx::Tensor t = broadcast(comm, nx::create(nx::uint8, {static_cast<int64_t>(id.size())}, bytes));
  std::vector<uint8_t> got = nx::to_vector<uint8_t>(t);
  std::copy(got.begin(), got.end(), id.begin());
  return id;
}

}  // namespace rune::distributed
