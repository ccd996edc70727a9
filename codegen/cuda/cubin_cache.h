// NVRTC behind the GPU binary disk cache (codegen/gpu_binary_cache.h).
#pragma once
#include <string>

namespace codegen::cuda {

// nvrtc_compile(source, arch), read from the disk cache when this NVRTC version compiled the
// same source for the same arch before. Throws as nvrtc_compile does.
std::string cubin_for(const std::string& source, const std::string& arch);

}  // namespace codegen::cuda
