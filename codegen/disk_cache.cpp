#include "codegen/disk_cache.h"

#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "ir/debug.h"

namespace codegen {

namespace {
constexpr char kMagic[8] = {'R', 'U', 'N', 'E', 'O', 'B', 'J', '1'};

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}
std::string hex(uint64_t v) {
  char b[17];
  std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
  return b;
}
void put_u64(std::string& s, uint64_t v) { s.append(reinterpret_cast<const char*>(&v), 8); }
uint64_t get_u64(const std::string& s, size_t at) {
  uint64_t v;
  std::memcpy(&v, s.data() + at, 8);
  return v;
}
}  // namespace

DiskCache::DiskCache() {
  if (ir::env_int("RUNE_DISK_CACHE", 1) == 0) return;
  if (const char* d = std::getenv("RUNE_CACHE_DIR")) {
    dir_ = d;
  } else if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) {
    dir_ = std::string(x) + "/rune";
  } else if (const char* h = std::getenv("HOME"); h && *h) {
    dir_ = std::string(h) + "/.cache/rune";
  }
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) dir_.clear();  // an unusable directory disables the cache rather than failing
}

DiskCache& DiskCache::instance() {
  static DiskCache c;
  return c;
}

std::string DiskCache::path_for(const std::string& key) const {
  return dir_ + "/" + hex(fnv1a(key)) + hex(fnv1a(key, 0x9e3779b97f4a7c15ull)) + ".obj";
}

std::optional<std::string> DiskCache::get(const std::string& key) {
  if (!enabled()) return std::nullopt;
  std::string path = path_for(key);
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream ss;
  ss << f.rdbuf();
  std::string s = ss.str();
  const size_t header = 8 + 8 + 8 + 8;
  bool ok = s.size() >= header && std::memcmp(s.data(), kMagic, 8) == 0 &&
            get_u64(s, 8) == s.size() - header && get_u64(s, 24) == fnv1a(key);
  std::string payload = ok ? s.substr(header) : std::string();
  if (ok && get_u64(s, 16) != fnv1a(payload)) ok = false;
  if (!ok) {
    if (ir::debug_level() >= 1)
      std::fprintf(stderr, "rune: cache entry %s is corrupt; rebuilding\n", path.c_str());
    std::remove(path.c_str());
    return std::nullopt;
  }
  return payload;
}

void DiskCache::put(const std::string& key, const std::string& data) {
  if (!enabled()) return;
  static std::atomic<uint64_t> counter{0};
  std::string path = path_for(key);
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  std::string blob(kMagic, 8);
  put_u64(blob, data.size());
  put_u64(blob, fnv1a(data));
  put_u64(blob, fnv1a(key));
  blob += data;
  {
    std::ofstream f(tmp, std::ios::binary);
    if (!f) return;  // read-only or full: caching is an optimisation, never an error
    f.write(blob.data(), static_cast<std::streamsize>(blob.size()));
    if (!f) {
      std::remove(tmp.c_str());
      return;
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace codegen
