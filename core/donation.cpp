#include "core/donation.h"

#include "core/earlier_failure.h"

namespace nx {

Tensor donate(const Tensor& x) {
  check_alive(x, "nx::donate");
  x.impl().donation.store(1);
  return x;
}

bool is_dead(const Tensor& t) { return t.impl().donation.load() == 2; }

Tensor observer_of(const Tensor& t) {
  const auto& im = t.impl();
  if (im.node) return t;
  return make_concrete(im.dtype, im.buffer, im.view, im.device, im.poison);
}

Tensor identity_result(const Tensor& x) {
  const auto& im = x.impl();
  if (im.donation.load() == 0) return x;
  if (!im.node) return make_concrete(im.dtype, im.buffer, im.view, im.device, im.poison);
  auto alias = std::make_shared<TensorImpl>();
  alias->dtype = im.dtype;
  alias->shape = im.shape;
  alias->device = im.device;
  alias->node = im.node;
  alias->tracer = im.tracer;
  return Tensor(std::move(alias));
}

namespace {
// Donors the current public op on this thread consumed early (consume_now), so its OpScope
// does not consume them again.
thread_local std::vector<const TensorImpl*> g_consumed_early;
bool consumed_early(const TensorImpl* im) {
  for (const TensorImpl* c : g_consumed_early)
    if (c == im) return true;
  return false;
}

// The claim: donated (1) -> dead (2). The consumer's name is set under the lock that
// check_alive reads it under, in the same critical section as the claim, so a losing thread
// never sees the tensor dead but unnamed. The dead value stops counting as a live observer of
// its storage. Returns false if another thread consumed it first.
bool claim(TensorImpl& im, const std::string& consumer) {
  std::lock_guard lock(im.mu);
  int expected = 1;
  if (!im.donation.compare_exchange_strong(expected, 2)) return false;
  im.consumer = consumer;
  if (im.buffer) im.buffer->live_values.fetch_sub(1);
  return true;
}
}  // namespace

StorageReads::~StorageReads() {
  for (int i = 0; i < n_; ++i) inline_[i]->reads.fetch_sub(1);
  for (runtime::Buffer* b : more_) b->reads.fetch_sub(1);
}

void StorageReads::add(const Tensor& t) {
  runtime::Buffer* b = t.impl().buffer.get();
  if (!b) return;
  b->reads.fetch_add(1);
  if (n_ < 4)
    inline_[n_++] = b;
  else
    more_.push_back(b);
}

int StorageReads::count(const runtime::Buffer* b) const {
  int c = 0;
  for (int i = 0; i < n_; ++i) c += inline_[i] == b;
  for (runtime::Buffer* m : more_) c += m == b;
  return c;
}

void consume_now(const Tensor& t, const char* consumer) {
  auto& im = t.impl();
  if (!claim(im, consumer)) check_alive(t, consumer);
  g_consumed_early.push_back(&im);
}

int other_observers(const Tensor& t, int own_reads) {
  const runtime::Buffer* b = t.impl().buffer.get();
  if (!b) return 0;
  // Reads first: a read that ended before this load left its views counted in live_values.
  int reads = b->reads.load();
  int live = b->live_values.load();
  // Borrowed memory has an owner outside rune, who may still observe it: one more observer, so
  // no consumer writes into it (docs/interop.md "Donation of borrowed memory").
  int owner = b->borrowed() ? 1 : 0;
  return reads - own_reads + live + owner;
}

void check_alive(const Tensor& t, const char* api) {
  auto& im = t.impl();
  if (im.donation.load() != 2) return;
  detail::raise_earlier_failure(t.device());
  std::lock_guard lock(im.mu);
  throw std::invalid_argument(std::string(api) + ": " + t.describe() + " was donated to " +
                              im.consumer);
}

std::vector<bool> consume_donations(const std::vector<Tensor>& srcs,
                                    std::string_view consumer_prefix,
                                    std::string_view consumer_suffix) {
  // Fast path: nothing donated, nothing dead (no allocation).
  bool marked = false;
  for (const auto& s : srcs) marked |= s.impl().donation.load(std::memory_order_relaxed) != 0;
  if (!marked) return {};
  const std::string consumer = std::string(consumer_prefix) + std::string(consumer_suffix);
  std::vector<bool> donated(srcs.size(), false);
  bool any = false;
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (consumed_early(&srcs[i].impl())) continue;
    check_alive(srcs[i], consumer.c_str());
    if (srcs[i].impl().donation.load() == 1) {
      donated[i] = any = true;
      for (size_t j = 0; j < i; ++j)
        if (srcs[j].impl_ptr() == srcs[i].impl_ptr()) {
          detail::raise_earlier_failure(srcs[i].device());
          throw std::invalid_argument("nx::donate: " + consumer + " reads one donation twice");
        }
    }
  }
  if (!any) return donated;
  for (size_t i = 0; i < srcs.size(); ++i) {
    if (!donated[i]) continue;
    // Another thread consumed it first: it is dead now.
    if (!claim(srcs[i].impl(), consumer)) check_alive(srcs[i], consumer.c_str());
  }
  return donated;
}

}  // namespace nx

