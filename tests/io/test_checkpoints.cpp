// Checkpoints (core/io.h): bit-exact round trips of every dtype on CPU, CPU:1 and the fake CUDA
// device; files written by real numpy and safetensors (tools/io-refgen); truncated, corrupt and
// hostile files raise clear errors without crashing or allocating beyond the file's size; a
// failed save leaves the previous file untouched and no temporary behind.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <new>
#include <random>

#include "codegen/compile.h"
#include "core/io_internal.h"
#include "gpu_runtime/fake_driver.h"
#include "io/reference_files.h"
#include "test_util.h"
#include "trace/rune.h"

// Largest single operator new request while `tracking` is set (hostile-file tests).
static std::atomic<bool> tracking{false};
static std::atomic<size_t> largest{0};
static void note(size_t n) {
  if (!tracking.load(std::memory_order_relaxed)) return;
  size_t cur = largest.load();
  while (n > cur && !largest.compare_exchange_weak(cur, n)) {
  }
}
// Every form of operator new and delete is replaced (malloc and free underneath), so no
// allocation is made by one family and released by the other (ASan checks that).
static void* allocate(size_t n, size_t align = 0) {
  note(n);
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n ? n : 1);
  return p;
}
void* operator new(size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new[](size_t n, const std::nothrow_t&) noexcept { return allocate(n); }
void* operator new(size_t n, std::align_val_t a) {
  if (void* p = allocate(n, static_cast<size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new[](size_t n, std::align_val_t a) {
  if (void* p = allocate(n, static_cast<size_t>(a))) return p;
  throw std::bad_alloc();
}
void* operator new(size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<size_t>(a));
}
void* operator new[](size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  return allocate(n, static_cast<size_t>(a));
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, size_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t) noexcept { std::free(p); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept { std::free(p); }

struct Params {
  nx::Tensor w, b;
};
RUNE_TREE(Params, w, b)
struct Bigger {
  nx::Tensor w, b, c;
};
RUNE_TREE(Bigger, w, b, c)

namespace {

namespace fs = std::filesystem;
using nx::Tensor;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

std::string data(const std::string& name) { return std::string(RUNE_IO_DATA) + "/" + name; }

// A fresh directory per test.
class Dir {
 public:
  Dir() {
    path_ = fs::temp_directory_path() /
            ("rune-io-" + std::to_string(::getpid()) + "-" + std::to_string(counter_++));
    fs::remove_all(path_);
    fs::create_directories(path_);
  }
  ~Dir() { fs::remove_all(path_); }
  std::string operator/(const std::string& n) const { return (path_ / n).string(); }
  std::vector<std::string> files() const {
    std::vector<std::string> r;
    for (auto& e : fs::directory_iterator(path_)) r.push_back(e.path().filename().string());
    std::sort(r.begin(), r.end());
    return r;
  }

 private:
  fs::path path_;
  static inline int counter_ = 0;
};

std::string read_file(const std::string& p) {
  std::ifstream f(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}
void write_file(const std::string& p, const std::string& s) {
  std::ofstream f(p, std::ios::binary | std::ios::trunc);
  f << s;
}

std::vector<uint8_t> from_hex(const std::string& h) {
  std::vector<uint8_t> r;
  for (size_t i = 0; i + 1 < h.size(); i += 2) r.push_back(std::stoi(h.substr(i, 2), nullptr, 16));
  return r;
}

nx::DType dtype_named(const std::string& n) {
  for (nx::DType t : {nx::bool_, nx::uint8, nx::int32, nx::int64, nx::float16, nx::bfloat16,
                      nx::float32, nx::float64})
    if (std::string(ir::name(t)) == n || std::string(ir::name(t)) + "_" == n) return t;
  ADD_FAILURE() << "no dtype " << n;
  return nx::float32;
}

// Random raw bits of dtype t (bools 0/1), with NaN payloads and -0 among the floats.
std::vector<uint8_t> random_bits(nx::DType t, int64_t n, std::mt19937_64& rng) {
  size_t isz = ir::itemsize(t);
  std::vector<uint8_t> b(n * isz);
  for (auto& x : b) x = static_cast<uint8_t>(rng());
  if (t == nx::bool_)
    for (auto& x : b) x &= 1;
  if (ir::is_float(t) && n >= 2) {
    // Element 0: a NaN with a payload; element 1: -0.
    std::memset(b.data(), 0xff, isz);
    b[0] = 0x35;
    std::memset(b.data() + isz, 0, isz);
    b[2 * isz - 1] = 0x80;
  }
  return b;
}

struct Case {
  std::string name;
  Tensor value;  // on the device under test
  std::vector<uint8_t> bits;
};

// Every dtype in four shapes: 0-d, empty, 3-d and a strided (sliced, transposed) view.
std::vector<Case> cases(const std::string& dev, bool with_bf16) {
  std::mt19937_64 rng(42);
  std::vector<Case> out;
  for (nx::DType t :
       {nx::bool_, nx::uint8, nx::int32, nx::int64, nx::float16, nx::bfloat16, nx::float32,
        nx::float64, nx::int8, nx::int16, nx::uint16, nx::uint32, nx::uint64}) {
    if (t == nx::bfloat16 && !with_bf16) continue;
    std::string dn(ir::name(t));
    for (const nx::Shape& s : {nx::Shape{}, nx::Shape{0, 3}, nx::Shape{2, 3, 4}}) {
      auto bits = random_bits(t, ir::numel(s), rng);
      Tensor h = nx::host_from_bytes(t, s, bits.data());
      out.push_back({dn + "_" + std::to_string(s.size()) + "d" + (ir::numel(s) ? "" : "_empty"),
                     dev == "CPU" ? h : nx::place(h, dev), bits});
    }
    // A strided view: every other row of a [4, 5] value, transposed to [5, 2].
    auto bits = random_bits(t, 20, rng);
    Tensor h = nx::host_from_bytes(t, {4, 5}, bits.data());
    Tensor base = dev == "CPU" ? h : nx::place(h, dev);
    Tensor v = nx::transpose(nx::slice(base, {{std::nullopt, std::nullopt, 2}}));
    size_t isz = ir::itemsize(t);
    std::vector<uint8_t> want;
    for (int c = 0; c < 5; ++c)
      for (int r = 0; r < 4; r += 2)
        want.insert(want.end(), bits.begin() + (r * 5 + c) * isz,
                    bits.begin() + (r * 5 + c + 1) * isz);
    out.push_back({dn + "_strided", v, want});
  }
  return out;
}

void expect_same(const Tensor& got, const Case& c, const std::string& dev) {
  ASSERT_TRUE(got.defined()) << c.name;
  EXPECT_EQ(got.dtype(), c.value.dtype()) << c.name;
  EXPECT_EQ(got.shape(), c.value.shape()) << c.name;
  EXPECT_EQ(got.device().name(), dev) << c.name;
  EXPECT_EQ(nx::to_bytes(got), c.bits) << c.name;
}

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, EveryDtypeAndShapeBitExact) {
  const std::string dev = GetParam();
  Dir dir;
  for (const char* ext : {".safetensors", ".npz"}) {
    bool npz = std::string(ext) == ".npz";
    auto cs = cases(dev, !npz);
    nx::TensorMap m;
    for (auto& c : cs) {
      EXPECT_EQ(nx::to_bytes(c.value), c.bits) << c.name;
      m[c.name] = c.value;
    }
    std::string path = dir / (std::string("ck") + ext);
    nx::save(path, m);
    auto host = nx::load(path);
    ASSERT_EQ(host.size(), cs.size()) << ext;
    for (auto& c : cs) expect_same(host.at(c.name), c, "CPU");
    auto there = nx::load(path, nx::Device::parse(dev, "test"));
    for (auto& c : cs) expect_same(there.at(c.name), c, dev);
    // Saving what was loaded writes the same bytes.
    std::string again = dir / (std::string("again") + ext);
    nx::save(again, there);
    EXPECT_EQ(read_file(again), read_file(path)) << ext;
  }
  for (auto& c : cases(dev, false)) {
    std::string path = dir / (c.name + ".npy");
    nx::save_npy(path, c.value);
    expect_same(nx::load_npy(path), c, "CPU");
    expect_same(nx::load_npy(path, nx::Device::parse(dev, "test")), c, dev);
  }
  EXPECT_EQ(dir.files().size(), cases(dev, false).size() + 4);  // no temporaries left
}

INSTANTIATE_TEST_SUITE_P(Devices, RoundTrip, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         rt::DeviceTestName());

TEST(Checkpoints, Bfloat16HasNoNumpyDtype) {
  Dir dir;
  Tensor x = nx::cast(nx::arange(nx::float32, 0, 3), nx::bfloat16);
  try {
    nx::save_npy(dir / "x.npy", x);
    FAIL();
  } catch (const std::invalid_argument& e) {
    EXPECT_STREQ(e.what(), ("nx::save_npy: '" + (dir / "x.npy") +
                            "': the tensor is bfloat16, which numpy has no dtype for: cast it "
                            "(nx::cast) to float32, or save it to .safetensors")
                               .c_str());
  }
  EXPECT_THROW(nx::save(dir / "x.npz", nx::TensorMap{{"x", x}}), std::invalid_argument);
  EXPECT_TRUE(dir.files().empty());
}

TEST(Checkpoints, ExtensionsAndArguments) {
  Dir dir;
  Tensor x = nx::arange(3);
  auto msg = [](auto f) {
    try {
      f();
    } catch (const std::exception& e) {
      return std::string(e.what());
    }
    return std::string("<no error>");
  };
  EXPECT_EQ(
      msg([&] {
        nx::save(dir / "x.bin", nx::TensorMap{{"x", x}});
      }),
      "nx::save: '" + (dir / "x.bin") + "': unknown extension (expected .safetensors or .npz)");
  EXPECT_EQ(msg([&] {
              nx::save(dir / "x.npy", nx::TensorMap{{"x", x}});
            }),
            "nx::save: '" + (dir / "x.npy") +
                "': a .npy file holds one tensor: use nx::save_npy(path, tensor)");
  EXPECT_EQ(
      msg([&] { nx::load(dir / "missing.safetensors"); }),
      "nx::load: '" + (dir / "missing.safetensors") + "': cannot open: No such file or directory");
  EXPECT_EQ(msg([&] {
              nx::save(dir / "x.safetensors", nx::TensorMap{{"__metadata__", x}});
            }),
            "nx::save: '" + (dir / "x.safetensors") +
                "': the name '__metadata__' is reserved by safetensors");
  EXPECT_EQ(msg([&] {
              nx::save(dir / "x.safetensors", nx::TensorMap{{"\xff", x}});
            }),
            "nx::save: '" + (dir / "x.safetensors") +
                "': a tensor name is not valid UTF-8, which safetensors' JSON header requires");
  EXPECT_TRUE(dir.files().empty());
}

// Past 4 GiB (or 65534 members) .npz members and the directory are recorded in zip64 fields.
// Writing 4 GiB is too slow for the suite, so the writer is asked for zip64 from 0 bytes on:
// every size and offset then takes the path a huge checkpoint takes. Our reader and Python's
// zipfile (numpy's reader) both read it back.
TEST(Checkpoints, NpzZip64Records) {
  Dir dir;
  nx::TensorMap m{{"w", nx::reshape(nx::arange(nx::float32, 0, 12), {3, 4})},
                  {"b", nx::create(nx::int64, {2}, {-7, 1LL << 40})},
                  {"empty", nx::zeros(nx::float64, {0, 3})}};
  const std::string path = dir / "zip64.npz";
  nx::io::save_npz("nx::save", path, m, 0);
  std::ifstream in(path, std::ios::binary);
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(bytes.find(std::string("PK\x06\x06", 4)), std::string::npos) << "zip64 end record";
  EXPECT_NE(bytes.find(std::string("PK\x06\x07", 4)), std::string::npos) << "zip64 locator";
  nx::TensorMap back = nx::load(path);
  ASSERT_EQ(back.size(), m.size());
  for (const auto& [name, t] : m) {
    EXPECT_EQ(back.at(name).dtype(), t.dtype()) << name;
    EXPECT_EQ(back.at(name).shape(), t.shape()) << name;
    EXPECT_EQ(nx::to_bytes(back.at(name)), nx::to_bytes(t)) << name;
  }
  // The same tensors without zip64: the records differ, the tensors do not.
  nx::save(dir / "plain.npz", m);
  EXPECT_EQ(nx::to_bytes(nx::load(dir / "plain.npz").at("b")), nx::to_bytes(m.at("b")));
  // Python's zipfile checks every member's CRC (testzip) through the zip64 fields.
  const std::string cmd =
      "python3 -c \"import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); "
      "assert z.testzip() is None; assert sorted(z.namelist()) == ['b.npy', 'empty.npy', 'w.npy'];"
      " assert all(i.file_size == len(z.read(i)) for i in z.infolist())\" '" +
      path + "'";
  if (std::system("python3 -c 'import zipfile' 2>/dev/null") == 0) {
    EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  }
}

// ---- files written by numpy and safetensors (tools/io-refgen) ----

void expect_reference(const nx::TensorMap& m, const std::string& file) {
  ASSERT_EQ(m.size(), reference_tensors().size()) << file;
  for (const auto& r : reference_tensors()) {
    auto it = m.find(r.name);
    ASSERT_NE(it, m.end()) << file << " " << r.name;
    EXPECT_EQ(it->second.dtype(), dtype_named(r.dtype)) << file << " " << r.name;
    EXPECT_EQ(it->second.shape(), r.shape) << file << " " << r.name;
    EXPECT_EQ(nx::to_bytes(it->second), from_hex(r.hex)) << file << " " << r.name;
  }
}

TEST(Reference, SafetensorsAndNpzWrittenByPython) {
  for (const char* f : {"ref.safetensors", "ref.npz", "ref_compressed.npz"})
    expect_reference(nx::load(data(f)), f);
  expect_reference(nx::load(data("ref.npz"), nx::Device::parse("CPU:1", "test")), "ref.npz");
}

TEST(Reference, NpyWrittenByNumpy) {
  Tensor f32 = nx::load_npy(data("ref_f32.npy"));
  for (const auto& r : reference_tensors())
    if (std::string(r.name) == "f32") {
      EXPECT_EQ(nx::to_bytes(f32), from_hex(r.hex));
    }
  Tensor fortran = nx::load_npy(data("ref_fortran.npy"));
  EXPECT_EQ(fortran.shape(), (nx::Shape{2, 3, 4}));
  std::vector<double> want(24);
  for (int i = 0; i < 24; ++i) want[i] = i;
  EXPECT_EQ(nx::to_vector<double>(fortran), want);
  Tensor be = nx::load_npy(data("ref_bigendian.npy"));
  EXPECT_EQ(be.dtype(), nx::int32);
  EXPECT_EQ(nx::to_vector<int32_t>(be), (std::vector<int32_t>{1, -2, 300}));
  Tensor zero_d = nx::load_npy(data("ref_0d.npy"), nx::Device::parse("CUDA:0", "test"));
  EXPECT_EQ(zero_d.shape(), nx::Shape{});
  EXPECT_EQ(nx::item<int64_t>(zero_d), -3);
  // What rune writes numpy would read back the same way: the same header bytes numpy writes.
  Dir dir;
  nx::save_npy(dir / "f32.npy", f32);
  EXPECT_EQ(read_file(dir / "f32.npy"), read_file(data("ref_f32.npy")));
}

// numpy's int16 files (tools/io-refgen), which rune lacked until issue 18, read as int16.
TEST(Reference, ReadsInt16) {
  for (const nx::Tensor& w :
       {nx::load(data("i16.safetensors")).at("w"), nx::load_npy(data("i16.npy"))}) {
    EXPECT_EQ(w.dtype(), nx::int16);
    EXPECT_EQ(w.shape(), nx::Shape{2});
    EXPECT_EQ(nx::to_vector<int16_t>(w), (std::vector<int16_t>{1, 2}));
  }
}

// ---- hostile files ----

// Loads `path` as its extension says; returns "" on success, else the message (which must be
// a std::invalid_argument or std::runtime_error beginning with the API and naming the file).
std::string try_load(const std::string& path) {
  bool npy = path.size() > 4 && path.compare(path.size() - 4, 4, ".npy") == 0;
  const std::string api = npy ? "nx::load_npy: '" + path + "': " : "nx::load: '" + path + "': ";
  try {
    if (npy)
      nx::load_npy(path);
    else
      nx::load(path);
  } catch (const std::invalid_argument& e) {
    EXPECT_EQ(std::string(e.what()).rfind(api, 0), 0u) << e.what();
    return e.what();
  } catch (const std::runtime_error& e) {
    EXPECT_EQ(std::string(e.what()).rfind(api, 0), 0u) << e.what();
    return e.what();
  }
  return "";
}

std::string safetensors_file(const std::string& json, const std::string& payload,
                             std::optional<uint64_t> len = std::nullopt) {
  uint64_t n = len ? *len : json.size();
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[i] = static_cast<char>(n >> (8 * i));
  return s + json + payload;
}

TEST(Hostile, TruncatedAtEveryByte) {
  Dir dir;
  for (const char* name : {"ref.safetensors", "ref.npz", "ref_compressed.npz", "ref_f32.npy"}) {
    std::string full = read_file(data(name));
    std::string ext = fs::path(name).extension().string();
    for (size_t n = 0; n < full.size(); ++n) {
      std::string p = dir / ("cut" + ext);
      write_file(p, full.substr(0, n));
      EXPECT_NE(try_load(p), "") << name << " cut at " << n;
    }
  }
}

TEST(Hostile, SafetensorsHeaders) {
  Dir dir;
  std::string p = dir / "h.safetensors";
  auto msg = [&](const std::string& file) {
    write_file(p, file);
    std::string m = try_load(p);
    return m.substr(m.find("': ") + 3);
  };
  const std::string ok = R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  write_file(p, safetensors_file(ok, std::string(8, 'x')));
  EXPECT_EQ(try_load(p), "");
  EXPECT_EQ(msg(safetensors_file(ok, std::string(8, 'x'), uint64_t{1} << 63)),
            "header claims 2^63 bytes, file has " + std::to_string(8 + ok.size() + 8));
  EXPECT_EQ(msg(safetensors_file(ok, "", ok.size())),
            "tensor 'w' has data_offsets [0, 8] past the end of the data (0 bytes)");
  EXPECT_EQ(
      msg(safetensors_file(
          R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4611686018427387904]}})",
          "12345678")),
      "tensor 'w' has data_offsets [0, 4611686018427387904] past the end of the data (8 bytes)");
  EXPECT_EQ(
      msg(safetensors_file(
          R"({"w":{"dtype":"F32","shape":[536870912, 1073741824],"data_offsets":[0,8]}})",
          "12345678")),
      "tensor 'w' is F32 [536870912, 1073741824] (2^61 bytes) but its data_offsets span 8 bytes");
  EXPECT_EQ(
      msg(safetensors_file(
          R"({"w":{"dtype":"F32","shape":[4294967296, 4294967296],"data_offsets":[0,8]}})",
          "12345678")),
      "tensor 'w' has shape [4294967296, 4294967296], more than 1152921504606846975 elements");
  EXPECT_EQ(msg(safetensors_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})",
                                 "12345678")),
            "tensor 'w' has data_offsets [8, 0]: the end is before the start");
  EXPECT_EQ(
      msg(safetensors_file(
          R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          "12345678")),
      "tensor 'b' at bytes [4, 8) overlaps the tensor before it (which ends at 8)");
  EXPECT_EQ(msg(safetensors_file(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                 "12345678")),
            "bytes [0, 4) of the data belong to no tensor (before tensor 'a')");
  // Out of order in the header but tiling the data: accepted, as the reference reader does.
  write_file(
      p,
      safetensors_file(
          R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
          "12345678"));
  EXPECT_EQ(try_load(p), "");
  EXPECT_EQ(
      msg(safetensors_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})", "12345678"))
          .rfind("header is not valid JSON: ", 0),
      0u);
  EXPECT_EQ(msg(safetensors_file(R"([1,2])", "")), "header is not a JSON object (it is an array)");
  EXPECT_EQ(msg(safetensors_file(R"({"w":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})",
                                 "12345678")),
            "tensor 'w' has shape dimension 0 = -2: dimensions must be integers >= 0 (at most "
            "2^63 - 1)");
  EXPECT_EQ(msg(safetensors_file(R"({"w":{"dtype":"F8_E4M3","shape":[8],"data_offsets":[0,8]}})",
                                 "12345678")),
            "tensor 'w' has dtype F8_E4M3, which rune lacks (it has BOOL, U8, U16, U32, U64, I8, "
            "I16, I32, I64, F16, BF16, F32, F64)");
  EXPECT_EQ(msg(safetensors_file(R"({"w":{"dtype":"BOOL","shape":[8],"data_offsets":[0,8]}})",
                                 "12345678")),
            "tensor 'w' is bool but element 0 is the byte 49 (not 0 or 1)");
  EXPECT_EQ(msg(safetensors_file(R"({"w":{"dtype":"U8","shape":[8]}})", "12345678")),
            "tensor 'w' lacks one of dtype, shape and data_offsets");
  EXPECT_EQ(msg(std::string(3, '\0')),
            "has 3 bytes, fewer than the 8 of a safetensors header length");
  // Deep nesting is refused as it is met (the header is read as a stream of events, no tree).
  EXPECT_EQ(msg(safetensors_file(std::string(100000, '[') + std::string(100000, ']'), "")),
            "header is not a JSON object (it is an array)");
  EXPECT_EQ(msg(safetensors_file(
                R"({"w":{"x":)" + std::string(65, '[') + std::string(65, ']') + "}}", "")),
            "header nests JSON more than 64 levels deep (a safetensors header has 3)");
  // A key rune does not read is skipped, whatever its value (as the reference reader does).
  write_file(p, safetensors_file(
                    R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":{"y":[1,[2]]}}})",
                    "12345678"));
  EXPECT_EQ(try_load(p), "");
  EXPECT_EQ(
      msg(safetensors_file(
          R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
          "12345678")),
      "header names tensor 'w' twice");
  EXPECT_EQ(msg(safetensors_file(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,8,8]}})",
                                 "12345678")),
            "tensor 'w' has data_offsets of more than two integers");
  EXPECT_EQ(msg(safetensors_file(R"({"__metadata__":{"k":1}})", "")),
            "__metadata__ entry 'k' is not a string");
}

