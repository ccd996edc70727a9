// nx::load_idx (core/io_idx.cpp): IDX files this test writes itself, plain and gzip-compressed
// (every dtype of the format, big-endian elements, on the host and the fake CUDA:0), hostile
// files that raise naming the API and the path without allocating what their headers claim, and
// Debian's dataset-fashion-mnist when it is installed (tools/setup-deps installs it).
#include <gtest/gtest.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "core/io_inflate.h"
#include "gpu_runtime/fake_driver.h"
#include "trace/rune.h"

namespace {

using nx::Shape;
using nx::Tensor;
using Bytes = std::vector<uint8_t>;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

std::string dir() {
  static const std::string d = [] {
    auto p = std::filesystem::temp_directory_path() / ("rune_test_idx_" + std::to_string(getpid()));
    std::filesystem::create_directories(p);
    return p.string();
  }();
  return d;
}

// The IDX header: 0, 0, the dtype code, the rank, big-endian extents.
Bytes header(uint8_t code, const std::vector<uint32_t>& dims) {
  Bytes b{0, 0, code, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims)
    b.insert(b.end(), {uint8_t(d >> 24), uint8_t(d >> 16), uint8_t(d >> 8), uint8_t(d)});
  return b;
}
Bytes cat(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}
std::string write(const std::string& name, const Bytes& b) {
  const std::string path = dir() + "/" + name;
  FILE* f = std::fopen(path.c_str(), "wb");
  std::fwrite(b.data(), 1, b.size(), f);
  std::fclose(f);
  return path;
}
std::string write_gz(const std::string& name, const Bytes& b) {
  const std::string path = dir() + "/" + name;
  gzFile f = gzopen(path.c_str(), "wb");
  gzwrite(f, b.data(), static_cast<unsigned>(b.size()));
  gzclose(f);
  return path;
}

TEST(Idx, EveryDtypeBigEndianPlainAndGzip) {
  // uint8 [2, 3, 2]
  Bytes u8 = header(0x08, {2, 3, 2});
  for (int i = 0; i < 12; ++i) u8.push_back(static_cast<uint8_t>(i * 20));
  // int8 [3]: -1, 127, -128; int16 [2]: 258, -2; int32 [2, 1]: 16909060, -5;
  // float32 [2]: 1.5, -0.25 (0x3fc00000, 0xbe800000); float64 [1]: 3.0 (0x4008000000000000)
  Bytes i8 = cat(header(0x09, {3}), {0xff, 0x7f, 0x80});
  Bytes i16 = cat(header(0x0b, {2}), {0x01, 0x02, 0xff, 0xfe});
  Bytes i32 = cat(header(0x0c, {2, 1}), {0x01, 0x02, 0x03, 0x04, 0xff, 0xff, 0xff, 0xfb});
  Bytes f32 = cat(header(0x0d, {2}), {0x3f, 0xc0, 0, 0, 0xbe, 0x80, 0, 0});
  Bytes f64 = cat(header(0x0e, {1}), {0x40, 0x08, 0, 0, 0, 0, 0, 0});
  Bytes empty = header(0x08, {0, 28});
  struct Want {
    const char* name;
    Bytes b;
    nx::DType t;
    Shape s;
    std::vector<double> v;
  };
  std::vector<double> u8v;
  for (int i = 0; i < 12; ++i) u8v.push_back(i * 20);
  std::vector<Want> wants{
      {"u8", u8, nx::uint8, {2, 3, 2}, u8v},        {"i8", i8, nx::int8, {3}, {-1, 127, -128}},
      {"i16", i16, nx::int16, {2}, {258, -2}},      {"i32", i32, nx::int32, {2, 1}, {16909060, -5}},
      {"f32", f32, nx::float32, {2}, {1.5, -0.25}}, {"f64", f64, nx::float64, {1}, {3.0}},
      {"empty", empty, nx::uint8, {0, 28}, {}}};
  for (const Want& w : wants)
    for (bool gz : {false, true}) {
      const std::string path = gz ? write_gz(std::string(w.name) + ".gz", w.b) : write(w.name, w.b);
      Tensor t = nx::load_idx(path);
      EXPECT_EQ(t.dtype(), w.t) << path;
      EXPECT_EQ(t.shape(), w.s) << path;
      EXPECT_EQ(nx::to_array(t), w.v) << path;
      EXPECT_EQ(t.device(), nx::Device::cpu()) << path;
    }
  Tensor g = nx::load_idx(write_gz("i16.gz", i16), nx::Device::parse("CUDA:0", "test"));
  EXPECT_EQ(g.device(), nx::Device::parse("CUDA:0", "test"));
  EXPECT_EQ(nx::to_array(g), (std::vector<double>{258, -2}));
}

void expect_error(const std::string& path, const std::vector<std::string>& parts) {
  try {
    nx::load_idx(path);
    ADD_FAILURE() << "no error for " << path;
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("nx::load_idx: '" + path + "'"), std::string::npos) << m;
    for (const auto& p : parts) EXPECT_NE(m.find(p), std::string::npos) << m << "\nlacks: " << p;
  }
}

