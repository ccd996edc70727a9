// Sorts on CUDA devices through CUB: librune_cub.so (runtime/cuda/cub_sort.cu), built with nvcc
// when the toolkit is there at build time, is loaded with dlopen the first time a sort or
// argsort is compiled for a device driven by the real CUDA driver (libcuda). Everywhere else
// (HIP, a fake driver, a build without nvcc, RUNE_CUB_MODULE=0) sorts run the rendered rank
// sort (codegen/gpu/c_renderer.cpp). docs/sort.md says why and what is tested where.
//
// No CUDA header here: the module's interface is the plain C of runtime/cuda/cub_sort_api.h.
#pragma once
#include <cstdint>
#include <string>

#include "ir/dtype.h"
#include "runtime/cuda/cub_sort_api.h"
#include "runtime/gpu/context.h"
#include "runtime/program.h"

namespace runtime::cuda {

// A loaded module.
struct CubModule {
  std::string path;
  const RuneCubApi* api = nullptr;
};

// Where the module is looked for, from RUNE_CUB_MODULE (`env`, null when unset) and the path
// baked in at build time (`built`, "" when rune was built without it):
//   env "0" or "off": none (the rank sort);  env another non-empty value: that path, which must
//   load;  else `built` when that file exists (a missing build-tree file falls back quietly).
// `path` is "" when there is none, and then `why` says why.
struct CubModuleSource {
  std::string path;
  bool required = false;  // failing to load it raises (rather than falling back)
  std::string why;
};
CubModuleSource cub_module_source(const char* env, const std::string& built);
// The path baked in at build time ("" when rune was built without the module).
std::string built_cub_module_path();

// dlopens `path` and checks its interface version. Throws std::runtime_error
// "rune: the CUB sort module <path> cannot be loaded: <dlerror()>" (or names what is wrong).
CubModule load_cub_module(const std::string& path);

// The module sorts on a device of `kind` driven by `driver` use, loaded on first use (once per
// process; thread-safe); nullptr when they use the rank sort, with the reason in *why. A module
// that is there but fails to load throws (load_cub_module's message), every time it is asked.
const CubModule* cub_module_for(DeviceKind kind, const gpu::DriverTable& driver, std::string* why);

// The module's element format of a dtype.
int cub_dtype(ir::DType t);

// A library step (Step::Kind::Library, its `queue` run with the device current) that sorts `rows`
// rows of `len` elements of `dtype` (argsort: int64 positions) with the module: params out (slot
// 0), operand (from element `offset`), scratch. Asks the module how much scratch it needs (on `c`'s
// device): *scratch_bytes.
Step cub_sort_step(gpu::Context& c, const CubModule& m, bool argsort, ir::DType dtype,
                   int64_t offset, int64_t rows, int64_t len, int64_t* scratch_bytes);

}  // namespace runtime::cuda
