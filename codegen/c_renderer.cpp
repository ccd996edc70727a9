#include "codegen/c_renderer.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <map>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "ir/builder.h"
#include "ir/scalar.h"

namespace codegen {

using namespace ir;

namespace {

// Device helpers shared by every dialect. Each mirrors one case of codegen/cpu/render_llvm.cpp
// (and ir/dtype.cpp for the 16-bit conversions); comments name the LLVM construct they match.
// Uses RUNE_FN, RUNE_SQRT_F32/F64 and the RUNE_*_AS_* bit casts defined by the dialect.
constexpr const char* kHelpers = R"(
RUNE_FN float rune_u32_f32(unsigned x) { return RUNE_U32_AS_F32(x); }
RUNE_FN unsigned rune_f32_u32(float x) { return RUNE_F32_AS_U32(x); }
RUNE_FN double rune_u64_f64(unsigned long long x) { return RUNE_U64_AS_F64((long long)x); }
RUNE_FN unsigned long long rune_f64_u64(double x) { return (unsigned long long)RUNE_F64_AS_U64(x); }

// float16 <-> float32, bit for bit as ir::f16_bits_to_f32 / ir::f32_to_f16_bits.
RUNE_FN float rune_f16_to_f32(unsigned short h) {
  const unsigned sign = ((unsigned)h & 0x8000u) << 16;
  const unsigned e = ((unsigned)h >> 10) & 0x1fu;
  const unsigned m = (unsigned)h & 0x3ffu;
  if (e == 0x1fu) return rune_u32_f32(sign | 0x7f800000u | (m << 13));
  if (e == 0u) {
    const float v = ((float)m) * 5.9604644775390625e-08f;
    return (sign != 0u) ? (-v) : v;
  }
  return rune_u32_f32(sign | ((e + 112u) << 23) | (m << 13));
}
RUNE_FN unsigned short rune_f32_to_f16(float f) {
  const unsigned x = rune_f32_u32(f);
  const unsigned sign = (x >> 16) & 0x8000u;
  const unsigned ax = x & 0x7fffffffu;
  if (ax > 0x7f800000u) return (unsigned short)(sign | 0x7e00u | ((ax >> 13) & 0x3ffu));
  if (ax >= 0x477ff000u) return (unsigned short)(sign | 0x7c00u);
  if (ax < 0x38800000u) {
    const float r = rintf(rune_u32_f32(ax) * 16777216.0f);
    return (unsigned short)(sign | (unsigned)r);
  }
  unsigned m = ax - 0x38000000u;
  m = m + (0xfffu + ((m >> 13) & 1u));
  return (unsigned short)(sign | (m >> 13));
}
// bfloat16 <-> float32: round to nearest even, NaNs quieted.
RUNE_FN float rune_bf16_to_f32(unsigned short h) { return rune_u32_f32(((unsigned)h) << 16); }
RUNE_FN unsigned short rune_f32_to_bf16(float f) {
  const unsigned x = rune_f32_u32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}

RUNE_FN float rune_abs_f32(float a) { return rune_u32_f32(rune_f32_u32(a) & 0x7fffffffu); }
RUNE_FN double rune_abs_f64(double a) { return rune_u64_f64(rune_f64_u64(a) & 0x7fffffffffffffffull); }
RUNE_FN bool rune_signbit_f32(float a) { return (rune_f32_u32(a) >> 31) != 0u; }
RUNE_FN bool rune_signbit_f64(double a) { return (rune_f64_u64(a) >> 63) != 0ull; }

// NaN propagates (the first NaN operand wins); equal values order -0 below +0.
RUNE_FN float rune_max_f32(float a, float b) {
  const float tie = rune_signbit_f32(a) ? b : a;
  const float r = (a > b) ? a : ((a < b) ? b : tie);
  return (a != a) ? a : ((b != b) ? b : r);
}
RUNE_FN float rune_min_f32(float a, float b) {
  const float tie = rune_signbit_f32(a) ? a : b;
  const float r = (a < b) ? a : ((a > b) ? b : tie);
  return (a != a) ? a : ((b != b) ? b : r);
}
RUNE_FN double rune_max_f64(double a, double b) {
  const double tie = rune_signbit_f64(a) ? b : a;
  const double r = (a > b) ? a : ((a < b) ? b : tie);
  return (a != a) ? a : ((b != b) ? b : r);
}
RUNE_FN double rune_min_f64(double a, double b) {
  const double tie = rune_signbit_f64(a) ? a : b;
  const double r = (a < b) ? a : ((a > b) ? b : tie);
  return (a != a) ? a : ((b != b) ? b : r);
}

// numpy remainder: frem, then moved into the divisor's sign; a zero result takes b's sign.
RUNE_FN float rune_mod_f32(float a, float b) {
  const float r = fmodf(a, b);
  const bool adj = ((r < 0.0f) || (r > 0.0f)) && (rune_signbit_f32(r) != rune_signbit_f32(b));
  const float ra = adj ? (r + b) : r;
  return (ra == 0.0f) ? rune_u32_f32(rune_f32_u32(b) & 0x80000000u) : ra;
}
RUNE_FN double rune_mod_f64(double a, double b) {
  const double r = fmod(a, b);
  const bool adj = ((r < 0.0) || (r > 0.0)) && (rune_signbit_f64(r) != rune_signbit_f64(b));
  const double ra = adj ? (r + b) : r;
  return (ra == 0.0) ? rune_u64_f64(rune_f64_u64(b) & 0x8000000000000000ull) : ra;
}

// Floor division / modulo (numpy): x / 0 and x % 0 give 0; MIN / -1 wraps.
RUNE_FN int rune_floordiv_i32(int a, int b) {
  const bool bz = b == 0, bm = b == -1;
  const int bs = (bz || bm) ? 1 : b;
  const int q = a / bs, r = a % bs;
  const bool adj = (r != 0) && ((r < 0) != (bs < 0));
  return bz ? 0 : (bm ? (int)(0u - (unsigned)a) : (adj ? (q - 1) : q));
}
RUNE_FN int rune_floormod_i32(int a, int b) {
  const bool bad = (b == 0) || (b == -1);
  const int bs = bad ? 1 : b;
  const int r = a % bs;
  const bool adj = (r != 0) && ((r < 0) != (bs < 0));
  return bad ? 0 : (adj ? (r + bs) : r);
}
RUNE_FN long long rune_floordiv_i64(long long a, long long b) {
  const bool bz = b == 0, bm = b == -1;
  const long long bs = (bz || bm) ? 1 : b;
  const long long q = a / bs, r = a % bs;
  const bool adj = (r != 0) && ((r < 0) != (bs < 0));
  return bz ? 0 : (bm ? (long long)(0ull - (unsigned long long)a) : (adj ? (q - 1) : q));
}
RUNE_FN long long rune_floormod_i64(long long a, long long b) {
  const bool bad = (b == 0) || (b == -1);
  const long long bs = bad ? 1 : b;
  const long long r = a % bs;
  const bool adj = (r != 0) && ((r < 0) != (bs < 0));
  return bad ? 0 : (adj ? (r + bs) : r);
}
)";

// Type of a value in registers: bool is bool; float16 / bfloat16 travel as bit patterns.
const char* reg_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int32:
      return "int";
    case DType::Int64:
      return "long long";
    case DType::Float16:
    case DType::BFloat16:
      return "unsigned short";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}
// Type of a value in memory (bool is a byte).
const char* mem_type(DType t) { return t == DType::Bool ? "unsigned char" : reg_type(t); }
// The unsigned type wrapping integer arithmetic is done in (C signed overflow is undefined).
const char* wrap_type(DType t) { return t == DType::Int64 ? "unsigned long long" : "unsigned"; }
bool fp(DType t) { return t == DType::Float32 || t == DType::Float64; }
const char* fsuffix(DType t) { return t == DType::Float64 ? "f64" : "f32"; }
int bits_of(DType t) { return t == DType::Bool ? 1 : static_cast<int>(itemsize(t) * 8); }

