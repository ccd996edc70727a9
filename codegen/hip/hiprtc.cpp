#include "codegen/hip/hiprtc.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <mutex>
#include <sstream>
#include <stdexcept>

namespace codegen::hip {

namespace {

// The few hiprtc entry points used, declared here so no HIP header is needed to build.
using hiprtcResult = int;  // HIPRTC_SUCCESS == 0
using hiprtcProgram = struct _hiprtcProgram*;

struct Hiprtc {
  void* lib = nullptr;
  std::string error;    // why loading failed
  std::string version;  // "major.minor (file)"
  const char* (*GetErrorString)(hiprtcResult) = nullptr;
  hiprtcResult (*Version)(int*, int*) = nullptr;
  hiprtcResult (*CreateProgram)(hiprtcProgram*, const char*, const char*, int, const char**,
                                const char**) = nullptr;
  hiprtcResult (*DestroyProgram)(hiprtcProgram*) = nullptr;
  hiprtcResult (*CompileProgram)(hiprtcProgram, int, const char**) = nullptr;
  hiprtcResult (*GetProgramLogSize)(hiprtcProgram, size_t*) = nullptr;
  hiprtcResult (*GetProgramLog)(hiprtcProgram, char*) = nullptr;
  hiprtcResult (*GetCodeSize)(hiprtcProgram, size_t*) = nullptr;
  hiprtcResult (*GetCode)(hiprtcProgram, char*) = nullptr;
};

template <class F>
bool bind(Hiprtc& h, F& fn, const char* sym) {
  fn = reinterpret_cast<F>(dlsym(h.lib, sym));
  if (!fn) h.error = std::string("symbol ") + sym + " not found in libamdhip64";
  return fn != nullptr;
}

// The file the loaded library resolves to (its name carries the ROCm build number).
std::string library_file(void* sym) {
  Dl_info info{};
  if (!dladdr(sym, &info) || !info.dli_fname) return "libamdhip64";
  std::error_code ec;
  auto p = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path(info.dli_fname).filename().string() : p.filename().string();
}

const Hiprtc& hiprtc() {
  static Hiprtc h;
  static std::once_flag once;
  std::call_once(once, [] {
    // hiprtc lives in the HIP runtime library itself in ROCm 5 (there is no libhiprtc.so).
    const char* names[] = {"libamdhip64.so.5", "libamdhip64.so"};
    std::string tried;
    for (const char* name : names) {
      h.lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
      if (h.lib) break;
      const char* e = dlerror();
      tried += std::string("\n  ") + name + ": " + (e ? e : "not found");
    }
    if (!h.lib) {
      h.error =
          "cannot load libamdhip64.so.5 (hiprtc, the HIP runtime compiler); install ROCm "
          "(apt-get install libamdhip64-dev); tried:" +
          tried;
      return;
    }
    bool ok = bind(h, h.GetErrorString, "hiprtcGetErrorString") &&
              bind(h, h.Version, "hiprtcVersion") &&
              bind(h, h.CreateProgram, "hiprtcCreateProgram") &&
              bind(h, h.DestroyProgram, "hiprtcDestroyProgram") &&
              bind(h, h.CompileProgram, "hiprtcCompileProgram") &&
              bind(h, h.GetProgramLogSize, "hiprtcGetProgramLogSize") &&
              bind(h, h.GetProgramLog, "hiprtcGetProgramLog") &&
              bind(h, h.GetCodeSize, "hiprtcGetCodeSize") && bind(h, h.GetCode, "hiprtcGetCode");
    if (!ok) {
      dlclose(h.lib);
      h.lib = nullptr;
      return;
    }
    int major = 0, minor = 0;
    h.Version(&major, &minor);
    h.version = std::to_string(major) + "." + std::to_string(minor) + " (" +
                library_file(reinterpret_cast<void*>(h.Version)) + ")";
  });
  return h;
}

std::string numbered(const std::string& source) {
  std::ostringstream s;
  std::istringstream in(source);
  std::string line;
  for (int i = 1; std::getline(in, line); ++i)
    s << (i < 10 ? "   " : i < 100 ? "  " : i < 1000 ? " " : "") << i << "  " << line << "\n";
  return s.str();
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

}  // namespace

const std::vector<std::string>& hiprtc_archs() {
  static const std::vector<std::string> archs = {"gfx803", "gfx900",  "gfx906",  "gfx908", "gfx90a",
                                                 "gfx90c", "gfx1010", "gfx1030", "gfx1031"};
  return archs;
}

bool hiprtc_available() { return hiprtc().lib != nullptr; }
std::string hiprtc_load_error() { return hiprtc().error; }
std::string hiprtc_version() { return hiprtc().version; }

// hiprtc of ROCm 5.2 is not safe to call from two threads at once: its compiler library (comgr)
// took no locks before ROCm 5.5, and CI saw a compile hang with two threads compiling. Every
// compile in the process holds this lock; hiprtc of later ROCm serialises internally anyway.
namespace {
std::mutex& hiprtc_compile_mutex() {
  static std::mutex mu;
  return mu;
}
}  // namespace

std::string hiprtc_compile(const std::string& source, const std::string& arch) {
  const auto& h = hiprtc();
  if (!h.lib) throw std::runtime_error("hiprtc_compile: " + h.error);
  // Checked before hiprtc sees the arch: an unsupported one aborts the process inside hiprtc.
  const auto& ok = hiprtc_archs();
  if (std::find(ok.begin(), ok.end(), arch.substr(0, arch.find(':'))) == ok.end())
    throw std::runtime_error(
        "hiprtc_compile: arch " + arch + " is not one hiprtc " + h.version +
        " is known to compile for (" + joined(ok) +
        "); hiprtc of ROCm 5.2 crashes the calling process for gfx940-942 and gfx11xx, so the "
        "arch is refused rather than risked");
  std::lock_guard serial(hiprtc_compile_mutex());
  hiprtcProgram prog = nullptr;
  hiprtcResult r = h.CreateProgram(&prog, source.c_str(), "rune_kernel.hip", 0, nullptr, nullptr);
  if (r != 0)
    throw std::runtime_error(std::string("hiprtc_compile: hiprtcCreateProgram: ") +
                             h.GetErrorString(r));
  struct Guard {
    const Hiprtc& h;
    hiprtcProgram& p;
    ~Guard() { h.DestroyProgram(&p); }
  } guard{h, prog};
  // No contraction into FMA; division and float64 sqrt are IEEE by default, denormals are kept
  // (measured: the kernel descriptors say float_denorm_mode 3). Without an explicit
  // --offload-arch hiprtc fails with an empty log.
  std::string arch_opt = "--offload-arch=" + arch;
  const char* opts[] = {arch_opt.c_str(), "-O3", "-ffp-contract=off", "-std=c++17"};
  r = h.CompileProgram(prog, static_cast<int>(sizeof opts / sizeof opts[0]), opts);
  size_t log_size = 0;
  std::string log;
  if (h.GetProgramLogSize(prog, &log_size) == 0 && log_size > 0) {
    log.resize(log_size);
    h.GetProgramLog(prog, log.data());
    while (!log.empty() && log.back() == '\0') log.pop_back();
  }
  if (r != 0) {
    throw std::runtime_error("hiprtc_compile: compiling for " + arch + " failed (" +
                             h.GetErrorString(r) + ")\n--- hiprtc log ---\n" + log +
                             "\n--- source ---\n" + numbered(source));
  }
  size_t size = 0;
  r = h.GetCodeSize(prog, &size);
  if (r != 0 || size == 0)
    throw std::runtime_error("hiprtc_compile: no code object for " + arch + " (" +
                             h.GetErrorString(r) + ")");
  std::string code(size, '\0');
  r = h.GetCode(prog, code.data());
  if (r != 0)
    throw std::runtime_error(std::string("hiprtc_compile: hiprtcGetCode: ") + h.GetErrorString(r));
  return code;
}

}  // namespace codegen::hip
