// Input values and raw bits. An Input step's tensor is a view (its Layout) of a fresh base
// buffer whose bytes come from the step's seed; values lean towards the cases that break
// kernels: signed zeros, infinities, NaNs with payloads, subnormals, extremes of integer types.
// Results are read back as raw bytes in C order (Bits), so -0 != +0 and NaN payloads count.
#pragma once
#include <cmath>
#include <cstring>
#include <sstream>

#include "core/donation.h"
#include "fuzz/program.h"
#include "ir/scalar.h"
#include "test_util.h"

namespace fuzz {

// The fuzzer's random numbers: the suite's splitmix64 (tests/test_util.h, the same sequence for a
// seed) with the draws the generator uses.
struct Rng : rt::Rng {
  using rt::Rng::Rng;
  int below(int n) { return static_cast<int>(next() % static_cast<uint64_t>(n)); }
  bool chance(double p) { return uniform() < p; }
};

// The raw bits of one element of dtype t drawn from rng.
inline uint64_t random_bits(DType t, Rng& r) {
  using ir::Value;
  int w = r.below(16);
  if (t == nx::bool_) return r.below(2);
  if (ir::is_int(t)) {
    int bits = static_cast<int>(ir::itemsize(t) * 8);
    uint64_t mask = bits == 64 ? ~0ull : (1ull << bits) - 1;
    if (w < 9) return Value::of_int(t, r.below(21) - 10).bits() & mask;  // small, incl. 0, -1
    if (w < 12) return r.next() & mask;                                  // anything
    uint64_t top = 1ull << (bits - 1);
    const uint64_t ext[] = {top, top - 1, mask, 1};  // min, max (signed), -1 / 255, 1
    return ext[r.below(4)] & mask;
  }
  double v;
  if (w < 6) {
    v = r.below(17) - 8;  // small integers (exact in every float type)
  } else if (w < 11) {
    v = (r.uniform() * 2 - 1) * std::ldexp(1.0, r.below(12) - 4);
  } else if (w == 11) {
    v = r.below(2) ? -0.0 : 0.0;
  } else if (w == 12) {
    v = r.below(2) ? -INFINITY : INFINITY;
  } else if (w == 13) {
    // A NaN with a payload and a random sign: only movement must keep its bits.
    uint64_t sign = r.below(2);
    switch (t) {
      case DType::Float16:
        return (sign << 15) | 0x7e00 | (r.below(2) ? 0x13 : 0);
      case DType::BFloat16:
        return (sign << 15) | 0x7fc0 | (r.below(2) ? 0x5 : 0);
      case DType::Float32:
        return (sign << 31) | 0x7fc00000u | (r.below(2) ? 0x1234 : 0);
      default:
        return (sign << 63) | 0x7ff8000000000000ull | (r.below(2) ? 0xabcd : 0);
    }
  } else if (w == 14) {
    v = std::ldexp(r.below(2) ? 1.0 : -1.5, t == nx::float64   ? -1060
                                            : t == nx::float16 ? -22
                                                               : -140);
  } else {
    v = std::ldexp(r.uniform() + 1, r.below(2) ? 14 : 100) * (r.below(2) ? 1 : -1);  // big
  }
  return Value::of_float(t, v).bits();
}

// ---- layouts ----

inline int64_t numel(const Shape& s) { return ir::numel(s); }

// The shape of the buffer an Input is a view of.
inline Shape base_shape(const Step& s) {
  Shape b = s.shape;
  switch (s.layout) {
    case Layout::Contig:
    case Layout::Flipped:
      return b;
    case Layout::Transposed:
      return Shape(b.rbegin(), b.rend());
    case Layout::Stepped:
      for (auto& d : b) d = 2 * d + 1;
      return b;
    case Layout::Broadcast:
      // Every other axis of extent > 1 (from the first) is broadcast from extent 1.
      for (size_t d = 0, k = 0; d < b.size(); ++d)
        if (b[d] > 1 && k++ % 2 == 0) b[d] = 1;
      return b;
  }
  return b;
}

inline std::vector<nx::Slice> stepped_slices(const Shape& logical) {
  std::vector<nx::Slice> sl;
  for (int64_t d : logical) sl.push_back({1, 2 * d + 1, 2});
  return sl;
}

// The Input's tensor from its base buffer (both on the mode's device).
inline Tensor input_view(const Step& s, const Tensor& base) {
  switch (s.layout) {
    case Layout::Contig:
      return base;
    case Layout::Transposed:
      return nx::transpose(base);
    case Layout::Stepped:
      return nx::slice(base, stepped_slices(s.shape));
    case Layout::Flipped:
      return nx::flip(base);
    case Layout::Broadcast:
      return nx::broadcast_to(base, s.shape);
  }
  return base;
}

// The base buffer's bytes (itemsize each, little endian).
inline std::vector<uint8_t> base_bytes(const Step& s) {
  Rng r(s.seed * 0x2545F4914F6CDD1Dull + 7);
  int64_t n = numel(base_shape(s));
  size_t isz = ir::itemsize(s.dtype);
  std::vector<uint8_t> b(std::max<size_t>(1, n * isz));
  for (int64_t i = 0; i < n; ++i) {
    uint64_t v = random_bits(s.dtype, r);
    std::memcpy(b.data() + i * isz, &v, isz);
  }
  return b;
}

// ---- reading results ----

struct Bits {
  DType dtype = nx::float32;
  Shape shape;
  std::vector<uint8_t> bytes;  // C order, itemsize each
  bool operator==(const Bits&) const = default;
  int64_t size() const { return numel(shape); }
  uint64_t at(int64_t k) const {
    uint64_t v = 0;
    size_t isz = ir::itemsize(dtype);
    std::memcpy(&v, bytes.data() + k * isz, isz);
    return v;
  }
};

// gtest prints Bits as "bfloat16 [2, 7] {0x3f80, ...}".
inline void PrintTo(const Bits& b, std::ostream* os) {
  *os << ir::name(b.dtype) << " " << ir::to_string(b.shape) << " {";
  for (int64_t k = 0; k < b.size(); ++k) {
    std::ostringstream h;
    h << "0x" << std::hex << b.at(k);
    *os << (k ? ", " : "") << h.str();
  }
  *os << "}";
}

// Waits for x (raising its device's recorded failures) and copies its elements' bytes.
inline Bits read_bits(const Tensor& x) {
  nx::wait(x);
  nx::check_alive(x, "fuzz::read_bits");
  // A read, not an op reading x: the copy runs under the reader's own scope (no arguments), so
  // it does not consume a donation x is still marked with (one its failed consumer left).
  Tensor h = x;
  if (x.device() != nx::Device::cpu()) {
    nx::OpScope reader("fuzz::read_bits", {});
    h = nx::place(x, nx::Device::cpu());
  }
  nx::wait(h);
  const auto& im = h.impl();
  Bits out{h.dtype(), h.shape(), {}};
  size_t isz = ir::itemsize(h.dtype());
  int64_t n = h.size();
  out.bytes.resize(n * isz);
  if (n == 0) return out;
  const char* base = static_cast<const char*>(im.buffer->data);
  int nd = h.ndim();
  std::vector<int64_t> idx(nd, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = im.view.offset;
    for (int d = 0; d < nd; ++d) off += idx[d] * im.view.strides[d];
    std::memcpy(out.bytes.data() + k * isz, base + off * isz, isz);
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < im.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

inline std::string hex(uint64_t v) {
  std::ostringstream s;
  s << "0x" << std::hex << v;
  return s.str();
}

// "float32 [2, 3]", then the first differing element of a and b (raw bits and values).
inline std::string describe_difference(const Bits& a, const Bits& b) {
  std::ostringstream s;
  if (a.dtype != b.dtype || a.shape != b.shape) {
    s << ir::name(a.dtype) << " " << ir::to_string(a.shape) << " vs " << ir::name(b.dtype) << " "
      << ir::to_string(b.shape);
    return s.str();
  }
  int64_t diff = 0;
  for (int64_t k = 0; k < a.size(); ++k) diff += a.at(k) != b.at(k);
  for (int64_t k = 0; k < a.size(); ++k) {
    if (a.at(k) == b.at(k)) continue;
    auto va = ir::Value::from_bits(a.dtype, a.at(k)), vb = ir::Value::from_bits(b.dtype, b.at(k));
    s.precision(17);
    s << ir::name(a.dtype) << " " << ir::to_string(a.shape) << ": " << diff
      << " elements differ; first at flat index " << k << ": " << hex(a.at(k)) << " ("
      << va.as_double() << ") vs " << hex(b.at(k)) << " (" << vb.as_double() << ")";
    break;
  }
  return s.str();
}

}  // namespace fuzz
