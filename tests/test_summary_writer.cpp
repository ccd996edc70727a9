// rune::SummaryWriter (trace/summary_writer.h): the event file read back record by record, each
// CRC checked, each Event decoded with a small protobuf reader written here independently.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.h"
#include "trace/rune.h"

namespace {

namespace tf = rune::tfevents;

// The published CRC-32C check values (RFC 3720 B.4 and the "123456789" check).
TEST(TfEvents, Crc32cKnownValues) {
  EXPECT_EQ(tf::crc32c("123456789", 9), 0xE3069283u);
  std::string zeros(32, '\0');
  EXPECT_EQ(tf::crc32c(zeros.data(), zeros.size()), 0x8A9136AAu);
  std::string ones(32, '\xFF');
  EXPECT_EQ(tf::crc32c(ones.data(), ones.size()), 0x62A8AB43u);
  uint32_t c = tf::crc32c("123456789", 9);
  EXPECT_EQ(tf::masked_crc32c("123456789", 9), ((c >> 15) | (c << 17)) + 0xA282EAD8u);
}

struct Field {
  int wire = 0;
  uint64_t varint = 0;
  std::string bytes;  // length-delimited and fixed fields, raw
};

// field number -> occurrences, of one message.
std::multimap<int, Field> parse(const std::string& m) {
  std::multimap<int, Field> out;
  size_t i = 0;
  auto varint = [&]() {
    uint64_t v = 0;
    for (int shift = 0;; shift += 7) {
      if (i >= m.size()) throw std::runtime_error("truncated varint");
      uint8_t b = static_cast<uint8_t>(m[i++]);
      v |= static_cast<uint64_t>(b & 0x7F) << shift;
      if (!(b & 0x80)) return v;
    }
  };
  while (i < m.size()) {
    uint64_t key = varint();
    Field f;
    f.wire = static_cast<int>(key & 7);
    size_t n = 0;
    if (f.wire == 0) {
      f.varint = varint();
    } else {
      n = f.wire == 1 ? 8 : f.wire == 5 ? 4 : f.wire == 2 ? static_cast<size_t>(varint()) : 0;
      if (n == 0 && f.wire != 2) throw std::runtime_error("unexpected wire type");
      if (i + n > m.size()) throw std::runtime_error("truncated field");
      f.bytes = m.substr(i, n);
      i += n;
    }
    out.emplace(static_cast<int>(key >> 3), f);
  }
  return out;
}

template <class T>
T fixed(const std::string& b) {
  T v;
  EXPECT_EQ(b.size(), sizeof(T));
  std::memcpy(&v, b.data(), sizeof(T));
  return v;
}

// The records of a file, their framing CRCs checked.
std::vector<std::string> read_records(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string file = ss.str();
  std::vector<std::string> records;
  size_t i = 0;
  while (i < file.size()) {
    EXPECT_GE(file.size() - i, 16u);
    uint64_t n = fixed<uint64_t>(file.substr(i, 8));
    EXPECT_EQ(fixed<uint32_t>(file.substr(i + 8, 4)), tf::masked_crc32c(file.data() + i, 8));
    std::string data = file.substr(i + 12, n);
    EXPECT_EQ(fixed<uint32_t>(file.substr(i + 12 + n, 4)), tf::masked_crc32c(data.data(), n));
    records.push_back(data);
    i += 16 + n;
  }
  return records;
}

TEST(SummaryWriter, WritesTheFileVersionThenScalars) {
  auto dir =
      std::filesystem::temp_directory_path() /
      ("rune-summary-test-" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
       "-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  std::string path;
  {
    rune::SummaryWriter w((dir / "run1").string());
    path = w.path();
    EXPECT_EQ(std::filesystem::path(path).filename().string().rfind("events.out.tfevents.", 0), 0u);
    w.add_scalar("loss", 2.5, 0);
    w.add_scalar("loss", nx::full(nx::float32, {}, 1.25), 1);
    w.add_scalar("lr", 3e-4, 1234567890123);
  }
  auto records = read_records(path);
  ASSERT_EQ(records.size(), 4u);
  auto first = parse(records[0]);
  ASSERT_EQ(first.count(3), 1u);
  EXPECT_EQ(first.find(3)->second.bytes, "brain.Event:2");
  EXPECT_GT(fixed<double>(first.find(1)->second.bytes), 1.7e9);  // wall time, in seconds
  struct Want {
    int64_t step;
    std::string tag;
    float value;
  };
  std::vector<Want> want = {{0, "loss", 2.5f}, {1, "loss", 1.25f}, {1234567890123, "lr", 3e-4f}};
  for (size_t k = 0; k < want.size(); ++k) {
    auto e = parse(records[k + 1]);
    ASSERT_EQ(e.count(2), 1u);
    EXPECT_EQ(static_cast<int64_t>(e.find(2)->second.varint), want[k].step);
    ASSERT_EQ(e.count(5), 1u);
    auto summary = parse(e.find(5)->second.bytes);
    ASSERT_EQ(summary.count(1), 1u);
    auto value = parse(summary.find(1)->second.bytes);
    EXPECT_EQ(value.find(1)->second.bytes, want[k].tag);
    EXPECT_EQ(value.find(2)->second.wire, 5);
    EXPECT_EQ(fixed<float>(value.find(2)->second.bytes), want[k].value);
  }
  std::filesystem::remove_all(dir);
}

TEST(SummaryWriter, Errors) {
  EXPECT_EQ(
      rt::message_of([] { rune::SummaryWriter w("/proc/rune-no-such-dir/x"); })
          .rfind("rune::SummaryWriter: cannot create log directory \"/proc/rune-no-such-dir/x\": ",
                 0),
      0u);
  auto dir =
      std::filesystem::temp_directory_path() / ("rune-summary-errors-" + std::to_string(getpid()));
  {
    rune::SummaryWriter w(dir.string());
    EXPECT_EQ(rt::message_of([&] { w.add_scalar("", 1.0, 0); }),
              "rune::SummaryWriter::add_scalar: empty tag");
    EXPECT_EQ(
        rt::message_of([&] { w.add_scalar("x", nx::full(nx::float32, {2}, 1.0), 0); }),
        "rune::SummaryWriter::add_scalar: tag \"x\" needs a one-element tensor, got float32 [2]");
  }
  std::filesystem::remove_all(dir);
}

}  // namespace