TEST(Hostile, NpyHeaders) {
  Dir dir;
  std::string p = dir / "h.npy";
  auto npy = [](const std::string& dict, const std::string& payload, int version = 1) {
    std::string s = "\x93NUMPY";
    s += static_cast<char>(version);
    s += '\0';
    uint32_t n = dict.size();
    s += static_cast<char>(n & 0xff);
    s += static_cast<char>(n >> 8);
    if (version > 1) s += std::string(2, '\0');
    return s + dict + payload;
  };
  auto msg = [&](const std::string& file) {
    write_file(p, file);
    std::string m = try_load(p);
    return m.substr(m.find("': ") + 3);
  };
  write_file(p, npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", "12345678"));
  EXPECT_EQ(try_load(p), "");
  EXPECT_EQ(
      msg(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
              "12345678")),
      "the tensor has shape [4611686018427387904, 4], more than 1152921504606846975 elements");
  EXPECT_EQ(
      msg(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (1099511627776,), }", "12345678")),
      "the tensor is '<i4' [1099511627776] (2^42 bytes) but 8 bytes of data follow its header");
  EXPECT_EQ(
      msg(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (99999999999999999999,), }", "")),
      "the tensor: npy header has a dimension above 2^63 - 1 at byte 69 of the header");
  EXPECT_EQ(
      msg(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), 'x': 1}", "12345678")),
      "the tensor: npy header has the unexpected or repeated key 'x' at byte 60 of the header");
  EXPECT_EQ(msg(npy("{'descr': '<i4', 'shape': (2,), }", "12345678")),
            "the tensor: npy header lacks one of 'descr', 'fortran_order' and 'shape' at byte 33 "
            "of the header");
  EXPECT_EQ(
      msg(npy("{'descr': [('a', '<i4')], 'fortran_order': False, 'shape': (2,), }", "12345678")),
      "the tensor: npy header expected a string at byte 10 of the header");
  EXPECT_EQ(msg(npy("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", "12345678")),
            "the tensor has numpy dtype '<c8', which rune lacks (it reads |b1, |u1, <u2, <u4, "
            "<u8, |i1, <i2, <i4, <i8, <f2, <f4, <f8 and their big-endian forms)");
  // Big-endian integers of every width are swapped on reading.
  write_file(p,
             npy("{'descr': '>u2', 'fortran_order': False, 'shape': (2,), }", "\x01\x02\xff\xfe"));
  EXPECT_EQ(nx::to_vector<uint16_t>(nx::load_npy(p)), (std::vector<uint16_t>{0x0102, 0xfffe}));
  write_file(p, npy("{'descr': '>i8', 'fortran_order': False, 'shape': (1,), }",
                    std::string("\xff\xff\xff\xff\xff\xff\xff\xfe", 8)));
  EXPECT_EQ(nx::to_vector<int64_t>(nx::load_npy(p)), (std::vector<int64_t>{-2}));
  EXPECT_EQ(msg(npy("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", "12345678", 9)),
            "the tensor has npy version 9.0 (rune reads 1.0 to 3.0)");
  std::string huge = npy("{}", "");
  huge[8] = huge[9] = '\xff';
  EXPECT_EQ(msg(huge), "the tensor has an npy header of 65535 bytes, but only 2 follow");
  std::string v2 = npy("{}", "", 2);
  v2[8] = v2[9] = v2[10] = v2[11] = '\xff';
  EXPECT_EQ(msg(v2), "the tensor has an npy header of 4294967295 bytes, but only 2 follow");
}

