// Split collectives: all_reduce_start returns at once with a handle while the collective's
// messages move on the communicator's progress thread (distributed/host/progress_queue.h); wait()
// returns the result, with the bits of the blocking all_reduce. As JAX / XLA's async
// collective-start / collective-done pair, each half is one primitive (an ir::Op::HostCall):
// eagerly a one-op program, inside rune::jit one step of the compiled program, so work between
// the two steps runs while the messages move. The memory-ordering scheduler runs a start as soon
// as its operand is ready and a wait only when nothing else can run (ir::HostFn::placement);
// starts keep their order among a program's message-moving steps (the same on every rank), waits
// move no messages and take no part in that order.
//
// The start copies its operand (the program may reuse the operand's memory at once) and hands
// back a token: a small tensor of the operand's dtype holding the ticket's number (never read it
// as data). The wait reads the ticket, blocks until the job ended and copies the result out, or
// raises the job's error: the blocking call's message (timeouts, mismatches, a broken
// communicator), naming its API. A start never waited for (an exception in between, a dropped
// handle) still runs, since the other ranks expect its messages; its result is dropped (a
// dropped handle's at once; a program that failed between the two steps leaves its ticket until
// finalize()), and finalize() cancels it if it is still in flight, so exit neither hangs nor
// leaks. Inside
// rune::jit a start whose token no wait reads is not part of the program (nothing computed from
// it is a result), on every rank alike.
#pragma once
#include <cstdint>
#include <string>

#include "core/tensor.h"
#include "distributed/collectives.h"
#include "distributed/host/collective_kernels.h"

namespace rune::distributed {

// An all_reduce in flight. Movable, not copyable; wait() once.
class PendingCollective {
 public:
  PendingCollective() = default;
  PendingCollective(PendingCollective&& o) noexcept { *this = std::move(o); }
  PendingCollective& operator=(PendingCollective&& o) noexcept;
  PendingCollective(const PendingCollective&) = delete;
  PendingCollective& operator=(const PendingCollective&) = delete;
  // A concrete handle never waited for is abandoned: its collective runs, its result is dropped.
  ~PendingCollective();

  // The collective's result (concrete, or traced inside rune::jit: the wait step). Raises what
  // the blocking call raises where the collective failed, and naming the API where the handle
  // is empty or was waited for already.
  nx::Tensor wait();
  bool valid() const { return token_.defined(); }

  // Internal: made by all_reduce_start.
  PendingCollective(Communicator comm, detail::CollectiveCall call, std::string api,
                    nx::Tensor token, nx::DType dtype, nx::Shape out_shape)
      : comm_(std::move(comm)),
        call_(call),
        api_(std::move(api)),
        token_(std::move(token)),
        dtype_(dtype),
        out_shape_(std::move(out_shape)) {}

 private:
  void abandon();
  Communicator comm_;
  detail::CollectiveCall call_{detail::Collective::AllReduce};
  std::string api_;
  nx::Tensor token_;
  nx::DType dtype_ = nx::DType::Float32;
  nx::Shape out_shape_;
};

// Starts all_reduce(comm, x, op) (same checks, same bits) and returns at once. Host
// communicators only; x concrete or traced. Every rank starts the same collectives in the same
// order (and may mix them with blocking ones: those wait for the starts before them).
PendingCollective all_reduce_start(const Communicator& comm, const nx::Tensor& x,
                                   ReduceOp op = ReduceOp::Sum);

namespace detail {
// The two halves as primitives, for callers building their own steps (data_parallel's
// buckets): start returns the token of `call` applied to x (errors named `api`); wait returns
// the result (dtype `t`, `out_shape`) of the collective behind `token`.
nx::Tensor collective_start(const Communicator& comm, const std::string& api,
                            const CollectiveCall& call, const nx::Tensor& x,
                            const nx::Shape& out_shape);
nx::Tensor collective_wait(const Communicator& comm, const std::string& api,
                           const CollectiveCall& call, const nx::Tensor& token,
                           const nx::Shape& out_shape);
// How many split collectives of comm are started and not yet waited for or dropped (tests).
size_t collectives_in_flight(const Communicator& comm);
}  // namespace detail

}  // namespace rune::distributed
