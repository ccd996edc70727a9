#include "runtime/cuda/cub_sort.h"

#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdlib>
#include <memory>
#include <mutex>
#include <stdexcept>

#include "ir/env.h"

namespace runtime::cuda {

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return stat(p.c_str(), &st) == 0;
}

// The process's one module: looked up and loaded once.
struct State {
  std::once_flag once;
  std::unique_ptr<CubModule> module;
  std::string why;    // why there is none (the rank sort)
  std::string error;  // a module that is there but does not load: raised every time
};
State& state() {
  static auto* s = new State;  // the module stays loaded for the process lifetime
  return *s;
}

}  // namespace

std::string built_cub_module_path() {
#ifdef RUNE_CUB_MODULE_PATH
  // The build tree's module; where that is gone (an installed rune whose build tree was
  // removed), the one `cmake --install` put in the configured prefix (docs/packaging.md).
#ifdef RUNE_CUB_MODULE_INSTALLED_PATH
  if (!file_exists(RUNE_CUB_MODULE_PATH) && file_exists(RUNE_CUB_MODULE_INSTALLED_PATH))
    return RUNE_CUB_MODULE_INSTALLED_PATH;
#endif
  return RUNE_CUB_MODULE_PATH;
#else
  return "";
#endif
}

CubModuleSource cub_module_source(const char* env, const std::string& built) {
  CubModuleSource s;
  if (env && *env) {
    std::string v = env;
    if (v == "0" || v == "off" || v == "OFF") {
      s.why = "RUNE_CUB_MODULE=" + v + " turns it off";
      return s;
    }
    s.path = v;
    s.required = true;
    return s;
  }
  if (built.empty()) {
    s.why = "rune was built without it (no nvcc at build time, or RUNE_CUB_MODULE=OFF)";
    return s;
  }
  if (!file_exists(built)) {
    s.why = built + " does not exist (set RUNE_CUB_MODULE to where it is)";
    return s;
  }
  s.path = built;
  s.required = true;
  return s;
}

CubModule load_cub_module(const std::string& path) {
  const std::string head = "rune: the CUB sort module " + path + " cannot be loaded: ";
  void* h = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    const char* e = dlerror();
    throw std::runtime_error(head + (e ? e : "dlopen failed"));
  }
  auto fn = reinterpret_cast<RuneCubApiFn>(dlsym(h, "rune_cub_api"));
  if (!fn) {
    const char* e = dlerror();
    const std::string why = e ? e : "";  // dlclose frees dlerror's string: copy it first
    dlclose(h);
    throw std::runtime_error(head + "symbol rune_cub_api not found (" + why + ")");
  }
  const RuneCubApi* api = fn(RUNE_CUB_API_VERSION);
  if (!api || api->version != RUNE_CUB_API_VERSION || !api->scratch_bytes || !api->sort ||
      !api->error_string) {
    dlclose(h);
    throw std::runtime_error(head + "it does not implement interface version " +
                             std::to_string(RUNE_CUB_API_VERSION) +
                             " (built for another rune: rebuild it)");
  }
  return {path, api};
}

const CubModule* cub_module_for(DeviceKind kind, const gpu::DriverTable& driver, std::string* why) {
  if (kind != DeviceKind::CUDA) {
    if (why) *why = "not a CUDA device";
    return nullptr;
  }
  // The module's CUDA runtime drives libcuda itself: any other table (the tests' fake driver
  // on the host) has no device it could reach.
  if (driver.library.rfind("libcuda", 0) != 0) {
    if (why) *why = "the CUDA driver is " + driver.library + ", not libcuda";
    return nullptr;
  }
  State& s = state();
  std::call_once(s.once, [&] {
    const std::optional<std::string>& module = ir::env::value(ir::env::Var::CubModule);
    CubModuleSource src =
        cub_module_source(module ? module->c_str() : nullptr, built_cub_module_path());
    if (src.path.empty()) {
      s.why = src.why;
      return;
    }
    try {
      s.module = std::make_unique<CubModule>(load_cub_module(src.path));
    } catch (const std::exception& e) {
      s.error = e.what();
    }
  });
  if (!s.error.empty()) throw std::runtime_error(s.error);
  if (!s.module && why) *why = s.why;
  return s.module.get();
}

int cub_dtype(ir::DType t) {
  switch (t) {
    case ir::DType::Bool:
    case ir::DType::UInt8:
      return RUNE_CUB_U8;
    case ir::DType::Int32:
      return RUNE_CUB_I32;
    case ir::DType::Int64:
      return RUNE_CUB_I64;
    case ir::DType::Int8:
      return RUNE_CUB_I8;
    case ir::DType::Int16:
      return RUNE_CUB_I16;
    case ir::DType::UInt16:
      return RUNE_CUB_U16;
    case ir::DType::UInt32:
      return RUNE_CUB_U32;
    case ir::DType::UInt64:
      return RUNE_CUB_U64;
    case ir::DType::Float16:
      return RUNE_CUB_F16;
    case ir::DType::BFloat16:
      return RUNE_CUB_BF16;
    case ir::DType::Float32:
      return RUNE_CUB_F32;
    case ir::DType::Float64:
      return RUNE_CUB_F64;
  }
  return -1;
}

Step cub_sort_step(gpu::Context& c, const CubModule& m, bool argsort, ir::DType dtype,
                   int64_t offset, int64_t rows, int64_t len, int64_t* scratch_bytes) {
  const RuneCubApi* api = m.api;
  const int code = cub_dtype(dtype);
  auto fail = [&, api](const char* what, int rc) {
    return std::runtime_error(std::string("CUDA: CUB ") + what + " (" + m.path + ") failed: " +
                              api->error_string(rc) + " (" + std::to_string(rc) + ")");
  };
  c.make_current();
  size_t bytes = 0;
  if (int rc = api->scratch_bytes(code, argsort, rows, len, &bytes)) throw fail("sort setup", rc);
  *scratch_bytes = static_cast<int64_t>(bytes);
  Step st;
  st.kind = Step::Kind::Library;
  st.name = std::string("cub_") + (argsort ? "argsort_" : "sort_") + std::string(ir::name(dtype)) +
            "_" + std::to_string(rows) + "x" + std::to_string(len);
  st.items = rows * len;
  // Each element read and written once by the radix passes' ends (keys and positions inside
  // the sort are CUB's business): the DEBUG=2 GB/s compare with a copy of the operand.
  st.bytes = rows * len * (ir::itemsize(dtype) + (argsort ? 8 : ir::itemsize(dtype)));
  st.geometry = gpu::launch_geometry(rows * len, c.info().multiprocessors, c.info().warp_size);
  const int64_t in_offset = offset * ir::itemsize(dtype);
  std::string path = m.path;
  st.queue = [api, code, argsort, in_offset, rows, len, bytes, path](gpu::Context& ctx,
                                                                     char* const* bufs) {
    int rc = api->sort(code, argsort, bufs[1] + in_offset, bufs[0], rows, len, bufs[2], bytes,
                       ctx.handle());
    if (rc)
      throw std::runtime_error("CUDA: CUB sort (" + path + ") failed: " + api->error_string(rc) +
                               " (" + std::to_string(rc) + ")");
  };
  return st;
}

}  // namespace runtime::cuda
