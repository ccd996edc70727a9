#include "codegen/cuda/nvrtc.h"

#include <dlfcn.h>

#include <mutex>
#include <sstream>
#include <stdexcept>
#include <vector>

namespace codegen::cuda {

namespace {

// The few NVRTC entry points used, declared here so no CUDA header is needed to build.
using nvrtcResult = int;  // NVRTC_SUCCESS == 0
using nvrtcProgram = struct _nvrtcProgram*;

struct Nvrtc {
  void* lib = nullptr;
  std::string error;  // why loading failed
  int major = 0, minor = 0;
  const char* (*GetErrorString)(nvrtcResult) = nullptr;
  nvrtcResult (*Version)(int*, int*) = nullptr;
  nvrtcResult (*CreateProgram)(nvrtcProgram*, const char*, const char*, int, const char* const*,
                               const char* const*) = nullptr;
  nvrtcResult (*DestroyProgram)(nvrtcProgram*) = nullptr;
  nvrtcResult (*CompileProgram)(nvrtcProgram, int, const char* const*) = nullptr;
  nvrtcResult (*GetProgramLogSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetProgramLog)(nvrtcProgram, char*) = nullptr;
  nvrtcResult (*GetCUBINSize)(nvrtcProgram, size_t*) = nullptr;
  nvrtcResult (*GetCUBIN)(nvrtcProgram, char*) = nullptr;
};

template <class F>
bool bind(Nvrtc& n, F& fn, const char* sym) {
  fn = reinterpret_cast<F>(dlsym(n.lib, sym));
  if (!fn) n.error = std::string("symbol ") + sym + " not found in libnvrtc";
  return fn != nullptr;
}

const Nvrtc& nvrtc() {
  static Nvrtc n;
  static std::once_flag once;
  std::call_once(once, [] {
    // The unversioned name first (any toolkit on the loader path), then known sonames and the
    // default toolkit location.
    const char* names[] = {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12",
                           "/usr/local/cuda/lib64/libnvrtc.so", "/usr/local/cuda/lib/libnvrtc.so"};
    std::string tried;
    for (const char* name : names) {
      n.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (n.lib) break;
      const char* e = dlerror();
      tried += std::string("\n  ") + name + ": " + (e ? e : "not found");
    }
    if (!n.lib) {
      n.error = "cannot load libnvrtc (the CUDA runtime compiler); tried:" + tried;
      return;
    }
    bool ok = bind(n, n.GetErrorString, "nvrtcGetErrorString") &&
              bind(n, n.Version, "nvrtcVersion") &&
              bind(n, n.CreateProgram, "nvrtcCreateProgram") &&
              bind(n, n.DestroyProgram, "nvrtcDestroyProgram") &&
              bind(n, n.CompileProgram, "nvrtcCompileProgram") &&
              bind(n, n.GetProgramLogSize, "nvrtcGetProgramLogSize") &&
              bind(n, n.GetProgramLog, "nvrtcGetProgramLog") &&
              bind(n, n.GetCUBINSize, "nvrtcGetCUBINSize") && bind(n, n.GetCUBIN, "nvrtcGetCUBIN");
    if (!ok) {
      dlclose(n.lib);
      n.lib = nullptr;
      return;
    }
    n.Version(&n.major, &n.minor);
  });
  return n;
}

std::string numbered(const std::string& source) {
  std::ostringstream s;
  std::istringstream in(source);
  std::string line;
  for (int i = 1; std::getline(in, line); ++i)
    s << (i < 10 ? "   " : i < 100 ? "  " : i < 1000 ? " " : "") << i << "  " << line << "\n";
  return s.str();
}

}  // namespace

bool nvrtc_available() { return nvrtc().lib != nullptr; }
std::string nvrtc_load_error() { return nvrtc().error; }
std::string nvrtc_version() {
  const auto& n = nvrtc();
  return n.lib ? std::to_string(n.major) + "." + std::to_string(n.minor) : "";
}

std::string nvrtc_compile(const std::string& source, const std::string& arch) {
  return nvrtc_compile(source, arch, nullptr);
}

std::string nvrtc_compile(const std::string& source, const std::string& arch,
                          std::string* ptxas_log) {
  const auto& n = nvrtc();
  if (!n.lib) throw std::runtime_error("nvrtc_compile: " + n.error);
  nvrtcProgram prog = nullptr;
  nvrtcResult r = n.CreateProgram(&prog, source.c_str(), "rune_kernel.cu", 0, nullptr, nullptr);
  if (r != 0)
    throw std::runtime_error(std::string("nvrtc_compile: nvrtcCreateProgram: ") +
                             n.GetErrorString(r));
  struct Guard {
    const Nvrtc& n;
    nvrtcProgram& p;
    ~Guard() { n.DestroyProgram(&p); }
  } guard{n, prog};
  // No contraction into FMA, IEEE division / sqrt, denormals kept: the bits of every primitive
  // are those of the host backend.
  std::string arch_opt = "--gpu-architecture=" + arch;
  std::vector<const char*> opts = {arch_opt.c_str(),   "--fmad=false", "--prec-div=true",
                                   "--prec-sqrt=true", "--ftz=false",  "--std=c++17"};
  if (ptxas_log) opts.push_back("--ptxas-options=-v");  // per-function resource lines in the log
  r = n.CompileProgram(prog, static_cast<int>(opts.size()), opts.data());
  size_t log_size = 0;
  std::string log;
  if (n.GetProgramLogSize(prog, &log_size) == 0 && log_size > 1) {
    log.resize(log_size);
    n.GetProgramLog(prog, log.data());
    log.resize(log_size - 1);
  }
  if (r != 0) {
    throw std::runtime_error("nvrtc_compile: compiling for " + arch + " failed (" +
                             n.GetErrorString(r) + ")\n--- NVRTC log ---\n" + log +
                             "\n--- source ---\n" + numbered(source));
  }
  size_t size = 0;
  r = n.GetCUBINSize(prog, &size);
  if (r != 0 || size == 0)
    throw std::runtime_error("nvrtc_compile: no cubin for " + arch + " (" + n.GetErrorString(r) +
                             "); a virtual compute_XX arch gives PTX only");
  std::string cubin(size, '\0');
  r = n.GetCUBIN(prog, cubin.data());
  if (r != 0)
    throw std::runtime_error(std::string("nvrtc_compile: nvrtcGetCUBIN: ") + n.GetErrorString(r));
  if (ptxas_log) *ptxas_log = log;
  return cubin;
}

}  // namespace codegen::cuda