TEST(Hostile, NpzArchives) {
  Dir dir;
  std::string p = dir / "h.npz";
  auto msg = [&](const std::string& file) {
    write_file(p, file);
    std::string m = try_load(p);
    return m.substr(m.find("': ") + 3);
  };
  std::string full = read_file(data("ref.npz"));
  EXPECT_EQ(msg(std::string(40, 'x')), "is not a zip archive (no end of central directory record)");
  // The central directory offset pointed past the end.
  std::string bad_cd = full;
  size_t eocd = full.rfind("PK\x05\x06");
  bad_cd[eocd + 16] = bad_cd[eocd + 17] = bad_cd[eocd + 18] = bad_cd[eocd + 19] = '\x7f';
  EXPECT_EQ(msg(bad_cd).rfind("central directory [", 0), 0u) << msg(bad_cd);
  // An entry count far beyond what the directory can hold.
  std::string many = full;
  many[eocd + 10] = many[eocd + 11] = many[eocd + 8] = many[eocd + 9] = '\xfe';
  EXPECT_NE(msg(many).find("central directory claims 65278 entries"), std::string::npos)
      << msg(many);
  // A deflated member whose claimed size is absurd, and a corrupt one.
  std::string z = read_file(data("ref_compressed.npz"));
  size_t cd = z.find("PK\x01\x02");
  std::string absurd = z;
  absurd[cd + 24] = absurd[cd + 25] = absurd[cd + 26] = '\xff';
  absurd[cd + 27] = '\x7f';
  EXPECT_NE(msg(absurd).find("more than deflate can produce"), std::string::npos) << msg(absurd);
  std::string flipped = full;
  size_t data_at = full.find("\x93NUMPY") + 100;
  flipped[data_at] ^= 1;
  EXPECT_NE(msg(flipped).find("fails its CRC-32 check"), std::string::npos) << msg(flipped);
}

