// A contraction operand read through a strided view whose logical axes may each span several
// axes of the view: the im2col matrix of a convolution, [(n, oh, ow), (c, kh, kw)], read
// straight from the windows of the input (ir::Op::Window) with no copy, so the product is an
// implicit GEMM. Logical index i of an axis is split row-major over its group's view axes; its
// element offset is the sum of those parts times their strides. Only movement ops that keep
// that form apply (merging reshapes, permutes, expands of size-1 axes); anything else makes the
// caller copy, as a reshape no strided view expresses always has.
#pragma once
#include <optional>
#include <vector>

#include "ir/node.h"
#include "ir/shape.h"

namespace codegen {

// A movement op (not Copy) applied to a view, or nullopt where no strided view expresses it: a
// reshape the strides do not allow, windows along a masked (padded) axis.
std::optional<ir::View> view_through(const ir::View& v, ir::NodeRef m);

struct GroupedView {
  ir::View view;            // over the view axes, group after group
  std::vector<int> groups;  // view axes per logical axis, each >= 1 (an extent-1 logical axis
                            // is one axis of extent 1)

  static GroupedView of(const ir::View& v);
  ir::Shape logical_shape() const;
  bool plain() const;  // one view axis per logical axis: `view` itself is the operand's view
  // The view after the movement op `m` (whose source is this), or nullopt.
  std::optional<GroupedView> through(ir::NodeRef m) const;
  // The element offset of each index along logical axis `axis` (its group's part of the
  // address; the view's offset not included).
  std::vector<int64_t> offsets(int axis) const;
};

}  // namespace codegen
