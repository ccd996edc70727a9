// The files of checkpoints: the atomic writer (temporary, fsync, rename), the read-only mapping
// and the error helpers shared by the formats (core/io_internal.h).
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
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

AtomicFile::AtomicFile(const char* api, const std::string& path)
    : api_(api), path_(path), tmp_(path + ".tmp." + std::to_string(::getpid())) {
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd_ < 0) os_error(api_, path_, "cannot create the temporary file '" + tmp_ + "'");
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

MappedFile::MappedFile(const char* api, const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) os_error(api, path, "cannot open");
  struct stat st;
  if (::fstat(fd, &st) != 0) {
    ::close(fd);
    os_error(api, path, "cannot stat");
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    bad(api, path, "not a regular file");
  }
  size_ = static_cast<size_t>(st.st_size);
  if (size_ > 0) {
    void* m = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (m == MAP_FAILED) {
      ::close(fd);
      os_error(api, path, "cannot map " + std::to_string(size_) + " bytes");
    }
    data_ = static_cast<const uint8_t*>(m);
  }
  ::close(fd);
}

MappedFile::~MappedFile() {
  if (data_) ::munmap(const_cast<uint8_t*>(data_), size_);
}

}  // namespace nx::io
