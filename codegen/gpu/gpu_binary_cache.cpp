#include "codegen/gpu/gpu_binary_cache.h"

#include "codegen/disk_cache.h"

namespace codegen {

std::string gpu_binary_key(const std::string& compiler, const std::string& compiler_version,
                           const std::string& arch, const std::string& source) {
  // NUL separators: no field can run into the next (none contains a NUL, the source last).
  std::string key = "gpu-binary-v1";
  for (const std::string* part : {&compiler, &compiler_version, &arch, &source}) {
    key += '\0';
    key += *part;
  }
  return key;
}

std::string cached_gpu_binary(const std::string& compiler, const std::string& compiler_version,
                              const std::string& arch, const std::string& source,
                              const std::function<std::string()>& compile) {
  auto& cache = DiskCache::instance();
  std::string key = gpu_binary_key(compiler, compiler_version, arch, source);
  if (auto hit = cache.get(key)) return *hit;
  std::string binary = compile();
  cache.put(key, binary);
  return binary;
}

std::string gpu_binary_version(const GpuCompiler& c) {
  return c.available() ? c.version() + " " + c.options_tag : "";
}

std::string cached_gpu_binary(const GpuCompiler& c, const std::string& source,
                              const std::string& arch) {
  if (!c.available()) return c.compile(source, arch);
  return cached_gpu_binary(c.name, gpu_binary_version(c), arch, source,
                           [&] { return c.compile(source, arch); });
}

}  // namespace codegen
