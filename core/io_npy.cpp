// .npy (numpy's format, version 1.0 to 3.0): the magic "\x93NUMPY", a version, a header length and
// a header that is a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3),
// } padded with spaces to a 64-byte boundary, then the data. The header is no JSON: it is read by
// the small strict tokenizer below, which accepts exactly such dicts (strings, integers, True,
// False, tuples) and never trusts a length beyond the bytes it has.
#include <cstring>

#include "core/io_internal.h"

namespace nx::io {

namespace {

struct Descr {
  DType dtype;
  const char* le;  // the little-endian (or byte-order-free) descr numpy writes
};
constexpr Descr kDescrs[] = {
    {DType::Bool, "|b1"},    {DType::UInt8, "|u1"},   {DType::UInt16, "<u2"},
    {DType::UInt32, "<u4"},  {DType::UInt64, "<u8"},  {DType::Int8, "|i1"},
    {DType::Int16, "<i2"},   {DType::Int32, "<i4"},   {DType::Int64, "<i8"},
    {DType::Float16, "<f2"}, {DType::Float32, "<f4"}, {DType::Float64, "<f8"}};

// "|b1, |u1, ...": the descrs of kDescrs, for the error naming a dtype rune lacks.
std::string known_descrs() {
  std::string r;
  for (const auto& d : kDescrs) r += std::string(r.empty() ? "" : ", ") + d.le;
  return r;
}

// A dict literal's tokens.
class Lexer {
 public:
  Lexer(const char* api, const std::string& file, const std::string& what, const char* p, size_t n)
      : api_(api), file_(file), what_(what), p_(p), n_(n) {}
  [[noreturn]] void fail(const std::string& msg) const {
    bad(api_, file_,
        what_ + ": npy header " + msg + " at byte " + std::to_string(i_) + " of the header");
  }
  void skip() {
    while (i_ < n_ && (p_[i_] == ' ' || p_[i_] == '\t' || p_[i_] == '\n' || p_[i_] == '\r')) ++i_;
  }
  bool peek(char c) {
    skip();
    return i_ < n_ && p_[i_] == c;
  }
  void expect(char c) {
    if (!peek(c)) fail(std::string("expected '") + c + "'");
    ++i_;
  }
  bool accept(char c) {
    if (!peek(c)) return false;
    ++i_;
    return true;
  }
  std::string string() {
    skip();
    if (i_ >= n_ || (p_[i_] != '\'' && p_[i_] != '"')) fail("expected a string");
    char q = p_[i_++];
    std::string s;
    while (i_ < n_ && p_[i_] != q) {
      if (p_[i_] == '\\') fail("has an escape in a string");
      s += p_[i_++];
      if (s.size() > 64) fail("has a string longer than 64 characters");
    }
    if (i_ >= n_) fail("has an unterminated string");
    ++i_;
    return s;
  }
  bool boolean() {
    skip();
    if (n_ - i_ >= 4 && std::memcmp(p_ + i_, "True", 4) == 0) return i_ += 4, true;
    if (n_ - i_ >= 5 && std::memcmp(p_ + i_, "False", 5) == 0) return i_ += 5, false;
    fail("expected True or False");
  }
  int64_t integer() {
    skip();
    uint64_t v = 0;
    size_t start = i_;
    while (i_ < n_ && p_[i_] >= '0' && p_[i_] <= '9') {
      auto m = mul(v, 10);
      auto a = m ? add(*m, static_cast<uint64_t>(p_[i_] - '0')) : std::nullopt;
      if (!a || *a > static_cast<uint64_t>(INT64_MAX)) fail("has a dimension above 2^63 - 1");
      v = *a;
      ++i_;
    }
    if (i_ == start) fail("expected a dimension (an integer >= 0)");
    if (i_ < n_ && p_[i_] == 'L') ++i_;  // Python 2's long suffix
    return static_cast<int64_t>(v);
  }
  bool at_end() {
    skip();
    return i_ == n_;
  }

