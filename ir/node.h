// The one node type used at every level: tensor graphs (nodes with shapes) and lowered kernel
// bodies (scalar nodes, empty shape). Nodes are immutable and interned: two structurally equal
// nodes are the same pointer, so a node pointer is its own structural cache key.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "ir/dtype.h"
#include "ir/host_fn.h"
#include "ir/shape.h"

namespace ir {

enum class Op : uint8_t {
#define X(name, arity, cat) name,
#include "ir/ops.def"
#undef X
};
enum class OpCategory : uint8_t {
  Leaf,
  Unary,
  Binary,
  Ternary,
  Reduce,
  Contract,
  Library,
  Movement,
  Gather,  // data-dependent reads (ir/ops.def's Gather)
  Kernel
};

// The result dtype rule of ir/ops.def's elementwise rows: Same as the (first) operand, Bool, or
// Given (the node's dtype, chosen by its maker: Cast, Bitcast, and every non-elementwise op).
enum class OpResult : uint8_t { Same, Bool, Given };

std::string_view op_name(Op op);
int op_arity(Op op);
OpCategory op_category(Op op);
OpResult op_result(Op op);
// Whether decompose rewrites the op into others (ir/ops.def's lowering column Decomposed), so no
// renderer sees it.
bool op_decomposed(Op op);
inline bool is_elementwise(Op op) {
  auto c = op_category(op);
  return c == OpCategory::Unary || c == OpCategory::Binary || c == OpCategory::Ternary;
}
inline bool is_reduce(Op op) { return op_category(op) == OpCategory::Reduce; }
inline bool is_movement(Op op) { return op_category(op) == OpCategory::Movement; }

using Pairs = std::vector<std::pair<int64_t, int64_t>>;
struct LoadArg {
  int param;
  View view;
  bool operator==(const LoadArg&) const = default;
};
// The closed set of node arguments.
using Arg = std::variant<std::monostate, int64_t, double, std::vector<int64_t>, Pairs, View,
                         LoadArg, HostFnArg>;

struct Node;
using NodeRef = const Node*;

struct Node {
  Op op;
  DType dtype;
  Shape shape;  // empty for scalar kernel nodes and 0-d tensors alike
  std::vector<NodeRef> src;
  Arg arg;
  size_t hash;
  uint64_t id;  // creation order, for stable topological sorts
};

// Returns the unique node with these fields (created on first use; freed by collect_nodes once
// nothing holds it).
NodeRef make(Op op, DType dtype, Shape shape, std::vector<NodeRef> src, Arg arg = {});
// Param `index` read as a contiguous tensor of this dtype and shape.
NodeRef contiguous_param(int index, DType dtype, const Shape& shape);
// How many nodes the intern table holds (for memory reports and tests).
size_t interned_nodes();

// Node collection (docs/design-notes.md "Bounded queues and caches"). The intern table is a
// cache: a node survives a collection when it is reachable from a registered root set (every
// structure that keeps nodes beyond one call registers one: the compile caches' keys, a
// compiled function's checks), or while any thread holds a NodeUse (a trace or a compile in
// progress: every node it holds stays). A collection runs only when no NodeUse is alive.
class NodeUse {
 public:
  NodeUse();
  ~NodeUse();
  NodeUse(const NodeUse&) = delete;
  NodeUse& operator=(const NodeUse&) = delete;
};
using NodeRootsFn = std::function<void(std::vector<NodeRef>&)>;
// Registers a root set (called under the collector's lock: it must not wait for a NodeUse);
// returns its id for remove_node_roots.
int add_node_roots(NodeRootsFn roots);
void remove_node_roots(int id);
// Frees every node unreachable from the roots, if no NodeUse is alive anywhere (else does
// nothing); returns how many it freed.
size_t collect_nodes();
// Collects when the table has grown past its limit: twice its size after the last collection,
// and at least RUNE_NODE_TABLE_MIN nodes (default 262144). Cheap when it has not.
void maybe_collect_nodes();

// Argument accessors (throw std::logic_error on the wrong alternative).
int64_t arg_int(NodeRef n);
double arg_float(NodeRef n);
const std::vector<int64_t>& arg_ints(NodeRef n);
const Pairs& arg_pairs(NodeRef n);
const View& arg_view(NodeRef n);
const LoadArg& arg_load(NodeRef n);
const HostFn& arg_host_fn(NodeRef n);

// Nodes reachable from roots, sources before users, in a deterministic order.
std::vector<NodeRef> toposort(const std::vector<NodeRef>& roots);
std::string to_string(NodeRef n);  // one line per node, for DEBUG=5 and errors

}  // namespace ir
