#include "codegen/cpu/render_llvm.h"

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "codegen/cpu/llvm_compat.h"
#include "codegen/decompose.h"
#include "ir/scalar.h"

namespace codegen::cpu {

using namespace ir;

namespace {

// Type of a value in registers. Bool is i1; bfloat16 travels as its bit pattern.
std::string reg_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "i1";
    case DType::UInt8:
      return "i8";
    case DType::Int32:
      return "i32";
    case DType::Int64:
      return "i64";
    case DType::Float16:
      return "half";
    case DType::BFloat16:
      return "i16";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
  }
  return "?";
}
// Type of a value in memory (bool is a byte).
std::string mem_type(DType t) { return t == DType::Bool ? "i8" : reg_type(t); }
std::string P(DType t) { return dialect::ptr(mem_type(t)); }
bool fp(DType t) { return t == DType::Float16 || t == DType::Float32 || t == DType::Float64; }
int bits_of(DType t) { return t == DType::Bool ? 1 : static_cast<int>(itemsize(t) * 8); }

std::string hex64(uint64_t v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "0x%016llX", static_cast<unsigned long long>(v));
  return buf;
}

std::string const_text(DType t, const Value& v) {
  switch (t) {
    case DType::Float64:
    case DType::Float32:
      return hex64(std::bit_cast<uint64_t>(v.f));  // exact in double
    case DType::Float16: {
      char buf[16];
      std::snprintf(buf, sizeof buf, "0xH%04X",
                    static_cast<unsigned>(f32_to_f16_bits(static_cast<float>(v.f))));
      return buf;
    }
    case DType::BFloat16:
      return std::to_string(static_cast<int16_t>(f32_to_bf16_bits(static_cast<float>(v.f))));
    case DType::Bool:
      return v.i ? "true" : "false";
    default:
      return std::to_string(v.i);
  }
}

// Writes the instructions of one function body. Values are SSA names; every node is emitted
// once (the DAG is rendered with sharing intact).
class Writer {
 public:
  std::ostringstream out;
  std::string tmp() { return "%t" + std::to_string(next_++); }
  std::string label() { return "L" + std::to_string(next_++); }
  std::string op(const std::string& rhs) {
    auto t = tmp();
    out << "  " << t << " = " << rhs << "\n";
    return t;
  }
  void line(const std::string& s) { out << "  " << s << "\n"; }
  void block(const std::string& l) { out << l << ":\n"; }

 private:
  int next_ = 0;
};

struct Env {
  std::vector<std::string> ptrs;  // typed base pointer per kernel param
  std::vector<DType> param_dtypes;
  std::vector<std::string> idx;                  // index value per iteration dim (shape ++ rshape)
  std::unordered_map<int64_t, std::string> acc;  // Acc leaves by arg (default 0)
};

class Emitter {
 public:
  Emitter(Writer& w, const Env& env) : w_(w), env_(env) {}

  std::string emit(NodeRef root) {
    for (NodeRef n : toposort({root})) val_[n] = emit_one(n);
    return val_.at(root);
  }

 private:
  std::string v(NodeRef n) { return val_.at(n); }

  std::string offset_of(const View& view) {
    std::string off = std::to_string(view.offset);
    for (size_t d = 0; d < view.shape.size(); ++d) {
      if (view.strides[d] == 0) continue;
      std::string term =
          view.strides[d] == 1
              ? env_.idx.at(d)
              : w_.op("mul i64 " + env_.idx.at(d) + ", " + std::to_string(view.strides[d]));
      off = w_.op("add i64 " + off + ", " + term);
    }
    return off;
  }
  std::string valid_of(const View& view) {
    std::string ok = "true";
    for (size_t d = 0; d < view.mask.size(); ++d) {
      auto [lo, hi] = view.mask[d];
      if (lo <= 0 && hi >= view.shape[d]) continue;
      auto ge = w_.op("icmp sge i64 " + env_.idx.at(d) + ", " + std::to_string(lo));
      auto lt = w_.op("icmp slt i64 " + env_.idx.at(d) + ", " + std::to_string(hi));
      auto both = w_.op("and i1 " + ge + ", " + lt);
      ok = ok == "true" ? both : w_.op("and i1 " + ok + ", " + both);
    }
    return ok;
  }
  std::string zero(DType t) {
    return const_text(t, is_float(t) ? Value::of_float(t, 0) : Value::of_int(t, 0));
  }

  std::string load(NodeRef n) {
    const auto& la = arg_load(n);
    DType t = n->dtype;
    std::string valid = valid_of(la.view);
    std::string off = offset_of(la.view);
    if (valid != "true") off = w_.op("select i1 " + valid + ", i64 " + off + ", i64 0");
    auto p = w_.op("getelementptr inbounds " + mem_type(t) + ", " + P(t) + " " +
                   env_.ptrs.at(la.param) + ", i64 " + off);
    std::string x = w_.op("load " + mem_type(t) + ", " + P(t) + " " + p);
    if (t == DType::Bool) x = w_.op("icmp ne i8 " + x + ", 0");
    if (valid != "true")
      x = w_.op("select i1 " + valid + ", " + reg_type(t) + " " + x + ", " + reg_type(t) + " " +
                zero(t));
    return x;
  }

  std::string call1(const std::string& fn, DType t, const std::string& a) {
    std::string ty = reg_type(t);
    return w_.op("call " + ty + " @llvm." + fn + "." + intrinsic_suffix(t) + "(" + ty + " " + a +
                 ")");
  }
  static std::string intrinsic_suffix(DType t) {
    return t == DType::Float64 ? "f64" : t == DType::Float32 ? "f32" : "f16";
  }

  std::string signbit(DType t, const std::string& x) {
    std::string it = "i" + std::to_string(bits_of(t));
    auto b = w_.op("bitcast " + reg_type(t) + " " + x + " to " + it);
    return w_.op("icmp slt " + it + " " + b + ", 0");
  }
  std::string sel(const std::string& c, DType t, const std::string& a, const std::string& b) {
    return w_.op("select i1 " + c + ", " + reg_type(t) + " " + a + ", " + reg_type(t) + " " + b);
  }

  std::string minmax(bool is_max, DType t, const std::string& a, const std::string& b) {
    std::string ty = reg_type(t);
    if (!fp(t)) {
      std::string pred = t == DType::Bool || t == DType::UInt8 ? (is_max ? "ugt" : "ult")
                                                               : (is_max ? "sgt" : "slt");
      auto c = w_.op("icmp " + pred + " " + ty + " " + a + ", " + b);
      return sel(c, t, a, b);
    }
    // NaN propagates; equal values (only -0 vs +0 can differ) order -0 below +0.
    auto an = w_.op("fcmp uno " + ty + " " + a + ", " + a);
    auto bn = w_.op("fcmp uno " + ty + " " + b + ", " + b);
    auto gt = w_.op("fcmp ogt " + ty + " " + a + ", " + b);
    auto lt = w_.op("fcmp olt " + ty + " " + a + ", " + b);
    auto sa = signbit(t, a);
    std::string tie = is_max ? sel(sa, t, b, a) : sel(sa, t, a, b);
    std::string r = is_max ? sel(gt, t, a, sel(lt, t, b, tie)) : sel(lt, t, a, sel(gt, t, b, tie));
    r = sel(bn, t, b, r);
    return sel(an, t, a, r);
  }

