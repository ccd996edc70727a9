// The start and wait halves of a split collective as ir::HostFn functions (one HostCall step
// each), the ticket carried from one to the other in a token tensor, and the eager handle.
#include "distributed/async_collectives.h"

#include <cstring>
#include <functional>
#include <memory>

#include "core/interpreter.h"
#include "core/io_internal.h"
#include "distributed/host/progress_queue.h"
#include "ir/node.h"

namespace rune::distributed {

namespace detail {

namespace {

using ir::NodeRef;
using ir::Op;

constexpr int64_t kStartFn = 0x5354415254, kWaitFn = 0x57414954;  // "START", "WAIT"
constexpr uint64_t kTokenMagic = 0x52554e45544b4e31;              // "RUNETKN1"

// The token: 16 bytes (magic, ticket) as elements of the operand's dtype.
struct Token {
  uint64_t magic, ticket;
};
int64_t token_elems(ir::DType t) {
  const int64_t isz = ir::itemsize(t);
  return (static_cast<int64_t>(sizeof(Token)) + isz - 1) / isz;
}

// The elements of the collective's result for an operand of in_shape over w ranks.
int64_t result_elems(const CollectiveCall& call, const ir::Shape& in_shape, int w) {
  const int64_t n = ir::numel(in_shape);
  if (call.kind == Collective::AllGather) return n * w;
  if (call.kind == Collective::ReduceScatter) return n / w;
  return n;
}

std::vector<int64_t> key_of(int64_t which, const CollectiveCall& call, const Communicator& comm,
                            const std::string& api) {
  return {which,
          static_cast<int64_t>(call.kind),
          static_cast<int64_t>(call.op),
          call.root,
          static_cast<int64_t>(reinterpret_cast<intptr_t>(&comm.impl(api.c_str()))),
          static_cast<int64_t>(std::hash<std::string>()(api))};
}

std::string short_name(const std::string& api, const CollectiveCall& call, const char* half) {
  std::string s =
      call.kind == Collective::Bucket ? std::string("bucket") : api.substr(api.rfind(':') + 1);
  s += half;
  if (call.kind == Collective::Broadcast) return s + "(root " + std::to_string(call.root) + ")";
  if (call.kind == Collective::AllGather) return s;
  return s + "(" + op_name(call.op) + ")";
}

[[noreturn]] void no_gradient(const std::string& api) {
  throw distributed_error(api +
                          ": a split collective (start / wait) has no gradient (rune::grad, vjp "
                          "and jvp differentiate the blocking collectives)");
}

// The start: copies the operand, queues the collective on the progress thread, writes the token.
class StartFn final : public ir::HostFn {
 public:
  StartFn(Communicator comm, std::string api, const CollectiveCall& call)
      : comm_(std::move(comm)),
        api_(std::move(api)),
        call_(call),
        key_(key_of(kStartFn, call_, comm_, api_)),
        name_(short_name(api_, call_, "_start")) {}
  const std::vector<int64_t>& key() const override { return key_; }
  const std::string& api() const override { return api_; }
  std::string describe() const override { return name_; }
  Placement placement() const override { return Placement::Early; }
  void run(const void* in, void* out, ir::DType t, const ir::Shape& in_shape,
           const ir::Shape&) const override {
    const size_t isz = static_cast<size_t>(ir::itemsize(t));
    const size_t in_bytes = static_cast<size_t>(ir::numel(in_shape)) * isz;
    const size_t out_bytes = static_cast<size_t>(result_elems(call_, in_shape, comm_.size())) * isz;
    // The program may reuse the operand's memory once this step returns: the job owns a copy.
    std::vector<uint8_t> data(static_cast<const uint8_t*>(in),
                              static_cast<const uint8_t*>(in) + in_bytes);
    const uint64_t ticket =
        progress_queue(comm_, api_.c_str())
            .submit(api_, [comm = comm_, api = api_, call = call_, t, in_shape, out_bytes,
                           data = std::move(data)](std::vector<uint8_t>& result) {
              result.resize(out_bytes);
              run_collective(comm, api.c_str(), call, t, in_shape, data.data(), result.data());
            });
    const Token token{kTokenMagic, ticket};
    std::memset(out, 0, static_cast<size_t>(token_elems(t)) * isz);
    std::memcpy(out, &token, sizeof token);
  }
  NodeRef vjp(NodeRef, NodeRef) const override { no_gradient(api_); }

