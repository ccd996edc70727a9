// Linked into every test binary of the suite: with RUNE_TEST_FAKE_CUDA=1 in the environment,
// the fake CUDA driver (gpu_runtime/fake_driver.h) is installed as CUDA:0 before anything else
// runs, so the suite runs on a GPU path without a GPU, e.g.
//   RUNE_TEST_FAKE_CUDA=1 RUNE_DEFAULT_DEVICE=CUDA:0 ctest -L unit
// Unset (or anything but 1), the hook does nothing. RUNE_TEST_FAKE_CUDA_DEVICES sets how many
// devices the fake has.
//
// The fake compiles each kernel source with the system compiler (~0.1 s); the shared objects
// are kept in $RUNE_CACHE_DIR/fake-cuda (RUNE_CACHE_DIR unset or empty: no cache), named by a
// hash of the source and of fake_driver.h (RUNE_FAKE_DRIVER_HASH, from the build), so test
// processes and reruns share them. An entry is written beside its name and renamed into place.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>

#include "gpu_runtime/fake_driver.h"
#include "ir/hash.h"

#ifndef RUNE_FAKE_DRIVER_HASH
#define RUNE_FAKE_DRIVER_HASH "unknown"
#endif

namespace {

std::string cache_dir() {
  const char* d = std::getenv("RUNE_CACHE_DIR");
  if (!d || !*d) return "";
  return std::string(d) + "/fake-cuda";
}

std::string cached_compile(const std::string& source, const std::string& arch) {
  static const std::string dir = cache_dir();
  if (dir.empty()) return fake_gpu::compile_host(source, arch);
  std::string text = std::string(RUNE_FAKE_DRIVER_HASH) + "\n" + arch + "\n" + source;
  char name[64];
  std::snprintf(name, sizeof name, "%016llx%016llx_%zu.so",
                static_cast<unsigned long long>(ir::fnv1a64(text)),
                static_cast<unsigned long long>(ir::fnv1a64(text, 0x84222325cbf29ce4ull)),
                text.size());
  std::string path = dir + "/" + name;
  std::error_code ec;
  if (std::filesystem::exists(path, ec)) return path;
  std::string built = fake_gpu::compile_host(source, arch);
  std::filesystem::create_directories(dir, ec);
  std::string tmp = path + ".tmp" + std::to_string(getpid());
  std::filesystem::copy_file(built, tmp, std::filesystem::copy_options::overwrite_existing, ec);
  if (!ec) std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return built;  // no cache entry; the fake's own file serves this process
  }
  // The fake's scratch files (source, log, object) are no longer needed.
  std::string base = built.substr(0, built.size() - 3);
  for (const char* ext : {".so", ".cpp", ".log"}) std::filesystem::remove(base + ext, ec);
  return path;
}

// Before ordinary static initialisers (priority 101 < default), so a test's namespace-scope
// tensors already see CUDA:0.
__attribute__((constructor(101))) void install_if_asked() {
  const char* v = std::getenv("RUNE_TEST_FAKE_CUDA");
  if (!v || std::string(v) != "1") return;
  // RUNE_TEST_FAKE_CUDA_DEVICES=n: CUDA:0 .. CUDA:n-1 (default 1), e.g. for the NCCL examples of
  // docs/distributed.md over two devices.
  if (const char* n = std::getenv("RUNE_TEST_FAKE_CUDA_DEVICES"); n && std::atoi(n) > 0)
    fake_gpu::devices() = std::atoi(n);
  fake_gpu::install_fake_cuda();
  codegen::set_gpu_target_for_testing(runtime::DeviceKind::CUDA,
                                      {&fake_gpu::host_dialect(), cached_compile});
}

}  // namespace