  std::string int_divmod(bool div, DType t, const std::string& a, const std::string& b) {
    std::string ty = reg_type(t);
    if (t == DType::UInt8 || t == DType::Bool) {
      auto bz = w_.op("icmp eq " + ty + " " + b + ", 0");
      auto bs = sel(bz, t, "1", b);
      auto q = w_.op(std::string(div ? "udiv " : "urem ") + ty + " " + a + ", " + bs);
      return sel(bz, t, "0", q);
    }
    // Floor division / modulo (numpy): guard x/0 (gives 0) and MIN/-1 (wraps).
    auto bz = w_.op("icmp eq " + ty + " " + b + ", 0");
    auto bm = w_.op("icmp eq " + ty + " " + b + ", -1");
    auto bad = w_.op("or i1 " + bz + ", " + bm);
    auto bs = sel(bad, t, "1", b);
    auto q = w_.op("sdiv " + ty + " " + a + ", " + bs);
    auto r = w_.op("srem " + ty + " " + a + ", " + bs);
    auto rnz = w_.op("icmp ne " + ty + " " + r + ", 0");
    auto rneg = w_.op("icmp slt " + ty + " " + r + ", 0");
    auto bneg = w_.op("icmp slt " + ty + " " + bs + ", 0");
    auto diff = w_.op("xor i1 " + rneg + ", " + bneg);
    auto adj = w_.op("and i1 " + rnz + ", " + diff);
    if (div) {
      auto q1 = w_.op("sub " + ty + " " + q + ", 1");
      auto qa = sel(adj, t, q1, q);
      auto neg = w_.op("sub " + ty + " 0, " + a);
      return sel(bz, t, "0", sel(bm, t, neg, qa));
    }
    auto r1 = w_.op("add " + ty + " " + r + ", " + bs);
    auto ra = sel(adj, t, r1, r);
    return sel(bad, t, "0", ra);
  }

  std::string float_mod(DType t, const std::string& a, const std::string& b) {
    std::string ty = reg_type(t);
    auto r = w_.op("frem " + ty + " " + a + ", " + b);
    auto rnz = w_.op("fcmp one " + ty + " " + r + ", " + zero(t));
    auto sr = signbit(t, r), sb = signbit(t, b);
    auto diff = w_.op("xor i1 " + sr + ", " + sb);
    auto adj = w_.op("and i1 " + rnz + ", " + diff);
    auto r1 = w_.op("fadd " + ty + " " + r + ", " + b);
    auto ra = sel(adj, t, r1, r);
    auto isz = w_.op("fcmp oeq " + ty + " " + ra + ", " + zero(t));
    auto z = w_.op("call " + ty + " @llvm.copysign." + intrinsic_suffix(t) + "(" + ty + " " +
                   zero(t) + ", " + ty + " " + b + ")");
    return sel(isz, t, z, ra);
  }

  std::string shift(bool left, DType t, const std::string& a, const std::string& b) {
    std::string ty = reg_type(t);
    auto big = w_.op("icmp uge " + ty + " " + b + ", " + std::to_string(bits_of(t)));
    auto bs = sel(big, t, "0", b);
    auto s = w_.op(std::string(left ? "shl " : "lshr ") + ty + " " + a + ", " + bs);
    return sel(big, t, "0", s);
  }

  std::string cast(DType from, DType to, const std::string& x) {
    if (from == to) return x;
    std::string ft = reg_type(from), tt = reg_type(to);
    if (to == DType::Bool) {
      if (fp(from)) return w_.op("fcmp une " + ft + " " + x + ", " + zero(from));
      if (from == DType::BFloat16) {
        auto m = w_.op("and i16 " + x + ", 32767");
        return w_.op("icmp ne i16 " + m + ", 0");
      }
      return w_.op("icmp ne " + ft + " " + x + ", 0");
    }
    if (from == DType::BFloat16) {  // only to float32 after decompose
      auto w = w_.op("zext i16 " + x + " to i32");
      auto s = w_.op("shl i32 " + w + ", 16");
      auto f = w_.op("bitcast i32 " + s + " to float");
      return cast(DType::Float32, to, f);
    }
    if (to == DType::BFloat16) {  // from float32: round to nearest even, quiet NaNs
      std::string f = from == DType::Float32 ? x : cast(from, DType::Float32, x);
      auto bits = w_.op("bitcast float " + f + " to i32");
      auto hi = w_.op("lshr i32 " + bits + ", 16");
      auto lsb = w_.op("and i32 " + hi + ", 1");
      auto bias = w_.op("add i32 " + lsb + ", 32767");
      auto r = w_.op("add i32 " + bits + ", " + bias);
      auto rh = w_.op("lshr i32 " + r + ", 16");
      auto q = w_.op("or i32 " + hi + ", 64");
      auto isn = w_.op("fcmp uno float " + f + ", " + f);
      auto res = w_.op("select i1 " + isn + ", i32 " + q + ", i32 " + rh);
      return w_.op("trunc i32 " + res + " to i16");
    }
    bool ff = fp(from), tf = fp(to);
    if (ff && tf)
      return w_.op(std::string(bits_of(to) > bits_of(from) ? "fpext " : "fptrunc ") + ft + " " + x +
                   " to " + tt);
    if (!ff && tf) {
      bool uns = from == DType::UInt8 || from == DType::Bool;
      return w_.op(std::string(uns ? "uitofp " : "sitofp ") + ft + " " + x + " to " + tt);
    }
    if (ff && !tf) {
      // Saturating, NaN -> 0 (ir::cast). Written as a conversion of an in-range value plus
      // selects rather than llvm.fpto*i.sat, which LLVM 14 does not vectorise.
      bool uns = to == DType::UInt8;
      int bits = bits_of(to);
      double lo = uns ? 0.0 : -std::ldexp(1.0, bits - 1),
             hi = uns ? 256.0 : std::ldexp(1.0, bits - 1);
      std::string los = hex64(std::bit_cast<uint64_t>(lo)),
                  his = hex64(std::bit_cast<uint64_t>(hi));
      auto below = w_.op("fcmp olt " + ft + " " + x + ", " + los);
      auto above = w_.op("fcmp oge " + ft + " " + x + ", " + his);
      auto nan = w_.op("fcmp uno " + ft + " " + x + ", " + x);
      auto out = w_.op("or i1 " + below + ", " + above);
      auto bad = w_.op("or i1 " + out + ", " + nan);
      auto safe = sel(bad, from, zero(from), x);
      auto r = w_.op(std::string(uns ? "fptoui " : "fptosi ") + ft + " " + safe + " to " + tt);
      std::string minv =
          uns ? "0" : std::to_string(bits == 64 ? INT64_MIN : -(int64_t{1} << (bits - 1)));
      std::string maxv =
          uns ? "255" : std::to_string(bits == 64 ? INT64_MAX : (int64_t{1} << (bits - 1)) - 1);
      if (bits == 64 && !uns) minv = "-9223372036854775808";
      r = sel(below, to, minv, r);
      r = sel(above, to, maxv, r);
      return sel(nan, to, "0", r);
    }
    // integer <-> integer
    int fb = bits_of(from), tb = bits_of(to);
    if (tb < fb) return w_.op("trunc " + ft + " " + x + " to " + tt);
    bool uns = from == DType::UInt8 || from == DType::Bool;
    return w_.op(std::string(uns ? "zext " : "sext ") + ft + " " + x + " to " + tt);
  }

