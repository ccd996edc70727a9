// NVRTC through the runtime-compiler driving CUDA and HIP share (codegen/gpu/runtime_compiler.h):
// what is NVRTC's own here is its library names, its words in errors and its options.
#include "codegen/cuda/nvrtc.h"

#include <mutex>

#include "codegen/gpu/runtime_compiler.h"

namespace codegen::cuda {

namespace {

// The types of codegen/cuda/nvrtc.def, declared here so no CUDA header is needed to build.
typedef int nvrtcResult;  // NVRTC_SUCCESS == 0
typedef struct _nvrtcProgram* nvrtcProgram;

struct Nvrtc {
#define RUNE_GPU_SYMBOLS "codegen/cuda/nvrtc.def"
#include "runtime/gpu/symbol_table.inc"
};

const gpu::Rtc<Nvrtc>& nvrtc() {
  static const gpu::Rtc<Nvrtc> n = gpu::load_rtc<Nvrtc>(
      // The unversioned name first (any toolkit on the loader path), then known sonames and the
      // default toolkit location.
      {"libnvrtc.so", "libnvrtc.so.13", "libnvrtc.so.12", "/usr/local/cuda/lib64/libnvrtc.so",
       "/usr/local/cuda/lib/libnvrtc.so"},
      "cannot load libnvrtc (the CUDA runtime compiler); tried:", "NVRTC");
  return n;
}

// A virtual compute_XX arch compiles, to PTX only.
constexpr const char* kPtxOnly = "; a virtual compute_XX arch gives PTX only";
constexpr gpu::RtcWords kWords = {"nvrtc", "NVRTC", "cubin", "GetCUBIN", "cu", kPtxOnly};

}  // namespace

bool nvrtc_available() { return nvrtc().loaded(); }
std::string nvrtc_load_error() { return nvrtc().error; }
std::string nvrtc_version() {
  const auto& n = nvrtc();
  return n.loaded() ? std::to_string(n.major) + "." + std::to_string(n.minor) : "";
}

std::string nvrtc_compile(const std::string& source, const std::string& arch) {
  return nvrtc_compile(source, arch, nullptr);
}

std::string nvrtc_compile(const std::string& source, const std::string& arch,
                          std::string* ptxas_log) {
  // No contraction into FMA, IEEE division / sqrt, denormals kept: the bits of every primitive
  // are those of the host backend.
  std::string arch_opt = "--gpu-architecture=" + arch;
  std::vector<const char*> opts = {arch_opt.c_str(),   "--fmad=false", "--prec-div=true",
                                   "--prec-sqrt=true", "--ftz=false",  "--std=c++17"};
  if (ptxas_log) opts.push_back("--ptxas-options=-v");  // per-function resource lines in the log
  return gpu::rtc_compile(nvrtc(), kWords, source, arch, opts, ptxas_log);
}

}  // namespace codegen::cuda