std::string paren(const std::string& s) { return "(" + s + ")"; }

// A float constant of dtype t (float32 / float64), exact: hex literal, or bits when not finite.
std::string float_lit(DType t, double v) {
  char buf[64];
  if (!std::isfinite(v)) {
    if (t == DType::Float32) {
      std::snprintf(buf, sizeof buf, "rune_u32_f32(0x%08xu)",
                    std::bit_cast<uint32_t>(static_cast<float>(v)));
    } else {
      std::snprintf(buf, sizeof buf, "rune_u64_f64(0x%016llxull)",
                    static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
    }
    return buf;
  }
  std::snprintf(buf, sizeof buf, "%a", v);
  std::string s = buf;
  if (t == DType::Float32) s += "f";
  return v < 0 || std::signbit(v) ? paren(s) : s;
}

std::string const_text(DType t, const Value& v) {
  switch (t) {
    case DType::Float64:
    case DType::Float32:
      return float_lit(t, v.f);
    case DType::Float16:
    case DType::BFloat16: {
      char buf[40];
      std::snprintf(buf, sizeof buf, "((unsigned short)0x%04xu)", static_cast<unsigned>(v.bits()));
      return buf;
    }
    case DType::Bool:
      return v.i ? "true" : "false";
    case DType::UInt8:
      return "((unsigned char)" + std::to_string(v.i & 0xff) + ")";
    case DType::Int32:
      if (v.i == INT32_MIN) return "(-2147483647 - 1)";
      return v.i < 0 ? paren(std::to_string(v.i)) : std::to_string(v.i);
    case DType::Int64:
      if (v.i == INT64_MIN) return "(-9223372036854775807LL - 1LL)";
      return v.i < 0 ? paren(std::to_string(v.i) + "LL") : std::to_string(v.i) + "LL";
  }
  return "?";
}
std::string zero(DType t) {
  return const_text(t, is_float(t) ? Value::of_float(t, 0) : Value::of_int(t, 0));
}

// Writes statements with indentation; every value is a named const (the DAG keeps its sharing).
class SourceWriter {
 public:
  std::ostringstream out;
  void line(const std::string& s) { out << std::string(indent_ * 2, ' ') << s << "\n"; }
  void open(const std::string& s) {
    line(s + " {");
    ++indent_;
  }
  void close(const std::string& tail = "") {
    --indent_;
    line("}" + tail);
  }
  std::string tmp() { return "t" + std::to_string(next_++); }
  // Declares `const T tN = rhs;` and returns tN.
  std::string let(DType t, const std::string& rhs) { return let_raw(reg_type(t), rhs); }
  std::string let_raw(const std::string& type, const std::string& rhs) {
    auto n = tmp();
    line("const " + type + " " + n + " = " + rhs + ";");
    return n;
  }

 private:
  int indent_ = 1;
  int next_ = 0;
};

struct Env {
  std::vector<std::string> ptrs;                 // param pointer names
  std::vector<std::string> idx;                  // index per iteration dim (shape ++ rshape)
  std::unordered_map<int64_t, std::string> acc;  // Acc leaves by arg (default 0)
  // Loads already read (vector loads: one component each), as values in memory form.
  std::unordered_map<NodeRef, std::string> loaded;
};

class Emitter {
 public:
  Emitter(SourceWriter& w, const Env& env) : w_(w), env_(env) {}

  std::string emit(NodeRef root) {
    for (NodeRef n : toposort({root})) val_[n] = emit_one(n);
    return val_.at(root);
  }

 private:
  std::string offset_of(const View& view) {
    std::string off = std::to_string(view.offset) + "LL";
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.strides[d] == 0) continue;
      std::string term =
          view.strides[d] == 1
              ? env_.idx.at(d)
              : paren(env_.idx.at(d) + " * " + std::to_string(view.strides[d]) + "LL");
      off = paren(off + " + " + term);
    }
    return off;
  }
  std::string valid_of(const View& view) {
    std::string ok;
    for (size_t d = 0; d < view.mask.size(); ++d) {
      auto [lo, hi] = view.mask[d];
      if (lo <= 0 && hi >= view.shape[d]) continue;
      const std::string& i = env_.idx.at(d);
      std::string both = paren(paren(i + " >= " + std::to_string(lo) + "LL") + " && " +
                               paren(i + " < " + std::to_string(hi) + "LL"));
      ok = ok.empty() ? both : paren(ok + " && " + both);
    }
    return ok.empty() ? "true" : ok;
  }

  // Masked loads never dereference an invalid index: the conditional skips the access.
  std::string load(NodeRef n) {
    const auto& la = arg_load(n);
    DType t = n->dtype;
    if (auto it = env_.loaded.find(n); it != env_.loaded.end())
      return w_.let(t, t == DType::Bool ? paren(it->second + " != 0") : it->second);
    std::string valid = valid_of(la.view);
    std::string x = env_.ptrs.at(la.param) + "[" + offset_of(la.view) + "]";
    if (t == DType::Bool) x = paren(x + " != 0");
    if (valid == "true") return w_.let(t, x);
    std::string ok = w_.let(DType::Bool, valid);
    return w_.let(t, ok + " ? " + x + " : " + zero(t));
  }

  std::string minmax(bool is_max, DType t, const std::string& a, const std::string& b) {
    if (fp(t))
      return std::string(is_max ? "rune_max_" : "rune_min_") + fsuffix(t) + "(" + a + ", " + b +
             ")";
    return paren(paren(a + (is_max ? " > " : " < ") + b) + " ? " + a + " : " + b);
  }

  std::string shift(bool left, DType t, const std::string& a, const std::string& b) {
    if (t == DType::Bool) return paren(b + " ? false : " + a);
    std::string u = wrap_type(t);
    std::string big = paren(paren("(" + u + ")" + b) + " >= " + std::to_string(bits_of(t)) + "u");
    std::string s = "(" + std::string(reg_type(t)) + ")(((" + u + ")" + a + ") " +
                    (left ? "<<" : ">>") + " ((" + u + ")" + b + "))";
    return paren(big + " ? ((" + reg_type(t) + ")0) : " + s);
  }

  // Wrapping integer arithmetic (add i32 etc. in LLVM): computed in the unsigned type.
  std::string wrap_int(DType t, const std::string& a, const char* op, const std::string& b) {
    std::string u = wrap_type(t);
    if (t == DType::UInt8) return "((unsigned char)(" + a + " " + op + " " + b + "))";
    return "((" + std::string(reg_type(t)) + ")((" + u + ")" + a + " " + op + " (" + u + ")" + b +
           "))";
  }

  // float -> integer: truncation toward zero, saturating, NaN gives 0 (llvm.fpto[su]i.sat).
  std::string float_to_int(DType from, DType to, const std::string& x) {
    std::string T = reg_type(to);
    std::string sfx = from == DType::Float32 ? "f" : "";
    if (to == DType::UInt8) {
      return "((" + x + " != " + x + ") ? ((unsigned char)0) : ((" + x + " >= 255.0" + sfx +
             ") ? ((unsigned char)255) : ((" + x + " <= 0.0" + sfx +
             ") ? ((unsigned char)0) : ((unsigned char)" + x + "))))";
    }
    std::string lim = to == DType::Int32 ? "2147483648.0" : "9223372036854775808.0";
    Value mx = Value::of_int(to, to == DType::Int32 ? INT32_MAX : INT64_MAX);
    Value mn = Value::of_int(to, to == DType::Int32 ? INT32_MIN : INT64_MIN);
    return "((" + x + " != " + x + ") ? ((" + T + ")0) : ((" + x + " >= " + lim + sfx + ") ? " +
           const_text(to, mx) + " : ((" + x + " <= -" + lim + sfx + ") ? " + const_text(to, mn) +
           " : ((" + T + ")" + x + "))))";
  }

  // Returns an expression (operands are names, so repeating one is free).
  std::string cast(DType from, DType to, const std::string& x) {
    if (from == to) return x;
    if (to == DType::Bool) {
      if (fp(from)) return paren(x + " != " + zero(from));
      if (is_half(from)) return "((" + x + " & 0x7fffu) != 0u)";
      return paren(x + " != 0");
    }
    if (from == DType::BFloat16)
      return cast(DType::Float32, to, w_.let(DType::Float32, "rune_bf16_to_f32(" + x + ")"));
    if (from == DType::Float16)
      return cast(DType::Float32, to, w_.let(DType::Float32, "rune_f16_to_f32(" + x + ")"));
    if (is_half(to)) {
      std::string f =
          from == DType::Float32 ? x : w_.let(DType::Float32, cast(from, DType::Float32, x));
      return std::string(to == DType::BFloat16 ? "rune_f32_to_bf16(" : "rune_f32_to_f16(") + f +
             ")";
    }
    bool ff = fp(from), tf = fp(to);
    if (ff && !tf) return float_to_int(from, to, x);
    // float <-> float rounds to nearest even; int -> float rounds once; int <-> int truncates
    // or extends (zero for bool and uint8, sign otherwise): all as C conversions do.
    if (!ff && tf && from == DType::Bool)
      return paren(x + " ? 1.0" + std::string(to == DType::Float32 ? "f" : "") + " : 0.0" +
                   (to == DType::Float32 ? "f" : ""));
    return "((" + std::string(reg_type(to)) + ")" + x + ")";
  }

  std::string bitcast(DType from, DType to, const std::string& x) {
    if (from == to || (is_half(from) && is_half(to))) return x;
    if (from == DType::Float32 && to == DType::Int32) return "((int)rune_f32_u32(" + x + "))";
    if (from == DType::Int32 && to == DType::Float32) return "rune_u32_f32((unsigned)" + x + ")";
    if (from == DType::Float64 && to == DType::Int64) return "((long long)rune_f64_u64(" + x + "))";
    if (from == DType::Int64 && to == DType::Float64)
      return "rune_u64_f64((unsigned long long)" + x + ")";
    throw std::logic_error("render_c: bitcast from " + std::string(name(from)) + " to " +
                           std::string(name(to)));
  }

  std::string int_divmod(bool div, DType t, const std::string& a, const std::string& b) {
    if (t == DType::Bool) return div ? paren(a + " && " + b) : "false";
    if (t == DType::UInt8)
      return "((" + b + " == 0) ? ((unsigned char)0) : ((unsigned char)(" + a +
             (div ? " / " : " % ") + b + ")))";
    std::string f = std::string(div ? "rune_floordiv_" : "rune_floormod_") +
                    (t == DType::Int32 ? "i32" : "i64");
    return f + "(" + a + ", " + b + ")";
  }

  [[noreturn]] static void undecomposed(NodeRef n) {
    throw std::logic_error("render_c: op " + std::string(op_name(n->op)) + " on " +
                           std::string(name(n->src.empty() ? n->dtype : n->src[0]->dtype)) +
                           " must be decomposed first");
  }

  std::string emit_one(NodeRef n) {
    DType t = n->dtype;
    switch (n->op) {
      case Op::Const: {
        Value c = is_float(t) ? Value::of_float(t, arg_float(n)) : Value::of_int(t, arg_int(n));
        return w_.let(t, const_text(t, c));
      }
      case Op::Load:
        return load(n);
      case Op::Valid:
        return w_.let(DType::Bool, valid_of(arg_view(n)));
      case Op::Index:
        return w_.let(DType::Int64, offset_of(arg_view(n)));
      case Op::Acc: {
        int64_t k = std::holds_alternative<int64_t>(n->arg) ? arg_int(n) : 0;
        return env_.acc.at(k);
      }
      default:
        break;
    }
    DType st = n->src.empty() ? t : n->src[0]->dtype;
    auto a = [&](int i) { return val_.at(n->src[i]); };
    // 16-bit floats only load, store, select, bitcast and convert (decompose computes at f32).
    if (n->op != Op::Cast && n->op != Op::Bitcast && n->op != Op::Where &&
        (is_half(st) || is_half(t)))
      undecomposed(n);
    bool f = fp(st);
    bool bl = t == DType::Bool;
    const std::string T = reg_type(t);
    switch (n->op) {
      case Op::Neg:
        if (f) return w_.let(t, "(-" + a(0) + ")");
        if (bl) return a(0);  // sub i1 0, a == a
        return w_.let(t, wrap_int(t, "0", "-", a(0)));
      case Op::Abs:
        if (f) return w_.let(t, std::string("rune_abs_") + fsuffix(t) + "(" + a(0) + ")");
        if (bl || t == DType::UInt8) return a(0);
        return w_.let(t,
                      "((" + a(0) + " < 0) ? " + wrap_int(t, "0", "-", a(0)) + " : " + a(0) + ")");
      case Op::Sqrt:
        if (!f) undecomposed(n);
        return w_.let(
            t, std::string(t == DType::Float32 ? "RUNE_SQRT_F32(" : "RUNE_SQRT_F64(") + a(0) + ")");
      case Op::Floor:
      case Op::Ceil:
      case Op::Round: {
        if (!f) return a(0);
        const char* fn = n->op == Op::Floor ? "floor" : n->op == Op::Ceil ? "ceil" : "rint";
        return w_.let(t, std::string(fn) + (t == DType::Float32 ? "f(" : "(") + a(0) + ")");
      }
      case Op::Not:
        if (bl) return w_.let(t, "(!" + a(0) + ")");
        return w_.let(t, "((" + T + ")(~" + a(0) + "))");
      case Op::Cast:
        return w_.let(t, cast(st, t, a(0)));
      case Op::Bitcast:
        return w_.let(t, bitcast(st, t, a(0)));
      case Op::IsNan:
        return w_.let(t, f ? paren(a(0) + " != " + a(0)) : "false");
      // For bool, + is logical or (numpy); - and * are xor and and.
      case Op::Add:
        if (f) return w_.let(t, paren(a(0) + " + " + a(1)));
        if (bl) return w_.let(t, paren(a(0) + " || " + a(1)));
        return w_.let(t, wrap_int(t, a(0), "+", a(1)));
      case Op::Sub:
        if (f) return w_.let(t, paren(a(0) + " - " + a(1)));
        if (bl) return w_.let(t, paren(a(0) + " != " + a(1)));
        return w_.let(t, wrap_int(t, a(0), "-", a(1)));
      case Op::Mul:
        if (f) return w_.let(t, paren(a(0) + " * " + a(1)));
        if (bl) return w_.let(t, paren(a(0) + " && " + a(1)));
        return w_.let(t, wrap_int(t, a(0), "*", a(1)));
      case Op::Div:
        return w_.let(t, f ? paren(a(0) + " / " + a(1)) : int_divmod(true, t, a(0), a(1)));
      case Op::Mod:
        return w_.let(t, f ? std::string("rune_mod_") + fsuffix(t) + "(" + a(0) + ", " + a(1) + ")"
                           : int_divmod(false, t, a(0), a(1)));
      case Op::Max:
        return w_.let(t, minmax(true, t, a(0), a(1)));
      case Op::Min:
        return w_.let(t, minmax(false, t, a(0), a(1)));
      // Ordered float compares except !=, which is unordered (une): exactly C's operators.
      case Op::CmpLt:
        return w_.let(t, paren(a(0) + " < " + a(1)));
      case Op::CmpLe:
        return w_.let(t, paren(a(0) + " <= " + a(1)));
      case Op::CmpEq:
        return w_.let(t, paren(a(0) + " == " + a(1)));
      case Op::CmpNe:
        return w_.let(t, paren(a(0) + " != " + a(1)));
      case Op::And:
        return w_.let(
            t, bl ? paren(a(0) + " && " + a(1)) : "((" + T + ")(" + a(0) + " & " + a(1) + "))");
      case Op::Or:
        return w_.let(
            t, bl ? paren(a(0) + " || " + a(1)) : "((" + T + ")(" + a(0) + " | " + a(1) + "))");
      case Op::Xor:
        return w_.let(
            t, bl ? paren(a(0) + " != " + a(1)) : "((" + T + ")(" + a(0) + " ^ " + a(1) + "))");
      case Op::Shl:
        return w_.let(t, shift(true, t, a(0), a(1)));
      case Op::Shr:
        return w_.let(t, shift(false, t, a(0), a(1)));
      case Op::Where:
        return w_.let(t, "(" + a(0) + " ? " + a(1) + " : " + a(2) + ")");
      default:
        undecomposed(n);
    }
  }

  SourceWriter& w_;
  const Env& env_;
  std::unordered_map<NodeRef, std::string> val_;
};