 private:
  const char* api_;
  const std::string& file_;
  const std::string& what_;
  const char* p_;
  size_t n_, i_ = 0;
};

}  // namespace

std::string npy_header(const char* api, const std::string& file, const std::string& what, DType t,
                       const Shape& shape) {
  const Descr* d = nullptr;
  for (const auto& e : kDescrs)
    if (e.dtype == t) d = &e;
  if (!d)
    bad(api, file,
        what +
            " is bfloat16, which numpy has no dtype for: cast it (nx::cast) to "
            "float32, or save it to .safetensors");
  std::string dict = std::string("{'descr': '") + d->le + "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i) dict += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dict += ',';  // a 1-tuple, as Python writes it
  dict += "), }";
  // Version 1.0 (a 2-byte length) when it fits, else 2.0; the whole preamble a multiple of 64.
  size_t pre = dict.size() + 1 + 10 < 65536 ? 10 : 12;
  size_t total = (pre + dict.size() + 1 + 63) / 64 * 64;
  dict.append(total - pre - dict.size() - 1, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  size_t hlen = dict.size();
  if (pre == 10) {
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(hlen & 0xff);
    out += static_cast<char>(hlen >> 8);
  } else {
    out += '\x02';
    out += '\x00';
    for (int i = 0; i < 4; ++i) out += static_cast<char>((hlen >> (8 * i)) & 0xff);
  }
  return out + dict;
}

Tensor npy_parse(const char* api, const std::string& file, const std::string& what,
                 const uint8_t* p, size_t n, std::optional<Device> device) {
  if (n < 10 || std::memcmp(p, "\x93NUMPY", 6) != 0)
    bad(api, file,
        what + " is not a .npy image (" + std::to_string(n) +
            " bytes without the magic \\x93NUMPY)");
  int major = p[6];
  if (major < 1 || major > 3)
    bad(api, file,
        what + " has npy version " + std::to_string(major) + "." + std::to_string(p[7]) +
            " (rune reads 1.0 to 3.0)");
  size_t pre = major == 1 ? 10 : 12;
  if (n < pre) bad(api, file, what + " is truncated inside its npy preamble");
  uint64_t hlen =
      major == 1
          ? (p[8] | (p[9] << 8))
          : (uint64_t{p[8]} | uint64_t{p[9]} << 8 | uint64_t{p[10]} << 16 | uint64_t{p[11]} << 24);
  if (hlen > n - pre)
    bad(api, file,
        what + " has an npy header of " + size_text(hlen) + " bytes, but only " +
            std::to_string(n - pre) + " follow");
  Lexer lx(api, file, what, reinterpret_cast<const char*>(p + pre), hlen);
  std::optional<std::string> descr;
  std::optional<bool> fortran;
  std::optional<Shape> shape;
  lx.expect('{');
  while (!lx.accept('}')) {
    std::string key = lx.string();
    lx.expect(':');
    if (key == "descr" && !descr) {
      descr = lx.string();
    } else if (key == "fortran_order" && !fortran) {
      fortran = lx.boolean();
    } else if (key == "shape" && !shape) {
      shape.emplace();
      lx.expect('(');
      while (!lx.accept(')')) {
        shape->push_back(lx.integer());
        if (shape->size() > 64) lx.fail("has more than 64 dimensions");
        if (!lx.accept(',')) {
          lx.expect(')');
          break;
        }
      }
    } else {
      lx.fail("has the unexpected or repeated key '" + key + "'");
    }
    if (!lx.accept(',')) {
      lx.expect('}');
      break;
    }
  }
  if (!lx.at_end()) lx.fail("has bytes after its dict");
  if (!descr || !fortran || !shape) lx.fail("lacks one of 'descr', 'fortran_order' and 'shape'");
  std::string d = *descr;
  bool swap = false;
  if (d.size() == 3 && (d[0] == '>' || d[0] == '=' || d[0] == '<' || d[0] == '|')) {
    swap = d[0] == '>' && d[2] != '1';
    if (d[0] == '>' || d[0] == '=') d[0] = d[2] == '1' ? '|' : '<';
    if (d[0] == '<' && d[2] == '1') d[0] = '|';
  }
  const Descr* found = nullptr;
  for (const auto& e : kDescrs)
    if (d == e.le) found = &e;
  if (!found)
    bad(api, file,
        what + " has numpy dtype '" + *descr + "', which rune lacks (it reads " + known_descrs() +
            " and their big-endian forms)");
  uint64_t nbytes = checked_bytes(api, file, what, found->dtype, *shape);
  uint64_t have = n - pre - hlen;
  if (nbytes != have)
    bad(api, file,
        what + " is '" + *descr + "' " + ir::to_string(*shape) + " (" + size_text(nbytes) +
            " bytes) but " + std::to_string(have) + " bytes of data follow its header");
  return make_tensor(api, file, what, found->dtype, *shape, p + pre + hlen, swap, *fortran, device);
}

}  // namespace nx::io
