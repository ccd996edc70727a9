#include "codegen/kernel.h"

namespace codegen {

namespace {
ir::Shape logical(const ir::View& v, const std::vector<int>& groups) {
  if (groups.empty()) return v.shape;
  ir::Shape s;
  size_t at = 0;
  for (int n : groups) {
    int64_t e = 1;
    for (int i = 0; i < n; ++i) e *= v.shape[at++];
    s.push_back(e);
  }
  return s;
}
}  // namespace

ir::Shape Contraction::a_shape() const { return logical(a, a_groups); }
ir::Shape Contraction::b_shape() const { return logical(b, b_groups); }

int64_t KernelSpec::reduce_size() const { return rbody || row() ? ir::numel(rshape) : 0; }
int64_t KernelSpec::blocks() const {
  int64_t r = reduce_size();
  return r <= kReduceBlock ? 1 : (r + kReduceBlock - 1) / kReduceBlock;
}

int64_t KernelSpec::out_numel() const {
  return ir::numel(shape) * (row_out ? ir::numel(rshape) : 1);
}

std::vector<ir::NodeRef*> KernelSpec::roots() {
  std::vector<ir::NodeRef*> r;
  if (body) r.push_back(&body);
  if (rbody) r.push_back(&rbody);
  for (auto& s : stages) r.push_back(&s.rbody);
  return r;
}
std::vector<ir::NodeRef> KernelSpec::roots() const {
  std::vector<ir::NodeRef> r;
  if (body) r.push_back(body);
  if (rbody) r.push_back(rbody);
  for (const auto& s : stages) r.push_back(s.rbody);
  return r;
}

}  // namespace codegen