// Emits `<prefix>d` index variables for flat index `var` over `dims` (C order), as
// render_llvm's decompose_index does with urem / udiv.
void decompose_index(SourceWriter& w, const std::string& var, const Shape& dims,
                     const std::string& prefix) {
  std::string rest = var;
  for (size_t d = dims.size(); d-- > 0;) {
    std::string id = prefix + std::to_string(d);
    if (d == 0) {
      w.line("const long long " + id + " = (long long)" + rest + ";");
      break;
    }
    std::string q = prefix + "q" + std::to_string(d);
    std::string dim = std::to_string(dims[d] == 0 ? 1 : dims[d]) + "ull";  // 0: never runs
    w.line("const long long " + id + " = (long long)(" + rest + " % " + dim + ");");
    w.line("const unsigned long long " + q + " = " + rest + " / " + dim + ";");
    rest = q;
  }
}

// The innermost reduced axis longer than 1 has stride 0 or +-1 in every load of rbody: the
// reduced elements are contiguous (or broadcast), so 8 neighbouring lanes read neighbouring
// addresses.
bool reduction_contiguous(const KernelSpec& k) {
  size_t nk = k.shape.size(), nr = k.rshape.size();
  size_t axis = nr;
  for (size_t a = nr; a-- > 0;)
    if (k.rshape[a] > 1) {
      axis = a;
      break;
    }
  if (axis == nr) return false;
  for (NodeRef n : toposort({k.rbody}))
    if (n->op == Op::Load) {
      const View& v = arg_load(n).view;
      if (v.strides.size() != nk + nr) return false;
      int64_t st = v.strides[nk + axis];
      if (st < -1 || st > 1) return false;
    }
  return true;
}