  std::string emit_one(NodeRef n) {
    DType t = n->dtype;
    std::string ty = reg_type(t);
    switch (n->op) {
      case Op::Const: {
        Value c = is_float(t) ? Value::of_float(t, arg_float(n)) : Value::of_int(t, arg_int(n));
        // Constants are used as operands directly; materialise through a no-op select so
        // every node has an SSA name.
        return w_.op("select i1 true, " + ty + " " + const_text(t, c) + ", " + ty + " " +
                     const_text(t, c));
      }
      case Op::Load:
        return load(n);
      case Op::Valid:
        return w_.op("select i1 " + valid_of(arg_view(n)) + ", i1 true, i1 false");
      case Op::Index:
        return w_.op("add i64 " + offset_of(arg_view(n)) + ", 0");
      case Op::Acc: {
        int64_t k = std::holds_alternative<int64_t>(n->arg) ? arg_int(n) : 0;
        return env_.acc.at(k);
      }
      default:
        break;
    }
    DType st = n->src.empty() ? t : n->src[0]->dtype;
    std::string sty = reg_type(st);
    auto a = [&](int i) { return v(n->src[i]); };
    bool f = fp(st);
    switch (n->op) {
      case Op::Neg:
        return f ? w_.op("fneg " + ty + " " + a(0)) : w_.op("sub " + ty + " 0, " + a(0));
      case Op::Abs:
        if (f) return call1("fabs", t, a(0));
        {
          auto neg = w_.op("sub " + ty + " 0, " + a(0));
          auto c = w_.op("icmp slt " + ty + " " + a(0) + ", 0");
          return t == DType::UInt8 || t == DType::Bool ? a(0) : sel(c, t, neg, a(0));
        }
      case Op::Sqrt:
        return call1("sqrt", t, a(0));
      case Op::Floor:
        return f ? call1("floor", t, a(0)) : a(0);
      case Op::Ceil:
        return f ? call1("ceil", t, a(0)) : a(0);
      case Op::Round:
        return f ? call1("roundeven", t, a(0)) : a(0);
      case Op::Not:
        return w_.op("xor " + ty + " " + a(0) + ", " + (t == DType::Bool ? "true" : "-1"));
      case Op::Cast:
        return cast(st, t, a(0));
      case Op::Bitcast:
        return w_.op("bitcast " + sty + " " + a(0) + " to " + ty);
      case Op::IsNan:
        return f ? w_.op("fcmp uno " + sty + " " + a(0) + ", " + a(0)) : "false";
      // For bool, + is logical or (numpy); - and * on i1 already are xor and and.
      case Op::Add:
        return w_.op((f                  ? "fadd "
                      : t == DType::Bool ? "or "
                                         : "add ") +
                     ty + " " + a(0) + ", " + a(1));
      case Op::Sub:
        return w_.op((f ? "fsub " : "sub ") + ty + " " + a(0) + ", " + a(1));
      case Op::Mul:
        return w_.op((f ? "fmul " : "mul ") + ty + " " + a(0) + ", " + a(1));
      case Op::Div:
        return f ? w_.op("fdiv " + ty + " " + a(0) + ", " + a(1)) : int_divmod(true, t, a(0), a(1));
      case Op::Mod:
        return f ? float_mod(t, a(0), a(1)) : int_divmod(false, t, a(0), a(1));
      case Op::Max:
        return minmax(true, t, a(0), a(1));
      case Op::Min:
        return minmax(false, t, a(0), a(1));
      case Op::CmpLt:
      case Op::CmpLe:
      case Op::CmpEq:
      case Op::CmpNe: {
        static const char* fpred[] = {"olt", "ole", "oeq", "une"};
        static const char* spred[] = {"slt", "sle", "eq", "ne"};
        static const char* upred[] = {"ult", "ule", "eq", "ne"};
        int k = static_cast<int>(n->op) - static_cast<int>(Op::CmpLt);
        bool uns = st == DType::UInt8 || st == DType::Bool;
        if (f) return w_.op(std::string("fcmp ") + fpred[k] + " " + sty + " " + a(0) + ", " + a(1));
        return w_.op(std::string("icmp ") + (uns ? upred[k] : spred[k]) + " " + sty + " " + a(0) +
                     ", " + a(1));
      }
      case Op::And:
        return w_.op("and " + ty + " " + a(0) + ", " + a(1));
      case Op::Or:
        return w_.op("or " + ty + " " + a(0) + ", " + a(1));
      case Op::Xor:
        return w_.op("xor " + ty + " " + a(0) + ", " + a(1));
      case Op::Shl:
        return shift(true, t, a(0), a(1));
      case Op::Shr:
        return shift(false, t, a(0), a(1));
      case Op::Where:
        return sel(a(0), t, a(1), a(2));
      default:
        throw std::logic_error("render_llvm: op " + std::string(op_name(n->op)) + " on " +
                               std::string(name(t)) + " must be decomposed first");
    }
  }

  Writer& w_;
  const Env& env_;
  std::unordered_map<NodeRef, std::string> val_;
};

// Declarations of every intrinsic the emitter may call (unused ones are harmless).
std::string intrinsic_decls() {
  std::ostringstream d;
  for (const char* t : {"float", "double", "half"}) {
    std::string s = std::string(t) == "float" ? "f32" : std::string(t) == "double" ? "f64" : "f16";
    for (const char* fn : {"fabs", "sqrt", "floor", "ceil", "roundeven"})
      d << "declare " << t << " @llvm." << fn << "." << s << "(" << t << ")\n";
    d << "declare " << t << " @llvm.copysign." << s << "(" << t << ", " << t << ")\n";
    for (const char* it : {"i8", "i32", "i64"}) {
      d << "declare " << it << " @llvm.fptosi.sat." << it << "." << s << "(" << t << ")\n";
      d << "declare " << it << " @llvm.fptoui.sat." << it << "." << s << "(" << t << ")\n";
    }
  }
  return d.str();
}

