#include <cmath>
#include <cstring>

#include "core/prim.h"

namespace nx {

using namespace detail;
using ir::Op;

namespace {

// Runs a creation op's body on the device it creates on (creation_device): operand-less
// primitives run there (an iota is computed on the device, not copied to it), and a host
// value the body returns (raw bytes, a 0-d constant) is moved there. Under a tracer the body
// builds the same nodes as ever; they run wherever the program runs.
template <class F>
Tensor created(const char* api, F&& body) {
  Device d = creation_device(api);
  CreateOn on(d);
  Tensor t = body();
  if (!t.is_traced() && !(t.device() == d)) t = place(t, d);
  return t;
}

}  // namespace

Tensor from_bytes(DType t, const Shape& shape, const void* data) {
  return created("nx::from_bytes", [&] { return host_from_bytes(t, shape, data); });
}

Tensor create(DType t, const Shape& shape, const std::vector<double>& values) {
  for (auto d : shape)
    if (d < 0) fail("nx::create", "negative dimension in " + ir::to_string(shape));
  if (static_cast<int64_t>(values.size()) != ir::numel(shape))
    fail("nx::create", std::to_string(values.size()) + " values for shape " + ir::to_string(shape) +
                           " (" + std::to_string(ir::numel(shape)) + " elements)");
  int64_t isz = ir::itemsize(t);
  std::vector<char> bytes(values.size() * isz);
  for (size_t i = 0; i < values.size(); ++i) {
    ir::Value v = ir::is_float(t) ? ir::Value::of_float(t, values[i])
                                  : ir::Value::of_int(t, static_cast<int64_t>(values[i]));
    uint64_t b = v.bits();
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
  for (auto d : shape)
    if (d < 0) fail(api, "negative dimension in " + ir::to_string(shape));
  return created(api, [&] {
    // Eager values are materialised (as numpy's are), so their layout is the ordinary
    // contiguous one; under a tracer the broadcast constant fuses into its consumers instead.
    Tensor b = broadcast_to(const_of(t, value), shape);
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
  return created("nx::scalar", [&] { return const_of(t, value); });
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
  return created("nx::iota", [&] { return prim(Op::Iota, DType::Int64, shape, {}, int64_t{a}); });
}

Tensor arange(int64_t n) {
  if (n < 0) fail("nx::arange", "negative length " + std::to_string(n));
  return created("nx::arange", [&] { return iota({n}, 0); });
}

Tensor arange(DType t, double start, double stop, double step) {
  if (step == 0 || !std::isfinite(start) || !std::isfinite(stop) || !std::isfinite(step))
    fail("nx::arange", "bad range start=" + std::to_string(start) +
                           " stop=" + std::to_string(stop) + " step=" + std::to_string(step));
  int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((stop - start) / step)));
  return created("nx::arange", [&] {
    // Values are start + i * step computed in float64, then converted once (as numpy does).
    Tensor i = cast(arange(n), DType::Float64);
    return cast(add(mul(i, const_of(DType::Float64, step)), const_of(DType::Float64, start)), t);
  });
}

Tensor linspace(DType t, double start, double stop, int64_t num, bool endpoint) {
  if (num < 0) fail("nx::linspace", "negative number of samples " + std::to_string(num));
  int64_t div = endpoint ? num - 1 : num;
  double step = div > 0 ? (stop - start) / static_cast<double>(div) : 0;
  return created("nx::linspace", [&] {
    Tensor i = arange(num);
    Tensor y = add(mul(cast(i, DType::Float64), const_of(DType::Float64, step)),
                   const_of(DType::Float64, start));
    if (endpoint && num > 1)
      y = where(equal(i, const_int(DType::Int64, num - 1)), const_of(DType::Float64, stop), y);
    return cast(y, t);
  });
}

Tensor eye(DType t, int64_t n, std::optional<int64_t> m) {
  int64_t cols = m.value_or(n);
  if (n < 0 || cols < 0)
    fail("nx::eye", "negative size " + std::to_string(n) + "x" + std::to_string(cols));
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
  return created("nx::randint", [&] {
    Tensor u = uniform64(k, shape, 3);
    Tensor v = floor(mul(u, const_of(DType::Float64, static_cast<double>(hi - lo))));
    return add(cast(v, DType::Int64), const_int(DType::Int64, lo));
  });
}

}  // namespace nx
