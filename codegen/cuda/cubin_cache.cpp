#include "codegen/cuda/cubin_cache.h"

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/gpu_binary_cache.h"

namespace codegen::cuda {

namespace {
std::string compile(const std::string& source, const std::string& arch) {
  return nvrtc_compile(source, arch);
}
// nvrtc_compile's options are fixed; bump the tag when they change.
const GpuCompiler kNvrtc = {"nvrtc", nvrtc_available, nvrtc_version,
                            "fmad=false prec-div prec-sqrt ftz=false c++17", compile};
}  // namespace

std::string cubin_cache_version() { return gpu_binary_version(kNvrtc); }
std::string cubin_for(const std::string& source, const std::string& arch) {
  return cached_gpu_binary(kNvrtc, source, arch);
}

}  // namespace codegen::cuda