class KernelRenderer {
 public:
  KernelRenderer(const KernelSpec& k, std::string name) : k_(k), name_(std::move(name)) {
    for (size_t p = 0; p < k.slots.size(); ++p) dtypes_.push_back(DType::Float32);
    dtypes_[0] = k.out_dtype;
    collect_param_dtypes(k.body);
    if (k.rbody) collect_param_dtypes(k.rbody);
    two_phase_ = k.rbody && k.blocks() > 1;
    if (two_phase_) dtypes_.push_back(k.rbody->dtype);  // scratch: one partial per block
    grouped_ = k.rbody && !two_phase_ && worth_grouping();
  }

  // Outputs adjacent along the last dim are reduced kGroup at a time when the reduced
  // expression reads memory contiguous along that dim (a matmul's right operand): the same
  // per-output lanes and order, but the loads of kGroup outputs form one vector.
  static constexpr int kGroup = 16;
  bool worth_grouping() const {
    size_t k = k_.shape.size();
    if (k == 0 || k_.shape[k - 1] < kGroup) return false;
    auto nodes = toposort({k_.rbody});
    if (nodes.size() > 48) return false;  // keep compile time and code size in check
    for (NodeRef n : nodes)
      if (n->op == Op::Load && arg_load(n).view.strides[k - 1] == 1) return true;
    return false;
  }

  RenderedKernel render() {
    std::ostringstream m;
    m << intrinsic_decls();
    if (k_.rbody) {
      m << render_combine();
      m << render_rbody();
      m << render_reduce();
      if (grouped_) m << render_reduce_grouped();
    }
    m << render_body();
    if (two_phase_) m << render_phase1();
    m << render_main();
    m << "attributes #0 = { alwaysinline nounwind }\n";
    m << "attributes #1 = { nounwind \"prefer-vector-width\"=\"512\" }\n";
    if (k_.rbody) m << lane_loop_metadata();
    return {name_, m.str(), two_phase_};
  }

 private:
  void collect_param_dtypes(NodeRef root) {
    for (NodeRef n : toposort({root}))
      if (n->op == Op::Load) dtypes_.at(arg_load(n).param) = n->dtype;
  }
  size_t nparams() const { return dtypes_.size(); }
  DType acc_type() const { return k_.rbody->dtype; }

  // "T0* %p0, T1* %p1, ..." for internal function signatures.
  std::string ptr_params() const {
    std::string s;
    for (size_t p = 0; p < nparams(); ++p)
      s += (p ? ", " : "") + P(dtypes_[p]) + " noalias %p" + std::to_string(p);
    return s;
  }
  std::string ptr_args(const std::vector<std::string>& ptrs) const {
    std::string s;
    for (size_t p = 0; p < nparams(); ++p) s += (p ? ", " : "") + P(dtypes_[p]) + " " + ptrs[p];
    return s;
  }
  std::vector<std::string> ptr_names() const {
    std::vector<std::string> v;
    for (size_t p = 0; p < nparams(); ++p) v.push_back("%p" + std::to_string(p));
    return v;
  }
  static std::string idx_params(size_t n, const char* prefix = "%i") {
    std::string s;
    for (size_t d = 0; d < n; ++d) s += ", i64 " + std::string(prefix) + std::to_string(d);
    return s;
  }

  std::string render_combine() {
    DType t = acc_type();
    std::string ty = reg_type(t);
    Op op = k_.reduce_op == Op::ReduceSum    ? Op::Add
            : k_.reduce_op == Op::ReduceProd ? Op::Mul
            : k_.reduce_op == Op::ReduceMax  ? Op::Max
                                             : Op::Min;
    if (t == DType::Bool && op == Op::Add) op = Op::Or;
    NodeRef A = make(Op::Acc, t, {}, {}, int64_t{0});
    NodeRef B = make(Op::Acc, t, {}, {}, int64_t{1});
    NodeRef c = decompose(make(op, t, {}, {A, B}));
    Writer w;
    Env env;
    env.acc[0] = "%a";
    env.acc[1] = "%b";
    auto r = Emitter(w, env).emit(c);
    return "define internal " + ty + " @" + name_ + "_combine(" + ty + " %a, " + ty +
           " %b) #0 {\nentry:\n" + w.out.str() + "  ret " + ty + " " + r + "\n}\n";
  }

  // rbody(ptrs, i0..ik-1, r): the reduced expression at output index i and flat reduce index r.
  std::string render_rbody() {
    Writer w;
    Env env;
    env.ptrs = ptr_names();
    size_t k = k_.shape.size(), m = k_.rshape.size();
    for (size_t d = 0; d < k; ++d) env.idx.push_back("%i" + std::to_string(d));
    // Decompose the flat reduce index into its dims (C order).
    std::vector<std::string> rid(m);
    std::string rest = "%r";
    for (size_t d = m; d-- > 0;) {
      if (d == 0) {
        rid[d] = rest;
        break;
      }
      rid[d] = w.op("urem i64 " + rest + ", " + std::to_string(k_.rshape[d]));
      rest = w.op("udiv i64 " + rest + ", " + std::to_string(k_.rshape[d]));
    }
    for (auto& s : rid) env.idx.push_back(s);
    auto r = Emitter(w, env).emit(k_.rbody);
    std::string ty = reg_type(acc_type());
    return "define internal " + ty + " @" + name_ + "_rbody(" + ptr_params() + idx_params(k) +
           ", i64 %r) #0 {\nentry:\n" + w.out.str() + "  ret " + ty + " " + r + "\n}\n";
  }

  // The lane loop of reduce() must stay a loop and be vectorized at the lane count: LLVM would
  // otherwise fully unroll it (8 iterations) first, leaving 8 scalar chains that the SLP
  // vectorizer often leaves scalar (measured: a row max ran 8x slower).
  static constexpr int kLaneLoopMd = 900;
  static std::string lane_loop_metadata() {
    std::string id = std::to_string(kLaneLoopMd);
    auto md = [&](int k) { return "!" + std::to_string(kLaneLoopMd + k); };
    return "!" + id + " = distinct !{!" + id + ", " + md(1) + ", " + md(2) + ", " + md(3) + "}\n" +
           md(1) + " = !{!\"llvm.loop.unroll.disable\"}\n" + md(2) +
           " = !{!\"llvm.loop.vectorize.enable\", i1 true}\n" + md(3) +
           " = !{!\"llvm.loop.vectorize.width\", i32 " + std::to_string(kReduceLanes) + "}\n";
  }

