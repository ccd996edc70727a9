#include "codegen/cuda/cubin_cache.h"

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu_binary_cache.h"

namespace codegen::cuda {

// nvrtc_compile's options are fixed; bump the tag when they change.
constexpr const char* kOptionsTag = "fmad=false prec-div prec-sqrt ftz=false c++17";

std::string cubin_cache_version() {
  return nvrtc_available() ? nvrtc_version() + " " + kOptionsTag : "";
}

std::string cubin_for(const std::string& source, const std::string& arch) {
  // Without NVRTC there is no version to key on: nvrtc_compile gives the load error.
  if (!nvrtc_available()) return nvrtc_compile(source, arch);
  return cached_gpu_binary("nvrtc", cubin_cache_version(), arch, source,
                           [&] { return nvrtc_compile(source, arch); });
}

}  // namespace codegen::cuda
