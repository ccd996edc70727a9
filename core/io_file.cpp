// The files of checkpoints: the atomic writer (temporary, fsync, rename), the reader of a whole
// file and the error helpers shared by the formats (core/io_internal.h).
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "core/io_internal.h"

namespace nx::io {

void bad(const char* api, const std::string& file, const std::string& msg) {
  throw std::invalid_argument(std::string(api) + ": '" + file + "': " + msg);
}

void os_error(const char* api, const std::string& file, const std::string& msg) {
  int e = errno;
  throw std::runtime_error(std::string(api) + ": '" + file + "': " + msg + ": " + std::strerror(e));
}

std::string size_text(uint64_t n) {
  if (n > (1u << 20) && (n & (n - 1)) == 0) return "2^" + std::to_string(__builtin_ctzll(n));
  return std::to_string(n);
}

std::optional<uint64_t> mul(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_mul_overflow(a, b, &r)) return std::nullopt;
  return r;
}

std::optional<uint64_t> add(uint64_t a, uint64_t b) {
  uint64_t r;
  if (__builtin_add_overflow(a, b, &r)) return std::nullopt;
  return r;
}

AtomicFile::AtomicFile(const char* api, const std::string& path) : api_(api), path_(path) {
  // One temporary per write: threads of this process saving to one path at once each write and
  // rename their own file, so a reader only ever sees one writer's complete file.
  static std::atomic<uint64_t> counter{0};
  const std::string stem = path + ".tmp." + std::to_string(::getpid()) + ".";
  for (int attempt = 0;; ++attempt) {
    tmp_ = stem + std::to_string(counter.fetch_add(1, std::memory_order_relaxed));
    fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd_ >= 0) return;
    // EEXIST: a stale temporary of an earlier process with this pid; take the next number.
    if (errno != EEXIST || attempt == 100) {
      const std::string tried = tmp_;
      tmp_.clear();  // not ours: the destructor must not remove it
      os_error(api_, path_, "cannot create the temporary file '" + tried + "'");
    }
  }
}

AtomicFile::~AtomicFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!tmp_.empty()) ::unlink(tmp_.c_str());
}

void AtomicFile::write(const void* data, size_t n) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd_, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      os_error(api_, path_, "cannot write the temporary file '" + tmp_ + "'");
    }
    p += w;
    n -= static_cast<size_t>(w);
    written_ += static_cast<uint64_t>(w);
  }
}

void AtomicFile::commit() {
  if (::fsync(fd_) != 0) os_error(api_, path_, "cannot sync the temporary file '" + tmp_ + "'");
  int fd = fd_;
  fd_ = -1;
  if (::close(fd) != 0) os_error(api_, path_, "cannot close the temporary file '" + tmp_ + "'");
  if (::rename(tmp_.c_str(), path_.c_str()) != 0)
    os_error(api_, path_, "cannot rename '" + tmp_ + "' over it");
  tmp_.clear();
  // Make the rename itself durable (best effort: some file systems refuse to sync a directory).
  std::string dir = path_.find('/') == std::string::npos ? "." : path_.substr(0, path_.rfind('/'));
  if (dir.empty()) dir = "/";
  int d = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (d >= 0) {
    ::fsync(d);
    ::close(d);
  }
}

namespace {

// What a file that is not a regular one is, for the message.
const char* kind_of(mode_t m) {
  if (S_ISDIR(m)) return "a directory";
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  return "not a regular file";
}

// The same file, unchanged: size and modification time (a writer that truncates and rewrites
// the file in place changes one or both).
bool same_state(const struct stat& a, const struct stat& b) {
  return a.st_size == b.st_size && a.st_mtim.tv_sec == b.st_mtim.tv_sec &&
         a.st_mtim.tv_nsec == b.st_mtim.tv_nsec;
}

}  // namespace

FileBytes::FileBytes(const char* api, const std::string& path) {
  // O_NONBLOCK: opening a FIFO for reading would wait for a writer forever; with it the open
  // returns and fstat refuses the FIFO. Reads of a regular file ignore the flag.
  int fd = ::open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
  if (fd < 0) os_error(api, path, "cannot open");
  struct Closer {
    int fd;
    ~Closer() { ::close(fd); }
  } closer{fd};
  struct stat before;
  if (::fstat(fd, &before) != 0) os_error(api, path, "cannot stat");
  if (!S_ISREG(before.st_mode))
    bad(api, path,
        std::string("is ") + kind_of(before.st_mode) +
            ", not a regular file (a checkpoint is read from a regular file)");
  size_ = static_cast<size_t>(before.st_size);
  data_ = std::make_unique_for_overwrite<uint8_t[]>(size_ ? size_ : 1);
  auto changed = [&](const std::string& how) {
    throw std::runtime_error(std::string(api) + ": '" + path +
                             "': the file changed while it was read (" + how +
                             "; another process is writing it? a save by nx::save is atomic)");
  };
  size_t done = 0;
  while (done < size_) {
    ssize_t n = ::pread(fd, data_.get() + done, size_ - done, static_cast<off_t>(done));
    if (n < 0) {
      if (errno == EINTR) continue;
      os_error(api, path,
               "cannot read byte " + std::to_string(done) + " of " + std::to_string(size_));
    }
    if (n == 0)
      changed("it had " + std::to_string(size_) + " bytes, then ended at byte " +
              std::to_string(done));
    done += static_cast<size_t>(n);
  }
  struct stat after;
  if (::fstat(fd, &after) != 0) os_error(api, path, "cannot stat");
  if (!same_state(before, after))
    changed(after.st_size != before.st_size ? "it had " + std::to_string(size_) + " bytes, then " +
                                                  std::to_string(after.st_size)
                                            : "it was modified");
}

}  // namespace nx::io
