// Shared helpers of the rune test suite: building tensors from exact values, reading them back,
// bit-exact and ulp comparisons, and non-contiguous layouts of known logical values.
#pragma once
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "core/nx.h"
#include "ir/scalar.h"

namespace rt {

using ir::Value;
using nx::DType;
using nx::Shape;
using nx::Tensor;

inline const std::vector<DType> kAllTypes = {
    nx::bool_,   nx::uint8, nx::int32, nx::int64,  nx::float16, nx::bfloat16, nx::float32,
    nx::float64, nx::int8,  nx::int16, nx::uint16, nx::uint32,  nx::uint64};
inline const std::vector<DType> kNumTypes = {nx::uint8,    nx::int32,   nx::int64,   nx::float16,
                                             nx::bfloat16, nx::float32, nx::float64, nx::int8,
                                             nx::int16,    nx::uint16,  nx::uint32,  nx::uint64};
// The integer dtypes issue 18 added (the tests that cover every dtype also list them above).
inline const std::vector<DType> kNewIntTypes = {nx::int8, nx::int16, nx::uint16, nx::uint32,
                                                nx::uint64};
inline const std::vector<DType> kFloatTypes = {nx::float16, nx::bfloat16, nx::float32, nx::float64};

inline std::string dname(DType t) { return std::string(ir::name(t)); }

// The exact bits of t's values, read as float64 on the host (every dtype converts exactly, so
// -0 and +0 differ, as do NaNs of another sign or payload): what "bit for bit" compares.
inline std::vector<uint64_t> bits(const Tensor& t) {
  std::vector<double> v = nx::to_array(nx::place(t, "CPU"));
  std::vector<uint64_t> b(v.size());
  std::memcpy(b.data(), v.data(), v.size() * sizeof(double));
  return b;
}

// A value of dtype t: floats rounded to t, integers wrapped to t.
inline Value F(DType t, double v) { return Value::of_float(t, v); }
inline Value I(DType t, int64_t v) { return Value::of_int(t, v); }
inline Value num(DType t, double v) {
  return ir::is_float(t) ? F(t, v) : I(t, static_cast<int64_t>(v));
}
inline Value bits(DType t, uint64_t b) { return Value::from_bits(t, b); }

inline bool is_nan(const Value& v) { return ir::is_float(v.dtype) && std::isnan(v.f); }

// Same dtype and same stored bits; any NaN equals any NaN.
inline bool same(const Value& a, const Value& b) {
  if (a.dtype != b.dtype) return false;
  if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b);
  return a.bits() == b.bits();
}

// Distance in units in the last place of the dtype (both NaN: 0; one NaN: max).
inline uint64_t ulp_distance(const Value& a, const Value& b) {
  if (is_nan(a) || is_nan(b)) return is_nan(a) && is_nan(b) ? 0 : ~0ull;
  int w = static_cast<int>(ir::itemsize(a.dtype) * 8);
  uint64_t sign = 1ull << (w - 1);
  uint64_t ba = a.bits(), bb = b.bits();
  uint64_t ma = ba & (sign - 1), mb = bb & (sign - 1);
  bool na = ba & sign, nb = bb & sign;
  if (na == nb) return ma > mb ? ma - mb : mb - ma;
  return ma + mb;  // opposite signs: the distance through zero (-0 and +0 are 0 apart)
}

inline std::string show(const Value& v) {
  std::ostringstream s;
  s << dname(v.dtype) << " ";
  if (ir::is_float(v.dtype)) {
    s.precision(17);
    s << v.f;
  } else if (v.dtype == nx::uint64) {
    s << static_cast<uint64_t>(v.i);
  } else {
    s << v.i;
  }
  s << " (0x" << std::hex << v.bits() << ")";
  return s.str();
}

inline std::string show(const Shape& s) { return ir::to_string(s); }

// Direct-loop references (tests/test_conv.cpp, tests/test_window.cpp): the row-major offset of
// multi-index i in shape s, and f called on every multi-index of s in row-major order.
inline int64_t row_major_offset(const Shape& s, const std::vector<int64_t>& i) {
  int64_t o = 0;
  for (size_t a = 0; a < s.size(); ++a) o = o * s[a] + i[a];
  return o;
}
inline void for_each_index(const Shape& s, const std::function<void(const std::vector<int64_t>&)>& f) {
  for (int64_t n : s)
    if (n == 0) return;
  std::vector<int64_t> i(s.size(), 0);
  while (true) {
    f(i);
    int a = static_cast<int>(s.size()) - 1;
    while (a >= 0 && ++i[a] == s[a]) i[a--] = 0;
    if (a < 0) return;
  }
}

