// The on-disk cache of compiled kernels, shared by processes. Entries are written to a
// temporary file and renamed into place, so readers never see a torn entry; every entry
// carries a checksum, so an unreadable or corrupt file is a miss (removed and rebuilt).
// Directory: RUNE_CACHE_DIR, else $XDG_CACHE_HOME/rune, else ~/.cache/rune. RUNE_CACHE_DIR=""
// or RUNE_DISK_CACHE=0 turns it off.
#pragma once
#include <optional>
#include <string>

namespace codegen {

class DiskCache {
 public:
  static DiskCache& instance();
  std::optional<std::string> get(const std::string& key);
  void put(const std::string& key, const std::string& data);
  const std::string& dir() const { return dir_; }
  bool enabled() const { return !dir_.empty(); }
  std::string path_for(const std::string& key) const;

 private:
  DiskCache();
  std::string dir_;
};

}  // namespace codegen
