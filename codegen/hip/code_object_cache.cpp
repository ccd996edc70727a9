#include "codegen/hip/code_object_cache.h"

#include "codegen/gpu_binary_cache.h"
#include "codegen/hip/hiprtc.h"

namespace codegen::hip {

// hiprtc_compile's options are fixed; bump the tag when they change.
constexpr const char* kOptionsTag = "O3 fp-contract=off c++17";

std::string code_object_cache_version() {
  return hiprtc_available() ? hiprtc_version() + " " + kOptionsTag : "";
}

std::string code_object_for(const std::string& source, const std::string& arch) {
  // Without hiprtc there is no version to key on: hiprtc_compile gives the load error.
  if (!hiprtc_available()) return hiprtc_compile(source, arch);
  return cached_gpu_binary("hiprtc", code_object_cache_version(), arch, source,
                           [&] { return hiprtc_compile(source, arch); });
}

}  // namespace codegen::hip