// An elementwise kernel whose loads are each either the output's own index (a C-contiguous view
// of the output's shape, unmasked, from an offset that is a multiple of 4) or one element
// (every stride 0): 4 consecutive outputs read 4 consecutive elements of each param, so a thread
// can move them as one vector (codegen/c_renderer.h, "vector loads").
bool vector_loads_for(const KernelSpec& k, const CDialect& d) {
  if (!d.vector_loads || k.rbody || k.contract || k.library || !k.body) return false;
  if (numel(k.shape) < 4) return false;
  const Shape& shape = k.shape;
  const View flat = View::contiguous(shape);
  for (NodeRef n : toposort({k.body})) {
    if (n->op == Op::Valid || n->op == Op::Index) return false;
    if (n->op != Op::Load) continue;
    const View& v = arg_load(n).view;
    if (!v.mask.empty() || v.strides.size() != shape.size()) return false;
    bool scalar = true, same = v.offset % 4 == 0;
    for (size_t a = 0; a < shape.size(); ++a) {
      if (v.strides[a] != 0) scalar = false;
      if (shape[a] > 1 && v.strides[a] != flat.strides[a]) same = false;
    }
    if (!scalar && !same) return false;
  }
  return true;
}
bool flat_load(NodeRef n) {
  for (int64_t st : arg_load(n).view.strides)
    if (st != 0) return true;
  return false;
}
// The vector type moving 4 elements of t (8-byte types: two 2-element vectors), and its
// element count.
std::string vec_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      return "uchar4";
    case DType::Float16:
    case DType::BFloat16:
      return "ushort4";
    case DType::Int32:
      return "int4";
    case DType::Float32:
      return "float4";
    case DType::Int64:
      return "longlong2";
    case DType::Float64:
      return "double2";
  }
  return "?";
}
int vec_width(DType t) { return ir::itemsize(t) == 8 ? 2 : 4; }
// Component c (0..3) of the 4 elements held in vector variables <v>0 (and <v>1 for 8-byte types).
std::string vec_component(DType t, const std::string& v, int c) {
  static const char* xyzw[] = {"x", "y", "z", "w"};
  int w = vec_width(t);
  return v + std::to_string(c / w) + "." + xyzw[c % w];
}

bool lane_threads_for(const KernelSpec& k, const CDialect& d) {
  return k.rbody && !k.contract && !k.library && !d.lane_shfl_u32.empty() &&
         numel(k.rshape) >= 2 * kReduceLanes && reduction_contiguous(k);
}

class KernelRenderer {
 public:
  KernelRenderer(const KernelSpec& k, std::string name, const CDialect& d)
      : k_(k), name_(std::move(name)), d_(d) {
    dtypes_.assign(k.slots.empty() ? 1 : k.slots.size(), DType::Float32);
    dtypes_[0] = k.out_dtype;
    collect(k.body);
    if (k.rbody) collect(k.rbody);
    nb_ = k.rbody ? blocks() : 1;
    two_phase_ = k.rbody && nb_ > 1;
    lanes_ = lane_threads_for(k, d);
    vec_ = vector_loads_for(k, d);
  }

  std::vector<DType> entry_dtypes() const {
    auto v = dtypes_;
    if (two_phase_) v.push_back(acc_type());
    return v;
  }

  // Only the kernel's own functions (no prelude), so several kernels can share one source.
  std::string render_functions() {
    std::ostringstream s;
    s << "// rune kernel " << name_ << "\n";
    if (k_.rbody) {
      s << render_combine();
      s << render_rbody();
      s << (lanes_ ? render_lane() : render_reduce());
    }
    s << render_body();
    if (vec_) s << render_body4();
    if (two_phase_) s << render_phase1();
    s << render_main();
    return s.str();
  }

 private:
  void collect(NodeRef root) {
    for (NodeRef n : toposort({root}))
      if (n->op == Op::Load) {
        size_t p = static_cast<size_t>(arg_load(n).param);
        if (p >= dtypes_.size()) dtypes_.resize(p + 1, DType::Float32);
        dtypes_[p] = n->dtype;
      }
  }
  // As KernelSpec::reduce_size / blocks (defined with the scheduler, which this library does not
  // link: it depends on rune_ir only).
  int64_t reduce_size() const { return numel(k_.rshape); }
  int64_t blocks() const {
    int64_t r = reduce_size();
    return r <= kReduceBlock ? 1 : (r + kReduceBlock - 1) / kReduceBlock;
  }
  DType acc_type() const { return k_.rbody->dtype; }
  std::string fn(const std::string& suffix) const { return name_ + "_" + suffix; }