// A contiguous tensor holding exactly `vals` (each of dtype t).
inline Tensor tensor(DType t, const Shape& shape, const std::vector<Value>& vals) {
  int64_t isz = ir::itemsize(t);
  if (static_cast<int64_t>(vals.size()) != ir::numel(shape))
    throw std::logic_error("rt::tensor: value count does not match shape");
  std::vector<char> bytes(std::max<size_t>(1, vals.size() * isz));
  for (size_t i = 0; i < vals.size(); ++i) {
    if (vals[i].dtype != t) throw std::logic_error("rt::tensor: value of the wrong dtype");
    uint64_t b = vals[i].bits();
    std::memcpy(bytes.data() + i * isz, &b, isz);
  }
  return nx::from_bytes(t, shape, bytes.data());
}
inline Tensor tensor(DType t, const Shape& shape, std::initializer_list<double> vals) {
  std::vector<Value> v;
  for (double d : vals) v.push_back(num(t, d));
  return tensor(t, shape, v);
}

// The values of x in C order, exactly.
inline std::vector<Value> read(const Tensor& x) {
  std::vector<Value> r;
  if (ir::is_float(x.dtype())) {
    for (double d : nx::to_vector<double>(x)) r.push_back(F(x.dtype(), d));
  } else {
    for (int64_t i : nx::to_vector<int64_t>(x)) r.push_back(I(x.dtype(), i));
  }
  return r;
}

