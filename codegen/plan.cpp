#include "codegen/plan.h"

#include <cstdlib>
#include <sstream>

#include "ir/env.h"

namespace codegen {

using namespace ir;

namespace {

// The innermost reduced axis longer than 1 has stride 0 or +-1 in every load of rbody: 8
// neighbouring lanes read neighbouring addresses.
bool reduction_contiguous(const KernelSpec& k) {
  size_t nk = k.shape.size(), nr = k.rshape.size(), axis = nr;
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
      if (v.strides[nk + axis] < -1 || v.strides[nk + axis] > 1) return false;
    }
  return true;
}

// Every load of an elementwise kernel reads the output's own index (C-contiguous over the
// output's shape, unmasked, from an offset that is a multiple of 4) or one element: 4
// consecutive outputs read 4 consecutive elements of each param.
bool vector4_possible(const KernelSpec& k) {
  if (k.rbody || k.contract || k.library || !k.body || numel(k.shape) < 4) return false;
  const View flat = View::contiguous(k.shape);
  for (NodeRef n : toposort({k.body})) {
    if (n->op == Op::Valid || n->op == Op::Index) return false;
    if (n->op != Op::Load) continue;
    const View& v = arg_load(n).view;
    if (!v.mask.empty() || v.strides.size() != k.shape.size()) return false;
    bool scalar = true, same = v.offset % 4 == 0;
    for (size_t a = 0; a < k.shape.size(); ++a) {
      if (v.strides[a] != 0) scalar = false;
      if (k.shape[a] > 1 && v.strides[a] != flat.strides[a]) same = false;
    }
    if (!scalar && !same) return false;
  }
  return true;
}

bool reduction(const KernelSpec& k) { return k.rbody && !k.contract && !k.library; }

}  // namespace

std::string Plan::str() const {
  std::ostringstream s;
  if (!gpu) {
    s << "host lanes:" << (vector_lanes ? "vector" : "unrolled") << " group:" << group;
  } else {
    s << "gpu lanes:" << (lane_threads ? "threads/" + std::to_string(lane_unroll) : "unrolled");
    if (vector4) s << " vec4";
  }
  return s.str();
}

std::optional<Plan> parse_plan(const std::string& text, std::string* error) {
  auto fail = [&](const std::string& why) -> std::optional<Plan> {
    if (error) *error = "plan \"" + text + "\": " + why;
    return std::nullopt;
  };
  std::istringstream in(text);
  std::string word;
  if (!(in >> word) || (word != "host" && word != "gpu")) return fail("starts with host or gpu");
  Plan p;
  p.gpu = word == "gpu";
  p.vector_lanes = !p.gpu;
  while (in >> word) {
    if (!p.gpu && word == "lanes:vector") {
      p.vector_lanes = true;
    } else if (word == "lanes:unrolled") {
      p.vector_lanes = false, p.lane_threads = false;
    } else if (!p.gpu && word.rfind("group:", 0) == 0) {
      p.group = std::atoi(word.c_str() + 6);
      if (p.group != 1 && p.group != 16) return fail("group is 1 or 16");
    } else if (p.gpu && word.rfind("lanes:threads/", 0) == 0) {
      p.lane_threads = true;
      p.lane_unroll = std::atoi(word.c_str() + 14);
      if (p.lane_unroll < 0 || p.lane_unroll > 64) return fail("unroll is 0 to 64");
    } else if (p.gpu && word == "vec4") {
      p.vector4 = true;
    } else {
      return fail("unknown part \"" + word + "\"");
    }
  }
  return p;
}

std::string validate(const KernelSpec& k, const Plan& plan) {
  // Parts that do not apply to a kernel's kind are ignored by lower (a plan can be forced on a
  // whole program); what remains must be possible.
  if (plan.group != 1 && plan.gpu) return "group:" + std::to_string(plan.group) + " is a host plan";
  if (plan.lane_threads && !plan.gpu) return "lanes:threads is a GPU plan";
  if (plan.vector4 && !plan.gpu) return "vec4 is a GPU plan";
  if (plan.vector4 && !k.rbody && !k.contract && !k.library && !vector4_possible(k))
    return "vec4 needs every load to read the output's own index (from an offset that is a "
           "multiple of 4) or one element";
  return "";
}

Plan optimise(const KernelSpec& k, const DeviceDesc& device) {
  Plan p;
  p.gpu = device.gpu;
  p.vector_lanes = !device.gpu;
  if (!device.gpu && reduction(k) && k.blocks() == 1 && !k.shape.empty() && k.shape.back() >= 16) {
    // Grouping pays when the reduced expression reads memory contiguous along the output's last
    // axis (a matmul's right operand), and stays small enough to compile quickly.
    auto nodes = toposort({k.rbody});
    bool contiguous_out = false;
    for (NodeRef n : nodes)
      if (n->op == Op::Load && arg_load(n).view.strides[k.shape.size() - 1] == 1)
        contiguous_out = true;
    if (contiguous_out && nodes.size() <= 48) p.group = 16;
  }
  if (device.gpu && device.lane_exchange && reduction(k) && numel(k.rshape) >= 2 * kReduceLanes &&
      reduction_contiguous(k)) {
    p.lane_threads = true;
    p.lane_unroll = device.lane_unroll;
  }
  if (device.gpu && device.vector_types && vector4_possible(k)) p.vector4 = true;
  // RUNE_PLAN, read once: where valid for this kernel on this kind of device, it replaces the
  // default (the bits cannot change; tests/lower/test_plans.cpp checks that they do not).
  static const std::optional<Plan> forced = []() -> std::optional<Plan> {
    const auto& text = ir::env::value(ir::env::Var::Plan);
    if (!text || text->empty()) return std::nullopt;
    return parse_plan(*text);
  }();
  if (forced && forced->gpu == device.gpu && validate(k, *forced).empty()) return *forced;
  return p;
}

}  // namespace codegen
