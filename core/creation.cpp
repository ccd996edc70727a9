#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>

#include "core/donation.h"
#include "core/prim.h"
#include "runtime/allocator.h"

namespace nx {

using namespace detail;
using ir::Op;

namespace {

// Allocation errors name the public op that allocated (runtime/allocator.h). Installed here, at
// static initialisation, because every program that makes a tensor links this file's ops.
const bool kAllocationsNameTheirOp = (runtime::set_op_name_source(&OpScope::current_api), true);

// Runs a creation op's body on the device it creates on (creation_device): operand-less
// primitives run there (an iota is computed on the device, not copied to it), and a host
// value the body returns (raw bytes, a 0-d constant) is moved there. Under a tracer the body
// builds the same nodes as ever; they run wherever the program runs.
//
// The op scope names the creation op to the allocator (an allocation that fails names it) and to
// the device checks; it has no tensor arguments, so it consumes nothing.
template <class F>
Tensor created(const char* api, F&& body) {
  static const std::vector<Tensor> kNoArgs;
  OpScope scope_(api, kNoArgs);
  Device d = creation_device(api);
  CreateOn on(d);
  Tensor t = body();
  if (!t.is_traced() && !(t.device() == d)) t = place(t, d);
  return t;
}

std::string num_str(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%.17g", v);
  return b;
}

// The value `v` given to creation op `api` as an element of dtype t (docs/design-notes.md "Sizes,
// files and creation rules"): floats round to t (overflowing to inf, as numpy's). Other dtypes
// take v truncated toward zero: bool is that != 0; an integer dtype raises for a truncation
// outside its range (an implicit conversion must not wrap; nx::cast is the explicit, saturating
// one). NaN has no truncation and raises for both.
ir::Value creation_value(const char* api, DType t, double v) {
  if (ir::is_float(t)) return ir::Value::of_float(t, v);
  if (std::isnan(v)) fail(api, "value nan cannot be " + std::string(ir::name(t)));
  if (t == DType::Bool) return ir::Value::of_int(t, std::trunc(v) != 0);
  // The dtype's range as [lo, hi) in doubles: both ends are powers of two, so exact.
  const int w = ir::int_bits(t);
  const bool sig = ir::is_signed_int(t);
  const double lo = sig ? -std::ldexp(1.0, w - 1) : 0.0, hi = std::ldexp(1.0, sig ? w - 1 : w);
  double tv = std::trunc(v);
  if (!(tv >= lo && tv < hi)) {
    const std::string top =
        t == DType::UInt64 ? std::to_string(UINT64_MAX) : std::to_string(ir::int_max(t));
    fail(api, "value " + num_str(v) + " is out of range for " + std::string(ir::name(t)) + " [" +
                  num_str(lo) + ", " + top + "]");
  }
  if (t == DType::UInt64)  // kept as its bit pattern (ir::Value)
    return ir::Value::of_int(t, static_cast<int64_t>(static_cast<uint64_t>(tv)));
  return ir::Value::of_int(t, static_cast<int64_t>(tv));
}

Tensor constant(const ir::Value& v) { return current_interpreter().constant(v); }

}  // namespace

Tensor from_bytes(DType t, const Shape& shape, const void* data) {
  ir::checked_numel("nx::from_bytes", shape);
  return created("nx::from_bytes", [&] { return host_from_bytes(t, shape, data); });
}

Tensor create(DType t, const Shape& shape, const std::vector<double>& values) {
  int64_t n = ir::checked_numel("nx::create", shape);
  if (static_cast<int64_t>(values.size()) != n)
    fail("nx::create", std::to_string(values.size()) + " values for shape " + ir::to_string(shape) +
                           " (" + std::to_string(n) + " elements)");
  int64_t isz = ir::itemsize(t);
  std::vector<char> bytes(values.size() * isz);
  for (size_t i = 0; i < values.size(); ++i) {
    uint64_t b = creation_value("nx::create", t, values[i]).bits();
    std::memcpy(bytes.data() + i * isz, &b, isz);
  }
  // Inside a trace, created values are constants of the program (captured tensors, moved to
  // the program's device with it).
  return created("nx::create", [&] {
    Tensor c = host_from_bytes(t, shape, bytes.data());
    if (&current_interpreter() == &eager_interpreter()) return c;
    return prim(Op::Copy, t, shape, {place(c, creation_device("nx::create"))});
  });
}

static Tensor full_on(const char* api, DType t, const Shape& shape, double value) {
  ir::checked_numel(api, shape);
  ir::Value v = creation_value(api, t, value);
  return created(api, [&] {
    // Eager values are materialised (as numpy's are), so their layout is the ordinary
    // contiguous one; under a tracer the broadcast constant fuses into its consumers instead.
    Tensor b = broadcast_to(constant(v), shape);
    if (&current_interpreter() == &eager_interpreter() && !shape.empty()) return contiguous(b);
    return b;
  });
}
Tensor full(DType t, const Shape& shape, double value) {
  return full_on("nx::full", t, shape, value);
}
Tensor zeros(DType t, const Shape& shape) { return full_on("nx::zeros", t, shape, 0); }
Tensor ones(DType t, const Shape& shape) { return full_on("nx::ones", t, shape, 1); }
Tensor scalar(DType t, double value) {
  ir::Value v = creation_value("nx::scalar", t, value);
  return created("nx::scalar", [&] { return constant(v); });
}
// As torch.full_like: on x's device, whatever the default.
Tensor full_like(const Tensor& x, double value) {
  CreateOn on(x.device());
  return full_on("nx::full_like", x.dtype(), x.shape(), value);
}
Tensor zeros_like(const Tensor& x) {
  CreateOn on(x.device());
  return full_on("nx::zeros_like", x.dtype(), x.shape(), 0);
}
Tensor ones_like(const Tensor& x) {
  CreateOn on(x.device());
  return full_on("nx::ones_like", x.dtype(), x.shape(), 1);
}

Tensor iota(const Shape& shape, int axis) {
  int n = static_cast<int>(shape.size());
  int a = axis < 0 ? axis + n : axis;
  if (a < 0 || a >= n)
    fail("nx::iota",
         "axis " + std::to_string(axis) + " out of range for shape " + ir::to_string(shape));
  ir::checked_numel("nx::iota", shape);
  return created("nx::iota", [&] { return prim(Op::Iota, DType::Int64, shape, {}, int64_t{a}); });
}

// As numpy's arange(n): a negative n is an empty range, like arange(int64, 0, n, 1).
Tensor arange(int64_t n) {
  n = std::max<int64_t>(n, 0);
  ir::checked_numel("nx::arange", {n});
  return created("nx::arange", [&] { return iota({n}, 0); });
}

Tensor arange(DType t, double start, double stop, double step) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail("nx::arange", "bad range start=" + std::to_string(start) +
                           " stop=" + std::to_string(stop) + " step=" + std::to_string(step));
  // The count in float64 first: (stop - start) / step may exceed any int64 (or be inf), and
  // converting such a double to int64 is undefined.
  double count = std::max(0.0, std::ceil((stop - start) / step));
  if (!(count <= static_cast<double>(ir::kMaxElements)))
    ir::fail_too_large("nx::arange", "[" + num_str(count) + "] (start=" + num_str(start) +
                                         " stop=" + num_str(stop) + " step=" + num_str(step) + ")");
  int64_t n = static_cast<int64_t>(count);
  // Every value start + i * step lies between the first and the last, so checking those two
  // against an integer dtype's range checks them all.
  if (n > 0) {
    creation_value("nx::arange", t, start);
    creation_value("nx::arange", t, start + static_cast<double>(n - 1) * step);
  }
  return created("nx::arange", [&] {
    // Values are start + i * step computed in float64, then converted once (as numpy does).
    Tensor i = cast(arange(n), DType::Float64);
    return cast(add(mul(i, const_of(DType::Float64, step)), const_of(DType::Float64, start)), t);
  });
}

