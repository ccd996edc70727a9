#include "ir/scalar.h"

#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>

namespace ir {

double round_to(DType t, double v) {
  switch (t) {
    case DType::Float32:
      return static_cast<double>(static_cast<float>(v));
    case DType::Float16:
      return f16_bits_to_f32(f64_to_f16_bits(v));
    case DType::BFloat16:
      return bf16_bits_to_f32(f64_to_bf16_bits(v));
    default:
      return v;
  }
}

// Keeps the low int_bits(t) bits of v, sign-extended for signed dtypes (uint64: the pattern).
static int64_t wrap(DType t, int64_t v) {
  if (t == DType::Bool) return v != 0;
  if (is_float(t)) return v;
  const int w = int_bits(t);
  if (w == 64) return v;
  const uint64_t low = static_cast<uint64_t>(v) & ((uint64_t{1} << w) - 1);
  if (is_unsigned_int(t)) return static_cast<int64_t>(low);
  const uint64_t sign = uint64_t{1} << (w - 1);
  return static_cast<int64_t>((low ^ sign) - sign);
}

Value Value::of_float(DType t, double v) {
  Value r;
  r.dtype = t;
  r.f = round_to(t, v);
  return r;
}
Value Value::of_int(DType t, int64_t v) {
  Value r;
  r.dtype = t;
  r.i = wrap(t, v);
  return r;
}

uint64_t Value::bits() const {
  switch (dtype) {
    case DType::Float64:
      return std::bit_cast<uint64_t>(f);
    case DType::Float32:
      return std::bit_cast<uint32_t>(static_cast<float>(f));
    case DType::Float16:
      return f32_to_f16_bits(static_cast<float>(f));
    case DType::BFloat16:
      return f32_to_bf16_bits(static_cast<float>(f));
    default: {
      const int w = int_bits(dtype);
      const uint64_t u = static_cast<uint64_t>(i);
      return w >= 64 ? u : dtype == DType::Bool ? (u & 1) : (u & ((uint64_t{1} << w) - 1));
    }
  }
}

Value Value::from_bits(DType t, uint64_t b) {
  Value r;
  r.dtype = t;
  switch (t) {
    case DType::Float64:
      r.f = std::bit_cast<double>(b);
      break;
    case DType::Float32:
      r.f = std::bit_cast<float>(static_cast<uint32_t>(b));
      break;
    case DType::Float16:
      r.f = f16_bits_to_f32(static_cast<uint16_t>(b));
      break;
    case DType::BFloat16:
      r.f = bf16_bits_to_f32(static_cast<uint16_t>(b));
      break;
    case DType::Bool:
      r.i = b != 0;
      break;
    default:
      r.i = wrap(t, static_cast<int64_t>(b));
  }
  return r;
}

// float -> integer: truncate toward zero; NaN gives 0; out of range saturates. (Kernels
// implement exactly this, so the result never depends on the hardware's conversion.)
static int64_t float_to_int(double v, DType to) {
  if (std::isnan(v)) return 0;
  const double t = std::trunc(v);
  // The range as doubles: [lo, hi) with hi = 2^bits (unsigned) or 2^(bits-1) (signed), exact.
  const int w = int_bits(to);
  const double lo = is_signed_int(to) ? -std::ldexp(1.0, w - 1) : 0.0;
  const double hi = std::ldexp(1.0, is_signed_int(to) ? w - 1 : w);
  if (t <= lo) return int_min(to);
  if (t >= hi) return int_max(to);
  if (to == DType::UInt64) return static_cast<int64_t>(static_cast<uint64_t>(t));
  return static_cast<int64_t>(t);
}

Value cast(const Value& v, DType to) {
  if (to == DType::Bool) return Value::of_int(to, is_float(v.dtype) ? v.f != 0 : v.i != 0);
  if (is_float(to)) {
    if (is_float(v.dtype)) return Value::of_float(to, v.f);
    const bool u64 = v.dtype == DType::UInt64;
    const uint64_t u = static_cast<uint64_t>(v.i);
    // int -> float64 and -> float32 round once (directly from the integer, as the hardware's
    // conversions do); -> 16-bit floats go through float64 (exact below 2^53), then round once.
    if (to == DType::Float32)
      return Value::of_float(to, u64 ? static_cast<double>(static_cast<float>(u))
                                     : static_cast<double>(static_cast<float>(v.i)));
    return Value::of_float(to, v.as_double());
  }
  if (is_float(v.dtype)) return Value::of_int(to, float_to_int(v.f, to));
  return Value::of_int(to, v.i);
}

static double nan_max(double a, double b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? b : a;
  return a > b ? a : b;
}
static double nan_min(double a, double b) {
  if (std::isnan(a)) return a;
  if (std::isnan(b)) return b;
  if (a == b) return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

static int64_t floordiv(int64_t a, int64_t b) {
  if (b == 0) return 0;  // numpy gives 0 (with a warning) for integer division by zero
  if (b == -1) return static_cast<int64_t>(0ull - static_cast<uint64_t>(a));
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) --q;
  return q;
}
static int64_t floormod(int64_t a, int64_t b) {
  if (b == 0 || b == -1) return 0;
  int64_t r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}

static int bit_width(DType t) { return static_cast<int>(itemsize(t) * 8); }

// Integer order: uint64 compares its bit patterns unsigned; every other dtype's values are
// exact in int64.
static bool int_less(DType t, int64_t a, int64_t b) {
  return t == DType::UInt64 ? static_cast<uint64_t>(a) < static_cast<uint64_t>(b) : a < b;
}

Value apply(Op op, DType out, const std::vector<Value>& a) {
  DType in = a.empty() ? out : a[0].dtype;
  bool fl = is_float(in);
  auto F = [&](double v) { return Value::of_float(out, v); };
  auto I = [&](int64_t v) { return Value::of_int(out, v); };
  auto B = [&](bool v) { return Value::of_int(DType::Bool, v); };
  auto u = [&](int k) { return static_cast<uint64_t>(a[k].i); };
  switch (op) {
    case Op::Neg:
      return fl ? F(-a[0].f) : I(static_cast<int64_t>(0ull - u(0)));
    case Op::Abs:
      if (fl) return F(std::fabs(a[0].f));
      return I(is_signed_int(in) && a[0].i < 0 ? static_cast<int64_t>(0ull - u(0)) : a[0].i);
    case Op::Sqrt:
      return F(std::sqrt(a[0].f));
    case Op::Rsqrt:  // the exact value rounded once (long double: 11 more bits than float64)
      return F(static_cast<double>(1.0L / std::sqrt(static_cast<long double>(a[0].f))));
    case Op::Exp:
      return F(std::exp(a[0].f));
    case Op::Log:
      return F(std::log(a[0].f));
    case Op::Sin:
      return F(std::sin(a[0].f));
    case Op::Cos:
      return F(std::cos(a[0].f));
    case Op::Tan:
      return F(std::tan(a[0].f));
    case Op::Tanh:
      return F(std::tanh(a[0].f));
    case Op::Atan:
      return F(std::atan(a[0].f));
    case Op::Expm1:
      return F(std::expm1(a[0].f));
    case Op::Log1p:
      return F(std::log1p(a[0].f));
    case Op::Exp2:
      return F(std::exp2(a[0].f));
    case Op::Log2:
      return F(std::log2(a[0].f));
    case Op::Sinh:
      return F(std::sinh(a[0].f));
    case Op::Cosh:
      return F(std::cosh(a[0].f));
    case Op::Asin:
      return F(std::asin(a[0].f));
    case Op::Acos:
      return F(std::acos(a[0].f));
    case Op::Erf:
      return F(std::erf(a[0].f));
    case Op::Erfc:
      return F(std::erfc(a[0].f));
    case Op::StopGradient:
      return a[0];
    case Op::Floor:
      return fl ? F(std::floor(a[0].f)) : a[0];
    case Op::Ceil:
      return fl ? F(std::ceil(a[0].f)) : a[0];
    case Op::Round:
      return fl ? F(std::nearbyint(a[0].f)) : a[0];
    case Op::Not:
      return in == DType::Bool ? B(!a[0].i) : I(~a[0].i);
    case Op::Cast:
      return cast(a[0], out);
    case Op::Bitcast:
      return Value::from_bits(out, a[0].bits());
    case Op::IsNan:
      return B(fl && std::isnan(a[0].f));
    case Op::IsInf:
      return B(fl && std::isinf(a[0].f));
    case Op::IsFinite:
      return B(!fl || std::isfinite(a[0].f));
    case Op::Add:
      return fl ? F(a[0].f + a[1].f) : I(static_cast<int64_t>(u(0) + u(1)));
    case Op::Sub:
      return fl ? F(a[0].f - a[1].f) : I(static_cast<int64_t>(u(0) - u(1)));
    case Op::Mul:
      return fl ? F(a[0].f * a[1].f) : I(static_cast<int64_t>(u(0) * u(1)));
    case Op::Div:
      if (fl) return F(a[0].f / a[1].f);
      if (in == DType::UInt64) return I(u(1) == 0 ? 0 : static_cast<int64_t>(u(0) / u(1)));
      return I(floordiv(a[0].i, a[1].i));
    case Op::Mod:
      if (fl) {
        double r = std::fmod(a[0].f, a[1].f);
        if (r != 0 && (std::signbit(r) != std::signbit(a[1].f))) r += a[1].f;
        if (r == 0) r = std::copysign(0.0, a[1].f);
        return F(r);
      }
      if (in == DType::UInt64) return I(u(1) == 0 ? 0 : static_cast<int64_t>(u(0) % u(1)));
      return I(floormod(a[0].i, a[1].i));
    case Op::Max:
      return fl ? F(nan_max(a[0].f, a[1].f)) : I(int_less(in, a[0].i, a[1].i) ? a[1].i : a[0].i);
    case Op::Min:
      return fl ? F(nan_min(a[0].f, a[1].f)) : I(int_less(in, a[1].i, a[0].i) ? a[1].i : a[0].i);
    case Op::Pow:
      return fl ? F(std::pow(a[0].f, a[1].f))
                : I(static_cast<int64_t>(std::pow(a[0].as_double(), a[1].as_double())));
    case Op::Atan2:
      return F(std::atan2(a[0].f, a[1].f));
    case Op::CmpLt:
      return B(fl ? a[0].f < a[1].f : int_less(in, a[0].i, a[1].i));
    case Op::CmpLe:
      return B(fl ? a[0].f <= a[1].f : !int_less(in, a[1].i, a[0].i));
    case Op::CmpEq:
      return B(fl ? a[0].f == a[1].f : a[0].i == a[1].i);
    case Op::CmpNe:
      return B(fl ? a[0].f != a[1].f : a[0].i != a[1].i);
    case Op::And:
      return I(a[0].i & a[1].i);
    case Op::Or:
      return I(a[0].i | a[1].i);
    case Op::Xor:
      return I(a[0].i ^ a[1].i);
    case Op::Shl: {
      int w = bit_width(in);
      return a[1].i >= w || a[1].i < 0 ? I(0) : I(static_cast<int64_t>(u(0) << a[1].i));
    }
    case Op::Shr: {
      int w = bit_width(in);
      uint64_t mask = w == 64 ? ~0ull : ((1ull << w) - 1);
      return a[1].i >= w || a[1].i < 0 ? I(0) : I(static_cast<int64_t>((u(0) & mask) >> a[1].i));
    }
    case Op::Where:
      return a[0].i ? a[1] : a[2];
    // The core ops of the lowered level (codegen/core_ops.h), for constant folding and the
    // check that legalising an op keeps its meaning (tests/lower/test_core_ops.cpp).
    case Op::UDiv:
      return I(static_cast<int64_t>(u(0) / u(1)));
    case Op::URem:
      return I(static_cast<int64_t>(u(0) % u(1)));
    case Op::DivT:
    case Op::RemT: {
      const bool div = op == Op::DivT;
      if (fl) return F(div ? a[0].f / a[1].f : std::fmod(a[0].f, a[1].f));
      const bool uns = !is_signed_int(in);
      if (a[1].i == 0 || (a[1].i == -1 && !uns))
        throw std::logic_error("ir::apply: truncating division by 0 or -1 is never legal");
      if (uns) return I(static_cast<int64_t>(div ? u(0) / u(1) : u(0) % u(1)));
      return I(div ? a[0].i / a[1].i : a[0].i % a[1].i);
    }
    case Op::Fma:
      return out == DType::Float32
                 ? F(std::fma(static_cast<float>(a[0].f), static_cast<float>(a[1].f),
                              static_cast<float>(a[2].f)))
                 : F(std::fma(a[0].f, a[1].f, a[2].f));
    default:
      throw std::logic_error("ir::apply: not an elementwise op: " + std::string(op_name(op)));
  }
}

Value reduce_identity(Op op, DType t) {
  bool fl = is_float(t);
  switch (op) {
    case Op::ReduceSum:
      return fl ? Value::of_float(t, 0.0) : Value::of_int(t, 0);
    case Op::ReduceProd:
      return fl ? Value::of_float(t, 1.0) : Value::of_int(t, 1);
    case Op::ReduceMax:
      return fl ? Value::of_float(t, -INFINITY) : Value::of_int(t, int_min(t));
    case Op::ReduceMin:
      return fl ? Value::of_float(t, INFINITY) : Value::of_int(t, int_max(t));
    default:
      throw std::logic_error("ir::reduce_identity: not a reduction");
  }
}

Value reduce_combine(Op op, const Value& a, const Value& b) {
  switch (op) {
    case Op::ReduceSum:
      return apply(Op::Add, a.dtype, {a, b});
    case Op::ReduceProd:
      return apply(Op::Mul, a.dtype, {a, b});
    case Op::ReduceMax:
      return apply(Op::Max, a.dtype, {a, b});
    case Op::ReduceMin:
      return apply(Op::Min, a.dtype, {a, b});
    default:
      throw std::logic_error("ir::reduce_combine: not a reduction");
  }
}

}  // namespace ir
