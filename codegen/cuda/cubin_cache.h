// NVRTC behind the GPU binary disk cache (codegen/gpu/gpu_binary_cache.h).
#pragma once
#include <string>

namespace codegen::cuda {

// nvrtc_compile(source, arch), read from the disk cache when this NVRTC version compiled the
// same source for the same arch before. Throws as nvrtc_compile does.
std::string cubin_for(const std::string& source, const std::string& arch);

// The compiler version cubin_for keys its entries on: nvrtc_version() and a tag of
// nvrtc_compile's options ("" without NVRTC).
std::string cubin_cache_version();

}  // namespace codegen::cuda
