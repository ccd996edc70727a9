// The on-disk cache of compiled kernels, shared by processes. Entries are written to a
// temporary file and renamed into place only when every write, the fsync and the close
// succeeded, so readers never see a torn or truncated entry (a full disk installs nothing);
// every entry carries a checksum, so an unreadable or corrupt file is a miss (removed and
// rebuilt). Entries are opened with O_NONBLOCK and read only if they are regular files: a FIFO
// or other non-regular file in an entry's place is a miss and can never block a reader.
// Directory: RUNE_CACHE_DIR, else $XDG_CACHE_HOME/rune, else ~/.cache/rune. RUNE_CACHE_DIR=""
// or RUNE_DISK_CACHE=0 turns it off.
#pragma once
#include <optional>
#include <string>

namespace codegen {

class DiskCache {
 public:
  static DiskCache& instance();
  // The kernels built with rune (the build's prebuild step, docs/performance.md "Prebuilt
  // kernels"): read-only, in the build tree or, where that is gone, where `cmake --install` put
  // them. Disabled by RUNE_PREBUILT_KERNELS=0, or when neither directory exists.
  static DiskCache& prebuilt();
  // `ext` names the kind of entry: ".obj" a kernel's object; ".target" the target id
  // remembered for a host fingerprint (codegen/cpu/host_target.h).
  std::optional<std::string> get(const std::string& key, const char* ext = ".obj");
  void put(const std::string& key, const std::string& data, const char* ext = ".obj");
  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }
  std::string path_for(const std::string& key, const char* ext = ".obj") const;

 private:
  DiskCache();
  explicit DiskCache(std::string read_only_dir);
  std::string dir_;
  bool read_only_ = false;  // a corrupt entry is a miss, not removed
};

}  // namespace codegen