  // reduce(ptrs, i..., rlo, rhi): one block, in the documented order: lane l takes the
  // elements at rlo + l, rlo + l + 8, ... in increasing order; then a fixed tree.
  std::string render_reduce() {
    DType t = acc_type();
    std::string ty = reg_type(t);
    size_t k = k_.shape.size();
    Value idv = reduce_identity(k_.reduce_op, t);
    std::string id = const_text(t, idv);
    std::string args = ptr_args(ptr_names());
    for (size_t d = 0; d < k; ++d) args += ", i64 %i" + std::to_string(d);
    std::string comb = "@" + name_ + "_combine";
    std::string rb = "@" + name_ + "_rbody";
    std::ostringstream s;
    int L = kReduceLanes;
    s << "define internal " << ty << " @" << name_ << "_reduce(" << ptr_params() << idx_params(k)
      << ", i64 %rlo, i64 %rhi) #0 {\nentry:\n";
    // The lanes live in a small array; the inner loop over the 8 lanes of one step is what
    // LLVM's loop vectorizer turns into one vector operation (rbody evaluated for 8
    // consecutive elements at once), without reassociating anything: lane l still combines
    // the elements rlo + l, rlo + l + 8, ... in increasing order.
    s << "  %lanes = alloca [" << L << " x " << ty << "], align 64\n";
    for (int l = 0; l < L; ++l) {
      s << "  %lp" << l << " = getelementptr inbounds [" << L << " x " << ty << "], "
        << dialect::ptr("[" + std::to_string(L) + " x " + ty + "]") << " %lanes, i64 0, i64 " << l
        << "\n";
      s << "  store " << ty << " " << id << ", " << dialect::ptr(ty) << " %lp" << l << "\n";
    }
    s << "  %n = sub i64 %rhi, %rlo\n  %nfull = udiv i64 %n, " << L << "\n";
    s << "  %has = icmp ugt i64 %nfull, 0\n  br i1 %has, label %main, label %main.done\n";
    s << "main:\n  %j = phi i64 [0, %entry], [%j.next, %main.latch]\n";
    s << "  %j8 = mul i64 %j, " << L << "\n  %base = add i64 %rlo, %j8\n";
    s << "  br label %lane\nlane:\n  %l = phi i64 [0, %main], [%l.next, %lane]\n";
    s << "  %rl = add i64 %base, %l\n";
    s << "  %vl = call " << ty << " " << rb << "(" << args << ", i64 %rl)\n";
    s << "  %lpl = getelementptr inbounds [" << L << " x " << ty << "], "
      << dialect::ptr("[" + std::to_string(L) + " x " + ty + "]") << " %lanes, i64 0, i64 %l\n";
    s << "  %ol = load " << ty << ", " << dialect::ptr(ty) << " %lpl\n";
    s << "  %nl = call " << ty << " " << comb << "(" << ty << " %ol, " << ty << " %vl)\n";
    s << "  store " << ty << " %nl, " << dialect::ptr(ty) << " %lpl\n";
    s << "  %l.next = add i64 %l, 1\n  %ldone = icmp eq i64 %l.next, " << L << "\n";
    s << "  br i1 %ldone, label %main.latch, label %lane, !llvm.loop !" << kLaneLoopMd << "\n";
    s << "main.latch:\n";
    s << "  %j.next = add i64 %j, 1\n  %jdone = icmp eq i64 %j.next, %nfull\n";
    s << "  br i1 %jdone, label %main.done, label %main\n";
    s << "main.done:\n";
    // The lanes leave memory here (constant indices only, so the array is promoted to
    // registers once the lane loop is vectorized); the tail's element t (< 8) goes to lane t,
    // each step guarded so rbody never reads past rhi.
    for (int l = 0; l < L; ++l)
      s << "  %h" << l << " = load " << ty << ", " << dialect::ptr(ty) << " %lp" << l << "\n";
    s << "  %tail0 = mul i64 %nfull, " << L << "\n  %tailbase = add i64 %rlo, %tail0\n";
    s << "  %ntail = sub i64 %n, %tail0\n  br label %tl0.test\n";
    for (int t = 0; t < L - 1; ++t) {
      std::string T = std::to_string(t),
                  next = t + 1 < L - 1 ? "tl" + std::to_string(t + 1) + ".test" : "tail.done";
      s << "tl" << T << ".test:\n  %tc" << T << " = icmp ugt i64 %ntail, " << T << "\n";
      s << "  br i1 %tc" << T << ", label %tl" << T << ", label %tail.done\n";
      s << "tl" << T << ":\n  %rt" << T << " = add i64 %tailbase, " << T << "\n";
      s << "  %vt" << T << " = call " << ty << " " << rb << "(" << args << ", i64 %rt" << T
        << ")\n";
      s << "  %ht" << T << " = call " << ty << " " << comb << "(" << ty << " %h" << T << ", " << ty
        << " %vt" << T << ")\n";
      s << "  br label %" << next << "\n";
    }
    s << "tail.done:\n";
    // Lane l's final value: h_l, or ht_l when the tail reached lane l (t = l ran).
    for (int l = 0; l < L; ++l) {
      s << "  %g" << l << " = phi " << ty << " ";
      for (int from = 0; from < L; ++from) {  // from: the block that branched to tail.done
        // Block tl<k>.test for k = 0..6 jumps here when ntail == k (lanes >= k untouched);
        // block tl6 jumps here after lane 6 (ntail == 7).
        std::string v = (l < from) ? "%ht" + std::to_string(l) : "%h" + std::to_string(l);
        std::string blk =
            from < L - 1 ? "%tl" + std::to_string(from) + ".test" : "%tl" + std::to_string(L - 2);
        s << (from ? ", " : "") << "[" << v << ", " << blk << "]";
      }
      s << "\n";
    }
    // Fixed tree: (l, l+4), then (l, l+2), then (0, 1).
    s << "  %q0 = call " << ty << " " << comb << "(" << ty << " %g0, " << ty << " %g4)\n";
    s << "  %q1 = call " << ty << " " << comb << "(" << ty << " %g1, " << ty << " %g5)\n";
    s << "  %q2 = call " << ty << " " << comb << "(" << ty << " %g2, " << ty << " %g6)\n";
    s << "  %q3 = call " << ty << " " << comb << "(" << ty << " %g3, " << ty << " %g7)\n";
    s << "  %s0 = call " << ty << " " << comb << "(" << ty << " %q0, " << ty << " %q2)\n";
    s << "  %s1 = call " << ty << " " << comb << "(" << ty << " %q1, " << ty << " %q3)\n";
    s << "  %res = call " << ty << " " << comb << "(" << ty << " %s0, " << ty << " %s1)\n";
    s << "  ret " << ty << " %res\n}\n";
    return s.str();
  }

