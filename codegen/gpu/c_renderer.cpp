// Prints a lowered kernel (codegen/lowered.h) as CUDA C / HIP C: every statement in order, every
// core op (codegen/core_ops.h) by its one spelling, the dialect's words for threads, bit casts,
// sqrt, fma and lane exchange. Nothing here decides how a kernel iterates.
#include "codegen/gpu/c_renderer.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "codegen/lower.h"
#include "ir/scalar.h"

namespace codegen {

using namespace ir;
using lir::Loop;
using lir::Stmt;

namespace {

// The 16-bit conversions (bit for bit ir::f16_bits_to_f32 / f32_to_f16_bits and the bfloat16
// rounding of ir/dtype.cpp) and the bit casts, over the dialect's RUNE_* words.
constexpr const char* kHelpers = R"(
RUNE_FN float rune_u32_f32(unsigned x) { return RUNE_U32_AS_F32(x); }
RUNE_FN unsigned rune_f32_u32(float x) { return RUNE_F32_AS_U32(x); }
RUNE_FN double rune_u64_f64(unsigned long long x) { return RUNE_U64_AS_F64((long long)x); }
RUNE_FN unsigned long long rune_f64_u64(double x) { return (unsigned long long)RUNE_F64_AS_U64(x); }
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
RUNE_FN float rune_bf16_to_f32(unsigned short h) { return rune_u32_f32(((unsigned)h) << 16); }
RUNE_FN unsigned short rune_f32_to_bf16(float f) {
  const unsigned x = rune_f32_u32(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return (unsigned short)((x >> 16) | 0x40u);
  return (unsigned short)((x + (0x7fffu + ((x >> 16) & 1u))) >> 16);
}
)";

const char* reg_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "bool";
    case DType::UInt8:
      return "unsigned char";
    case DType::Int8:
      return "signed char";
    case DType::Int16:
      return "short";
    case DType::UInt16:
      return "unsigned short";
    case DType::Int32:
      return "int";
    case DType::UInt32:
      return "unsigned";
    case DType::Int64:
      return "long long";
    case DType::UInt64:
      return "unsigned long long";
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
const char* mem_type(DType t) { return t == DType::Bool ? "unsigned char" : reg_type(t); }
// The unsigned type integer arithmetic wraps in (C signed overflow is undefined; narrower types
// promote to int, whose overflow is undefined too, so they compute in unsigned).
const char* wrap_type(DType t) { return itemsize(t) == 8 ? "unsigned long long" : "unsigned"; }
bool fp(DType t) { return t == DType::Float32 || t == DType::Float64; }
std::string paren(const std::string& s) { return "(" + s + ")"; }

std::string const_text(NodeRef n) {
  DType t = n->dtype;
  char buf[64];
  switch (t) {
    case DType::Float32:
    case DType::Float64: {
      double v = arg_float(n);
      if (!std::isfinite(v)) {
        if (t == DType::Float32)
          std::snprintf(buf, sizeof buf, "rune_u32_f32(0x%08xu)",
                        std::bit_cast<uint32_t>(static_cast<float>(v)));
        else
          std::snprintf(buf, sizeof buf, "rune_u64_f64(0x%016llxull)",
                        static_cast<unsigned long long>(std::bit_cast<uint64_t>(v)));
        return buf;
      }
      std::snprintf(buf, sizeof buf, t == DType::Float32 ? "%af" : "%a", v);
      return std::signbit(v) ? paren(buf) : buf;
    }
    case DType::Float16:
    case DType::BFloat16:
      std::snprintf(buf, sizeof buf, "((unsigned short)0x%04xu)",
                    static_cast<unsigned>(Value::of_float(t, arg_float(n)).bits()));
      return buf;
    case DType::Bool:
      return arg_int(n) ? "true" : "false";
    case DType::UInt8:
      return "((unsigned char)" + std::to_string(arg_int(n) & 0xff) + ")";
    case DType::Int8:
    case DType::Int16:
    case DType::UInt16:
    case DType::UInt32:
    case DType::UInt64: {
      // The value in its dtype (uint64: unsigned), cast so the expression has the dtype's type
      // (-128 is an int expression in C, in range, then converted).
      const Value v = Value::of_int(t, arg_int(n));
      if (t == DType::UInt64) return std::to_string(static_cast<unsigned long long>(v.i)) + "ull";
      if (t == DType::UInt32) return std::to_string(v.i) + "u";
      return "((" + std::string(reg_type(t)) + ")" + paren(std::to_string(v.i)) + ")";
    }
    case DType::Int32:
      if (arg_int(n) == INT32_MIN) return "(-2147483647 - 1)";
      return arg_int(n) < 0 ? paren(std::to_string(arg_int(n))) : std::to_string(arg_int(n));
    case DType::Int64:
      if (arg_int(n) == INT64_MIN) return "(-9223372036854775807LL - 1LL)";
      return paren(std::to_string(arg_int(n)) + "LL");
  }
  return "?";
}

// Vectors of 4 elements (8-byte types: two of 2), CUDA's types with members x, y, z, w. The
// integer dtypes of issue 18 use the type of their width that every dialect already declares
// (int8 in uchar4, uint32 in int4, ...): a member converts to and from the dtype modulo 2^bits.
std::string vec_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8:
    case DType::Int8:
      return "uchar4";
    case DType::Int16:
    case DType::UInt16:
    case DType::Float16:
    case DType::BFloat16:
      return "ushort4";
    case DType::Int32:
    case DType::UInt32:
      return "int4";
    case DType::Float32:
      return "float4";
    case DType::Int64:
    case DType::UInt64:
      return "longlong2";
    case DType::Float64:
      return "double2";
  }
  return "?";
}
int vec_width(DType t) { return itemsize(t) == 8 ? 2 : 4; }
std::string vec_part(DType t, const std::string& v, int64_t c) {
  static const char* xyzw[] = {"x", "y", "z", "w"};
  return v + std::to_string(c / vec_width(t)) + "." + xyzw[c % vec_width(t)];
}

