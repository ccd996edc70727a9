#include "codegen/inplace.h"

namespace codegen {

using namespace ir;

namespace {

// Whether `v` addresses element k of a contiguous buffer of `shape` at index k.
bool reads_own_index(const View& v, const Shape& shape) {
  if (v.shape != shape || v.offset != 0) return false;
  for (size_t d = 0; d < v.mask.size(); ++d)
    if (v.mask[d].first > 0 || v.mask[d].second < shape[d]) return false;
  auto cs = contiguous_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && v.strides[d] != cs[d]) return false;
  return true;
}

}  // namespace

std::vector<std::vector<int>> inplace_inputs(const Schedule& s) {
  std::vector<std::vector<int>> out(s.output_slots.size());
  for (size_t o = 0; o < s.output_slots.size(); ++o) {
    // The first kernel writing the output's slot (a slot may be written more than once, e.g.
    // a value computed there and copied there again): from its run on, the output's memory no
    // longer holds the input, so every later read of the input is a clobbered read.
    int writer = -1;
    for (size_t j = 0; j < s.kernels.size() && writer < 0; ++j)
      if (s.kernels[j].slots[0] == s.output_slots[o]) writer = static_cast<int>(j);
    if (writer < 0) continue;
    const KernelSpec& w = s.kernels[writer];
    for (int in = 0; in < s.n_inputs; ++in) {
      bool ok = true;
      for (size_t j = 0; j < s.kernels.size() && ok; ++j) {
        const KernelSpec& k = s.kernels[j];
        if (k.contract || k.library) {
          // Reads whole rows (and columns); a product is also built in the output before its
          // epilogue reads anything: no input of such a kernel may share the output's memory.
          for (size_t p = 1; p < k.slots.size(); ++p)
            if (k.slots[p] == in && static_cast<int>(j) >= writer) ok = false;
          continue;
        }
        for (int part = 0; part < 2 && ok; ++part) {
          NodeRef root = part == 0 ? k.body : k.rbody;
          if (!root) continue;
          for (NodeRef n : toposort({root})) {
            // A Gather's read (LoadAt) is at a data-dependent index: never the output's own.
            if (n->op == Op::LoadAt && k.slots[arg_int(n)] == in && static_cast<int>(j) >= writer)
              ok = false;
            if (n->op != Op::Load || k.slots[arg_load(n).param] != in) continue;
            bool own_index = static_cast<int>(j) == writer && part == 0 &&
                             reads_own_index(arg_load(n).view, w.shape);
            if (static_cast<int>(j) > writer || (static_cast<int>(j) == writer && !own_index))
              ok = false;
          }
        }
      }
      if (ok) out[o].push_back(in);
    }
  }
  return out;
}

}  // namespace codegen