// Seeded random mutations of every reference file: bit flips, byte overwrites with extreme
// values, cuts. Each load succeeds or raises a clear error, and no single allocation exceeds
// twice the file's size (plus a small constant for the library's own bookkeeping). Each file
// is loaded once untracked first, and its kernel's background upgrade awaited: a load that
// converts (a Fortran-order array's transposing copy) builds its kernel on the first call, and
// the compiler's or the disk cache's buffers (a code object of ~200 KB) are not the loader's
// allocations.
TEST(Hostile, RandomMutations) {
  Dir dir;
  std::mt19937_64 rng(2024);
  int raised = 0, loaded = 0;
  for (const char* name :
       {"ref.safetensors", "ref.npz", "ref_compressed.npz", "ref_f32.npy", "ref_fortran.npy"}) {
    std::string full = read_file(data(name));
    std::string ext = fs::path(name).extension().string();
    EXPECT_EQ(try_load(data(name)), "") << name;
    // That kernel's full tier compiles in the background (codegen/cpu/kernel_upgrades.h): let
    // it finish, so the compiler's allocations are not counted as the loader's below.
    codegen::wait_for_kernel_upgrades();
    for (int k = 0; k < 800; ++k) {
      std::string s = full;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits; ++e) {
        size_t at = rng() % s.size();
        switch (rng() % 3) {
          case 0:
            s[at] ^= static_cast<char>(1 << (rng() % 8));
            break;
          case 1:
            s[at] = "\x00\xff\x7f\x80"[rng() % 4];
            break;
          default:
            s[at] = static_cast<char>(rng());
        }
      }
      std::string p = dir / ("m" + ext);
      write_file(p, s);
      largest = 0;
      tracking = true;
      std::string m = try_load(p);
      tracking = false;
      (m.empty() ? loaded : raised)++;
      EXPECT_LE(largest.load(), 2 * s.size() + 65536) << name << " mutation " << k << ": " << m;
    }
  }
  EXPECT_GT(raised, 1000);
  std::printf("mutations: %d raised, %d loaded\n", raised, loaded);
}