Tensor linspace(DType t, double start, double stop, int64_t num, bool endpoint) {
  if (num < 0) fail("nx::linspace", "negative number of samples " + std::to_string(num));
  ir::checked_numel("nx::linspace", {num});
  // Integer dtypes take the floor of each sample (numpy's linspace); the samples lie between
  // start and stop, so those two decide whether they fit the dtype.
  const bool integer = ir::is_int(t);
  if (num > 0) {
    creation_value("nx::linspace", t, integer ? std::floor(start) : start);
    if (num > 1) creation_value("nx::linspace", t, integer ? std::floor(stop) : stop);
  }
  int64_t div = endpoint ? num - 1 : num;
  double step = div > 0 ? (stop - start) / static_cast<double>(div) : 0;
  return created("nx::linspace", [&] {
    Tensor i = arange(num);
    Tensor y = add(mul(cast(i, DType::Float64), const_of(DType::Float64, step)),
                   const_of(DType::Float64, start));
    if (endpoint && num > 1)
      y = where(equal(i, const_int(DType::Int64, num - 1)), const_of(DType::Float64, stop), y);
    if (integer) y = floor(y);
    return cast(y, t);
  });
}

Tensor eye(DType t, int64_t n, std::optional<int64_t> m) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0)
    fail("nx::eye", "negative size " + std::to_string(n) + "x" + std::to_string(cols));
  ir::checked_numel("nx::eye", {n, cols});
  return created("nx::eye", [&] {
    Tensor diag = equal(iota({n, cols}, 0), iota({n, cols}, 1));
    return cast(diag, t);
  });
}

