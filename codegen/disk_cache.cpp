#include "codegen/disk_cache.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "ir/debug.h"
#include "ir/env.h"
#include "ir/hash.h"

namespace codegen {

namespace {
constexpr char kMagic[8] = {'R', 'U', 'N', 'E', 'O', 'B', 'J', '1'};

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

// The whole of the regular file at `path`, or nullopt. O_NONBLOCK: opening a FIFO (or a device)
// put where an entry belongs would otherwise wait for a writer forever; anything that is not a
// regular file is then refused by fstat before a byte is read.
std::optional<std::string> read_regular(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) return std::nullopt;
  std::optional<std::string> out;
  struct stat st;
  if (::fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) {
    std::string s;
    s.reserve(static_cast<size_t>(st.st_size));
    char buf[65536];
    for (;;) {
      ssize_t n = ::read(fd, buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) break;  // an I/O error: a miss
      if (n == 0) {
        out = std::move(s);
        break;
      }
      s.append(buf, static_cast<size_t>(n));
    }
  }
  ::close(fd);
  return out;
}

// Writes all of `data` to a new file `path` and makes it durable; false (and nothing left at
// `path`) when any step fails: a short or failed write (a full disk, a file size limit), fsync or
// close. Only a file written in full may be renamed into the cache.
bool write_new_file(const std::string& path, const std::string& data) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOCTTY, 0644);
  if (fd < 0) return false;
  bool ok = true;
  for (size_t done = 0; ok && done < data.size();) {
    ssize_t n = ::write(fd, data.data() + done, data.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0)
      ok = false;
    else
      done += static_cast<size_t>(n);
  }
  if (ok && ::fsync(fd) != 0) ok = false;
  if (::close(fd) != 0) ok = false;
  if (!ok) ::unlink(path.c_str());
  return ok;
}
}  // namespace

DiskCache::DiskCache() {
  using ir::env::Var;
  if (ir::env::integer(Var::DiskCache) == 0) return;
  // RUNE_CACHE_DIR set, even empty (no disk cache), decides; then the XDG default, then HOME's.
  const auto& dir = ir::env::value(Var::CacheDir);
  const auto& xdg = ir::env::value(Var::XdgCacheHome);
  const auto& home = ir::env::value(Var::Home);
  if (dir) {
    dir_ = *dir;
  } else if (xdg && !xdg->empty()) {
    dir_ = *xdg + "/rune";
  } else if (home && !home->empty()) {
    dir_ = *home + "/.cache/rune";
  }
  if (dir_.empty()) return;
  std::error_code ec;
  std::filesystem::create_directories(dir_, ec);
  if (ec) dir_.clear();  // an unusable directory disables the cache rather than failing
}

DiskCache::DiskCache(std::string read_only_dir) : dir_(std::move(read_only_dir)), read_only_(true) {
  std::error_code ec;
  if (dir_.empty() || !std::filesystem::is_directory(dir_, ec)) dir_.clear();
}

DiskCache& DiskCache::instance() {
  static DiskCache c;
  return c;
}

DiskCache& DiskCache::prebuilt() {
  static DiskCache c([]() -> std::string {
    if (ir::env::integer(ir::env::Var::PrebuiltKernels) == 0) return "";
#ifdef RUNE_PREBUILT_KERNELS_DIR
    std::error_code ec;
#ifdef RUNE_PREBUILT_KERNELS_INSTALLED_DIR
    if (!std::filesystem::is_directory(RUNE_PREBUILT_KERNELS_DIR, ec))
      return RUNE_PREBUILT_KERNELS_INSTALLED_DIR;
#endif
    return RUNE_PREBUILT_KERNELS_DIR;
#else
    return "";
#endif
  }());
  return c;
}

std::string DiskCache::path_for(const std::string& key, const char* ext) const {
  // Two independent 64-bit hashes of the key (the source and target): 128 bits of name.
  return dir_ + "/" + hex(ir::fnv1a64(key)) + hex(ir::fnv1a64(key, 0x9e3779b97f4a7c15ull)) + ext;
}

std::optional<std::string> DiskCache::get(const std::string& key, const char* ext) {
  if (!enabled()) return std::nullopt;
  std::string path = path_for(key, ext);
  // Missing, unreadable or not a regular file: a miss. A non-regular file is left alone (it is
  // not ours to remove); the next put renames a good entry over it.
  std::optional<std::string> file = read_regular(path);
  if (!file) return std::nullopt;
  const std::string& s = *file;
  const size_t header = 8 + 8 + 8 + 8;
  bool ok = s.size() >= header && std::memcmp(s.data(), kMagic, 8) == 0 &&
            get_u64(s, 8) == s.size() - header && get_u64(s, 24) == ir::fnv1a64(key);
  std::string payload = ok ? s.substr(header) : std::string();
  if (ok && get_u64(s, 16) != ir::fnv1a64(payload)) ok = false;
  if (!ok) {
    if (ir::debug_level() >= 1)
      std::fprintf(stderr, "rune: cache entry %s is corrupt; rebuilding\n", path.c_str());
    if (!read_only_) std::remove(path.c_str());
    return std::nullopt;
  }
  return payload;
}

void DiskCache::put(const std::string& key, const std::string& data, const char* ext) {
  if (!enabled() || read_only_) return;
  static std::atomic<uint64_t> counter{0};
  std::string path = path_for(key, ext);
  std::string tmp = path + ".tmp." + std::to_string(getpid()) + "." + std::to_string(counter++);
  std::string blob(kMagic, 8);
  put_u64(blob, data.size());
  put_u64(blob, ir::fnv1a64(data));
  put_u64(blob, ir::fnv1a64(key));
  blob += data;
  // Read-only, full or over a size limit: caching is an optimisation, never an error, and a
  // failed write installs nothing.
  if (!write_new_file(tmp, blob)) return;
  if (std::rename(tmp.c_str(), path.c_str()) != 0) std::remove(tmp.c_str());
}

}  // namespace codegen