  // "P0* __restrict__ p0, const P1* __restrict__ p1, ..."
  std::string ptr_params() const {
    std::string s;
    for (size_t p = 0; p < dtypes_.size(); ++p)
      s += std::string(p ? ", " : "") + (p ? "const " : "") + mem_type(dtypes_[p]) + "* " +
           d_.restrict_kw + " p" + std::to_string(p);
    return s;
  }
  std::string ptr_args() const {
    std::string s;
    for (size_t p = 0; p < dtypes_.size(); ++p) s += (p ? ", p" : "p") + std::to_string(p);
    return s;
  }
  static std::string idx_params(size_t n) {
    std::string s;
    for (size_t d = 0; d < n; ++d) s += ", long long i" + std::to_string(d);
    return s;
  }
  static std::string idx_args(size_t n) {
    std::string s;
    for (size_t d = 0; d < n; ++d) s += ", i" + std::to_string(d);
    return s;
  }
  Env base_env(size_t dims) const {
    Env env;
    for (size_t p = 0; p < dtypes_.size(); ++p) env.ptrs.push_back("p" + std::to_string(p));
    for (size_t d = 0; d < dims; ++d) env.idx.push_back("i" + std::to_string(d));
    return env;
  }

  // combine(a, b): the reduction's binary op, at float32 for 16-bit accumulators (as decompose).
  std::string render_combine() {
    DType t = acc_type();
    Op op = k_.reduce_op == Op::ReduceSum    ? Op::Add
            : k_.reduce_op == Op::ReduceProd ? Op::Mul
            : k_.reduce_op == Op::ReduceMax  ? Op::Max
                                             : Op::Min;
    if (t == DType::Bool && op == Op::Add) op = Op::Or;
    NodeRef A = make(Op::Acc, t, {}, {}, int64_t{0});
    NodeRef B = make(Op::Acc, t, {}, {}, int64_t{1});
    NodeRef c = is_half(t) ? b::cast(make(op, DType::Float32, {},
                                          {b::cast(A, DType::Float32), b::cast(B, DType::Float32)}),
                                     t)
                           : make(op, t, {}, {A, B});
    SourceWriter w;
    Env env;
    env.acc[0] = "a";
    env.acc[1] = "b";
    auto r = Emitter(w, env).emit(c);
    std::string ty = reg_type(t);
    return d_.device_fn + " " + ty + " " + fn("combine") + "(" + ty + " a, " + ty + " b) {\n" +
           w.out.str() + "  return " + r + ";\n}\n";
  }

  // rbody(ptrs, i..., r): the reduced expression at output index i and flat reduce index r.
  std::string render_rbody() {
    SourceWriter w;
    size_t k = k_.shape.size(), m = k_.rshape.size();
    Env env = base_env(k);
    if (m > 0) {
      w.line("const unsigned long long rf = (unsigned long long)r;");
      decompose_index(w, "rf", k_.rshape, "r");
    }
    for (size_t d = 0; d < m; ++d) env.idx.push_back("r" + std::to_string(d));
    auto r = Emitter(w, env).emit(k_.rbody);
    std::string ty = reg_type(acc_type());
    return d_.device_fn + " " + ty + " " + fn("rbody") + "(" + ptr_params() + idx_params(k) +
           ", long long r) {\n" + w.out.str() + "  return " + r + ";\n}\n";
  }

  // reduce(ptrs, i..., rlo, rhi): one block in the documented order. Lane l takes the elements
  // rlo + l, rlo + l + 8, ... in increasing order (the last group is partial: its element
  // rlo + 8j + l exists only while < rhi, exactly the host's tail loop); then the fixed tree.
  std::string render_reduce() {
    DType t = acc_type();
    std::string ty = reg_type(t);
    size_t k = k_.shape.size();
    std::string id = const_text(t, reduce_identity(k_.reduce_op, t));
    std::string comb = fn("combine"), rb = fn("rbody");
    std::string args = ptr_args() + idx_args(k);
    SourceWriter w;
    for (int l = 0; l < kReduceLanes; ++l) w.line(ty + " a" + std::to_string(l) + " = " + id + ";");
    w.open("for (long long j = rlo; j < rhi; j += " + std::to_string(kReduceLanes) + "LL)");
    for (int l = 0; l < kReduceLanes; ++l) {
      std::string al = "a" + std::to_string(l);
      std::string upd = al + " = " + comb + "(" + al + ", " + rb + "(" + args + ", j + " +
                        std::to_string(l) + "LL));";
      if (l == 0)
        w.line(upd);
      else
        w.line("if (j + " + std::to_string(l) + "LL < rhi) " + upd);
    }
    w.close();
    static_assert(kReduceLanes == 8, "the tree below is written for 8 lanes");
    w.line("const " + ty + " q0 = " + comb + "(a0, a4);");
    w.line("const " + ty + " q1 = " + comb + "(a1, a5);");
    w.line("const " + ty + " q2 = " + comb + "(a2, a6);");
    w.line("const " + ty + " q3 = " + comb + "(a3, a7);");
    w.line("const " + ty + " s0 = " + comb + "(q0, q2);");
    w.line("const " + ty + " s1 = " + comb + "(q1, q3);");
    w.line("return " + comb + "(s0, s1);");
    return d_.device_fn + " " + ty + " " + fn("reduce") + "(" + ptr_params() + idx_params(k) +
           ", long long rlo, long long rhi) {\n" + w.out.str() + "}\n";
  }

  // lane(ptrs, i..., rlo, rhi, l): lane l of one block, the elements rlo + l, rlo + l + 8, ...
  // below rhi in increasing order (render_reduce's a<l>, computed by one thread).
  std::string render_lane() {
    DType t = acc_type();
    std::string ty = reg_type(t);
    size_t k = k_.shape.size();
    SourceWriter w;
    w.line(ty + " a = " + const_text(t, reduce_identity(k_.reduce_op, t)) + ";");
    if (!d_.unroll.empty()) w.line(d_.unroll);
    w.open("for (long long j = rlo + l; j < rhi; j += " + std::to_string(kReduceLanes) + "LL)");
    w.line("a = " + fn("combine") + "(a, " + fn("rbody") + "(" + ptr_args() + idx_args(k) +
           ", j));");
    w.close();
    w.line("return a;");
    return d_.device_fn + " " + ty + " " + fn("lane") + "(" + ptr_params() + idx_params(k) +
           ", long long rlo, long long rhi, long long l) {\n" + w.out.str() + "}\n";
  }
  // `v` of lane l + k of this thread's group of 8, as the accumulator type.
  std::string lane_shuffle(const std::string& v, int k) const {
    DType t = acc_type();
    std::string ks = std::to_string(k);
    const std::string &s32 = d_.lane_shfl_u32, &s64 = d_.lane_shfl_u64;
    switch (t) {
      case DType::Float32:
        return "rune_u32_f32(" + s32 + "(rune_f32_u32(" + v + "), " + ks + "))";
      case DType::Float64:
        return "rune_u64_f64(" + s64 + "(rune_f64_u64(" + v + "), " + ks + "))";
      case DType::Int64:
        return "(long long)" + s64 + "((unsigned long long)" + v + ", " + ks + ")";
      case DType::Bool:
        return "(" + s32 + "((unsigned)" + v + ", " + ks + ") != 0u)";
      default:
        return "(" + std::string(reg_type(t)) + ")" + s32 + "((unsigned)" + v + ", " + ks + ")";
    }
  }
  // Lane l of the work item's group (l = w & 7) reduces its lane of the block [rlo, rhi), then
  // the fixed tree of docs/numerics.md as exchanges: after the step with offset 4, lane l < 4
  // holds q_l = p_l (+) p_{l+4}; after 2, lane l < 2 holds s_l = q_l (+) q_{l+2}; after 1, lane 0
  // holds s_0 (+) s_1. Lanes >= 4, 2, 1 compute values nobody reads.
  void lane_reduce(SourceWriter& w, const std::string& out, const std::string& rlo,
                   const std::string& rhi) {
    static_assert(kReduceLanes == 8, "the tree below is written for 8 lanes");
    std::string ty = reg_type(acc_type());
    w.line(ty + " " + out + " = " + fn("lane") + "(" + ptr_args() + idx_args(k_.shape.size()) +
           ", " + rlo + ", " + rhi + ", (long long)l);");
    for (int k : {4, 2, 1})
      w.line(out + " = " + fn("combine") + "(" + out + ", " + lane_shuffle(out, k) + ");");
  }