namespace nx {

namespace {
thread_local int g_op_depth = 0;
thread_local const char* g_outer_api = nullptr;
thread_local const std::vector<const Tensor*>* g_outer_args = nullptr;
const std::vector<const Tensor*> kNoArgs;
}  // namespace

bool OpScope::active() { return g_op_depth > 0; }
int OpScope::depth() { return g_op_depth; }
thread_local const char* g_call_api = nullptr;
const char* OpScope::current_api() { return g_op_depth > 0 ? g_outer_api : g_call_api; }

CallName::CallName(const char* api) : prev_(g_call_api) { g_call_api = api; }
CallName::~CallName() { g_call_api = prev_; }
const std::vector<const Tensor*>& OpScope::current_args() {
  return g_op_depth > 0 && g_outer_args ? *g_outer_args : kNoArgs;
}

OpScope::OpScope(const char* api, std::initializer_list<const Tensor*> args) {
  if (g_op_depth == 0)
    for (const Tensor* t : args)
      if (t && t->defined()) args_.push_back(t);
  enter(api);
}

OpScope::OpScope(const char* api, const std::vector<Tensor>& args) {
  if (g_op_depth == 0)
    for (const Tensor& t : args)
      if (t.defined()) args_.push_back(&t);
  enter(api);
}

void OpScope::enter(const char* api) {
  if (g_op_depth == 0) {
    g_outer_api = api;
    g_outer_args = &args_;
  }
  api_ = api;
  outer_ = g_op_depth == 0;
  if (outer_) {
    g_consumed_early.clear();
    for (const Tensor* t : args_) reads_.add(*t);  // before the checks (see StorageReads)
    for (size_t i = 0; i < args_.size(); ++i) {
      check_alive(*args_[i], api);
      if (args_[i]->impl().donation.load() == 1)
        for (size_t j = 0; j < i; ++j)
          if (args_[j]->impl_ptr() == args_[i]->impl_ptr()) {
            detail::raise_earlier_failure(args_[i]->device());
            throw std::invalid_argument(std::string("nx::donate: ") + api +
                                        " reads one donation twice");
          }
    }
  }
  if (outer_) exceptions_ = std::uncaught_exceptions();
  ++g_op_depth;
}

OpScope::~OpScope() noexcept(false) {
  --g_op_depth;
  if (!outer_) return;
  struct ClearEarly {
    ~ClearEarly() { g_consumed_early.clear(); }
  } clear_early;
  if (std::uncaught_exceptions() != exceptions_) return;
  bool marked = false;
  for (const Tensor* t : args_) marked |= t->impl().donation.load(std::memory_order_relaxed) != 0;
  if (!marked) return;
  std::vector<Tensor> held;
  for (const Tensor* t : args_) held.push_back(*t);
  consume_donations(held, api_);
}

}  // namespace nx
