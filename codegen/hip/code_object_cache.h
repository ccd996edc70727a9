// hiprtc behind the GPU binary disk cache (codegen/gpu/gpu_binary_cache.h).
#pragma once
#include <string>

namespace codegen::hip {

// hiprtc_compile(source, arch), read from the disk cache when this hiprtc build compiled the
// same source for the same arch before. Throws as hiprtc_compile does.
std::string code_object_for(const std::string& source, const std::string& arch);

// The compiler version code_object_for keys its entries on: hiprtc_version() and a tag of
// hiprtc_compile's options ("" without hiprtc).
std::string code_object_cache_version();

}  // namespace codegen::hip
