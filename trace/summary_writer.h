// rune::SummaryWriter: scalars (a loss, a learning rate) as TensorBoard event files, written
// without a protobuf dependency (the few Event fields are encoded by hand). docs/interop.md.
//
// File format (TensorFlow's TFRecord of tensorflow.Event): per record, the length as uint64
// little-endian, the masked CRC32C of those 8 bytes, the data, the masked CRC32C of the data.
// The first record is the Event {wall_time, file_version: "brain.Event:2"}; each scalar is an
// Event {wall_time, step, summary {value {tag, simple_value}}}.
#pragma once
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "core/tensor.h"

namespace rune {

class SummaryWriter {
 public:
  // Creates `logdir` (and its parents) if needed and a new file in it named
  // events.out.tfevents.<seconds>.<host>.<pid>.<n>, which TensorBoard's directory watcher reads.
  // Throws std::runtime_error "rune::SummaryWriter: ..." naming the path when it cannot.
  explicit SummaryWriter(const std::string& logdir);
  ~SummaryWriter();  // flushes and closes
  SummaryWriter(const SummaryWriter&) = delete;
  SummaryWriter& operator=(const SummaryWriter&) = delete;

  // One scalar at `step` (stored as float32, as TensorBoard's simple_value is).
  void add_scalar(const std::string& tag, double value, int64_t step);
  // A one-element tensor's value (read back to the host: it waits for the value).
  void add_scalar(const std::string& tag, const nx::Tensor& value, int64_t step);
  void flush();
  const std::string& path() const { return path_; }

 private:
  void write_record(const std::string& data);
  std::string path_;
  std::FILE* file_ = nullptr;
};

// The pieces of the format, for tests and other writers.
namespace tfevents {
uint32_t crc32c(const void* data, size_t n);  // Castagnoli, as TFRecord uses
uint32_t masked_crc32c(const void* data, size_t n);
// The serialized Event messages.
std::string file_version_event(double wall_time);
std::string scalar_event(double wall_time, int64_t step, std::string_view tag, float value);
// One framed record: length, masked CRC of the length, data, masked CRC of the data.
std::string frame_record(const std::string& data);
}  // namespace tfevents

}  // namespace rune