class Printer {
 public:
  Printer(const lir::Kernel& k, const std::string& name, const CDialect& d)
      : k_(k), name_(name), d_(d) {}

  std::string functions() {
    std::ostringstream s;
    for (const auto& e : k_.entries) s << entry(e);
    return s.str();
  }

 private:
  void line(const std::string& s) { out_ << std::string(indent_ * 2, ' ') << s << "\n"; }
  void open(const std::string& s) {
    line(s + " {");
    ++indent_;
  }
  void close() {
    --indent_;
    line("}");
  }
  std::string let(DType t, const std::string& rhs) {
    std::string n = "t" + std::to_string(next_++);
    line("const " + std::string(reg_type(t)) + " " + n + " = " + rhs + ";");
    return n;
  }
  std::string var_name(lir::VarId v) const { return k_.vars[v].name + "_"; }

  std::string entry(const lir::Entry& e) {
    out_.str("");
    indent_ = 1;
    printed_.reset();
    std::string params;
    for (size_t p = 0; p < k_.params.size(); ++p)
      params += std::string(p ? ", " : "") + (k_.params[p].written ? "" : "const ") +
                mem_type(k_.params[p].dtype) + "* " + d_.restrict_kw + " p" + std::to_string(p);
    block_ = e.block;
    block(e.head);
    if (!e.aligned_body.empty()) {
      std::string ored;
      for (size_t p = 0; p < k_.params.size(); ++p)
        ored += std::string(p ? " | " : "") + "(unsigned long long)p" + std::to_string(p);
      open("if (((" + ored + ") & 15ull) == 0ull)");
      scoped(e.aligned_body);
      line("return;");
      close();
    }
    block(e.body);
    std::string bounds =
        e.block && d_.launch_bounds ? " __launch_bounds__(" + std::to_string(e.block) + ", 1)" : "";
    std::string marker = e.block && !d_.block_size_symbol.empty()
                             ? "extern \"C\" const int " + d_.block_size_symbol + name_ + e.suffix +
                                   " = " + std::to_string(e.block) + ";\n"
                             : "";
    return d_.kernel_qualifier + bounds + " void " + name_ + e.suffix + "(" + params +
           ", long long n) {\n" + out_.str() + "}\n" + marker;
  }

