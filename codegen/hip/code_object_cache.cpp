#include "codegen/hip/code_object_cache.h"

#include "codegen/gpu/gpu_binary_cache.h"
#include "codegen/hip/hiprtc.h"

namespace codegen::hip {

// hiprtc_compile's options are fixed; bump the tag when they change.
const GpuCompiler kHiprtc = {"hiprtc", hiprtc_available, hiprtc_version, "O3 fp-contract=off c++17",
                             hiprtc_compile};

std::string code_object_cache_version() { return gpu_binary_version(kHiprtc); }
std::string code_object_for(const std::string& source, const std::string& arch) {
  return cached_gpu_binary(kHiprtc, source, arch);
}

}  // namespace codegen::hip
