#include "ir/node.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <map>
#include <mutex>
#include <shared_mutex>
#include <sstream>
#include <stdexcept>
#include <unordered_map>
#include <unordered_set>

#include "ir/env.h"

namespace ir {

namespace {
struct OpInfo {
  std::string_view name;
  int arity;
  OpCategory cat;
  OpResult result = OpResult::Given;
  bool decomposed = false;
};
enum Lowering { Core, Decomposed };
constexpr OpInfo kOps[] = {
#define X(name, arity, cat) {#name, arity, OpCategory::cat},
#define X_UNARY(name, nx, domain, result, lowering, derivative) \
  {#name, 1, OpCategory::Unary, OpResult::result, lowering == Decomposed},
#define X_BINARY(name, nx, domain, result, lowering) \
  {#name, 2, OpCategory::Binary, OpResult::result, lowering == Decomposed},
#include "ir/ops.def"
#undef X
#undef X_UNARY
#undef X_BINARY
};

size_t mix(size_t h, size_t v) { return (h ^ (v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2))); }

size_t hash_arg(const Arg& a) {
  size_t h = a.index();
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, int64_t>)
          h = mix(h, static_cast<size_t>(v));
        else if constexpr (std::is_same_v<T, double>)
          h = mix(h, std::bit_cast<uint64_t>(v));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          for (auto x : v) h = mix(h, static_cast<size_t>(x));
        else if constexpr (std::is_same_v<T, Pairs>)
          for (auto [x, y] : v) h = mix(mix(h, x), y);
        else if constexpr (std::is_same_v<T, View>)
          h = mix(h, v.hash());
        else if constexpr (std::is_same_v<T, LoadArg>)
          h = mix(mix(h, v.param), v.view.hash());
        else if constexpr (std::is_same_v<T, HostFnArg>)
          for (auto x : v.fn->key()) h = mix(h, static_cast<size_t>(x));
      },
      a);
  return h;
}

// Arg equality that tells -0.0 from +0.0 and treats equal NaN bit patterns as equal.
bool arg_equal(const Arg& a, const Arg& b) {
  if (a.index() != b.index()) return false;
  if (auto* x = std::get_if<double>(&a))
    return std::bit_cast<uint64_t>(*x) == std::bit_cast<uint64_t>(std::get<double>(b));
  return a == b;
}

struct NodeHash {
  size_t operator()(const Node* n) const { return n->hash; }
};
struct NodeEq {
  bool operator()(const Node* a, const Node* b) const {
    return a->hash == b->hash && a->op == b->op && a->dtype == b->dtype && a->shape == b->shape &&
           a->src == b->src && arg_equal(a->arg, b->arg);
  }
};

struct Table {
  std::mutex mu;
  std::unordered_set<const Node*, NodeHash, NodeEq> nodes;
  uint64_t next_id = 0;
};
Table& table() {
  static Table* t = new Table;  // never destroyed: nodes outlive every static user
  return *t;
}
}  // namespace

std::string_view op_name(Op op) { return kOps[static_cast<int>(op)].name; }
int op_arity(Op op) { return kOps[static_cast<int>(op)].arity; }
OpCategory op_category(Op op) { return kOps[static_cast<int>(op)].cat; }
OpResult op_result(Op op) { return kOps[static_cast<int>(op)].result; }
bool op_decomposed(Op op) { return kOps[static_cast<int>(op)].decomposed; }

NodeRef make(Op op, DType dtype, Shape shape, std::vector<NodeRef> src, Arg arg) {
  size_t h = mix(static_cast<size_t>(op) * 131 + static_cast<size_t>(dtype), hash_arg(arg));
  for (auto d : shape) h = mix(h, static_cast<size_t>(d));
  h = mix(h, shape.size());
  for (auto s : src) h = mix(h, reinterpret_cast<size_t>(s));
  Node probe{op, dtype, std::move(shape), std::move(src), std::move(arg), h, 0};
  auto& t = table();
  std::lock_guard lock(t.mu);
  auto it = t.nodes.find(&probe);
  if (it != t.nodes.end()) return *it;
  probe.id = t.next_id++;
  auto* n = new Node(std::move(probe));
  t.nodes.insert(n);
  return n;
}

size_t interned_nodes() {
  auto& t = table();
  std::lock_guard lock(t.mu);
  return t.nodes.size();
}

namespace {
// Held shared by every NodeUse (the outermost on a thread), exclusively by a collection.
std::shared_mutex g_use_mu;
thread_local int g_use_depth = 0;
struct RootSets {
  std::mutex mu;
  std::map<int, NodeRootsFn> sets;
  int next = 0;
  size_t after_last = 0;  // table size after the last collection
};
RootSets& root_sets() {
  static auto* r = new RootSets;
  return *r;
}
size_t table_min() {
  static const size_t v = static_cast<size_t>(env::integer(env::Var::NodeTableMin));  // >= 1
  return v;
}
}  // namespace