// ---- atomic writes ----

TEST(Atomic, FailedSaveLeavesThePreviousFile) {
  Dir dir;
  for (const char* ext : {".safetensors", ".npz"}) {
    std::string path = dir / (std::string("ck") + ext);
    nx::save(path, nx::TensorMap{{"a", nx::arange(4)}});
    const std::string before = read_file(path);
    // A dead value (donated, then consumed) second in name order: the save fails midway.
    Tensor x = nx::arange(nx::float32, 0, 1000);
    Tensor d = nx::donate(x);
    Tensor y = d + 1.0;
    nx::wait(y);
    try {
      nx::save(path, nx::TensorMap{{"a_first", nx::ones(nx::float32, {1000})}, {"b_dead", x}});
      FAIL() << "saved a dead value";
    } catch (const std::invalid_argument& e) {
      EXPECT_EQ(std::string(e.what()).rfind("nx::save: ", 0), 0u) << e.what();
    }
    EXPECT_EQ(read_file(path), before);
    EXPECT_EQ(dir.files(), std::vector<std::string>{std::string("ck") + ext}) << ext;
    fs::remove(path);
  }
  // An unwritable destination raises before touching anything else.
  std::string path = dir / "ck.safetensors";
  nx::save(path, nx::TensorMap{{"a", nx::arange(4)}});
  const std::string before = read_file(path);
  EXPECT_THROW(nx::save_npy(dir / "no-such-dir/x.npy", nx::arange(3)), std::runtime_error);
  EXPECT_THROW(nx::save(dir / "no-such-dir/x.safetensors", nx::TensorMap{{"a", nx::arange(3)}}),
               std::runtime_error);
  EXPECT_EQ(read_file(path), before);
  EXPECT_EQ(dir.files(), std::vector<std::string>{"ck.safetensors"});
}

