// hiprtc through the runtime-compiler driving CUDA and HIP share
// (codegen/gpu/runtime_compiler.h): what is hiprtc's own here is its library names, its words in
// errors, its options, the archs it may be given and the lock around it.
#include "codegen/hip/hiprtc.h"

#include <dlfcn.h>

#include <algorithm>
#include <filesystem>
#include <mutex>

#include "codegen/gpu/runtime_compiler.h"

namespace codegen::hip {

namespace {

// The types of codegen/hip/hiprtc.def, declared here so no HIP header is needed to build.
typedef int hiprtcResult;  // HIPRTC_SUCCESS == 0
typedef struct _hiprtcProgram* hiprtcProgram;

struct Hiprtc {
#define RUNE_GPU_SYMBOLS "codegen/hip/hiprtc.def"
#include "runtime/gpu/symbol_table.inc"
};

// The file the loaded library resolves to (its name carries the ROCm build number).
std::string library_file(void* sym) {
  Dl_info info{};
  if (!dladdr(sym, &info) || !info.dli_fname) return "libamdhip64";
  std::error_code ec;
  auto p = std::filesystem::canonical(info.dli_fname, ec);
  return ec ? std::filesystem::path(info.dli_fname).filename().string() : p.filename().string();
}

struct Loaded {
  gpu::Rtc<Hiprtc> rtc;
  std::string version;  // "major.minor (file)"
};

const Loaded& hiprtc() {
  static const Loaded h = [] {
    Loaded l;
    // hiprtc lives in the HIP runtime library itself in ROCm 5 (there is no libhiprtc.so).
    l.rtc = gpu::load_rtc<Hiprtc>({"libamdhip64.so.5", "libamdhip64.so"},
                                  "cannot load libamdhip64.so.5 (hiprtc, the HIP runtime "
                                  "compiler); install ROCm (apt-get install libamdhip64-dev); "
                                  "tried:",
                                  "hiprtc");
    if (l.rtc.loaded())
      l.version = std::to_string(l.rtc.major) + "." + std::to_string(l.rtc.minor) + " (" +
                  library_file(reinterpret_cast<void*>(l.rtc.fn.Version)) + ")";
    return l;
  }();
  return h;
}

constexpr gpu::RtcWords kWords = {"hiprtc", "hiprtc", "code object", "GetCode", "hip", ""};

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ", ") + x;
  return s;
}

// hiprtc of ROCm 5.2 is not safe to call from two threads at once: its compiler library (comgr)
// took no locks before ROCm 5.5, and CI saw a compile hang with two threads compiling. Every
// compile in the process holds this lock; hiprtc of later ROCm serialises internally anyway.
std::mutex& hiprtc_compile_mutex() {
  static std::mutex mu;
  return mu;
}

}  // namespace

const std::vector<std::string>& hiprtc_archs() {
  static const std::vector<std::string> archs = {"gfx803", "gfx900",  "gfx906",  "gfx908", "gfx90a",
                                                 "gfx90c", "gfx1010", "gfx1030", "gfx1031"};
  return archs;
}

bool hiprtc_available() { return hiprtc().rtc.loaded(); }
std::string hiprtc_load_error() { return hiprtc().rtc.error; }
std::string hiprtc_version() { return hiprtc().version; }

std::string hiprtc_compile(const std::string& source, const std::string& arch) {
  const auto& h = hiprtc();
  if (!h.rtc.loaded()) throw std::runtime_error("hiprtc_compile: " + h.rtc.error);
  // Checked before hiprtc sees the arch: an unsupported one aborts the process inside hiprtc.
  const auto& ok = hiprtc_archs();
  if (std::find(ok.begin(), ok.end(), arch.substr(0, arch.find(':'))) == ok.end())
    throw std::runtime_error(
        "hiprtc_compile: arch " + arch + " is not one hiprtc " + h.version +
        " is known to compile for (" + joined(ok) +
        "); hiprtc of ROCm 5.2 crashes the calling process for gfx940-942 and gfx11xx, so the "
        "arch is refused rather than risked");
  std::lock_guard serial(hiprtc_compile_mutex());
  // No contraction into FMA; division and float64 sqrt are IEEE by default, denormals are kept
  // (measured: the kernel descriptors say float_denorm_mode 3). Without an explicit
  // --offload-arch hiprtc fails with an empty log.
  std::string arch_opt = "--offload-arch=" + arch;
  return gpu::rtc_compile(h.rtc, kWords, source, arch,
                          {arch_opt.c_str(), "-O3", "-ffp-contract=off", "-std=c++17"});
}

}  // namespace codegen::hip
