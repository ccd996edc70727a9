#include "codegen/lowered.h"

#include <sstream>

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

// An expression as nested text over var names (shared nodes repeat; this is for reading).
std::string expr(const Kernel& k, ir::NodeRef n) {
  if (!n) return "-";
  switch (n->op) {
    case ir::Op::Const:
      return ir::is_float(n->dtype) ? std::to_string(ir::arg_float(n))
                                    : std::to_string(ir::arg_int(n));
    case ir::Op::Var:
      return k.vars[static_cast<size_t>(ir::arg_int(n))].name;
    case ir::Op::LoadAt:
      return "p" + std::to_string(ir::arg_int(n)) + "[" + expr(k, n->src[0]) + "]";
    case ir::Op::RegAt:
      return k.vars[static_cast<size_t>(ir::arg_int(n))].name + "[" + expr(k, n->src[0]) + "]";
    default:
      break;
  }
  std::string s = std::string(ir::op_name(n->op)) + "." + std::string(ir::name(n->dtype)) + "(";
  for (size_t i = 0; i < n->src.size(); ++i) s += (i ? ", " : "") + expr(k, n->src[i]);
  return s + ")";
}

void block(std::ostringstream& s, const Kernel& k, const Block& b, int depth) {
  std::string pad(static_cast<size_t>(depth) * 2, ' ');
  for (const Stmt& st : b) {
    std::string v = st.var >= 0 ? k.vars[static_cast<size_t>(st.var)].name : "";
    switch (st.kind) {
      case Stmt::Kind::For:
        s << pad << "for " << v << " in [" << expr(k, st.a) << ", " << expr(k, st.b) << ") step "
          << st.step << " " << loop_name(st.loop) << (st.unroll ? " unroll" : "") << ":\n";
        block(s, k, st.body, depth + 1);
        break;
      case Stmt::Kind::If:
        s << pad << "if " << expr(k, st.a) << ":\n";
        block(s, k, st.body, depth + 1);
        break;
      case Stmt::Kind::Let:
        s << pad << v << " = " << expr(k, st.a) << "\n";
        break;
      case Stmt::Kind::Reg:
        s << pad << "reg " << ir::name(st.dtype) << " " << v << "[" << st.count
          << "] = " << expr(k, st.a) << "\n";
        break;
      case Stmt::Kind::Set:
        s << pad << v << "[" << expr(k, st.b) << "] = " << expr(k, st.a) << "\n";
        break;
      case Stmt::Kind::Store:
        s << pad << "p" << st.param << "[" << expr(k, st.b) << "] = " << expr(k, st.a) << "\n";
        break;
      case Stmt::Kind::VLoad:
        s << pad << v << " = p" << st.param << "[" << expr(k, st.b) << " ..+" << st.count << "]\n";
        break;
      case Stmt::Kind::VStore:
        s << pad << "p" << st.param << "[" << expr(k, st.b) << " ..+" << st.count << "] = {";
        for (size_t i = 0; i < st.values.size(); ++i) s << (i ? ", " : "") << expr(k, st.values[i]);
        s << "}\n";
        break;
      case Stmt::Kind::Shared:
        s << pad << "shared " << ir::name(st.dtype) << " " << v << "[" << st.count << "]\n";
        break;
      case Stmt::Kind::Barrier:
        s << pad << "barrier\n";
        break;
      case Stmt::Kind::AsyncCopy:
        s << pad << v << "[" << expr(k, st.a) << " ..+" << st.count << "] = async p" << st.param
          << "[" << expr(k, st.b) << " ..+" << st.count << "] if " << expr(k, st.values.at(0))
          << "\n";
        break;
      case Stmt::Kind::AsyncWait:
        s << pad << "async wait\n";
        break;
      case Stmt::Kind::Mma:
        s << pad << "mma m16n8k" << st.count << " " << ir::name(st.dtype) << " " << v << "["
          << expr(k, st.b) << " ..+4] += {";
        for (size_t i = 0; i < st.values.size(); ++i) s << (i ? ", " : "") << expr(k, st.values[i]);
        s << "}\n";
        break;
    }
  }
}

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
    block(s, k, e.head, 1);
    if (!e.aligned_body.empty()) {
      s << "  when aligned to 16 bytes:\n";
      block(s, k, e.aligned_body, 2);
      s << "  otherwise:\n";
    }
    block(s, k, e.body, 1);
  }
  return s.str();
}

}  // namespace codegen::lir
