#include "codegen/kernel.h"

#include "codegen/grouped_view.h"

namespace codegen {

ir::Shape Contraction::a_shape() const {
  return a_groups.empty() ? a.shape : GroupedView{a, a_groups}.logical_shape();
}
ir::Shape Contraction::b_shape() const {
  return b_groups.empty() ? b.shape : GroupedView{b, b_groups}.logical_shape();
}

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
  for (auto& part : attention)
    for (ir::NodeRef* p : part.roots()) r.push_back(p);
  return r;
}
std::vector<ir::NodeRef> KernelSpec::roots() const {
  std::vector<ir::NodeRef> r;
  if (body) r.push_back(body);
  if (rbody) r.push_back(rbody);
  for (const auto& s : stages) r.push_back(s.rbody);
  for (const auto& part : attention)
    for (ir::NodeRef p : part.roots()) r.push_back(p);
  return r;
}

}  // namespace codegen