  // reduceW(ptrs, i0..i(k-2), ib, rlo, rhi, out): reduce() for the kGroup outputs whose last
  // index is ib, ib+1, ...; each keeps its own 8 lanes and tree. Results go to out[0..kGroup).
  std::string render_reduce_grouped() {
    DType t = acc_type();
    std::string ty = reg_type(t), pty = dialect::ptr(ty);
    size_t k = k_.shape.size();
    const int L = kReduceLanes, W = kGroup;
    std::string id = const_text(t, reduce_identity(k_.reduce_op, t));
    std::string comb = "@" + name_ + "_combine", rb = "@" + name_ + "_rbody";
    auto args_for = [&](int w) {
      std::string a = ptr_args(ptr_names());
      for (size_t d = 0; d + 1 < k; ++d) a += ", i64 %i" + std::to_string(d);
      return a + ", i64 %ib" + std::to_string(w);
    };
    auto acc = [&](int l, int w) { return "%a" + std::to_string(l) + "_" + std::to_string(w); };
    std::string lanes_ty = "[" + std::to_string(L * W) + " x " + ty + "]";
    std::ostringstream s;
    s << "define internal void @" << name_ << "_reduceW(" << ptr_params();
    for (size_t d = 0; d + 1 < k; ++d) s << ", i64 %i" << d;
    s << ", i64 %ib, i64 %rlo, i64 %rhi, " << pty << " %out) #0 {\nentry:\n";
    s << "  %lanes = alloca " << lanes_ty << "\n";
    for (int w = 0; w < W; ++w) s << "  %ib" << w << " = add i64 %ib, " << w << "\n";
    s << "  %n = sub i64 %rhi, %rlo\n  %nfull = udiv i64 %n, " << L << "\n";
    s << "  %has = icmp ugt i64 %nfull, 0\n  br i1 %has, label %main, label %main.done\n";
    s << "main:\n  %j = phi i64 [0, %entry], [%j.next, %main]\n";
    for (int l = 0; l < L; ++l)
      for (int w = 0; w < W; ++w)
        s << "  " << acc(l, w) << " = phi " << ty << " [" << id << ", %entry], [" << acc(l, w)
          << ".next, %main]\n";
    s << "  %j8 = mul i64 %j, " << L << "\n  %base = add i64 %rlo, %j8\n";
    for (int l = 0; l < L; ++l) {
      s << "  %r" << l << " = add i64 %base, " << l << "\n";
      for (int w = 0; w < W; ++w) {
        std::string v = "%v" + std::to_string(l) + "_" + std::to_string(w);
        s << "  " << v << " = call " << ty << " " << rb << "(" << args_for(w) << ", i64 %r" << l
          << ")\n";
        s << "  " << acc(l, w) << ".next = call " << ty << " " << comb << "(" << ty << " "
          << acc(l, w) << ", " << ty << " " << v << ")\n";
      }
    }
    s << "  %j.next = add i64 %j, 1\n  %jdone = icmp eq i64 %j.next, %nfull\n";
    s << "  br i1 %jdone, label %main.done, label %main\nmain.done:\n";
    for (int l = 0; l < L; ++l)
      for (int w = 0; w < W; ++w)
        s << "  %f" << (l * W + w) << " = phi " << ty << " [" << id << ", %entry], [" << acc(l, w)
          << ".next, %main]\n";
    for (int slot = 0; slot < L * W; ++slot) {
      s << "  %lp" << slot << " = getelementptr inbounds " << lanes_ty << ", "
        << dialect::ptr(lanes_ty) << " %lanes, i64 0, i64 " << slot << "\n";
      s << "  store " << ty << " %f" << slot << ", " << pty << " %lp" << slot << "\n";
    }
    s << "  %tail0 = mul i64 %nfull, " << L << "\n  %tailbase = add i64 %rlo, %tail0\n";
    s << "  %ntail = sub i64 %n, %tail0\n  %hast = icmp ugt i64 %ntail, 0\n";
    s << "  br i1 %hast, label %tail, label %tail.done\n";
    s << "tail:\n  %t = phi i64 [0, %main.done], [%t.next, %tail]\n";
    s << "  %rt = add i64 %tailbase, %t\n  %tw = mul i64 %t, " << W << "\n";
    for (int w = 0; w < W; ++w) {
      s << "  %vt" << w << " = call " << ty << " " << rb << "(" << args_for(w) << ", i64 %rt)\n";
      s << "  %ti" << w << " = add i64 %tw, " << w << "\n";
      s << "  %tp" << w << " = getelementptr inbounds " << lanes_ty << ", "
        << dialect::ptr(lanes_ty) << " %lanes, i64 0, i64 %ti" << w << "\n";
      s << "  %to" << w << " = load " << ty << ", " << pty << " %tp" << w << "\n";
      s << "  %tn" << w << " = call " << ty << " " << comb << "(" << ty << " %to" << w << ", " << ty
        << " %vt" << w << ")\n";
      s << "  store " << ty << " %tn" << w << ", " << pty << " %tp" << w << "\n";
    }
    s << "  %t.next = add i64 %t, 1\n  %tdone = icmp eq i64 %t.next, %ntail\n";
    s << "  br i1 %tdone, label %tail.done, label %tail\ntail.done:\n";
    for (int w = 0; w < W; ++w) {
      auto g = [&](int l) { return "%g" + std::to_string(w) + "_" + std::to_string(l); };
      for (int l = 0; l < L; ++l)
        s << "  " << g(l) << " = load " << ty << ", " << pty << " %lp" << (l * W + w) << "\n";
      auto c = [&](const std::string& r, const std::string& a, const std::string& b) {
        s << "  " << r << " = call " << ty << " " << comb << "(" << ty << " " << a << ", " << ty
          << " " << b << ")\n";
      };
      std::string q = "%q" + std::to_string(w) + "_";
      // The same fixed tree as reduce(): (l, l+4), then (l, l+2), then (0, 1).
      for (int l = 0; l < 4; ++l) c(q + std::to_string(l), g(l), g(l + 4));
      c(q + "s0", q + "0", q + "2");
      c(q + "s1", q + "1", q + "3");
      c(q + "r", q + "s0", q + "s1");
      s << "  %op" << w << " = getelementptr inbounds " << ty << ", " << pty << " %out, i64 " << w
        << "\n";
      s << "  store " << ty << " " << q << "r, " << pty << " %op" << w << "\n";
    }
    s << "  ret void\n}\n";
    return s.str();
  }

