// A primitive computed by host code outside any kernel (ir/ops.def's HostCall): the node's arg
// holds the function. rune::distributed's collectives are such functions; ir/ knows only this
// interface, so nothing below trace/ depends on MPI (the implementations live in rune_distributed).
//
// Invariants: a HostFn is immutable once made; two functions with equal keys compute the same
// thing (node interning, the program caches and the eager cache compare keys, so equal calls
// share one node and one compiled program); a HostCall node is never fused: its operand is
// materialised contiguously and the call is one step of the program (codegen/schedule.cpp), and
// the steps of a program's HostCall nodes keep one order, fixed by the program's structure
// (codegen/memory_order.cpp), so every process running the same program calls them in the same
// order (those that move messages: ordered() below).
#pragma once
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/shape.h"

namespace ir {

struct Node;
using NodeRef = const Node*;

class HostFn {
 public:
  virtual ~HostFn() = default;
  // What identifies the function (equal keys: the same function).
  virtual const std::vector<int64_t>& key() const = 0;
  // The public API it implements, named in errors ("rune::distributed::all_reduce").
  virtual const std::string& api() const = 0;
  // A short description for step names and debug output ("all_reduce(sum)").
  virtual std::string describe() const = 0;
  // Runs on host memory: `in` holds the operand (contiguous, `dtype`, `in_shape`), `out`
  // receives the result (contiguous, the node's dtype and `out_shape`). Raises on failure.
  virtual void run(const void* in, void* out, DType dtype, const Shape& in_shape,
                   const Shape& out_shape) const = 0;
  // Whether the function has a GPU form (queue_on_gpu): a program for a GPU with a HostCall of a
  // function without one raises when it is compiled.
  virtual bool runs_on_gpu() const { return false; }
  // The GPU form: queues the work on the stream of `gpu_context`, the runtime::gpu::Context of the
  // program's device (opaque here: ir/ knows no runtime types), reading `in` and writing `out`
  // (device addresses, contiguous, as run's). It must only queue (no wait for the device) and
  // raise where queueing fails (rune::distributed's NCCL / RCCL collectives).
  virtual void queue_on_gpu(void* /*gpu_context*/, const void* /*in*/, void* /*out*/,
                            DType /*dtype*/, const Shape& /*in_shape*/,
                            const Shape& /*out_shape*/) const {
    throw std::logic_error(api() + ": no GPU form");
  }
  // Whether the call takes part in the one order of a program's host calls (memory_order):
  // every call that moves messages between processes must (they pair up across processes by
  // their order). A call that only waits for work an ordered call began (the wait half of a
  // split collective) may say false, so it does not hold back the calls after it.
  virtual bool ordered() const { return true; }
  // Where the memory-ordering scheduler puts the step: Early runs as soon as its operand is
  // ready (with the kernel producing that operand: the start of a split collective, so its
  // messages move while later kernels run); Late runs only when nothing else is ready (its
  // wait, as late as its consumers allow). Neither changes a dependency, so neither changes bits.
  enum class Placement { Anywhere, Early, Late };
  virtual Placement placement() const { return Placement::Anywhere; }
  // The operand's cotangent given the cotangent `g` of node `n` (a HostCall of this function),
  // for autodiff (trace/vjp.cpp); raises naming api() where the function has no derivative.
  virtual NodeRef vjp(NodeRef n, NodeRef g) const = 0;
};

// The node argument of a HostCall: equal when the keys are.
struct HostFnArg {
  std::shared_ptr<const HostFn> fn;
  bool operator==(const HostFnArg& o) const {
    return fn == o.fn || (fn && o.fn && fn->key() == o.fn->key());
  }
};

}  // namespace ir
