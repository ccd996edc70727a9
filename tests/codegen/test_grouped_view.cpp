// codegen::GroupedView, the contraction operand whose axes span several view axes (a
// convolution's windows read in place): which movement ops keep it, and the offsets it gives.
#include <gtest/gtest.h>

#include "codegen/grouped_view.h"
#include "ir/node.h"

namespace {

using codegen::GroupedView;
using ir::Op;

ir::NodeRef node(Op op, const ir::Shape& shape, ir::Arg arg = {}) {
  static ir::NodeUse use;
  ir::NodeRef src = ir::contiguous_param(0, ir::DType::Float32, {1});
  return ir::make(op, ir::DType::Float32, shape, {src}, std::move(arg));
}

// Windows of a [2, 3, 6] input along its last axis (4 windows of 3, stride 1), permuted to
// [2, 4, 3, 3]: the rows (batch, position) and columns (channel, tap) of an im2col.
GroupedView windows() {
  ir::View v = *ir::View::contiguous({2, 3, 6}).window(2, 4, 3, 1, 1);
  v = v.permute({0, 2, 1, 3});
  return GroupedView::of(v);
}

TEST(GroupedView, AMergingReshapeGroupsAxesNoStrideMerges) {
  auto g = windows().through(node(Op::Reshape, {8, 9}));
  ASSERT_TRUE(g);
  EXPECT_EQ(g->logical_shape(), (ir::Shape{8, 9}));
  EXPECT_EQ(g->groups, (std::vector<int>{2, 2}));
  // Row (b, o) at b * 18 + o; column (c, j) at c * 6 + j: x[b, c, o + j].
  EXPECT_EQ(g->offsets(0), (std::vector<int64_t>{0, 1, 2, 3, 18, 19, 20, 21}));
  EXPECT_EQ(g->offsets(1), (std::vector<int64_t>{0, 1, 2, 6, 7, 8, 12, 13, 14}));
}

TEST(GroupedView, APermuteMovesWholeGroupsAndAnExpandWidensAnExtentOneAxis) {
  auto g = windows().through(node(Op::Reshape, {1, 8, 9}));
  ASSERT_TRUE(g);
  auto t = g->through(node(Op::Permute, {1, 9, 8}, std::vector<int64_t>{0, 2, 1}));
  ASSERT_TRUE(t);
  EXPECT_EQ(t->logical_shape(), (ir::Shape{1, 9, 8}));
  EXPECT_EQ(t->offsets(2), g->offsets(1));
  auto e = t->through(node(Op::Expand, {5, 9, 8}));
  ASSERT_TRUE(e);
  EXPECT_EQ(e->logical_shape(), (ir::Shape{5, 9, 8}));
  EXPECT_EQ(e->offsets(0), (std::vector<int64_t>{0, 0, 0, 0, 0}));
}

TEST(GroupedView, AxesWhoseStridesChainAreOneAxis) {
  // A contiguous [2, 3, 4] merged to [6, 4]: one view axis per group, a plain view.
  auto g = GroupedView::of(ir::View::contiguous({2, 3, 4})).through(node(Op::Reshape, {6, 4}));
  ASSERT_TRUE(g);
  EXPECT_TRUE(g->plain());
}

TEST(GroupedView, WhatNoGroupExpressesFails) {
  auto g = windows().through(node(Op::Reshape, {8, 9}));
  ASSERT_TRUE(g);
  // Splitting a group, shrinking or flipping it: no longer a product of whole axes.
  EXPECT_FALSE(g->through(node(Op::Reshape, {4, 2, 9})));
  EXPECT_FALSE(g->through(node(Op::Shrink, {4, 9}, ir::Pairs{{0, 4}, {0, 9}})));
  EXPECT_FALSE(g->through(node(Op::Flip, {8, 9}, std::vector<int64_t>{0})));
  // A reshape that mixes axes across group borders.
  EXPECT_FALSE(windows().through(node(Op::Reshape, {2, 6, 6})));
  // Windows of a padded (masked) axis are no view.
  EXPECT_FALSE(ir::View::contiguous({6}).pad({{1, 1}}).window(0, 6, 3, 1, 1));
}

}  // namespace
