// Prints a lowered kernel (codegen/lowered.h) as LLVM IR: every statement in order, every core op
// (codegen/core_ops.h) by its one spelling. Nothing here decides how a kernel iterates.
#include "codegen/cpu/render_llvm.h"

#include <bit>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <stdexcept>
#include <unordered_map>

#include "codegen/cpu/llvm_compat.h"
#include "codegen/lower.h"
#include "ir/debug.h"
#include "ir/scalar.h"

namespace codegen::cpu {

using namespace ir;
using lir::Loop;
using lir::Stmt;

namespace {

// Types in registers (bool i1, bfloat16 its bit pattern) and in memory (bool a byte).
std::string reg_type(DType t) {
  switch (t) {
    case DType::Bool:
      return "i1";
    case DType::Float16:
      return "half";
    case DType::BFloat16:
      return "i16";
    case DType::Float32:
      return "float";
    case DType::Float64:
      return "double";
    default:  // integers: LLVM's are signless; the ops below pick signed or unsigned forms
      return "i" + std::to_string(int_bits(t));
  }
}
std::string mem_type(DType t) { return t == DType::Bool ? "i8" : reg_type(t); }
std::string ptr(const std::string& elem) { return dialect::ptr(elem); }
bool fp(DType t) { return t == DType::Float16 || t == DType::Float32 || t == DType::Float64; }
bool uns(DType t) { return is_unsigned_int(t) || t == DType::Bool; }
int bits_of(DType t) { return int_bits(t); }
std::string sfx(DType t) {
  return t == DType::Float64 ? "f64" : t == DType::Float32 ? "f32" : "f16";
}

std::string const_text(NodeRef n) {
  DType t = n->dtype;
  char buf[32];
  switch (t) {
    case DType::Float64:
    case DType::Float32:  // exact in double
      std::snprintf(buf, sizeof buf, "0x%016llX",
                    static_cast<unsigned long long>(std::bit_cast<uint64_t>(arg_float(n))));
      return buf;
    case DType::Float16:
      std::snprintf(buf, sizeof buf, "0xH%04X",
                    static_cast<unsigned>(f32_to_f16_bits(static_cast<float>(arg_float(n)))));
      return buf;
    case DType::BFloat16:
      return std::to_string(
          static_cast<int16_t>(f32_to_bf16_bits(static_cast<float>(arg_float(n)))));
    case DType::Bool:
      return arg_int(n) ? "true" : "false";
    default:
      return std::to_string(Value::of_int(t, arg_int(n)).i);
  }
}

class Printer {
 public:
  Printer(const lir::Kernel& k, const std::string& name) : k_(k), name_(name) {}

  std::string module() {
    std::ostringstream m;
    for (const char* t : {"float", "double", "half"}) {
      std::string s = std::string(t) == "float"    ? "f32"
                      : std::string(t) == "double" ? "f64"
                                                   : "f16";
      for (const char* fn : {"sqrt", "floor", "ceil", "roundeven"})
        m << "declare " << t << " @llvm." << fn << "." << s << "(" << t << ")\n";
      m << "declare " << t << " @llvm.fma." << s << "(" << t << ", " << t << ", " << t << ")\n";
    }
    m << "declare void @" << prefetch_intrinsic() << "(" << ptr("i8") << ", i32, i32, i32)\n";
    for (const auto& e : k_.entries) m << entry(e);
    m << "attributes #1 = { nounwind \"prefer-vector-width\"=\"512\" }\n" << metadata_.str();
    return m.str();
  }

 private:
  static std::string prefetch_intrinsic() {
    return dialect::kOpaquePointers ? "llvm.prefetch.p0" : "llvm.prefetch.p0i8";
  }

  // ---- output ----
  std::string tmp() { return "%t" + std::to_string(next_++); }
  std::string op(const std::string& rhs) {
    auto t = tmp();
    body_ << "  " << t << " = " << rhs << "\n";
    return t;
  }
  void line(const std::string& s) { body_ << "  " << s << "\n"; }
  // A load or store inside a lanes loop is in the loop's access group (loop() below).
  std::string access(const std::string& memory_op) {
    return groups_.empty()
               ? memory_op
               : memory_op + ", !llvm.access.group !" + std::to_string(groups_.back().second);
  }
  void label(const std::string& l) {
    body_ << l << ":\n";
    block_ = l;
  }