TEST(Idx, HostileFilesRaiseNamingTheApiAndThePath) {
  Bytes ok = cat(header(0x08, {4}), {1, 2, 3, 4});
  expect_error(write("magic", cat({1, 0, 8, 1}, {0, 0, 0, 1, 9})), {"not an IDX file", "0x01"});
  expect_error(write("code", cat(header(0x0a, {1}), {1})), {"dtype code 0x0a"});
  expect_error(write("short", {0, 0, 8}), {"truncated", "no complete IDX header"});
  expect_error(write("short_dims", {0, 0, 8, 3, 0, 0, 0, 2}), {"no complete IDX header"});
  expect_error(write("truncated", Bytes(ok.begin(), ok.end() - 1)),
               {"truncated", "uint8 [4]", "needs 12 bytes", "holds 11"});
  expect_error(write("longer", cat(ok, {9})), {"longer than its header says", "holds 13"});
  expect_error(write("int32_truncated", cat(header(0x0c, {2}), {0, 0, 0, 1, 0, 0})),
               {"int32 [2]", "needs 16 bytes", "holds 14"});
  // Extents the format cannot hold, and a shape no file could: raised before any allocation.
  expect_error(write("negative", cat(header(0x08, {0x80000000u}), {1})), {"above 2^31 - 1"});
  expect_error(write("huge", cat(header(0x0e, {0x7fffffff, 0x7fffffff, 0x7fffffff}), {1, 2})),
               {"more than"});
  expect_error(write("big", cat(header(0x08, {60000, 28, 28}), {1, 2, 3})),
               {"needs 47040016 bytes", "holds 19"});
  // Compressed: the same checks on the inflated bytes; a header claiming 2^31 - 1 bytes of a
  // small stream inflates what is there and stops.
  expect_error(write_gz("big.gz", cat(header(0x08, {0x7fffffff}), Bytes(1000, 7))),
               {"truncated", "holds 1008"});
  expect_error(write_gz("longer.gz", cat(ok, Bytes(5000, 1))), {"longer than its header", "more"});
  expect_error(write_gz("magic.gz", {7, 7, 7, 7, 7}), {"not an IDX file"});
  Bytes gz;
  {
    const std::string p = write_gz("whole.gz", cat(header(0x08, {3000}), Bytes(3000, 5)));
    FILE* f = std::fopen(p.c_str(), "rb");
    int c;
    while ((c = std::fgetc(f)) != EOF) gz.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
  }
  expect_error(write("cut.gz", Bytes(gz.begin(), gz.begin() + gz.size() / 2)), {"gzip"});
  Bytes corrupt = gz;
  corrupt[12] ^= 0xff;
  corrupt[13] ^= 0xff;
  expect_error(write("corrupt.gz", corrupt), {"gzip"});
  try {
    nx::load_idx(dir() + "/missing");
    ADD_FAILURE() << "no error for a missing file";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("nx::load_idx: '" + dir() + "/missing'"),
              std::string::npos)
        << e.what();
  }
}

