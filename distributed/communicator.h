// rune::distributed: a communicator over the processes of one job and the point-to-point
// exchange the collectives (distributed/collectives.h) are built from. The ranks are started by
// an MPI launcher (mpirun; the MPI transport), or by anything that sets RUNE_RANK,
// RUNE_WORLD_SIZE and RUNE_MASTER_ADDR (the TCP transport, distributed/host/transport.h). Built
// without MPI, only the TCP transport is there: init() under a launcher raises saying so.
//
// Invariants: every wait has a deadline (the communicator's timeout, RUNE_DISTRIBUTED_TIMEOUT
// seconds, default 300), so no call blocks forever; a collective that failed (timeout, mismatch,
// a lost peer) leaves the communicator broken, and every later collective on it raises at once
// (messages of the failed call may still be in flight, so the message stream no longer lines
// up).
#pragma once
#include <cstddef>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace rune::distributed {

// Every failure of rune::distributed: launch, timeouts, mismatches across ranks, bad arguments.
class distributed_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// True when rune was built with MPI (CMake found it).
bool available();

class Communicator {
 public:
  Communicator() = default;
  int rank() const;
  int size() const;
  double timeout_seconds() const;
  // Raises naming the value unless seconds > 0.
  void set_timeout(double seconds);
  bool defined() const { return impl_ != nullptr; }
  // "MPI" or "TCP".
  const char* transport() const;

  struct Impl;
  explicit Communicator(std::shared_ptr<Impl> impl) : impl_(std::move(impl)) {}
  Impl& impl(const char* api) const;

 private:
  std::shared_ptr<Impl> impl_;
};

// Joins the job once (later calls return the same communicator). Under an MPI launcher (or with
// no RUNE_MASTER_ADDR) it starts MPI: the rank and world size come from the launcher, and
// RUNE_WORLD_SIZE / RUNE_RANK, where set, must agree with it, so a job started with the wrong -np
// fails here, naming both numbers. Without a launcher and with RUNE_MASTER_ADDR (host:port),
// RUNE_RANK and RUNE_WORLD_SIZE set, the ranks meet over TCP (rank 0 listens at the address), as
// torch.distributed does; a rank missing at the timeout makes the others raise, naming it.
// RUNE_DISTRIBUTED_TIMEOUT (seconds) sets the timeout. The transport is finalized at exit (or by
// finalize()).
Communicator init();
void finalize();

namespace detail {
// One buffer to send to, or receive from, `peer`.
struct Message {
  int peer;
  void* data;
  size_t bytes;
};
// Posts every receive and send (tag `tag`) and waits for all of them, polling against the
// communicator's deadline. On timeout raises, naming `api`, this rank and the peers still
// unanswered, and breaks the communicator.
void exchange(const Communicator& comm, const char* api, int tag, const std::vector<Message>& sends,
              const std::vector<Message>& recvs);
// Marks the communicator broken after a failure `what` (later calls raise naming it).
void mark_broken(const Communicator& comm, const std::string& what);
}  // namespace detail

}  // namespace rune::distributed
