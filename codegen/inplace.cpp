#include "codegen/inplace.h"

namespace codegen {

using namespace ir;

bool reads_own_index(const View& v, const Shape& shape) {
  if (v.shape != shape || v.offset != 0) return false;
  for (size_t d = 0; d < v.mask.size(); ++d)
    if (v.mask[d].first > 0 || v.mask[d].second < shape[d]) return false;
  auto cs = contiguous_strides(shape);
  for (size_t d = 0; d < shape.size(); ++d)
    if (shape[d] != 1 && v.strides[d] != cs[d]) return false;
  return true;
}

namespace {

// One read of an input by a kernel: whole rows (a contraction, library or attention kernel), a
// gather (at a data-dependent index), or an elementwise load through `view` in the body (part 0) or
// a reduction body (part 1: the rbody, or a row kernel's stages).
struct Read {
  int kernel;
  enum Kind { Whole, Gather, Load } kind;
  int part;
  const View* view;
};

// Every read of each input, found in one walk of each kernel: the check below is then linear
// in the reads of the input it asks about, where walking every kernel for every (output, input)
// pair was cubic (a 4-layer GPT step with its AdamW state: minutes).
std::vector<std::vector<Read>> reads_by_input(const Schedule& s) {
  std::vector<std::vector<Read>> reads(static_cast<size_t>(s.n_inputs));
  auto add = [&](int slot, Read r) {
    if (slot >= 0 && slot < s.n_inputs) reads[static_cast<size_t>(slot)].push_back(r);
  };
  for (size_t j = 0; j < s.kernels.size(); ++j) {
    const KernelSpec& k = s.kernels[j];
    int jk = static_cast<int>(j);
    if (k.contract || k.library || k.fused_attention()) {
      for (size_t p = 1; p < k.slots.size(); ++p) add(k.slots[p], {jk, Read::Whole, 0, nullptr});
      continue;
    }
    for (NodeRef root : k.roots()) {
      const int part = root == k.body ? 0 : 1;
      for (NodeRef n : toposort({root})) {
        if (n->op == Op::LoadAt) add(k.slots[arg_int(n)], {jk, Read::Gather, part, nullptr});
        if (n->op == Op::Load)
          add(k.slots[arg_load(n).param], {jk, Read::Load, part, &arg_load(n).view});
      }
    }
  }
  return reads;
}

Shape row_space(const KernelSpec& k) {
  Shape s = k.shape;
  s.insert(s.end(), k.rshape.begin(), k.rshape.end());
  return s;
}

}  // namespace

std::vector<std::vector<int>> inplace_inputs(const Schedule& s) {
  std::vector<std::vector<int>> out(s.output_slots.size());
  auto reads = reads_by_input(s);
  for (size_t o = 0; o < s.output_slots.size(); ++o) {
    // The first kernel writing the output's slot (a slot may be written more than once, e.g.
    // a value computed there and copied there again): from its run on, the output's memory no
    // longer holds the input, so every later read of the input is a clobbered read.
    int writer = -1;
    for (size_t j = 0; j < s.kernels.size() && writer < 0; ++j)
      if (s.kernels[j].slots[0] == s.output_slots[o]) writer = static_cast<int>(j);
    if (writer < 0) continue;
    const KernelSpec& w = s.kernels[static_cast<size_t>(writer)];
    for (int in = 0; in < s.n_inputs; ++in) {
      bool ok = true;
      for (const Read& r : reads[static_cast<size_t>(in)]) {
        switch (r.kind) {
          case Read::Whole:
            // Reads whole rows (and columns); a product is also built in the output before its
            // epilogue reads anything: no input of such a kernel may share the output's memory.
          case Read::Gather:
            // A Gather's read (LoadAt) is at a data-dependent index: never the output's own.
            if (r.kernel >= writer) ok = false;
            break;
          case Read::Load: {
            // A row kernel writing rows reads each row (its stages, then its body) before it
            // writes that row, in one work item (host) or thread (GPU), or with plan
            // rows:lanes each element in the one thread of its lane: a read of the row's own
            // elements is a read of its own index, in every part.
            bool own_index = r.kernel == writer &&
                             (w.row_out ? reads_own_index(*r.view, row_space(w))
                                        : r.part == 0 && reads_own_index(*r.view, w.shape));
            if (r.kernel > writer || (r.kernel == writer && !own_index)) ok = false;
            break;
          }
        }
        if (!ok) break;
      }
      if (ok) out[o].push_back(in);
    }
  }
  return out;
}

}  // namespace codegen
