// Internal helpers of the checkpoint files (core/io*.cpp): errors, the atomic writer, the
// reader of a whole file, and the per-format entry points. Not part of the public API.
#pragma once
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/io.h"

namespace nx::io {

// std::invalid_argument "<api>: '<file>': <msg>" (a bad argument or a malformed file).
[[noreturn]] void bad(const char* api, const std::string& file, const std::string& msg);
// std::runtime_error "<api>: '<file>': <msg>: <strerror(errno)>" (the operating system failed).
[[noreturn]] void os_error(const char* api, const std::string& file, const std::string& msg);

// "2^62" for powers of two above 2^20, else the decimal number (for sizes in messages).
std::string size_text(uint64_t n);
// n * m and a + b, or nullopt on overflow.
std::optional<uint64_t> mul(uint64_t a, uint64_t b);
std::optional<uint64_t> add(uint64_t a, uint64_t b);
// The number of elements of `shape` (dims already checked non-negative), or a clear error when
// the shape does not fit rune's limits (ir::kMaxElements) or `bytes` does not fit uint64.
uint64_t checked_bytes(const char* api, const std::string& file, const std::string& what, DType t,
                       const Shape& shape);

// Writes `path` atomically: bytes go to a temporary `path.tmp.<pid>.<n>` (n: a counter of this
// process, so every write has its own temporary, whichever thread makes it; created with O_EXCL,
// so no two writers ever share one); commit() fsyncs, closes and renames it over `path`.
// Destroyed without commit() (an exception), it removes the temporary.
class AtomicFile {
 public:
  AtomicFile(const char* api, const std::string& path);
  ~AtomicFile();
  AtomicFile(const AtomicFile&) = delete;
  AtomicFile& operator=(const AtomicFile&) = delete;
  void write(const void* data, size_t n);
  uint64_t written() const { return written_; }
  void commit();

 private:
  const char* api_;
  std::string path_, tmp_;
  int fd_ = -1;
  uint64_t written_ = 0;
};

// The whole of a regular file, read into memory (not mapped: a file truncated by another process
// while a mapping of it is read kills the reader with SIGBUS; read(2) returns what is there).
// Refuses what is not a regular file (a FIFO, a device, a directory) without blocking on it, and
// raises std::runtime_error when the file changes size or is modified while it is read.
class FileBytes {
 public:
  FileBytes(const char* api, const std::string& path);
  FileBytes(const FileBytes&) = delete;
  FileBytes& operator=(const FileBytes&) = delete;
  const uint8_t* data() const { return data_.get(); }
  size_t size() const { return size_; }

 private:
  std::unique_ptr<uint8_t[]> data_;
  size_t size_ = 0;
};

// A tensor of the file: dtype, shape and `n` bytes at `p` in C order (or Fortran order), in the
// file's byte order. Checks bool bytes (0 or 1), copies into a fresh host buffer and places it on
// `device`. `what` names the tensor in messages ("tensor 'w'").
Tensor make_tensor(const char* api, const std::string& file, const std::string& what, DType t,
                   const Shape& shape, const uint8_t* p, bool byteswap, bool fortran,
                   std::optional<Device> device);

// Reads x's bits in C order under `api` (waits; copies device values to the host; raises as a
// read does for a dead or failed value).
std::vector<uint8_t> read_bytes(const Tensor& x, const char* api);

// .npy: the header of a tensor (raises naming `what` for bfloat16), and parsing one .npy image.
std::string npy_header(const char* api, const std::string& file, const std::string& what, DType t,
                       const Shape& shape);
Tensor npy_parse(const char* api, const std::string& file, const std::string& what,
                 const uint8_t* p, size_t n, std::optional<Device> device);

void save_safetensors(const char* api, const std::string& path, const TensorMap& tensors);
TensorMap load_safetensors(const char* api, const std::string& path, std::optional<Device> device);
// zip64_from: sizes and offsets from this value on are written as zip64 fields (always past
// 4 GiB; tests pass 0 to write an all-zip64 archive without writing 4 GiB).
void save_npz(const char* api, const std::string& path, const TensorMap& tensors,
              uint64_t zip64_from = 0xffffffffu);
TensorMap load_npz(const char* api, const std::string& path, std::optional<Device> device);

}  // namespace nx::io
