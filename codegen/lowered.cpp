#include "codegen/lowered.h"

#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace codegen::lir {

namespace {

const char* loop_name(Loop l) {
  switch (l) {
    case Loop::Serial:
      return "serial";
    case Loop::Vector:
      return "vector";
    case Loop::Unrolled:
      return "unrolled";
    case Loop::Grid:
      return "grid";
    case Loop::Blocks:
      return "blocks";
    case Loop::Threads:
      return "threads";
  }
  return "?";
}

// Prints statements. An expression is nested text over var names; a node that one statement
// reads more than once (a decomposed tanh reads its argument and its parts many times) is
// printed once, as `$N = ...` on a line before the statement, and named where it is used: the
// text grows with the expression's nodes, not with its paths (which grow exponentially).
class Printer {
 public:
  Printer(std::ostringstream& s, const Kernel& k) : s_(s), k_(k) {}

  void block(const Block& b, int depth) {
    for (const Stmt& st : b) statement(st, depth);
  }

 private:
  static bool leaf(ir::NodeRef n) { return n->op == ir::Op::Const || n->op == ir::Op::Var; }

  void count_uses(ir::NodeRef n) {
    if (!n || leaf(n)) return;
    if (uses_[n]++ > 0) return;
    for (ir::NodeRef c : n->src) count_uses(c);
  }

  // Names the shared nodes under n, children first, printing each definition.
  void name_shared(ir::NodeRef n, const std::string& pad) {
    if (!n || leaf(n) || !visited_.insert(n).second) return;
    for (ir::NodeRef c : n->src) name_shared(c, pad);
    if (uses_[n] > 1) {
      std::string name(1, '$');
      name += std::to_string(next_++);
      s_ << pad << name << " = " << expr(n) << "\n";
      names_.emplace(n, std::move(name));
    }
  }

  std::string expr(ir::NodeRef n) {
    if (!n) return "-";
    if (auto it = names_.find(n); it != names_.end()) return it->second;
    switch (n->op) {
      case ir::Op::Const:
        return ir::is_float(n->dtype) ? std::to_string(ir::arg_float(n))
                                      : std::to_string(ir::arg_int(n));
      case ir::Op::Var:
        return var(ir::arg_int(n));
      case ir::Op::LoadAt:
        return param(ir::arg_int(n)) + "[" + expr(n->src[0]) + "]";
      case ir::Op::RegAt:
        return var(ir::arg_int(n)) + "[" + expr(n->src[0]) + "]";
      default:
        break;
    }
    std::string s = std::string(ir::op_name(n->op)) + "." + std::string(ir::name(n->dtype)) + "(";
    for (size_t i = 0; i < n->src.size(); ++i) s += (i ? ", " : "") + expr(n->src[i]);
    return s + ")";
  }

  static std::string param(int64_t p) {
    std::string s(1, 'p');  // (not "p" + ...: g++ 12 warns falsely on that)
    return s += std::to_string(p);
  }
  std::string var(int64_t v) const { return k_.vars[static_cast<size_t>(v)].name; }

  // The statement's expressions, in the order the statement prints them.
  static std::vector<ir::NodeRef> roots(const Stmt& st) {
    std::vector<ir::NodeRef> r{st.a, st.b};
    r.insert(r.end(), st.values.begin(), st.values.end());
    return r;
  }