NodeUse::NodeUse() {
  if (g_use_depth++ == 0) g_use_mu.lock_shared();
}
NodeUse::~NodeUse() {
  if (--g_use_depth == 0) g_use_mu.unlock_shared();
}

int add_node_roots(NodeRootsFn roots) {
  auto& r = root_sets();
  std::lock_guard lock(r.mu);
  r.sets.emplace(r.next, std::move(roots));
  return r.next++;
}

void remove_node_roots(int id) {
  auto& r = root_sets();
  std::lock_guard lock(r.mu);
  r.sets.erase(id);
}

size_t collect_nodes() {
  if (g_use_depth > 0) return 0;  // this thread holds nodes
  std::unique_lock use(g_use_mu, std::try_to_lock);
  if (!use.owns_lock()) return 0;  // a trace or compile is in progress somewhere
  auto& r = root_sets();
  std::lock_guard sets_lock(r.mu);
  std::vector<NodeRef> stack;
  for (auto& [id, fn] : r.sets) fn(stack);
  std::unordered_set<NodeRef> live;
  while (!stack.empty()) {
    NodeRef n = stack.back();
    stack.pop_back();
    if (!n || !live.insert(n).second) continue;
    for (NodeRef s : n->src) stack.push_back(s);
  }
  auto& t = table();
  std::lock_guard lock(t.mu);
  size_t freed = 0;
  for (auto it = t.nodes.begin(); it != t.nodes.end();) {
    if (live.count(*it)) {
      ++it;
      continue;
    }
    delete *it;
    it = t.nodes.erase(it);
    ++freed;
  }
  r.after_last = t.nodes.size();
  return freed;
}

void maybe_collect_nodes() {
  if (g_use_depth > 0) return;
  size_t size, after;
  {
    auto& t = table();
    std::lock_guard lock(t.mu);
    size = t.nodes.size();
  }
  {
    auto& r = root_sets();
    std::lock_guard lock(r.mu);
    after = r.after_last;
  }
  if (size < table_min() || size < 2 * after) return;
  collect_nodes();
}

template <class T>
static const T& get_arg(NodeRef n, const char* what) {
  if (auto* p = std::get_if<T>(&n->arg)) return *p;
  throw std::logic_error(std::string("ir: node ") + std::string(op_name(n->op)) + " has no " +
                         what + " argument");
}
int64_t arg_int(NodeRef n) { return get_arg<int64_t>(n, "integer"); }
double arg_float(NodeRef n) { return get_arg<double>(n, "float"); }
const std::vector<int64_t>& arg_ints(NodeRef n) { return get_arg<std::vector<int64_t>>(n, "ints"); }
const Pairs& arg_pairs(NodeRef n) { return get_arg<Pairs>(n, "pairs"); }
const View& arg_view(NodeRef n) { return get_arg<View>(n, "view"); }
const LoadArg& arg_load(NodeRef n) { return get_arg<LoadArg>(n, "load"); }
const HostFn& arg_host_fn(NodeRef n) { return *get_arg<HostFnArg>(n, "host function").fn; }

std::vector<NodeRef> toposort(const std::vector<NodeRef>& roots) {
  std::vector<NodeRef> order;
  std::unordered_set<NodeRef> seen;
  std::vector<std::pair<NodeRef, size_t>> stack;
  for (auto r : roots) {
    if (!seen.insert(r).second) continue;
    stack.push_back({r, 0});
    while (!stack.empty()) {
      auto& [n, i] = stack.back();
      if (i < n->src.size()) {
        NodeRef s = n->src[i++];
        if (seen.insert(s).second) stack.push_back({s, 0});
      } else {
        order.push_back(n);
        stack.pop_back();
      }
    }
  }
  return order;
}

std::string to_string(NodeRef root) {
  std::ostringstream os;
  std::unordered_map<NodeRef, size_t> num;
  for (auto n : toposort({root})) {
    num[n] = num.size();
    os << "%" << num[n] << " = " << op_name(n->op) << " " << name(n->dtype) << " "
       << to_string(n->shape);
    for (auto s : n->src) os << " %" << num[s];
    std::visit(
        [&](const auto& v) {
          using T = std::decay_t<decltype(v)>;
          if constexpr (std::is_same_v<T, int64_t> || std::is_same_v<T, double>)
            os << " (" << v << ")";
          else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
            os << " " << to_string(v);
          else if constexpr (std::is_same_v<T, View>)
            os << " view" << to_string(v.shape) << to_string(v.strides) << "+" << v.offset;
          else if constexpr (std::is_same_v<T, LoadArg>)
            os << " p" << v.param << " view" << to_string(v.view.shape) << to_string(v.view.strides)
               << "+" << v.view.offset;
          else if constexpr (std::is_same_v<T, HostFnArg>)
            os << " " << v.fn->describe();
        },
        n->arg);
    os << "\n";
  }
  return os.str();
}

NodeRef contiguous_param(int index, DType dtype, const Shape& shape) {
  return make(Op::Param, dtype, shape, {}, LoadArg{index, View::contiguous(shape)});
}

}  // namespace ir
