#include "codegen/lower/builder.h"

#include <stdexcept>

#include "codegen/core_ops.h"
#include "codegen/lower.h"
#include "ir/rewrite.h"

namespace codegen::lowering {

NodeRef I(int64_t v) { return b::ci(DType::Int64, v); }
NodeRef add(NodeRef a, NodeRef c) { return b::add(a, c); }
NodeRef mul(NodeRef a, int64_t s) { return s == 1 ? a : b::mul(a, I(s)); }
static NodeRef index_op(Op op, NodeRef a, int64_t d) {
  if (a->op == Op::Const) return I(op == Op::UDiv ? arg_int(a) / d : arg_int(a) % d);
  return make(op, DType::Int64, {}, {a, I(d)});
}
NodeRef udiv(NodeRef a, int64_t d) { return d == 1 ? a : index_op(Op::UDiv, a, d); }
NodeRef urem(NodeRef a, int64_t d) { return d == 1 ? I(0) : index_op(Op::URem, a, d); }
NodeRef udiv(NodeRef a, NodeRef d) { return make(Op::UDiv, DType::Int64, {}, {a, d}); }
NodeRef urem(NodeRef a, NodeRef d) { return make(Op::URem, DType::Int64, {}, {a, d}); }
NodeRef min(NodeRef a, NodeRef c) { return b::where(b::lt(a, c), a, c); }

AxisDims operand_axis(const Contraction& c, bool is_a, int axis) {
  const View& v = is_a ? c.a : c.b;
  const std::vector<int>& groups = is_a ? c.a_groups : c.b_groups;
  if (groups.empty()) return {{v.shape[axis], v.strides[axis]}};
  size_t at = 0;
  for (int d = 0; d < axis; ++d) at += groups[d];
  AxisDims r;
  for (int i = 0; i < groups[axis]; ++i) r.push_back({v.shape[at + i], v.strides[at + i]});
  return r;
}

NodeRef offset_along(NodeRef i, const AxisDims& dims) {
  if (dims.size() == 1) return mul(i, dims[0].second);
  NodeRef off = nullptr, rest = i;
  for (size_t d = dims.size(); d-- > 0;) {
    NodeRef term = mul(d == 0 ? rest : urem(rest, dims[d].first), dims[d].second);
    off = off ? add(term, off) : term;
    if (d > 0) rest = udiv(rest, dims[d].first);
  }
  return off;
}

std::vector<NodeRef> unflatten(NodeRef flat, const Shape& dims) {
  std::vector<NodeRef> idx(dims.size());
  NodeRef rest = flat;
  for (size_t d = dims.size(); d-- > 0;) {
    if (d == 0) {
      idx[0] = rest;
      break;
    }
    int64_t n = dims[d] == 0 ? 1 : dims[d];  // 0: the kernel never runs
    idx[d] = urem(rest, n);
    rest = udiv(rest, n);
  }
  return idx;
}

NodeRef offset_of(const View& v, const std::vector<NodeRef>& idx) {
  NodeRef off = I(v.offset);
  for (size_t d = 0; d < v.shape.size(); ++d)
    if (v.strides[d] != 0) off = add(off, mul(idx.at(d), v.strides[d]));
  return off;
}
NodeRef valid_of(const View& v, const std::vector<NodeRef>& idx) {
  NodeRef ok = b::ci(DType::Bool, 1);
  for (size_t d = 0; d < v.mask.size(); ++d) {
    auto [lo, hi] = v.mask[d];
    if (lo <= 0 && hi >= v.shape[d]) continue;
    NodeRef in = b::band(b::le(I(lo), idx.at(d)), b::lt(idx.at(d), I(hi)));
    ok = ok->op == Op::Const ? in : b::band(ok, in);
  }
  return ok;
}
NodeRef zero(DType t) { return is_float(t) ? b::cf(t, 0) : b::ci(t, 0); }
NodeRef load_at(int param, DType t, NodeRef index) {
  return make(Op::LoadAt, t, {}, {index}, int64_t{param});
}
NodeRef widen(NodeRef x, DType t) { return x->dtype == t ? x : legalize(b::cast(x, t)); }

Builder::Builder(const KernelSpec& k, const Plan& p) : k_(k), p_(p) {
  out_.vars = {{"lo", DType::Int64}, {"hi", DType::Int64}};
  out_.params = codegen::kernel_params(k);
}

NodeRef Builder::let(const std::string& name, NodeRef value) {
  VarId v = var(name, value->dtype);
  Stmt s{Stmt::Kind::Let};
  s.var = v, s.a = value, s.dtype = value->dtype;
  emit(std::move(s));
  return V(v);
}
VarId Builder::reg(const std::string& name, DType t, int64_t count, NodeRef init) {
  VarId v = var(name, t);
  Stmt s{Stmt::Kind::Reg};
  s.var = v, s.dtype = t, s.count = count, s.a = init;
  emit(std::move(s));
  return v;
}
void Builder::set(VarId r, NodeRef slot, NodeRef value) {
  Stmt s{Stmt::Kind::Set};
  s.var = r, s.b = slot, s.a = value;
  emit(std::move(s));
}
void Builder::store(int param, NodeRef index, NodeRef value) {
  if (auto t = shared_tiles_.find(param); t != shared_tiles_.end())
    return set(t->second.array, b::sub(index, t->second.base), value);
  Stmt s{Stmt::Kind::Store};
  s.param = param, s.b = index, s.a = value;
  emit(std::move(s));
}
void Builder::prefetch(int param, NodeRef index) {
  Stmt s{Stmt::Kind::Prefetch};
  s.param = param, s.b = index;
  emit(std::move(s));
}
VarId Builder::shared(const std::string& name, DType t, int64_t count) {
  VarId v = var(name, t);
  Stmt s{Stmt::Kind::Shared};
  s.var = v, s.dtype = t, s.count = count;
  emit(std::move(s));
  return v;
}

NodeRef Builder::at_index(NodeRef root, const std::vector<NodeRef>& idx,
                          const std::vector<NodeRef>& accs,
                          const std::map<NodeRef, NodeRef>& loaded) {
  NodeRef r = rewrite(root, [&](NodeRef n, const std::vector<NodeRef>&) -> NodeRef {
    if (auto it = loaded.find(n); it != loaded.end()) return it->second;
    switch (n->op) {
      case Op::Load: {
        const auto& la = arg_load(n);
        NodeRef ok = valid_of(la.view, idx), off = offset_of(la.view, idx);
        if (auto t = shared_tiles_.find(la.param); t != shared_tiles_.end()) {
          if (ok->op != Op::Const) throw std::logic_error("lower: a masked read of a shared tile");
          return at(t->second.array, b::sub(off, t->second.base));
        }
        if (ok->op == Op::Const) return load_at(la.param, n->dtype, off);
        return b::where(ok, load_at(la.param, n->dtype, b::where(ok, off, I(0))), zero(n->dtype));
      }
      case Op::Valid:
        return valid_of(arg_view(n), idx);
      case Op::Index:
        return offset_of(arg_view(n), idx);
      case Op::Acc:
        return accs.at(std::holds_alternative<int64_t>(n->arg) ? arg_int(n) : 0);
      default:
        return nullptr;
    }
  });
  return legalize(r);
}

}  // namespace codegen::lowering