  void statement(const Stmt& st, int depth) {
    std::string pad(static_cast<size_t>(depth) * 2, ' ');
    uses_.clear(), names_.clear(), visited_.clear();
    const std::vector<ir::NodeRef> rs = roots(st);
    for (ir::NodeRef n : rs) count_uses(n);
    for (ir::NodeRef n : rs) name_shared(n, pad);
    std::string v = st.var >= 0 ? var(st.var) : "";
    switch (st.kind) {
      case Stmt::Kind::For:
        s_ << pad << "for " << v << " in [" << expr(st.a) << ", " << expr(st.b) << ") step "
           << st.step << " " << loop_name(st.loop) << (st.unroll ? " unroll" : "") << ":\n";
        block(st.body, depth + 1);
        break;
      case Stmt::Kind::If:
        s_ << pad << "if " << expr(st.a) << ":\n";
        block(st.body, depth + 1);
        break;
      case Stmt::Kind::Let:
        s_ << pad << v << " = " << expr(st.a) << "\n";
        break;
      case Stmt::Kind::Reg:
        s_ << pad << "reg " << ir::name(st.dtype) << " " << v << "[" << st.count
           << "] = " << expr(st.a) << "\n";
        break;
      case Stmt::Kind::Set:
        s_ << pad << v << "[" << expr(st.b) << "] = " << expr(st.a) << "\n";
        break;
      case Stmt::Kind::Store:
        s_ << pad << "p" << st.param << "[" << expr(st.b) << "] = " << expr(st.a) << "\n";
        break;
      case Stmt::Kind::VLoad:
        s_ << pad << v << " = p" << st.param << "[" << expr(st.b) << " ..+" << st.count << "]\n";
        break;
      case Stmt::Kind::VStore:
        s_ << pad << "p" << st.param << "[" << expr(st.b) << " ..+" << st.count << "] = {"
           << list(st.values) << "}\n";
        break;
      case Stmt::Kind::Shared:
        s_ << pad << "shared " << ir::name(st.dtype) << " " << v << "[" << st.count << "]\n";
        break;
      case Stmt::Kind::Barrier:
        s_ << pad << "barrier\n";
        break;
      case Stmt::Kind::Prefetch:
        s_ << pad << "prefetch p" << st.param << "[" << expr(st.b) << "]\n";
        break;
      case Stmt::Kind::AsyncCopy:
        s_ << pad << v << "[" << expr(st.a) << " ..+" << st.count << "] = async p" << st.param
           << "[" << expr(st.b) << " ..+" << st.count << "] if " << expr(st.values.at(0)) << "\n";
        break;
      case Stmt::Kind::AsyncWait:
        s_ << pad << "async wait\n";
        break;
      case Stmt::Kind::Mma:
        s_ << pad << "mma m16n8k" << st.count << " " << ir::name(st.dtype) << " " << v << "["
           << expr(st.b) << " ..+4] += {" << list(st.values) << "}\n";
        break;
    }
  }

  std::string list(const std::vector<ir::NodeRef>& values) {
    std::string s;
    for (size_t i = 0; i < values.size(); ++i) s += (i ? ", " : "") + expr(values[i]);
    return s;
  }

  std::ostringstream& s_;
  const Kernel& k_;
  std::unordered_map<ir::NodeRef, int> uses_;
  std::unordered_map<ir::NodeRef, std::string> names_;
  std::unordered_set<ir::NodeRef> visited_;
  int next_ = 0;
};

}  // namespace

const std::string* PrintedValues::find(ir::NodeRef n) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
    if (auto f = it->find(n); f != it->end()) return &f->second;
  return nullptr;
}

void PrintedValues::add(ir::NodeRef n, std::string printed) {
  scopes_.back()[n] = std::move(printed);
  if (reads_register(n)) reads_.push_back(n);
}

void PrintedValues::end_statement() {
  for (ir::NodeRef n : reads_)
    for (auto& scope : scopes_) scope.erase(n);
  reads_.clear();
}

bool PrintedValues::reads_register(ir::NodeRef n) {
  if (auto it = reads_register_.find(n); it != reads_register_.end()) return it->second;
  bool r = n->op == ir::Op::RegAt && !immutable_.count(static_cast<VarId>(ir::arg_int(n)));
  for (ir::NodeRef s : n->src) r = r || reads_register(s);
  return reads_register_[n] = r;
}

std::string to_string(const Kernel& k) {
  std::ostringstream s;
  s << "params:";
  for (const auto& p : k.params) s << " " << ir::name(p.dtype) << (p.written ? "*" : "");
  s << "\n";
  for (const auto& e : k.entries) {
    s << "entry" << e.suffix << " items " << e.items << " threads " << e.threads;
    if (e.block) s << " block " << e.block;
    s << ":\n";
    Printer p(s, k);
    p.block(e.head, 1);
    if (!e.aligned_body.empty()) {
      s << "  when aligned to 16 bytes:\n";
      p.block(e.aligned_body, 2);
      s << "  otherwise:\n";
    }
    p.block(e.body, 1);
  }
  return s.str();
}

}  // namespace codegen::lir