  // body(ptrs, i..., [acc]): the output value at index i.
  std::string render_body() {
    SourceWriter w;
    size_t k = k_.shape.size();
    Env env = base_env(k);
    std::string accp;
    if (k_.rbody) {
      env.acc[0] = "acc";
      accp = std::string(", ") + reg_type(acc_type()) + " acc";
    }
    auto r = Emitter(w, env).emit(k_.body);
    std::string ty = reg_type(k_.out_dtype);
    return d_.device_fn + " " + ty + " " + fn("body") + "(" + ptr_params() + idx_params(k) + accp +
           ") {\n" + w.out.str() + "  return " + r + ";\n}\n";
  }

  // body4(ptrs, base): outputs base .. base + 3 (base a multiple of 4, every pointer 16-byte
  // aligned): each param read through the output's index is read as one vector, the body is
  // evaluated 4 times on its components, and the 4 outputs are stored as one vector.
  std::string render_body4() {
    SourceWriter w;
    std::vector<Env> envs(4, base_env(0));
    std::map<std::pair<int, int64_t>, std::string> vars;  // (param, offset) -> vector name
    for (NodeRef n : toposort({k_.body})) {
      if (n->op != Op::Load || !flat_load(n)) continue;
      const auto& la = arg_load(n);
      auto key = std::make_pair(la.param, la.view.offset);
      auto it = vars.find(key);
      if (it == vars.end()) {
        std::string v = "v" + std::to_string(vars.size()) + "_";
        it = vars.emplace(key, v).first;
        std::string vt = vec_type(n->dtype);
        std::string src = "((const " + vt + "*)(p" + std::to_string(la.param) + " + " +
                          std::to_string(la.view.offset) + "LL + (long long)base))";
        for (int h = 0; h < 4 / vec_width(n->dtype); ++h)
          w.line("const " + vt + " " + v + std::to_string(h) + " = " + src + "[" +
                 std::to_string(h) + "];");
      }
      for (int c = 0; c < 4; ++c) envs[c].loaded[n] = vec_component(n->dtype, it->second, c);
    }
    DType ot = k_.out_dtype;
    std::string ovt = vec_type(ot);
    for (int h = 0; h < 4 / vec_width(ot); ++h) w.line(ovt + " o" + std::to_string(h) + ";");
    for (int c = 0; c < 4; ++c) {
      auto r = Emitter(w, envs[c]).emit(k_.body);
      w.line(vec_component(ot, "o", c) + " = " + to_mem(ot, r) + ";");
    }
    for (int h = 0; h < 4 / vec_width(ot); ++h)
      w.line("((" + ovt + "*)(p0 + (long long)base))[" + std::to_string(h) + "] = o" +
             std::to_string(h) + ";");
    return d_.device_fn + " void " + fn("body4") + "(" + ptr_params() +
           ", unsigned long long base) {\n" + w.out.str() + "}\n";
  }

  std::string entry_params() const {
    std::string s = ptr_params();
    if (two_phase_) s += std::string(", ") + mem_type(acc_type()) + "* " + d_.restrict_kw + " ps";
    return s + ", long long n";
  }
  // for (w = this thread's first item; w < n; w += all threads)
  void open_grid_loop(SourceWriter& w) {
    w.open("for (unsigned long long w = " + d_.thread_id +
           "; w < (unsigned long long)n; w += " + d_.thread_stride + ")");
  }
  static std::string to_mem(DType t, const std::string& v) {
    return t == DType::Bool ? "(unsigned char)(" + v + " ? 1 : 0)" : v;
  }
  static std::string from_mem(DType t, const std::string& v) {
    return t == DType::Bool ? paren(v + " != 0") : v;
  }

  // name_p1: one thread per (output, block) partial.
  std::string render_phase1() {
    SourceWriter w;
    DType t = acc_type();
    size_t k = k_.shape.size();
    std::string nb = std::to_string(nb_) + "ull";
    open_grid_loop(w);
    // pw: the (output, block) pair of this work item.
    if (lanes_) {
      w.line("const unsigned long long pw = w >> 3;");
      w.line("const unsigned l = (unsigned)(w & 7ull);");
    } else {
      w.line("const unsigned long long pw = w;");
    }
    w.line("const unsigned long long o = pw / " + nb + ";");
    w.line("const long long blk = (long long)(pw % " + nb + ");");
    decompose_index(w, "o", k_.shape, "i");
    w.line("const long long rlo = blk * " + std::to_string(kReduceBlock) + "LL;");
    w.line("const long long rend = rlo + " + std::to_string(kReduceBlock) + "LL;");
    w.line("const long long rhi = (rend > " + std::to_string(reduce_size()) + "LL) ? " +
           std::to_string(reduce_size()) + "LL : rend;");
    if (lanes_) {
      lane_reduce(w, "part", "rlo", "rhi");
      w.line("if (l == 0u) ps[pw] = " + to_mem(t, "part") + ";");
    } else {
      w.line("const " + std::string(reg_type(t)) + " part = " + fn("reduce") + "(" + ptr_args() +
             idx_args(k) + ", rlo, rhi);");
      w.line("ps[pw] = " + to_mem(t, "part") + ";");
    }
    w.close();
    return d_.kernel_qualifier + " void " + fn("p1") + "(" + entry_params() + ") {\n" +
           w.out.str() + "}\n";
  }

  std::string render_main() {
    SourceWriter w;
    size_t k = k_.shape.size();
    if (vec_) {
      // Vectors of 4 outputs when every pointer is 16-byte aligned (a uniform branch), then the
      // last n % 4 outputs one by one; otherwise the scalar loop below.
      std::string ored;
      for (size_t p = 0; p < dtypes_.size(); ++p)
        ored += std::string(p ? " | " : "") + "(unsigned long long)p" + std::to_string(p);
      w.open("if (((" + ored + ") & 15ull) == 0ull)");
      w.line("const unsigned long long n4 = (unsigned long long)n >> 2;");
      w.line("for (unsigned long long w = " + d_.thread_id + "; w < n4; w += " + d_.thread_stride +
             ") " + fn("body4") + "(" + ptr_args() + ", w << 2);");
      w.open("for (unsigned long long w = (n4 << 2) + " + d_.thread_id +
             "; w < (unsigned long long)n; w += " + d_.thread_stride + ")");
      decompose_index(w, "w", k_.shape, "i");
      w.line("const " + std::string(reg_type(k_.out_dtype)) + " val = " + fn("body") + "(" +
             ptr_args() + idx_args(k) + ");");
      w.line("p0[w] = " + to_mem(k_.out_dtype, "val") + ";");
      w.close();
      w.line("return;");
      w.close();
    }
    open_grid_loop(w);
    // o: the output of this work item.
    const bool lanes = lanes_ && !two_phase_;
    if (lanes) {
      w.line("const unsigned long long o = w >> 3;");
      w.line("const unsigned l = (unsigned)(w & 7ull);");
    } else {
      w.line("const unsigned long long o = w;");
    }
    decompose_index(w, "o", k_.shape, "i");
    std::string accarg;
    if (k_.rbody) {
      DType t = acc_type();
      std::string ty = reg_type(t);
      if (lanes) {
        lane_reduce(w, "acc", "0LL", std::to_string(reduce_size()) + "LL");
        w.line("if (l != 0u) continue;");
      } else if (!two_phase_) {
        w.line("const " + ty + " acc = " + fn("reduce") + "(" + ptr_args() + idx_args(k) +
               ", 0LL, " + std::to_string(reduce_size()) + "LL);");
      } else {
        // Block partials combine left to right.
        std::string nb = std::to_string(nb_) + "ull";
        w.line("const unsigned long long sb = o * " + nb + ";");
        w.line(ty + " cacc = " + from_mem(t, "ps[sb]") + ";");
        if (!d_.unroll.empty()) w.line(d_.unroll);
        w.line("for (unsigned long long b = 1; b < " + nb + "; ++b) cacc = " + fn("combine") +
               "(cacc, " + from_mem(t, "ps[sb + b]") + ");");
        w.line("const " + ty + " acc = cacc;");
      }
      accarg = ", acc";
    }
    DType ot = k_.out_dtype;
    w.line("const " + std::string(reg_type(ot)) + " val = " + fn("body") + "(" + ptr_args() +
           idx_args(k) + accarg + ");");
    w.line("p0[o] = " + to_mem(ot, "val") + ";");
    w.close();
    return d_.kernel_qualifier + " void " + name_ + "(" + entry_params() + ") {\n" + w.out.str() +
           "}\n";
  }