  // body(ptrs, i..., [acc]): the output value at index i.
  std::string render_body() {
    Writer w;
    Env env;
    env.ptrs = ptr_names();
    size_t k = k_.shape.size();
    for (size_t d = 0; d < k; ++d) env.idx.push_back("%i" + std::to_string(d));
    std::string accp;
    if (k_.rbody) {
      env.acc[0] = "%acc";
      accp = ", " + reg_type(acc_type()) + " %acc";
    }
    auto r = Emitter(w, env).emit(k_.body);
    std::string ty = reg_type(k_.out_dtype);
    return "define internal " + ty + " @" + name_ + "_body(" + ptr_params() + idx_params(k) + accp +
           ") #0 {\nentry:\n" + w.out.str() + "  ret " + ty + " " + r + "\n}\n";
  }

  // Loads the typed param pointers from %bufs.
  std::string load_params(std::ostringstream& s) {
    std::string i8pp = dialect::ptr(dialect::ptr("i8"));
    for (size_t p = 0; p < nparams(); ++p) {
      s << "  %pp" << p << " = getelementptr inbounds " << dialect::ptr("i8") << ", " << i8pp
        << " %bufs, i64 " << p << "\n";
      s << "  %raw" << p << " = load " << dialect::ptr("i8") << ", " << i8pp << " %pp" << p << "\n";
      if (dialect::kOpaquePointers)
        s << "  %p" << p << " = getelementptr i8, ptr %raw" << p << ", i64 0\n";
      else
        s << "  %p" << p << " = bitcast i8* %raw" << p << " to " << P(dtypes_[p]) << "\n";
    }
    return "";
  }

  // Emits the decomposition of flat index %<var> over `dims` into %<prefix>0.. (C order).
  static void decompose_index(std::ostringstream& s, const std::string& var, const Shape& dims,
                              const std::string& prefix) {
    std::string rest = var;
    for (size_t d = dims.size(); d-- > 0;) {
      if (d == 0) {
        s << "  " << prefix << "0 = add i64 " << rest << ", 0\n";
        break;
      }
      std::string q = prefix + "q" + std::to_string(d);
      s << "  " << prefix << d << " = urem i64 " << rest << ", " << dims[d] << "\n";
      s << "  " << q << " = udiv i64 " << rest << ", " << dims[d] << "\n";
      rest = q;
    }
  }
  std::string idx_args(size_t k) const {
    std::string a;
    for (size_t d = 0; d < k; ++d) a += ", i64 %i" + std::to_string(d);
    return a;
  }
  void store_out(std::ostringstream& s, const std::string& val, const std::string& index) {
    DType t = k_.out_dtype;
    std::string v = val;
    if (t == DType::Bool) {
      s << "  %ob = zext i1 " << val << " to i8\n";
      v = "%ob";
    }
    s << "  %optr = getelementptr inbounds " << mem_type(t) << ", " << P(t) << " %p0, i64 " << index
      << "\n";
    s << "  store " << mem_type(t) << " " << v << ", " << P(t) << " %optr\n";
  }

  std::string render_phase1() {
    std::ostringstream s;
    DType t = acc_type();
    std::string ty = reg_type(t);
    size_t k = k_.shape.size();
    int64_t nb = k_.blocks(), R = k_.reduce_size();
    s << "define void @" << name_ << "_p1(" << dialect::ptr(dialect::ptr("i8"))
      << " noalias %bufs, i64 %lo, i64 %hi) #1 {\nentry:\n";
    load_params(s);
    s << "  %any = icmp slt i64 %lo, %hi\n  br i1 %any, label %loop, label %exit\nloop:\n";
    s << "  %w = phi i64 [%lo, %entry], [%w.next, %loop]\n";
    s << "  %o = udiv i64 %w, " << nb << "\n  %blk = urem i64 %w, " << nb << "\n";
    decompose_index(s, "%o", k_.shape, "%i");
    s << "  %rlo = mul i64 %blk, " << kReduceBlock << "\n";
    s << "  %rend = add i64 %rlo, " << kReduceBlock << "\n";
    s << "  %rbig = icmp ugt i64 %rend, " << R << "\n";
    s << "  %rhi = select i1 %rbig, i64 " << R << ", i64 %rend\n";
    s << "  %part = call " << ty << " @" << name_ << "_reduce(" << ptr_args(ptr_names())
      << idx_args(k) << ", i64 %rlo, i64 %rhi)\n";
    size_t sp = nparams() - 1;
    std::string st = reg_type(t) == "i1" ? "i8" : ty;
    std::string pv = "%part";
    if (t == DType::Bool) {
      s << "  %partb = zext i1 %part to i8\n";
      pv = "%partb";
    }
    s << "  %sptr = getelementptr inbounds " << st << ", " << P(t) << " %p" << sp << ", i64 %w\n";
    s << "  store " << st << " " << pv << ", " << P(t) << " %sptr\n";
    s << "  %w.next = add i64 %w, 1\n  %wdone = icmp eq i64 %w.next, %hi\n";
    s << "  br i1 %wdone, label %exit, label %loop\nexit:\n  ret void\n}\n";
    return s.str();
  }

