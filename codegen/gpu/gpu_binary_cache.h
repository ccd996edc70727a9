// The on-disk cache of GPU binaries (cubins, AMDGPU code objects), shared by the NVRTC and
// hiprtc paths: a kernel compiled once is loaded from disk by every later process. Entries live
// in the kernel disk cache (codegen/disk_cache.h: checksummed, written by rename, RUNE_CACHE_DIR),
// so a corrupt entry is a miss that is rebuilt, an entry that is not a regular file (a FIFO) is a
// miss that cannot block, a write that fails (a full disk) installs nothing, and with the disk
// cache off every call compiles.
#pragma once
#include <functional>
#include <string>

namespace codegen {

// The cache key: every input that decides the binary's bytes. `compiler` is "nvrtc" or
// "hiprtc"; `compiler_version` must change whenever the compiler or its options do.
std::string gpu_binary_key(const std::string& compiler, const std::string& compiler_version,
                           const std::string& arch, const std::string& source);

// The binary for (compiler, version, arch, source): read from the disk cache, else compile()
// and stored. Exceptions from compile() propagate and store nothing.
std::string cached_gpu_binary(const std::string& compiler, const std::string& compiler_version,
                              const std::string& arch, const std::string& source,
                              const std::function<std::string()>& compile);

// A runtime compiler behind the cache (codegen/cuda/cubin_cache.cpp, codegen/hip/
// code_object_cache.cpp).
struct GpuCompiler {
  const char* name;  // "nvrtc" / "hiprtc": the key's compiler
  bool (*available)();
  std::string (*version)();
  // A tag of the compiler's fixed options: bump it when they change.
  const char* options_tag;
  std::string (*compile)(const std::string& source, const std::string& arch);
};

// The version c's entries are keyed on: "<version()> <options_tag>"; "" when c is not loaded.
std::string gpu_binary_version(const GpuCompiler& c);
// c.compile(source, arch) through the cache; without the compiler (nothing to key on) the
// compile runs uncached and raises the compiler's load error.
std::string cached_gpu_binary(const GpuCompiler& c, const std::string& source,
                              const std::string& arch);

}  // namespace codegen