 private:
  Communicator comm_;
  std::string api_;
  CollectiveCall call_;
  std::vector<int64_t> key_;
  std::string name_;
};

// The wait: reads the ticket, blocks until its job ended, copies the result out (or raises).
class WaitFn final : public ir::HostFn {
 public:
  WaitFn(Communicator comm, std::string api, const CollectiveCall& call)
      : comm_(std::move(comm)),
        api_(std::move(api)),
        call_(call),
        key_(key_of(kWaitFn, call_, comm_, api_)),
        name_(short_name(api_, call_, "_wait")) {}
  const std::vector<int64_t>& key() const override { return key_; }
  const std::string& api() const override { return api_; }
  std::string describe() const override { return name_; }
  bool ordered() const override { return false; }  // it moves no messages
  Placement placement() const override { return Placement::Late; }
  void run(const void* in, void* out, ir::DType t, const ir::Shape&,
           const ir::Shape& out_shape) const override {
    Token token;
    std::memcpy(&token, in, sizeof token);
    if (token.magic != kTokenMagic)
      throw distributed_error(api_ + ": the operand of the wait is not a token made by a start");
    std::vector<uint8_t> r = progress_queue(comm_, api_.c_str()).wait(api_, token.ticket);
    const size_t bytes = static_cast<size_t>(ir::numel(out_shape) * ir::itemsize(t));
    if (r.size() != bytes)
      throw std::logic_error(api_ + ": a split collective's result has " +
                             std::to_string(r.size()) + " bytes, the wait expects " +
                             std::to_string(bytes));
    if (bytes) std::memcpy(out, r.data(), bytes);
  }
  NodeRef vjp(NodeRef, NodeRef) const override { no_gradient(api_); }

 private:
  Communicator comm_;
  std::string api_;
  CollectiveCall call_;
  std::vector<int64_t> key_;
  std::string name_;
};

uint64_t ticket_of(const nx::Tensor& token, const char* api) {
  std::vector<uint8_t> b = nx::io::read_bytes(token, api);
  Token t{};
  if (b.size() >= sizeof t) std::memcpy(&t, b.data(), sizeof t);
  return t.magic == kTokenMagic ? t.ticket : 0;
}

}  // namespace

nx::Tensor collective_start(const Communicator& comm, const std::string& api,
                            const CollectiveCall& call, const nx::Tensor& x,
                            const nx::Shape& out_shape) {
  (void)out_shape;  // the start's result is the token; the wait is given the shape
  if (!x.is_traced() && !(x.device().kind == runtime::DeviceKind::CPU))
    throw distributed_error(api + ": " + x.describe() + " is on " + x.device().name() +
                            ": split collectives run on host tensors (use the blocking call)");
  auto fn = std::make_shared<StartFn>(comm, api, call);
  return nx::apply(Op::HostCall, x.dtype(), {token_elems(x.dtype())}, {x},
                   ir::HostFnArg{std::move(fn)});
}

nx::Tensor collective_wait(const Communicator& comm, const std::string& api,
                           const CollectiveCall& call, const nx::Tensor& token,
                           const nx::Shape& out_shape) {
  auto fn = std::make_shared<WaitFn>(comm, api, call);
  return nx::apply(Op::HostCall, token.dtype(), out_shape, {token}, ir::HostFnArg{std::move(fn)});
}

size_t collectives_in_flight(const Communicator& comm) {
  return progress_queue(comm, "rune::distributed").tickets();
}

}  // namespace detail

PendingCollective& PendingCollective::operator=(PendingCollective&& o) noexcept {
  if (this != &o) {
    abandon();
    comm_ = std::move(o.comm_);
    call_ = o.call_;
    api_ = std::move(o.api_);
    token_ = std::move(o.token_);
    dtype_ = o.dtype_;
    out_shape_ = std::move(o.out_shape_);
    o.token_ = nx::Tensor();
  }
  return *this;
}

PendingCollective::~PendingCollective() { abandon(); }

void PendingCollective::abandon() {
  if (!token_.defined()) return;
  nx::Tensor token = std::move(token_);
  token_ = nx::Tensor();
  if (token.is_traced()) return;  // the program decides: no wait step, no wait
  try {
    if (uint64_t id = detail::ticket_of(token, api_.c_str()))
      detail::progress_queue(comm_, api_.c_str()).abandon(id);
  } catch (...) {  // a destructor: a token that cannot be read has nothing to drop
  }
}

nx::Tensor PendingCollective::wait() {
  const std::string api = api_.empty() ? "rune::distributed::PendingCollective::wait" : api_;
  if (!token_.defined())
    throw distributed_error(api +
                            ": the handle holds no collective (waited for already, or "
                            "default-constructed)");
  nx::Tensor token = std::move(token_);
  token_ = nx::Tensor();
  return detail::collective_wait(comm_, api, call_, token, out_shape_);
}

PendingCollective all_reduce_start(const Communicator& comm, const nx::Tensor& x, ReduceOp op) {
  const char* api = "rune::distributed::all_reduce";
  // The blocking call's checks, with its messages: a zero-size dry run is not possible, so the
  // same checks are repeated here.
  if (!x.defined()) throw distributed_error(std::string(api) + ": the tensor is undefined");
  detail::check_reduce_op(api, x.dtype(), op);
  comm.impl(api);
  const detail::CollectiveCall call{detail::Collective::AllReduce, op, 0};
  nx::Tensor token = detail::collective_start(comm, api, call, x, x.shape());
  return PendingCollective(comm, call, api, std::move(token), x.dtype(), x.shape());
}

}  // namespace rune::distributed