  const KernelSpec& k_;
  std::string name_;
  const CDialect& d_;
  std::vector<DType> dtypes_;
  int64_t nb_ = 1;
  bool two_phase_ = false;
  bool lanes_ = false;  // the lanes of a block run as 8 threads (c_lane_threads)
  bool vec_ = false;    // vector loads and stores of 4 outputs (c_vector_loads)
};

// A contraction kernel (ir::Op::Dot): one thread per output, the fma chain over k in
// increasing order from +0 (the order of codegen/cpu/gemm.cpp, so the bits match the host).
std::string render_contraction(const KernelSpec& k, const std::string& name, const CDialect& d) {
  const View& a = k.contract->a;
  const View& b = k.contract->b;
  const bool f64 = k.out_dtype == DType::Float64;
  const std::string t = f64 ? "double" : "float";
  const std::string fma = f64 ? d.fma_f64 : d.fma_f32;
  size_t nd = a.shape.size();
  auto ll = [](int64_t v) { return "(long long)" + std::to_string(v); };
  std::ostringstream s;
  // A fused epilogue (the schedule's fuse_epilogues): body computes each output from the
  // product (its Acc leaf, of the output's dtype) and other loads at the output's shape.
  const bool epilogue = k.body && k.body->op != Op::Acc;
  std::vector<std::string> ptype(k.slots.size(), t);
  if (epilogue)
    for (NodeRef n : toposort({k.body}))
      if (n->op == Op::Load) {
        size_t p = static_cast<size_t>(arg_load(n).param);
        if (p >= ptype.size()) ptype.resize(p + 1, t);
        ptype[p] = mem_type(n->dtype);
      }
  std::string params;
  for (size_t p = 1; p < ptype.size(); ++p)
    params += ", const " + ptype[p] + "* " + d.restrict_kw + " p" + std::to_string(p);
  const std::string pa = "p" + std::to_string(k.contract->a_param);
  const std::string pb = "p" + std::to_string(k.contract->b_param);
  s << "// rune kernel " << name << ": contraction\n";
  if (epilogue) {
    SourceWriter w;
    Env env;
    for (size_t p = 0; p < ptype.size(); ++p) env.ptrs.push_back("p" + std::to_string(p));
    for (size_t dd = 0; dd < k.shape.size(); ++dd) env.idx.push_back("e" + std::to_string(dd));
    env.acc[0] = "acc";
    auto r = Emitter(w, env).emit(k.body);
    std::string idx;
    for (size_t dd = 0; dd < k.shape.size(); ++dd) idx += ", long long e" + std::to_string(dd);
    s << d.device_fn << " " << t << " " << name << "_epilogue(" << t << "* " << d.restrict_kw
      << " p0" << params << idx << ", " << t << " acc) {\n"
      << w.out.str() << "  return " << r << ";\n}\n";
  }
  s << d.kernel_qualifier << " void " << name << "(" << t << "* " << d.restrict_kw << " p0"
    << params << ", long long n) {\n";
  s << "  for (unsigned long long w = " << d.thread_id
    << "; w < (unsigned long long)n; w += " << d.thread_stride << ") {\n";
  s << "    long long r = (long long)w;\n";
  s << "    long long j = r % " << ll(b.shape[nd - 1]) << "; r /= " << ll(b.shape[nd - 1]) << ";\n";
  s << "    long long i = r % " << ll(a.shape[nd - 2]) << "; r /= " << ll(a.shape[nd - 2]) << ";\n";
  s << "    long long ao = " << ll(a.offset) << " + i * " << ll(a.strides[nd - 2])
    << ", bo = " << ll(b.offset) << " + j * " << ll(b.strides[nd - 1]) << ";\n";
  for (size_t dd = nd - 2; dd-- > 0;) {
    s << "    { long long q = r % " << ll(a.shape[dd]) << "; r /= " << ll(a.shape[dd])
      << "; ao += q * " << ll(a.strides[dd]) << "; bo += q * " << ll(b.strides[dd]) << "; }\n";
  }
  s << "    " << t << " acc = 0;\n";
  s << "    for (long long p = 0; p < " << ll(a.shape[nd - 1]) << "; ++p)\n";
  s << "      acc = " << fma << "(" << pa << "[ao + p * " << ll(a.strides[nd - 1]) << "], " << pb
    << "[bo + p * " << ll(b.strides[nd - 2]) << "], acc);\n";
  if (!epilogue) {
    s << "    p0[w] = acc;\n  }\n}\n";
    return s.str();
  }
  // The output's index over its own shape (the product's batch dims, then i, j).
  SourceWriter w;
  decompose_index(w, "w", k.shape, "e");
  s << w.out.str();
  std::string args = "p0";
  for (size_t p = 1; p < ptype.size(); ++p) args += ", p" + std::to_string(p);
  for (size_t dd = 0; dd < k.shape.size(); ++dd) args += ", e" + std::to_string(dd);
  s << "    p0[w] = " << name << "_epilogue(" << args << ", acc);\n  }\n}\n";
  return s.str();
}

// The sort order of a library kernel's dtype as an integer key compared with `<` (the order of
// codegen/cpu/sort_scan.cpp): floats map sign-magnitude bits to a monotone unsigned key with
// both zeros on one key and every NaN above +inf. Returns the key type; `s` gets the helper.
std::string render_sort_key(std::ostringstream& s, DType t, const std::string& name,
                            const CDialect& d) {
  std::string kt, body;
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
      kt = "unsigned", body = "return (unsigned)v;";
      break;
    case DType::Int32:
    case DType::Int64:
      kt = reg_type(t), body = "return v;";
      break;
    case DType::Float16:
    case DType::BFloat16: {
      std::string inf = t == DType::Float16 ? "0x7c00u" : "0x7f80u";
      kt = "unsigned";
      body = "const unsigned u = (unsigned)v, mag = u & 0x7fffu; return (mag > " + inf +
             ") ? 0x10000u : ((mag == 0u) ? 0x8000u : (((u & 0x8000u) != 0u) ? (0x8000u - mag) "
             ": (0x8000u + mag)));";
      break;
    }
    case DType::Float32:
      kt = "unsigned";
      body =
          "const unsigned u = rune_f32_u32(v), mag = u & 0x7fffffffu; return (mag > 0x7f800000u) "
          "? 0xffffffffu : ((mag == 0u) ? 0x80000000u : (((u >> 31) != 0u) ? (0x80000000u - mag) "
          ": (0x80000000u + mag)));";
      break;
    case DType::Float64:
      kt = "unsigned long long";
      body =
          "const unsigned long long u = rune_f64_u64(v), mag = u & 0x7fffffffffffffffull; return "
          "(mag > 0x7ff0000000000000ull) ? 0xffffffffffffffffull : ((mag == 0ull) ? "
          "0x8000000000000000ull : (((u >> 63) != 0ull) ? (0x8000000000000000ull - mag) : "
          "(0x8000000000000000ull + mag)));";
      break;
  }
  s << d.device_fn << " " << kt << " " << name << "_key(" << mem_type(t) << " v) { " << body
    << " }\n";
  return kt;
}

