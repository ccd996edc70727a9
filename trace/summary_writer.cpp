#include "trace/summary_writer.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <system_error>

#include "core/ops.h"

namespace rune {

namespace tfevents {

namespace {

// The reflected CRC-32C table (polynomial 0x1EDC6F41, reflected 0x82F63B78).
const std::array<uint32_t, 256>& crc_table() {
  static const std::array<uint32_t, 256> table = [] {
    std::array<uint32_t, 256> t{};
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82F63B78u : c >> 1;
      t[i] = c;
    }
    return t;
  }();
  return table;
}

// Protobuf wire format: varints, and fields as (number << 3 | wire type) keys.
void put_varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out.push_back(static_cast<char>((v & 0x7F) | 0x80));
    v >>= 7;
  }
  out.push_back(static_cast<char>(v));
}
void put_key(std::string& out, int field, int wire_type) {
  put_varint(out, static_cast<uint64_t>(field) << 3 | static_cast<uint64_t>(wire_type));
}
template <class T>
void put_fixed(std::string& out, T v) {  // little-endian, as x86 and ARM store it
  char b[sizeof(T)];
  std::memcpy(b, &v, sizeof(T));
  out.append(b, sizeof(T));
}
void put_bytes(std::string& out, int field, std::string_view bytes) {
  put_key(out, field, 2);
  put_varint(out, bytes.size());
  out.append(bytes);
}

// Event.wall_time = 1 (double), Event.step = 2 (int64), Event.file_version = 3 (string),
// Event.summary = 5; Summary.value = 1; Summary.Value.tag = 1, .simple_value = 2 (float).
void put_wall_time(std::string& out, double wall_time) {
  put_key(out, 1, 1);
  put_fixed(out, wall_time);
}

}  // namespace

uint32_t crc32c(const void* data, size_t n) {
  const auto& t = crc_table();
  const auto* p = static_cast<const uint8_t*>(data);
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) c = t[(c ^ p[i]) & 0xFF] ^ (c >> 8);
  return c ^ 0xFFFFFFFFu;
}

uint32_t masked_crc32c(const void* data, size_t n) {
  uint32_t c = crc32c(data, n);
  return ((c >> 15) | (c << 17)) + 0xA282EAD8u;
}

std::string file_version_event(double wall_time) {
  std::string e;
  put_wall_time(e, wall_time);
  put_bytes(e, 3, "brain.Event:2");
  return e;
}

std::string scalar_event(double wall_time, int64_t step, std::string_view tag, float value) {
  std::string v;
  put_bytes(v, 1, tag);
  put_key(v, 2, 5);
  put_fixed(v, value);
  std::string summary;
  put_bytes(summary, 1, v);
  std::string e;
  put_wall_time(e, wall_time);
  put_key(e, 2, 0);
  put_varint(e, static_cast<uint64_t>(step));  // int64: negative steps take ten bytes
  put_bytes(e, 5, summary);
  return e;
}

std::string frame_record(const std::string& data) {
  std::string r;
  uint64_t n = data.size();
  put_fixed(r, n);
  put_fixed(r, masked_crc32c(r.data(), 8));
  r.append(data);
  put_fixed(r, masked_crc32c(data.data(), data.size()));
  return r;
}

}  // namespace tfevents

namespace {

double now_seconds() {
  using namespace std::chrono;
  return duration<double>(system_clock::now().time_since_epoch()).count();
}

std::string host_name() {
  char buf[256] = {};
  if (gethostname(buf, sizeof(buf) - 1) != 0 || buf[0] == 0) return "localhost";
  return buf;
}

}  // namespace

SummaryWriter::SummaryWriter(const std::string& logdir) {
  std::error_code ec;
  std::filesystem::create_directories(logdir, ec);
  if (ec)
    throw std::runtime_error("rune::SummaryWriter: cannot create log directory \"" + logdir +
                             "\": " + ec.message());
  // Two writers of one process in one second get different names (the counter).
  static std::atomic<int> counter{0};
  double t = now_seconds();
  path_ = (std::filesystem::path(logdir) /
           ("events.out.tfevents." + std::to_string(static_cast<int64_t>(t)) + "." + host_name() +
            "." + std::to_string(getpid()) + "." + std::to_string(counter.fetch_add(1))))
              .string();
  file_ = std::fopen(path_.c_str(), "wb");
  if (!file_)
    throw std::runtime_error("rune::SummaryWriter: cannot open \"" + path_ +
                             "\": " + std::strerror(errno));
  write_record(tfevents::file_version_event(t));
  flush();
}

SummaryWriter::~SummaryWriter() {
  if (file_) std::fclose(file_);
}

void SummaryWriter::write_record(const std::string& data) {
  std::string r = tfevents::frame_record(data);
  if (std::fwrite(r.data(), 1, r.size(), file_) != r.size())
    throw std::runtime_error("rune::SummaryWriter: cannot write \"" + path_ +
                             "\": " + std::strerror(errno));
}

void SummaryWriter::add_scalar(const std::string& tag, double value, int64_t step) {
  if (tag.empty()) throw std::invalid_argument("rune::SummaryWriter::add_scalar: empty tag");
  write_record(tfevents::scalar_event(now_seconds(), step, tag, static_cast<float>(value)));
}

void SummaryWriter::add_scalar(const std::string& tag, const nx::Tensor& value, int64_t step) {
  if (value.size() != 1)
    throw std::invalid_argument("rune::SummaryWriter::add_scalar: tag \"" + tag +
                                "\" needs a one-element tensor, got " + value.describe());
  add_scalar(tag, nx::item<double>(value), step);
}

void SummaryWriter::flush() {
  if (std::fflush(file_) != 0)
    throw std::runtime_error("rune::SummaryWriter: cannot write \"" + path_ +
                             "\": " + std::strerror(errno));
}

}  // namespace rune