// The bounded inflate loop both compressed readers share (core/io_inflate.h) hands zlib its input
// and output in chunks: with 7-byte chunks a 40 KB stream inflates whole (before the shared loop,
// load_idx gave zlib its input once, capped at 4 GiB, so a longer stream read as truncated), a
// cut stream ends as InputEnded, a corrupt one as Corrupt with zlib's reason, and the output
// never passes the cap.
TEST(Idx, InflateLoopFeedsZlibInChunks) {
  Bytes plain(40000);
  for (size_t i = 0; i < plain.size(); ++i) plain[i] = static_cast<uint8_t>((i * 7919) >> 5);
  Bytes gz;
  {
    const std::string p = write_gz("chunks.gz", plain);
    FILE* f = std::fopen(p.c_str(), "rb");
    int c;
    while ((c = std::fgetc(f)) != EOF) gz.push_back(static_cast<uint8_t>(c));
    std::fclose(f);
  }
  const auto unbounded = [](const uint8_t*, uint64_t) { return uint64_t{1} << 40; };
  auto run = [&](const Bytes& in, const std::function<uint64_t(const uint8_t*, uint64_t)>& cap,
                 uint64_t chunk) {
    return nx::io::inflate_bounded("test", "mem", in.data(), in.size(), 16 + MAX_WBITS, 16, cap,
                                   chunk);
  };
  for (uint64_t chunk : {uint64_t{1}, uint64_t{7}, uint64_t{4096}, uint64_t{1} << 30}) {
    nx::io::Inflated z = run(gz, unbounded, chunk);
    EXPECT_EQ(z.end, nx::io::InflateEnd::StreamEnd) << "chunk " << chunk;
    EXPECT_EQ(z.bytes, plain) << "chunk " << chunk;
  }
  nx::io::Inflated cut = run(Bytes(gz.begin(), gz.begin() + gz.size() / 2), unbounded, 7);
  EXPECT_EQ(cut.end, nx::io::InflateEnd::InputEnded);
  EXPECT_TRUE(std::equal(cut.bytes.begin(), cut.bytes.end(), plain.begin()));
  Bytes corrupt = gz;
  for (size_t i = 12; i < 40; ++i) corrupt[i] ^= 0xff;
  nx::io::Inflated bad = run(corrupt, unbounded, 7);
  EXPECT_EQ(bad.end, nx::io::InflateEnd::Corrupt);
  EXPECT_FALSE(bad.zlib_message.empty());
  nx::io::Inflated capped = run(
      gz, [](const uint8_t*, uint64_t) { return uint64_t{1000}; }, 7);
  EXPECT_EQ(capped.end, nx::io::InflateEnd::CapReached);
  EXPECT_EQ(capped.bytes, Bytes(plain.begin(), plain.begin() + 1000));
}

// Debian's dataset-fashion-mnist (/usr/share/datasets/fashion-mnist), when installed.
TEST(Idx, FashionMnistWhenInstalled) {
  const std::string d = "/usr/share/datasets/fashion-mnist/";
  if (!std::filesystem::exists(d + "t10k-images-idx3-ubyte.gz"))
    GTEST_SKIP() << "dataset-fashion-mnist is not installed (tools/setup-deps installs it)";
  Tensor images = nx::load_idx(d + "t10k-images-idx3-ubyte.gz");
  Tensor labels = nx::load_idx(d + "t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(images.dtype(), nx::uint8);
  EXPECT_EQ(images.shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(labels.shape(), (Shape{10000}));
  // Ten classes of 1000 test images each.
  Tensor counts = nx::sum(nx::one_hot(labels, 10, nx::int32), {0});
  EXPECT_EQ(nx::to_vector<int64_t>(nx::cast(counts, nx::int64)), std::vector<int64_t>(10, 1000));
  EXPECT_GT(nx::item<double>(nx::max(nx::cast(images, nx::float32))), 200.0);
}

}  // namespace