  // ---- statements ----
  void block(const lir::Block& b) {
    for (const Stmt& s : b) {
      statement(s);
      printed_.end_statement();
    }
  }
  void scoped(const lir::Block& b) {
    printed_.open();
    block(b);
    printed_.close();
  }

  void statement(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::For:
        return loop(s);
      case Stmt::Kind::If:
        open("if (" + value(s.a) + ")");
        scoped(s.body);
        return close();
      case Stmt::Kind::Let:
        vars_[s.var] = value(s.a);
        return;
      case Stmt::Kind::Reg: {
        std::string init = value(s.a), r = var_name(s.var);
        line(std::string(reg_type(s.dtype)) + " " + r + "[" + std::to_string(s.count) + "];");
        if (s.count == 1) return line(r + "[0] = " + init + ";");
        return line("for (int i_ = 0; i_ < " + std::to_string(s.count) + "; ++i_) " + r +
                    "[i_] = " + init + ";");
      }
      case Stmt::Kind::Set: {
        std::string v = value(s.a);
        return line(var_name(s.var) + "[" + value(s.b) + "] = " + v + ";");
      }
      case Stmt::Kind::Store: {
        DType t = k_.params[s.param].dtype;
        std::string v = value(s.a);
        if (t == DType::Bool) v = "(unsigned char)(" + v + " ? 1 : 0)";
        return line("p" + std::to_string(s.param) + "[" + value(s.b) + "] = " + v + ";");
      }
      case Stmt::Kind::VLoad: {
        std::string vt = vec_type(s.dtype), v = var_name(s.var);
        vectors_[s.var] = s.dtype;
        printed_.immutable(s.var);
        std::string src =
            "((const " + vt + "*)(p" + std::to_string(s.param) + " + " + value(s.b) + "))";
        for (int h = 0; h < 4 / vec_width(s.dtype); ++h)
          line("const " + vt + " " + v + std::to_string(h) + " = " + src + "[" + std::to_string(h) +
               "];");
        return;
      }
      case Stmt::Kind::VStore: {
        std::string vt = vec_type(s.dtype), o = "o" + std::to_string(next_++) + "_";
        std::vector<std::string> vals;
        for (NodeRef v : s.values) vals.push_back(value(v));
        for (int h = 0; h < 4 / vec_width(s.dtype); ++h)
          line(vt + " " + o + std::to_string(h) + ";");
        for (int c = 0; c < 4; ++c)
          line(vec_part(s.dtype, o, c) + " = " +
               (s.dtype == DType::Bool ? "(unsigned char)(" + vals[c] + " ? 1 : 0)" : vals[c]) +
               ";");
        std::string base = value(s.b);
        for (int h = 0; h < 4 / vec_width(s.dtype); ++h)
          line("((" + vt + "*)(p" + std::to_string(s.param) + " + " + base + "))[" +
               std::to_string(h) + "] = " + o + std::to_string(h) + ";");
        return;
      }
      case Stmt::Kind::Shared:
        if (!block_ || d_.block_sync.empty())
          throw std::logic_error("print_c: a shared array outside a fixed-block entry");
        return line(d_.shared_kw + " " + reg_type(s.dtype) + " " + var_name(s.var) + "[" +
                    std::to_string(s.count) + "];");
      case Stmt::Kind::Barrier:
        if (!block_ || d_.block_sync.empty())
          throw std::logic_error("print_c: a barrier outside a fixed-block entry");
        return line(d_.block_sync + ";");
      case Stmt::Kind::Mma:
        return mma(s);
      case Stmt::Kind::AsyncCopy: {
        if (!block_ || d_.async_copy.empty())
          throw std::logic_error("print_c: dialect " + d_.name +
                                 " has no asynchronous copy here (a fixed-block entry on sm_80+)");
        const std::string bytes = std::to_string(s.count * static_cast<int64_t>(itemsize(s.dtype)));
        std::string ok = value(s.values.at(0)), dst = value(s.a), src = value(s.b);
        return line(d_.async_copy + "<" + bytes + ">(&" + var_name(s.var) + "[" + dst + "], p" +
                    std::to_string(s.param) + " + " + src + ", " + ok + ");");
      }
      case Stmt::Kind::AsyncWait:
        if (!block_ || d_.async_wait.empty())
          throw std::logic_error("print_c: dialect " + d_.name + " has no asynchronous copy");
        return line(d_.async_wait + "();");
      case Stmt::Kind::Prefetch:
        return;  // a host hint (lowered.h); the C dialects have none
    }
  }

  // A tensor-core step: the fragment values as 32-bit registers (tf32: a float32's bits; bf16:
  // two values per register, the first in the low half), then the dialect's helper.
  void mma(const Stmt& s) {
    const bool bf16 = s.dtype == DType::BFloat16;
    const std::string& fn = bf16 ? d_.mma_bf16 : d_.mma_tf32;
    if (!block_ || fn.empty())
      throw std::logic_error("print_c: dialect " + d_.name +
                             " has no tensor-core step here (a fixed-block entry on sm_80+)");
    if (s.values.size() != (bf16 ? 12u : 6u) || s.count != (bf16 ? 16 : 8))
      throw std::logic_error("print_c: a malformed mma step");
    std::vector<std::string> v;
    for (NodeRef x : s.values) v.push_back(value(x));
    std::vector<std::string> regs;
    if (bf16)
      for (size_t i = 0; i < v.size(); i += 2)
        regs.push_back("((unsigned)" + v[i] + " | ((unsigned)" + v[i + 1] + " << 16))");
    else
      for (const auto& x : v) regs.push_back("rune_f32_u32(" + x + ")");
    const std::string r = var_name(s.var);
    const int64_t o = arg_int(s.b);
    std::string args;
    for (int64_t c = 0; c < 4; ++c) args += r + "[" + std::to_string(o + c) + "], ";
    for (size_t i = 0; i < regs.size(); ++i) args += (i ? ", " : "") + regs[i];
    line(fn + "(" + args + ");");
  }

  void loop(const Stmt& s) {
    if (s.loop == Loop::Unrolled) {
      for (int64_t v = arg_int(s.a); v < arg_int(s.b); v += s.step) {
        vars_[s.var] = std::to_string(v) + "LL";
        scoped(s.body);
      }
      return;
    }
    std::string v = var_name(s.var), lo = value(s.a), hi = value(s.b);
    vars_[s.var] = v;
    if (s.unroll > 0) line("#pragma unroll " + std::to_string(s.unroll));
    const std::string B = std::to_string(block_) + "ull";
    if ((s.loop == Loop::Blocks || s.loop == Loop::Threads) && !block_)
      throw std::logic_error("print_c: a block loop outside a fixed-block entry");
    if (s.loop == Loop::Blocks)
      open("for (long long " + v + " = " + lo + " + (long long)(" + d_.thread_id + " / " + B +
           "); " + v + " < " + hi + "; " + v + " += (long long)(" + d_.thread_stride + " / " + B +
           "))");
    else if (s.loop == Loop::Threads)
      open("for (long long " + v + " = " + lo + " + (long long)(" + d_.thread_id + " % " + B +
           "); " + v + " < " + hi + "; " + v + " += " + std::to_string(block_) + "LL)");
    else if (s.loop == Loop::Grid)
      open("for (long long " + v + " = (long long)" + d_.thread_id + " + " + lo + "; " + v + " < " +
           hi + "; " + v + " += (long long)" + d_.thread_stride + ")");
    else
      open("for (long long " + v + " = " + lo + "; " + v + " < " + hi + "; " + v +
           " += " + std::to_string(s.step) + "LL)");
    scoped(s.body);
    close();
  }

  // ---- expressions ----
  std::string value(NodeRef n) {
    if (const std::string* v = printed_.find(n)) return *v;
    std::vector<std::string> a;
    for (NodeRef s : n->src) a.push_back(value(s));
    std::string v = print(n, a);
    printed_.add(n, v);
    return v;
  }

  std::string print(NodeRef n, const std::vector<std::string>& a) {
    DType t = n->dtype, st = n->src.empty() ? t : n->src[0]->dtype;
    const std::string T = reg_type(t);
    const bool f = fp(st), bl = st == DType::Bool;
    auto wrap = [&](const char* o) {
      if (t == DType::UInt8) return "((unsigned char)(" + a[0] + " " + o + " " + a[1] + "))";
      std::string u = wrap_type(t);
      return "((" + T + ")((" + u + ")" + a[0] + " " + o + " (" + u + ")" + a[1] + "))";
    };
    auto infix = [&](const char* o) { return paren(a[0] + " " + o + " " + a[1]); };
    auto call = [&](const std::string& fn) { return fn + "(" + a[0] + ")"; };
    const char* f32 = t == DType::Float32 ? "f" : "";
    switch (n->op) {
      case Op::Const:
        return const_text(n);
      case Op::Var:
        return vars_.at(static_cast<lir::VarId>(arg_int(n)));
      case Op::LoadAt: {
        std::string x = "p" + std::to_string(arg_int(n)) + "[" + a[0] + "]";
        return let(t, t == DType::Bool ? paren(x + " != 0") : x);
      }
      case Op::RegAt: {
        auto v = static_cast<lir::VarId>(arg_int(n));
        if (auto it = vectors_.find(v); it != vectors_.end()) {
          std::string x = vec_part(it->second, var_name(v), arg_int(n->src[0]));
          return let(t, t == DType::Bool ? paren(x + " != 0") : x);
        }
        return let(t, var_name(v) + "[" + a[0] + "]");
      }
      case Op::Shuffle:
        return let(t, shuffle(t, a[0], arg_int(n), d_.lane_shfl_u32, d_.lane_shfl_u64));
      case Op::ShuffleIdx:
        return let(t, shuffle(t, a[0], arg_int(n), d_.lane_idx_u32, d_.lane_idx_u64));
      case Op::Neg:
        return let(t, "(-" + a[0] + ")");
      case Op::Add:
        return let(t, f ? infix("+") : wrap("+"));
      case Op::Sub:
        return let(t, f ? infix("-") : wrap("-"));
      case Op::Mul:
        return let(t, f ? infix("*") : wrap("*"));
      case Op::DivT:
        return let(t, t == DType::UInt8 ? "((unsigned char)" + infix("/") + ")" : infix("/"));
      case Op::RemT:
        if (f)
          return let(
              t, std::string(t == DType::Float32 ? "fmodf(" : "fmod(") + a[0] + ", " + a[1] + ")");
        return let(t, t == DType::UInt8 ? "((unsigned char)" + infix("%") + ")" : infix("%"));
      case Op::UDiv:
      case Op::URem:
        return let(t, "(long long)((unsigned long long)" + a[0] +
                          (n->op == Op::UDiv ? " / " : " % ") + "(unsigned long long)" + a[1] +
                          ")");
      case Op::Sqrt:
        return let(t, call(t == DType::Float32 ? "RUNE_SQRT_F32" : "RUNE_SQRT_F64"));
      case Op::Floor:
        return let(t, call(std::string("floor") + f32));
      case Op::Ceil:
        return let(t, call(std::string("ceil") + f32));
      case Op::Round:
        return let(t, call(std::string("rint") + f32));
      case Op::Fma:
        return let(t, (t == DType::Float32 ? d_.fma_f32 : d_.fma_f64) + "(" + a[0] + ", " + a[1] +
                          ", " + a[2] + ")");
      case Op::CmpLt:
        return let(t, infix("<"));
      case Op::CmpLe:
        return let(t, infix("<="));
      case Op::CmpEq:
        return let(t, infix("=="));
      case Op::CmpNe:
        return let(t, infix("!="));
      case Op::And:
        return let(t, bl ? infix("&&") : "((" + T + ")" + infix("&") + ")");
      case Op::Or:
        return let(t, bl ? infix("||") : "((" + T + ")" + infix("|") + ")");
      case Op::Xor:
        return let(t, bl ? infix("!=") : "((" + T + ")" + infix("^") + ")");
      case Op::Shl:
      case Op::Shr: {
        std::string u = wrap_type(t);
        // int8 / int16 zero-extend first: Shr is logical on the dtype's own bits.
        std::string x = t == DType::Int8    ? "(unsigned char)" + a[0]
                        : t == DType::Int16 ? "(unsigned short)" + a[0]
                                            : a[0];
        return let(t, "((" + T + ")(((" + u + ")" + x + ") " + (n->op == Op::Shl ? "<<" : ">>") +
                          " ((" + u + ")" + a[1] + ")))");
      }
      case Op::Where:
        return let(t, "(" + a[0] + " ? " + a[1] + " : " + a[2] + ")");
      case Op::Bitcast:
        return let(t, bitcast(st, t, a[0]));
      case Op::Cast:
        if (st == DType::Float16) return let(t, "rune_f16_to_f32(" + a[0] + ")");
        if (st == DType::BFloat16) return let(t, "rune_bf16_to_f32(" + a[0] + ")");
        if (t == DType::Float16) return let(t, "rune_f32_to_f16(" + a[0] + ")");
        if (t == DType::BFloat16) return let(t, "rune_f32_to_bf16(" + a[0] + ")");
        return let(t, "((" + T + ")" + a[0] + ")");
      default:
        throw std::logic_error("render_c: " + std::string(op_name(n->op)) + " on " +
                               std::string(name(st)) + " is not a core op");
    }
  }

  static std::string bitcast(DType from, DType to, const std::string& x) {
    if (from == DType::Float32 && to == DType::Int32) return "((int)rune_f32_u32(" + x + "))";
    if (from == DType::Int32 && to == DType::Float32) return "rune_u32_f32((unsigned)" + x + ")";
    if (from == DType::Float64 && to == DType::Int64) return "((long long)rune_f64_u64(" + x + "))";
    if (from == DType::Int64 && to == DType::Float64)
      return "rune_u64_f64((unsigned long long)" + x + ")";
    if (is_half(from) && is_half(to)) return x;
    // Integers and 16-bit floats (kept as their bits): a conversion between the same-width C
    // integer types keeps the bits (modulo 2^bits); floats go through their unsigned pattern.
    const bool fi = !fp(from), ti = !fp(to);
    if (itemsize(from) == itemsize(to) && from != DType::Bool && to != DType::Bool) {
      const std::string T = reg_type(to);
      if (fi && ti) return "((" + T + ")" + x + ")";
      if (from == DType::Float32) return "((" + T + ")rune_f32_u32(" + x + "))";
      if (from == DType::Float64) return "((" + T + ")rune_f64_u64(" + x + "))";
      if (to == DType::Float32) return "rune_u32_f32((unsigned)" + x + ")";
      if (to == DType::Float64) return "rune_u64_f64((unsigned long long)" + x + ")";
    }
    throw std::logic_error("render_c: bitcast from " + std::string(name(from)) + " to " +
                           std::string(name(to)));
  }

  // v of another lane of this thread's group of 8 through the exchange s32 / s64 (lane l + k
  // for Shuffle, lane k for ShuffleIdx).
  std::string shuffle(DType t, const std::string& v, int64_t k, const std::string& s32,
                      const std::string& s64) const {
    std::string ks = std::to_string(k);
    if (s32.empty() || s64.empty())
      throw std::logic_error("render_c: dialect " + d_.name + " has no lane exchange");
    switch (t) {
      case DType::Float32:
        return "rune_u32_f32(" + s32 + "(rune_f32_u32(" + v + "), " + ks + "))";
      case DType::Float64:
        return "rune_u64_f64(" + s64 + "(rune_f64_u64(" + v + "), " + ks + "))";
      case DType::Int64:
      case DType::UInt64:
        return "(" + std::string(reg_type(t)) + ")" + s64 + "((unsigned long long)" + v + ", " +
               ks + ")";
      case DType::Bool:
        return "(" + s32 + "((unsigned)" + v + ", " + ks + ") != 0u)";
      default:
        return "(" + std::string(reg_type(t)) + ")" + s32 + "((unsigned)" + v + ", " + ks + ")";
    }
  }

  const lir::Kernel& k_;
  std::string name_;
  const CDialect& d_;
  std::ostringstream out_;
  int indent_ = 1, next_ = 0;
  int64_t block_ = 0;  // the entry's fixed block size (0: none)
  std::unordered_map<lir::VarId, std::string> vars_;
  std::unordered_map<lir::VarId, DType> vectors_;
  lir::PrintedValues printed_;
};

}  // namespace