  std::string entry(const lir::Entry& e) {
    body_.str("");
    allocas_.str("");
    std::string i8 = ptr("i8");  // the type of one param's address
    for (size_t p = 0; p < k_.params.size(); ++p) {
      std::string pp =
          op("getelementptr inbounds " + i8 + ", " + ptr(i8) + " %bufs, i64 " + std::to_string(p));
      std::string raw = op("load " + i8 + ", " + ptr(i8) + " " + pp);
      params_.push_back(dialect::kOpaquePointers ? raw
                                                 : op("bitcast i8* " + raw + " to " +
                                                      ptr(mem_type(k_.params[p].dtype))));
    }
    vars_[lir::kLo] = "%lo";
    vars_[lir::kHi] = "%hi";
    block_ = "entry";
    printed_.reset();
    block(e.body);
    std::string text = "define void @" + name_ + e.suffix + "(" + ptr(i8) +
                       " noalias %bufs, i64 %lo, i64 %hi) #1 {\nentry:\n" + allocas_.str() +
                       body_.str() + "  ret void\n}\n";
    params_.clear();
    return text;
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
  std::string L() { return "L" + std::to_string(next_++); }

  void statement(const Stmt& s) {
    switch (s.kind) {
      case Stmt::Kind::For:
        return loop(s);
      case Stmt::Kind::If: {
        std::string c = value(s.a), then = L(), done = L();
        line("br i1 " + c + ", label %" + then + ", label %" + done);
        label(then);
        scoped(s.body);
        line("br label %" + done);
        label(done);
        return;
      }
      case Stmt::Kind::Let:
        vars_[s.var] = value(s.a);
        return;
      case Stmt::Kind::Reg: {
        std::string arr = "[" + std::to_string(s.count) + " x " + reg_type(s.dtype) + "]";
        std::string r = "%r" + std::to_string(s.var);
        allocas_ << "  " << r << " = alloca " << arr << ", align 64\n";
        vars_[s.var] = r;
        arrays_[s.var] = arr;
        std::string init = value(s.a);
        for (int64_t i = 0; i < s.count; ++i)
          line(access("store " + reg_type(s.dtype) + " " + init + ", " + ptr(reg_type(s.dtype)) +
                      " " + slot(s.var, std::to_string(i))));
        return;
      }
      case Stmt::Kind::Set: {
        DType t = k_.vars[s.var].dtype;
        std::string v = value(s.a);
        line(access("store " + reg_type(t) + " " + v + ", " + ptr(reg_type(t)) + " " +
                    slot(s.var, value(s.b))));
        return;
      }
      case Stmt::Kind::Store: {
        DType t = k_.params[s.param].dtype;
        std::string v = value(s.a);
        if (t == DType::Bool) v = op("zext i1 " + v + " to i8");
        std::string p = op("getelementptr inbounds " + mem_type(t) + ", " + ptr(mem_type(t)) + " " +
                           params_[s.param] + ", i64 " + value(s.b));
        line(access("store " + mem_type(t) + " " + v + ", " + ptr(mem_type(t)) + " " + p));
        return;
      }
      case Stmt::Kind::Prefetch: {
        // Read (0), keep in every cache level (3), data (1). The address is computed without
        // `inbounds`: it may lie past the param's end, which a prefetch never faults on.
        DType t = k_.params[s.param].dtype;
        std::string p = op("getelementptr " + mem_type(t) + ", " + ptr(mem_type(t)) + " " +
                           params_[s.param] + ", i64 " + value(s.b));
        if (!dialect::kOpaquePointers) p = op("bitcast " + ptr(mem_type(t)) + " " + p + " to i8*");
        line("call void @" + prefetch_intrinsic() + "(" + ptr("i8") + " " + p +
             ", i32 0, i32 3, i32 1)");
        return;
      }
      default:
        throw std::logic_error("render_llvm: a GPU statement in a host kernel");
    }
  }
  std::string slot(lir::VarId r, const std::string& index) {
    const std::string& arr = arrays_.at(r);
    return op("getelementptr inbounds " + arr + ", " + ptr(arr) + " " + vars_[r] + ", i64 0, i64 " +
              index);
  }

  void loop(const Stmt& s) {
    if (s.loop == Loop::Grid || s.loop == Loop::Blocks || s.loop == Loop::Threads)
      throw std::logic_error("render_llvm: a GPU loop in a host kernel");
    if (s.loop == Loop::Unrolled) {
      for (int64_t v = arg_int(s.a); v < arg_int(s.b); v += s.step) {
        vars_[s.var] = std::to_string(v);
        scoped(s.body);
      }
      return;
    }
    std::string lo = value(s.a), hi = value(s.b);
    std::string pre = block_, head = L(), body = L(), latch = L(), done = L();
    std::string v = "%v" + std::to_string(next_++);
    // A lanes loop's metadata ids: the loop, its three hints, its parallel-accesses hint, its
    // access group, and the list of every enclosing lanes loop's group (for nested ones).
    const int id = s.loop == Loop::Vector ? 900 + 8 * loops_++ : 0;
    if (id) {
      std::string list;
      for (const auto& [group, tag] : groups_) list += "!" + std::to_string(group) + ", ";
      metadata_ << "!" << id + 5 << " = distinct !{}\n!" << id + 6 << " = !{" << list << "!"
                << id + 5 << "}\n";
      groups_.push_back({id + 5, groups_.empty() ? id + 5 : id + 6});
    }
    line("br label %" + head);
    label(head);
    line(v + " = phi i64 [" + lo + ", %" + pre + "], [" + v + ".next, %" + latch + "]");
    std::string more = op("icmp slt i64 " + v + ", " + hi);
    line("br i1 " + more + ", label %" + body + ", label %" + done);
    label(body);
    vars_[s.var] = v;
    scoped(s.body);
    line("br label %" + latch);
    label(latch);
    line(v + ".next = add i64 " + v + ", " + std::to_string(s.step));
    std::string md;
    if (id) {
      // The lanes loop stays a loop, vectorised at its trip count: LLVM would otherwise unroll
      // it first and leave scalar chains (measured: a row max ran 8x slower). Its iterations
      // are independent lanes (each reads and writes its own elements and register slots; an
      // output written in place of an input is read only at each element's own index:
      // codegen/inplace.h), so every memory access in it is in its access group and the loop
      // is marked parallel: LLVM then vectorises it without a run-time overlap check between
      // buffers, whose scalar fallback would keep a reduction's lane registers in memory.
      md = ", !llvm.loop !" + std::to_string(id);
      int64_t width = arg_int(s.b) - arg_int(s.a);
      metadata_ << "!" << id << " = distinct !{!" << id << ", !" << id + 1 << ", !" << id + 2
                << ", !" << id + 3 << ", !" << id + 4 << "}\n!" << id + 1
                << " = !{!\"llvm.loop.unroll.disable\"}\n!" << id + 2
                << " = !{!\"llvm.loop.vectorize.enable\", i1 true}\n!" << id + 3
                << " = !{!\"llvm.loop.vectorize.width\", i32 " << width << "}\n!" << id + 4
                << " = !{!\"llvm.loop.parallel_accesses\", !" << id + 5 << "}\n";
      groups_.pop_back();
    }
    line("br label %" + head + md);
    label(done);
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
    std::string ty = reg_type(t), sty = reg_type(st);
    bool f = fp(st);
    auto bin = [&](const char* fop, const char* iop) {
      return op(std::string(f ? fop : iop) + " " + ty + " " + a[0] + ", " + a[1]);
    };
    switch (n->op) {
      case Op::Const:
        return const_text(n);
      case Op::Var:
        return vars_.at(static_cast<lir::VarId>(arg_int(n)));
      case Op::LoadAt: {
        int p = static_cast<int>(arg_int(n));
        std::string mt = mem_type(t);
        std::string addr = op("getelementptr inbounds " + mt + ", " + ptr(mt) + " " + params_[p] +
                              ", i64 " + a[0]);
        std::string x = op(access("load " + mt + ", " + ptr(mt) + " " + addr));
        return t == DType::Bool ? op("icmp ne i8 " + x + ", 0") : x;
      }
      case Op::RegAt:
        return op(access("load " + ty + ", " + ptr(ty) + " " +
                         slot(static_cast<lir::VarId>(arg_int(n)), a[0])));
      case Op::Neg:
        return op("fneg " + ty + " " + a[0]);
      case Op::Add:
        return bin("fadd", "add");
      case Op::Sub:
        return bin("fsub", "sub");
      case Op::Mul:
        return bin("fmul", "mul");
      case Op::DivT:
        return bin("fdiv", uns(st) ? "udiv" : "sdiv");
      case Op::RemT:
        return bin("frem", uns(st) ? "urem" : "srem");
      case Op::UDiv:
        return bin("udiv", "udiv");
      case Op::URem:
        return bin("urem", "urem");
      case Op::And:
        return bin("and", "and");
      case Op::Or:
        return bin("or", "or");
      case Op::Xor:
        return bin("xor", "xor");
      case Op::Shl:
        return bin("shl", "shl");
      case Op::Shr:
        return bin("lshr", "lshr");
      case Op::Sqrt:
      case Op::Floor:
      case Op::Ceil:
      case Op::Round: {
        const char* fn = n->op == Op::Sqrt    ? "sqrt"
                         : n->op == Op::Floor ? "floor"
                         : n->op == Op::Ceil  ? "ceil"
                                              : "roundeven";
        return op("call " + ty + " @llvm." + fn + "." + sfx(t) + "(" + ty + " " + a[0] + ")");
      }
      case Op::Fma:
        return op("call " + ty + " @llvm.fma." + sfx(t) + "(" + ty + " " + a[0] + ", " + ty + " " +
                  a[1] + ", " + ty + " " + a[2] + ")");
      case Op::CmpLt:
      case Op::CmpLe:
      case Op::CmpEq:
      case Op::CmpNe: {
        static const char* fpred[] = {"olt", "ole", "oeq", "une"};
        static const char* spred[] = {"slt", "sle", "eq", "ne"};
        static const char* upred[] = {"ult", "ule", "eq", "ne"};
        int k = static_cast<int>(n->op) - static_cast<int>(Op::CmpLt);
        if (f) return op(std::string("fcmp ") + fpred[k] + " " + sty + " " + a[0] + ", " + a[1]);
        return op(std::string("icmp ") + (uns(st) ? upred[k] : spred[k]) + " " + sty + " " + a[0] +
                  ", " + a[1]);
      }
      case Op::Where:
        return op("select i1 " + a[0] + ", " + ty + " " + a[1] + ", " + ty + " " + a[2]);
      case Op::Bitcast:
        return op("bitcast " + sty + " " + a[0] + " to " + ty);
      case Op::Cast:
        return cast(st, t, a[0]);
      default:
        throw std::logic_error("render_llvm: " + std::string(op_name(n->op)) + " on " +
                               std::string(name(st)) + " is not a host core op");
    }
  }

  // Core casts only (codegen/core_ops.h): float -> int sees in-range values.
  std::string cast(DType from, DType to, const std::string& x) {
    std::string ft = reg_type(from), tt = reg_type(to);
    if (from == DType::BFloat16) {  // to float32: the bits are the high half
      auto w = op("zext i16 " + x + " to i32");
      return op("bitcast i32 " + op("shl i32 " + w + ", 16") + " to float");
    }
    if (to == DType::BFloat16) {  // from float32: round to nearest even, NaNs quieted
      auto bits = op("bitcast float " + x + " to i32");
      auto hi = op("lshr i32 " + bits + ", 16");
      auto bias = op("add i32 " + op("and i32 " + hi + ", 1") + ", 32767");
      auto rounded = op("lshr i32 " + op("add i32 " + bits + ", " + bias) + ", 16");
      auto quiet = op("or i32 " + hi + ", 64");
      auto nan = op("fcmp uno float " + x + ", " + x);
      auto r = op("select i1 " + nan + ", i32 " + quiet + ", i32 " + rounded);
      return op("trunc i32 " + r + " to i16");
    }
    bool ff = fp(from), tf = fp(to);
    if (ff && tf)
      return op(std::string(bits_of(to) > bits_of(from) ? "fpext " : "fptrunc ") + ft + " " + x +
                " to " + tt);
    if (!ff && tf)
      return op(std::string(uns(from) ? "uitofp " : "sitofp ") + ft + " " + x + " to " + tt);
    if (ff) return op(std::string(uns(to) ? "fptoui " : "fptosi ") + ft + " " + x + " to " + tt);
    if (bits_of(to) < bits_of(from)) return op("trunc " + ft + " " + x + " to " + tt);
    if (bits_of(to) == bits_of(from)) return x;
    return op(std::string(uns(from) ? "zext " : "sext ") + ft + " " + x + " to " + tt);
  }

  const lir::Kernel& k_;
  std::string name_;
  std::ostringstream body_, allocas_, metadata_;
  std::string block_;
  std::vector<std::string> params_;
  std::unordered_map<lir::VarId, std::string> vars_, arrays_;
  lir::PrintedValues printed_;
  int next_ = 0, loops_ = 0;
  // The enclosing lanes loops, outermost first: each one's access group and the metadata its
  // memory accesses are tagged with (its group, or the list of every enclosing loop's group).
  std::vector<std::pair<int, int>> groups_;
};

}  // namespace

std::string print_llvm(const lir::Kernel& k, const std::string& name) {
  return Printer(k, name).module();
}

RenderedKernel render_llvm(const KernelSpec& k, const std::string& name, int threads) {
  DeviceDesc host;
  host.threads = threads;
  Plan plan = optimise(k, host);
  lir::Kernel lowered = lower(k, plan);
  debug_print_lowered(k, plan, lowered, "CPU");
  const bool two_phase = lowered.entries.size() > 1;
  return {name, "; plan: " + plan.str() + "\n" + print_llvm(lowered, name), two_phase,
          two_phase ? lowered.entries[0].items : 0};
}

}  // namespace codegen::cpu