TEST(Atomic, SaveReplacesAnExistingFile) {
  Dir dir;
  std::string path = dir / "ck.safetensors";
  nx::save(path, nx::TensorMap{{"a", nx::arange(4)}});
  nx::save(path, nx::TensorMap{{"b", nx::arange(2)}});
  auto m = nx::load(path);
  ASSERT_EQ(m.size(), 1u);
  EXPECT_EQ(nx::to_vector<int64_t>(m.at("b")), (std::vector<int64_t>{0, 1}));
}

// ---- trees ----

TEST(Trees, SaveAndLoadIntoByPath) {
  Dir dir;
  std::vector<Params> layers = {
      {nx::arange(nx::float32, 0, 6), nx::zeros(nx::float64, {2})},
      {nx::reshape(nx::arange(nx::float32, 0, 6), {2, 3}), nx::ones(nx::float64, {3})}};
  for (const char* ext : {".safetensors", ".npz"}) {
    std::string path = dir / (std::string("tree") + ext);
    nx::save(path, layers);
    auto m = nx::load(path);
    std::vector<std::string> names;
    for (auto& [k, v] : m) names.push_back(k);
    EXPECT_EQ(names, (std::vector<std::string>{"0.b", "0.w", "1.b", "1.w"}));
    std::vector<Params> fresh = {
        {nx::zeros(nx::float32, {6}), nx::zeros(nx::float64, {2})},
        {nx::place(nx::zeros(nx::float32, {2, 3}), "CPU:1"), nx::zeros(nx::float64, {3})}};
    nx::load_into(path, fresh);
    EXPECT_EQ(nx::to_bytes(fresh[1].w), nx::to_bytes(layers[1].w));
    EXPECT_EQ(nx::to_bytes(fresh[0].b), nx::to_bytes(layers[0].b));
    EXPECT_EQ(fresh[1].w.device().name(), "CPU:1");  // each leaf stays where it was
    EXPECT_EQ(fresh[0].w.device().name(), "CPU");
  }
  std::string path = dir / "tree.safetensors";
  auto msg = [&](auto& tree) {
    try {
      nx::load_into(path, tree);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("<loaded>");
  };
  const std::string head = "nx::load_into: '" + path + "': ";
  std::vector<Params> one = {layers[0]};
  EXPECT_EQ(msg(one),
            head + "the file holds tensor '1.b' (float64 [3]), which is no leaf of the tree");
  std::vector<Bigger> more = {{layers[0].w, layers[0].b, layers[0].b},
                              {layers[1].w, layers[1].b, layers[1].b}};
  EXPECT_EQ(msg(more), head + "leaf '0.c' (float64 [2]) is missing from the file");
  std::vector<Params> wrong = {layers[0], {layers[1].b, layers[1].b}};
  EXPECT_EQ(msg(wrong),
            head + "leaf '1.w' is float64 [3] in the tree but float32 [2, 3] in the file");
  // A tree that is one tensor is saved as "0".
  nx::save(dir / "one.safetensors", layers[0].w);
  EXPECT_EQ(nx::load(dir / "one.safetensors").count("0"), 1u);
}

}  // namespace