Plan c_plan(const KernelSpec& k, const DeviceDesc& device) { return optimise(k, device); }
bool c_lane_threads(const KernelSpec& k, const DeviceDesc& device) {
  return !k.contract && !k.library && k.rbody && c_plan(k, device).lane_threads;
}
bool c_vector_loads(const KernelSpec& k, const DeviceDesc& device) {
  return !k.contract && !k.library && !k.rbody && !k.row() && k.body && c_plan(k, device).vector4;
}

std::vector<DType> c_param_dtypes(const KernelSpec& k) {
  std::vector<DType> v;
  for (const auto& p : kernel_params(k)) v.push_back(p.dtype);
  // A two-phase reduction's partials (gpu_backend.cpp binds their scratch slot last).
  if (k.rbody && k.blocks() > 1) v.push_back(k.rbody->dtype);
  return v;
}

std::string render_c_prelude(const CDialect& d) {
  std::ostringstream s;
  s << "// rune kernels (" << d.name << ")\n" << d.prelude;
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

std::string print_c(const lir::Kernel& k, const std::string& name, const CDialect& d) {
  return Printer(k, name, d).functions();
}

CKernel render_c_kernel_for_launch(const KernelSpec& k, const std::string& name, const CDialect& d,
                                   const DeviceDesc& device) {
  Plan plan = c_plan(k, device);
  lir::Kernel lowered = lower(k, plan);
  debug_print_lowered(k, plan, lowered, d.name);
  CKernel r;
  r.text = "// rune kernel " + name + " (plan: " + plan.str() + ")\n" + print_c(lowered, name, d);
  for (const auto& e : lowered.entries)
    r.launches.push_back({e.suffix, e.items, e.threads, e.block});
  return r;
}

std::string render_c_kernel(const KernelSpec& k, const std::string& name, const CDialect& d,
                            const DeviceDesc& device) {
  return render_c_kernel_for_launch(k, name, d, device).text;
}

std::string render_c(const KernelSpec& k, const std::string& name, const CDialect& d,
                     const DeviceDesc& device) {
  return render_c_prelude(d) + render_c_kernel(k, name, d, device);
}

}  // namespace codegen