// ---- random numbers: splitmix64 of (key, flat index), all in int64 primitives ----
namespace {
constexpr int64_t kGolden = static_cast<int64_t>(0x9E3779B97F4A7C15ull);
constexpr int64_t kMix1 = static_cast<int64_t>(0xBF58476D1CE4E5B9ull);
constexpr int64_t kMix2 = static_cast<int64_t>(0x94D049BB133111EBull);

uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

Tensor shr(const Tensor& x, int64_t s) {
  return binary("nx::rand", Op::Shr, x, const_int(DType::Int64, s));
}
Tensor bxor(const Tensor& a, const Tensor& b) { return binary("nx::rand", Op::Xor, a, b); }

// 64 random bits per element of `shape`, a function of the key and the element's flat index.
Tensor random_bits(Key k, const Shape& shape, int64_t stream) {
  Tensor i = reshape(arange(ir::numel(shape)), shape);
  int64_t base =
      static_cast<int64_t>(mix64(k.value + static_cast<uint64_t>(stream) * 0x632BE59BD9B4E019ull));
  Tensor z = add(mul(add(i, const_int(DType::Int64, 1)), const_int(DType::Int64, kGolden)),
                 const_int(DType::Int64, base));
  z = mul(bxor(z, shr(z, 30)), const_int(DType::Int64, kMix1));
  z = mul(bxor(z, shr(z, 27)), const_int(DType::Int64, kMix2));
  return bxor(z, shr(z, 31));
}

// Uniform [0, 1) with 53 random bits, as float64.
Tensor uniform64(Key k, const Shape& shape, int64_t stream) {
  Tensor bits = shr(random_bits(k, shape, stream), 11);
  return mul(cast(bits, DType::Float64), const_of(DType::Float64, 0x1p-53));
}
}  // namespace

Key key(uint64_t seed) { return Key{mix64(seed ^ 0x5851F42D4C957F2Dull)}; }
std::pair<Key, Key> split(Key k) { return {Key{mix64(k.value ^ 0x1)}, Key{mix64(k.value ^ 0x2)}}; }

Tensor rand(Key k, DType t, const Shape& shape) {
  if (!ir::is_float(t)) fail("nx::rand", "dtype must be float, got " + std::string(ir::name(t)));
  ir::checked_numel("nx::rand", shape);
  return created("nx::rand", [&] {
    Tensor u = uniform64(k, shape, 0);
    if (t == DType::Float64) return u;
    // Round down to t's precision so the result stays below 1.
    Tensor c = cast(u, t);
    int mant = t == DType::Float32 ? 24 : t == DType::Float16 ? 11 : 8;
    return where(greater_equal(c, scalar_like(c, 1)), scalar_like(c, 1 - std::ldexp(1.0, -mant)),
                 c);
  });
}

Tensor randn(Key k, DType t, const Shape& shape) {
  if (!ir::is_float(t)) fail("nx::randn", "dtype must be float, got " + std::string(ir::name(t)));
  ir::checked_numel("nx::randn", shape);
  return created("nx::randn", [&] {
    // Box-Muller in float64: u1 in (0, 1] so the log is finite.
    Tensor u1 = sub(const_of(DType::Float64, 1), uniform64(k, shape, 1));
    Tensor u2 = uniform64(k, shape, 2);
    Tensor r = sqrt(mul(const_of(DType::Float64, -2), log(u1)));
    Tensor z = mul(r, cos(mul(u2, const_of(DType::Float64, 6.283185307179586))));
    return cast(z, t);
  });
}

Tensor randint(Key k, int64_t lo, int64_t hi, const Shape& shape) {
  if (hi <= lo)
    fail("nx::randint", "empty range [" + std::to_string(lo) + ", " + std::to_string(hi) + ")");
  ir::checked_numel("nx::randint", shape);
  return created("nx::randint", [&] {
    Tensor u = uniform64(k, shape, 3);
    Tensor v = floor(mul(u, const_of(DType::Float64, static_cast<double>(hi - lo))));
    return add(cast(v, DType::Int64), const_int(DType::Int64, lo));
  });
}

}  // namespace nx