// Compares element lists; `where(k)` describes element k (its inputs) for messages, and
// `ulps(k)` is element k's tolerance (0: the same bits).
inline ::testing::AssertionResult match(const std::vector<Value>& got,
                                        const std::vector<Value>& want,
                                        const std::function<std::string(size_t)>& where = {},
                                        const std::function<uint64_t(size_t)>& ulps = {}) {
  if (got.size() != want.size())
    return ::testing::AssertionFailure() << "size " << got.size() << " != expected " << want.size();
  std::ostringstream msg;
  size_t bad = 0;
  for (size_t k = 0; k < got.size(); ++k) {
    uint64_t tol = ulps ? ulps(k) : 0;
    bool ok = tol == 0 ? same(got[k], want[k])
                       : got[k].dtype == want[k].dtype && ulp_distance(got[k], want[k]) <= tol;
    if (ok) continue;
    if (++bad <= 8) {
      msg << "\n  [" << k << "]";
      if (where) msg << " " << where(k);
      msg << ": got " << show(got[k]) << ", want " << show(want[k]);
      if (tol) msg << " (" << ulp_distance(got[k], want[k]) << " ulp > " << tol << ")";
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements differ" << msg.str();
}

inline ::testing::AssertionResult match(const Tensor& got, const std::vector<Value>& want,
                                        const std::function<std::string(size_t)>& where = {},
                                        const std::function<uint64_t(size_t)>& ulps = {}) {
  return match(read(got), want, where, ulps);
}

// ---- layouts: tensors of a known logical [R, C] grid reached through different views ----

enum class Layout { Contig, Transposed, Stepped, NegStep, Flipped };
inline const char* layout_name(Layout l) {
  switch (l) {
    case Layout::Contig:
      return "contiguous";
    case Layout::Transposed:
      return "transposed";
    case Layout::Stepped:
      return "stepped slice";
    case Layout::NegStep:
      return "negative-step slice";
    case Layout::Flipped:
      return "flipped";
  }
  return "?";
}

// A filler value for the elements a view must skip (visible if read by mistake).
inline Value filler(DType t) { return t == nx::bool_ ? I(t, 1) : num(t, 77); }

// A tensor of shape [R, C] whose logical values are `grid` (C order), laid out as `l`.
inline Tensor with_layout(DType t, int64_t R, int64_t C, const std::vector<Value>& grid, Layout l) {
  auto at = [&](int64_t i, int64_t j) { return grid[i * C + j]; };
  switch (l) {
    case Layout::Contig:
      return tensor(t, {R, C}, grid);
    case Layout::Transposed: {
      std::vector<Value> d;
      for (int64_t j = 0; j < C; ++j)
        for (int64_t i = 0; i < R; ++i) d.push_back(at(i, j));
      return nx::transpose(tensor(t, {C, R}, d));
    }
    case Layout::Stepped: {
      // (i, j) lives at (1 + 2i, 1 + 3j) of a [2R + 1, 3C + 1] buffer.
      int64_t W = 3 * C + 1;
      std::vector<Value> d((2 * R + 1) * W, filler(t));
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) d[(1 + 2 * i) * W + 1 + 3 * j] = at(i, j);
      return nx::slice(tensor(t, {2 * R + 1, W}, d), {{1, 2 * R + 1, 2}, {1, W, 3}});
    }
    case Layout::NegStep: {
      // Row i is buffer row 2R - 1 - 2i, column j is buffer column C - 1 - j.
      std::vector<Value> d(2 * R * C, filler(t));
      for (int64_t i = 0; i < R; ++i)
        for (int64_t j = 0; j < C; ++j) d[(2 * R - 1 - 2 * i) * C + (C - 1 - j)] = at(i, j);
      return nx::slice(tensor(t, {2 * R, C}, d),
                       {{std::nullopt, std::nullopt, -2}, {std::nullopt, std::nullopt, -1}});
    }
    case Layout::Flipped: {
      std::vector<Value> d(grid.rbegin(), grid.rend());
      return nx::flip(tensor(t, {R, C}, d));
    }
  }
  throw std::logic_error("with_layout");
}

// Deterministic pseudo-random numbers for test data (splitmix64).
struct Rng {
  uint64_t s;
  explicit Rng(uint64_t seed) : s(seed) {}
  uint64_t next() {
    uint64_t z = (s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  double uniform() { return static_cast<double>(next() >> 11) * 0x1p-53; }  // [0, 1)
  int64_t range(int64_t lo, int64_t hi) {                                   // [lo, hi)
    return lo + static_cast<int64_t>(next() % static_cast<uint64_t>(hi - lo));
  }
};

// ---- the default device (RUNE_DEFAULT_DEVICE; tools/gpu-check runs the suite on CUDA:0) ----

// Whether creation ops put their results on the synchronous host (RUNE_DEFAULT_DEVICE unset or
// CPU), as most tests' expectations about errors and devices assume.
inline bool host_is_default() { return nx::default_device() == nx::Device::cpu(); }

// Whether this process runs with the fake CUDA driver as CUDA:0 (RUNE_TEST_FAKE_CUDA=1,
// tests/fake_cuda_hook.cpp). Child processes (samples) do not have it.
inline bool fake_cuda() {
  const char* v = std::getenv("RUNE_TEST_FAKE_CUDA");
  return v && std::string(v) == "1";
}

// Skips the current test, with `reason`, when the default device is not the host: for tests
// whose expectation legitimately depends on it (a check raising at the call rather than at the
// next wait, device names in messages, CPU:n streams, host allocator or compile counters).
#define RUNE_SKIP_UNLESS_HOST_DEFAULT(reason)                                         \
  do {                                                                                \
    if (!::rt::host_is_default())                                                     \
      GTEST_SKIP() << "needs the host as the default device (RUNE_DEFAULT_DEVICE is " \
                   << nx::default_device().name() << "): " << (reason);               \
  } while (0)

// The gtest names of device parameters: "CPU:1" -> "CPU_1" (names allow no ':').
struct DeviceTestName {
  template <class P>
  std::string operator()(const ::testing::TestParamInfo<P>& info) const {
    std::string s = info.param;
    for (char& c : s)
      if (c == ':') c = '_';
    return s;
  }
};

// Runs fn and returns the what() of any std::exception it throws, or "no error": for tests
// that compare messages whatever the exception's type.
template <class Fn>
std::string message_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "no error";
}

// Runs fn and returns the what() of the std::invalid_argument it throws ("" if none / other).
template <class Fn>
std::string error_of(Fn&& fn) {
  try {
    fn();
  } catch (const std::invalid_argument& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("<unexpected exception type> ") + e.what();
  }
  return "<no exception>";
}

}  // namespace rt

namespace ir {
// Test names and messages print dtypes by name.
inline void PrintTo(DType t, std::ostream* os) { *os << name(t); }
}  // namespace ir