// A library kernel (KernelSpec::library) over rows of L contiguous elements of p1 (from the
// operand's offset); n = numel(shape), the launch's element count.
//   Sort / Argsort: a stable rank sort, one thread per element: its rank is the number of
//     elements before it with key <= its key plus those after it with key < its key (O(L) per
//     element: the fallback where CUB's radix sorts are not available, docs/sort.md). A stable
//     sort's result is unique, so the bits match the host's sort.
//   Cumsum: one thread per row, the chain acc = x[0]; acc = acc + x[i] in increasing i, the
//     order of codegen/cpu/sort_scan.cpp, so the bits match the host.
std::string render_library(const KernelSpec& k, const std::string& name, const CDialect& d) {
  const LibraryCall& lib = *k.library;
  const int64_t len = k.shape.empty() ? 1 : k.shape.back();
  const std::string L = "(long long)" + std::to_string(len);
  const std::string off = "(long long)" + std::to_string(lib.offset);
  const std::string it = mem_type(lib.in_dtype), ot = mem_type(k.out_dtype);
  std::ostringstream s;
  s << "// rune kernel " << name << ": " << op_name(lib.op) << " along rows of " << len << "\n";
  if (lib.op == Op::Cumsum) {
    const bool wrap = lib.in_dtype == DType::Int64;
    s << d.kernel_qualifier << " void " << name << "(" << ot << "* " << d.restrict_kw
      << " p0, const " << it << "* " << d.restrict_kw << " p1, long long n) {\n";
    s << "  const long long rows = n / " << L << ";\n";
    s << "  for (unsigned long long w = " << d.thread_id
      << "; w < (unsigned long long)rows; w += " << d.thread_stride << ") {\n";
    s << "    const " << it << "* x = p1 + " << off << " + (long long)w * " << L << ";\n";
    s << "    " << ot << "* y = p0 + (long long)w * " << L << ";\n";
    s << "    " << ot << " acc = x[0];\n    y[0] = acc;\n";
    s << "    for (long long i = 1; i < " << L << "; ++i) {\n";
    if (wrap)
      s << "      acc = (long long)((unsigned long long)acc + (unsigned long long)x[i]);\n";
    else
      s << "      acc = acc + x[i];\n";
    s << "      y[i] = acc;\n    }\n  }\n}\n";
    return s.str();
  }
  const std::string kt = render_sort_key(s, lib.in_dtype, name, d);
  s << d.kernel_qualifier << " void " << name << "(" << ot << "* " << d.restrict_kw << " p0, const "
    << it << "* " << d.restrict_kw << " p1, long long n) {\n";
  s << "  for (unsigned long long w = " << d.thread_id
    << "; w < (unsigned long long)n; w += " << d.thread_stride << ") {\n";
  s << "    const long long r = (long long)w / " << L << ", i = (long long)w % " << L << ";\n";
  s << "    const " << it << "* row = p1 + " << off << " + r * " << L << ";\n";
  s << "    const " << kt << " ki = " << name << "_key(row[i]);\n";
  s << "    long long rank = 0;\n";
  s << "    for (long long j = 0; j < " << L << "; ++j) {\n";
  s << "      const " << kt << " kj = " << name << "_key(row[j]);\n";
  s << "      rank += (j < i) ? ((kj <= ki) ? 1 : 0) : ((kj < ki) ? 1 : 0);\n    }\n";
  s << "    p0[r * " << L << " + rank] = " << (lib.op == Op::Argsort ? "i" : "row[i]") << ";\n";
  s << "  }\n}\n";
  return s.str();
}

}  // namespace

const CDialect& cuda_dialect() {
  static const CDialect d = [] {
    CDialect c;
    c.name = "cuda";
    // No includes: NVRTC provides the device builtins used here.
    c.kernel_qualifier = "extern \"C\" __global__";
    c.device_fn = "static __device__ __forceinline__";
    c.restrict_kw = "__restrict__";
    c.thread_id =
        "((unsigned long long)blockIdx.x * (unsigned long long)blockDim.x + (unsigned long "
        "long)threadIdx.x)";
    c.thread_stride = "((unsigned long long)gridDim.x * (unsigned long long)blockDim.x)";
    c.sqrt_f32 = "__fsqrt_rn";
    c.sqrt_f64 = "__dsqrt_rn";
    c.f32_as_u32 = "__float_as_uint";
    c.u32_as_f32 = "__uint_as_float";
    c.f64_as_u64 = "__double_as_longlong";
    c.u64_as_f64 = "__longlong_as_double";
    c.fma_f32 = "__fmaf_rn";
    c.fma_f64 = "__fma_rn";
    // The 8 lanes of a group sit in one warp (blocks are whole warps, groups 8-aligned); the
    // mask names exactly the group, whose threads are active together.
    c.prelude =
        "static __device__ __forceinline__ unsigned rune_shfl_u32(unsigned v, int k) {\n"
        "  return __shfl_down_sync(0xffu << (threadIdx.x & 24u), v, k, 8);\n}\n"
        "static __device__ __forceinline__ unsigned long long rune_shfl_u64(unsigned long long "
        "v, int k) {\n"
        "  return __shfl_down_sync(0xffu << (threadIdx.x & 24u), v, k, 8);\n}\n";
    c.lane_shfl_u32 = "rune_shfl_u32";
    c.lane_shfl_u64 = "rune_shfl_u64";
    // 32 loads in flight per lane thread: a 256M-element sum has only 8 threads per 65,536
    // elements (the documented order), about 256 per SM on an H200, and needs ~20 KiB of loads
    // in flight per SM to reach the memory's bandwidth.
    c.unroll = "#pragma unroll 32";
    c.vector_loads = true;
    return c;
  }();
  return d;
}

bool c_lane_threads(const KernelSpec& k, const CDialect& d) { return lane_threads_for(k, d); }
bool c_vector_loads(const KernelSpec& k, const CDialect& d) { return vector_loads_for(k, d); }

std::vector<DType> c_param_dtypes(const KernelSpec& k) {
  if (k.contract) {
    std::vector<DType> v(k.slots.size(), k.out_dtype);
    if (k.body)
      for (NodeRef n : toposort({k.body}))
        if (n->op == Op::Load) v.at(static_cast<size_t>(arg_load(n).param)) = n->dtype;
    return v;
  }
  if (k.library) return {k.out_dtype, k.library->in_dtype};
  return KernelRenderer(k, "k", cuda_dialect()).entry_dtypes();
}

std::string render_c_prelude(const CDialect& d) {
  std::ostringstream s;
  s << "// rune kernels (" << d.name << ")\n";
  s << d.prelude;
  s << "#define RUNE_FN " << d.device_fn << "\n";
  s << "#define RUNE_SQRT_F32(x) " << d.sqrt_f32 << "(x)\n";
  s << "#define RUNE_SQRT_F64(x) " << d.sqrt_f64 << "(x)\n";
  s << "#define RUNE_F32_AS_U32(x) " << d.f32_as_u32 << "(x)\n";
  s << "#define RUNE_U32_AS_F32(x) " << d.u32_as_f32 << "(x)\n";
  s << "#define RUNE_F64_AS_U64(x) " << d.f64_as_u64 << "(x)\n";
  s << "#define RUNE_U64_AS_F64(x) " << d.u64_as_f64 << "(x)\n";
  s << kHelpers << "\n";
  return s.str();
}

std::string render_c_kernel(const KernelSpec& k, const std::string& name, const CDialect& d) {
  if (k.contract) return render_contraction(k, name, d);
  if (k.library) return render_library(k, name, d);
  if (!k.body) throw std::logic_error("render_c: kernel " + name + " has no body");
  return KernelRenderer(k, name, d).render_functions();
}

std::string render_c(const KernelSpec& k, const std::string& name, const CDialect& d) {
  return render_c_prelude(d) + render_c_kernel(k, name, d);
}

}  // namespace codegen
