// Donation (docs/semantics.md §3): nx::donate(x) gives x up to the next operation that reads it.
#pragma once
#include <initializer_list>
#include <string>
#include <string_view>
#include <vector>

#include "core/tensor.h"

namespace nx {

// Marks x as donated and returns it (the same value, usable until its consumer runs).
Tensor donate(const Tensor& x);
// Raises std::invalid_argument "<api>: <dtype> <shape> was donated to <consumer>" if t is dead.
void check_alive(const Tensor& t, const char* api);
// Called by every consumer before it runs: checks that no operand is dead and that no donation
// is read twice, then kills the donated operands (recording `consumer`). Returns, per operand,
// whether it was donated (empty when none was). Nothing is consumed when it raises.
std::vector<bool> consume_donations(const std::vector<Tensor>& srcs, std::string_view consumer,
                                    std::string_view consumer_suffix = {});
bool is_dead(const Tensor& t);

// x as the result of an op that returns its operand unchanged (a reshape to its own shape, a
// cast to its own dtype, ...): x itself, or, when x is donated, a distinct value over the same
// storage, so the op kills its donated operand and not its own result.
Tensor identity_result(const Tensor& x);

// A live value over t's storage and view, for queued work that reads t later (a check's data,
// read at the next wait after the device work queued meanwhile): while it lives, t's storage
// counts as observed and no consumer writes a donated result into it.
Tensor observer_of(const Tensor& t);

// Reads of storage in progress (runtime::Buffer::reads), registered for the guard's lifetime.
// A read registers before it checks that its value is alive; a consumer kills its donor before
// it counts the reads. So whatever the interleaving, either the read sees the donor dead (and
// raises) or the consumer sees the read and computes into fresh memory.
class StorageReads {
 public:
  StorageReads() = default;
  ~StorageReads();
  StorageReads(const StorageReads&) = delete;
  StorageReads& operator=(const StorageReads&) = delete;
  void add(const Tensor& t);  // nothing for a traced value
  // How many of these reads reach `b`.
  int count(const runtime::Buffer* b) const;

 private:
  runtime::Buffer* inline_[4] = {};
  int n_ = 0;
  std::vector<runtime::Buffer*> more_;
};

// Called by a consumer about to write into donor t's storage: kills t now, naming the public
// op being applied (its OpScope then leaves t alone), and raises as check_alive does if another
// thread consumed it first.
void consume_now(const Tensor& t, const char* consumer);
// After its donor t died: how many other values and reads can observe t's storage (live views,
// bases, captured constants, reads in progress), not counting `own_reads` reads the consumer
// registered itself. The consumer may write into the storage only when this is 0.
int other_observers(const Tensor& t, int own_reads);

}  // namespace nx

namespace nx {

// Marks the extent of one public nx op. The outermost scope on a thread checks its tensor
// arguments on entry (dead values and donations read twice raise before anything runs) and, if
// the op returns normally, kills its donated arguments naming `api` as their consumer. Nested
// ops and the primitives they apply consume nothing, so a failing op leaves every argument as
// it was, and a donated value names the entry point the user called.
class OpScope {
 public:
  OpScope(const char* api, std::initializer_list<const Tensor*> args);
  OpScope(const char* api, const std::vector<Tensor>& args);
  ~OpScope() noexcept(false);
  OpScope(const OpScope&) = delete;
  OpScope& operator=(const OpScope&) = delete;
  // Whether an op scope is active on this thread (primitives then leave donations alone).
  static bool active();
  // How many op scopes are active on this thread. A primitive applied at depth 1 is applied by
  // the public op itself; composite ops reach primitives only through nested public ops, so a
  // depth-1 primitive is the op's only compute step and may write into a donated operand.
  static int depth();
  // The public op being applied on this thread (the outermost scope), else the entry point a
  // CallName names, or nullptr.
  static const char* current_api();
  // That op's tensor arguments (empty outside any op).
  static const std::vector<const Tensor*>& current_args();

 private:
  void enter(const char* api);
  const char* api_ = nullptr;
  // The op's arguments, outermost scope only. Pointers: the arguments outlive the scope (they
  // are the public op's parameters), and the eager fast path must not copy tensors.
  std::vector<const Tensor*> args_;
  StorageReads reads_;  // the outermost scope's reads of its arguments
  bool outer_ = false;
  int exceptions_ = 0;
};

// Names the entry point running on this thread outside any op scope (a compiled call running
// its program), for messages raised below it, such as an allocation that cannot be satisfied.
class CallName {
 public:
  explicit CallName(const char* api);
  ~CallName();
  CallName(const CallName&) = delete;
  CallName& operator=(const CallName&) = delete;

 private:
  const char* prev_;
};

}  // namespace nx