  std::string render_main() {
    std::ostringstream s;
    size_t k = k_.shape.size();
    s << "define void @" << name_ << "(" << dialect::ptr(dialect::ptr("i8"))
      << " noalias %bufs, i64 %lo, i64 %hi) #1 {\nentry:\n";
    load_params(s);
    if (grouped_) s << "  %gbuf = alloca [" << kGroup << " x " << reg_type(acc_type()) << "]\n";
    s << "  %any = icmp slt i64 %lo, %hi\n  br i1 %any, label %outer, label %exit\n";
    if (!k_.rbody) {
      // Elementwise: items are output elements; the inner loop runs along the last dim.
      int64_t last = k == 0 ? 1 : k_.shape[k - 1];
      s << "outer:\n  %flat = phi i64 [%lo, %entry], [%flat.next, %inner.exit]\n";
      s << "  %orow = udiv i64 %flat, " << last << "\n  %istart = urem i64 %flat, " << last << "\n";
      s << "  %rrow = sub i64 " << last << ", %istart\n  %rall = sub i64 %hi, %flat\n";
      s << "  %rsm = icmp ult i64 %rrow, %rall\n  %cnt = select i1 %rsm, i64 %rrow, i64 %rall\n";
      s << "  %iend = add i64 %istart, %cnt\n";
      if (k > 1) decompose_index(s, "%orow", Shape(k_.shape.begin(), k_.shape.end() - 1), "%i");
      s << "  %rowbase = mul i64 %orow, " << last << "\n";
      s << "  br label %inner\ninner:\n";
      s << "  %i" << (k == 0 ? 0 : k - 1) << " = phi i64 [%istart, %outer], [%inext, %inner]\n";
      std::string ty = reg_type(k_.out_dtype);
      s << "  %val = call " << ty << " @" << name_ << "_body(" << ptr_args(ptr_names())
        << idx_args(k) << ")\n";
      s << "  %oidx = add i64 %rowbase, %i" << (k == 0 ? 0 : k - 1) << "\n";
      store_out(s, "%val", "%oidx");
      s << "  %inext = add i64 %i" << (k == 0 ? 0 : k - 1) << ", 1\n";
      s << "  %idone = icmp eq i64 %inext, %iend\n  br i1 %idone, label %inner.exit, label "
           "%inner\n";
      s << "inner.exit:\n  %flat.next = add i64 %flat, %cnt\n";
      s << "  %more = icmp slt i64 %flat.next, %hi\n  br i1 %more, label %outer, label %exit\n";
      s << "exit:\n  ret void\n}\n";
      return s.str();
    }
    DType t = acc_type();
    std::string ty = reg_type(t);
    if (grouped_)
      s << "outer:\n  %o = phi i64 [%lo, %entry], [%o.next, %done], [%o.nextW, %group]\n";
    else
      s << "outer:\n  %o = phi i64 [%lo, %entry], [%o.next, %done]\n";
    decompose_index(s, "%o", k_.shape, "%i");
    if (grouped_) {
      // A whole group of outputs in this row and in [lo, hi): reduce them together.
      const int W = kGroup;
      std::string last = "%i" + std::to_string(k - 1);
      s << "  %room = sub i64 " << k_.shape[k - 1] << ", " << last << "\n";
      s << "  %left = sub i64 %hi, %o\n";
      s << "  %g1 = icmp uge i64 %room, " << W << "\n  %g2 = icmp uge i64 %left, " << W << "\n";
      s << "  %g = and i1 %g1, %g2\n  br i1 %g, label %group, label %single\n";
      std::string arr = "[" + std::to_string(W) + " x " + ty + "]";
      s << "group:\n";
      s << "  %gb0 = getelementptr inbounds " << arr << ", " << dialect::ptr(arr)
        << " %gbuf, i64 0, i64 0\n";
      s << "  call void @" << name_ << "_reduceW(" << ptr_args(ptr_names());
      for (size_t d = 0; d + 1 < k; ++d) s << ", i64 %i" << d;
      s << ", i64 " << last << ", i64 0, i64 " << k_.reduce_size() << ", " << dialect::ptr(ty)
        << " %gb0)\n";
      std::string oty = reg_type(k_.out_dtype);
      DType ot = k_.out_dtype;
      for (int w = 0; w < W; ++w) {
        std::string ws = std::to_string(w);
        s << "  %gp" << ws << " = getelementptr inbounds " << ty << ", " << dialect::ptr(ty)
          << " %gb0, i64 " << ws << "\n";
        s << "  %ga" << ws << " = load " << ty << ", " << dialect::ptr(ty) << " %gp" << ws << "\n";
        s << "  %gl" << ws << " = add i64 " << last << ", " << ws << "\n";
        std::string args = ptr_args(ptr_names());
        for (size_t d = 0; d + 1 < k; ++d) args += ", i64 %i" + std::to_string(d);
        args += ", i64 %gl" + ws;
        s << "  %gv" << ws << " = call " << oty << " @" << name_ << "_body(" << args << ", " << ty
          << " %ga" << ws << ")\n";
        s << "  %go" << ws << " = add i64 %o, " << ws << "\n";
        std::string v = "%gv" + ws;
        if (ot == DType::Bool) {
          s << "  %gz" << ws << " = zext i1 " << v << " to i8\n";
          v = "%gz" + ws;
        }
        s << "  %gq" << ws << " = getelementptr inbounds " << mem_type(ot) << ", " << P(ot)
          << " %p0, i64 %go" << ws << "\n";
        s << "  store " << mem_type(ot) << " " << v << ", " << P(ot) << " %gq" << ws << "\n";
      }
      s << "  %o.nextW = add i64 %o, " << W << "\n  %gdone = icmp eq i64 %o.nextW, %hi\n";
      s << "  br i1 %gdone, label %exit, label %outer\nsingle:\n";
    }
    if (!two_phase_) {
      s << "  %acc = call " << ty << " @" << name_ << "_reduce(" << ptr_args(ptr_names())
        << idx_args(k) << ", i64 0, i64 " << k_.reduce_size() << ")\n";
      s << "  br label %done\n";
    } else {
      // Combine the block partials left to right.
      int64_t nb = k_.blocks();
      size_t sp = nparams() - 1;
      std::string st = t == DType::Bool ? "i8" : ty;
      s << "  %sbase = mul i64 %o, " << nb << "\n";
      s << "  %s0p = getelementptr inbounds " << st << ", " << P(t) << " %p" << sp
        << ", i64 %sbase\n";
      s << "  %s0 = load " << st << ", " << P(t) << " %s0p\n";
      std::string first = "%s0";
      if (t == DType::Bool) {
        s << "  %s0b = icmp ne i8 %s0, 0\n";
        first = "%s0b";
      }
      s << "  br label %comb\ncomb:\n";
      s << "  %b = phi i64 [1, %outer], [%b.next, %comb]\n";
      s << "  %cacc = phi " << ty << " [" << first << ", %outer], [%cacc.next, %comb]\n";
      s << "  %bi = add i64 %sbase, %b\n";
      s << "  %bp = getelementptr inbounds " << st << ", " << P(t) << " %p" << sp << ", i64 %bi\n";
      s << "  %bv = load " << st << ", " << P(t) << " %bp\n";
      std::string bv = "%bv";
      if (t == DType::Bool) {
        s << "  %bvb = icmp ne i8 %bv, 0\n";
        bv = "%bvb";
      }
      s << "  %cacc.next = call " << ty << " @" << name_ << "_combine(" << ty << " %cacc, " << ty
        << " " << bv << ")\n";
      s << "  %b.next = add i64 %b, 1\n  %bdone = icmp eq i64 %b.next, " << nb << "\n";
      s << "  br i1 %bdone, label %done, label %comb\n";
    }
    s << "done:\n";
    if (two_phase_) s << "  %acc = phi " << ty << " [%cacc.next, %comb]\n";
    std::string oty = reg_type(k_.out_dtype);
    s << "  %val = call " << oty << " @" << name_ << "_body(" << ptr_args(ptr_names())
      << idx_args(k) << ", " << ty << " %acc)\n";
    store_out(s, "%val", "%o");
    s << "  %o.next = add i64 %o, 1\n  %odone = icmp eq i64 %o.next, %hi\n";
    s << "  br i1 %odone, label %exit, label %outer\nexit:\n  ret void\n}\n";
    return s.str();
  }

  const KernelSpec& k_;
  std::string name_;
  std::vector<DType> dtypes_;
  bool two_phase_ = false;
  bool grouped_ = false;
};

}  // namespace

RenderedKernel render_llvm(const KernelSpec& k, const std::string& name) {
  return KernelRenderer(k, name).render();
}

}  // namespace codegen::cpu
