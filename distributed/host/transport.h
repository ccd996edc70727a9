// How a communicator's messages move between ranks: MPI (processes started by an MPI launcher,
// distributed/host/mpi_transport.cpp) or TCP sockets between processes that met at a rendezvous
// address (RUNE_MASTER_ADDR, distributed/host/tcp_transport.cpp). The collectives only ever call
// exchange(), so they compute the same bits over either.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "distributed/communicator.h"

namespace rune::distributed::detail {

class Transport {
 public:
  virtual ~Transport() = default;
  virtual const char* name() const = 0;  // "MPI", "TCP"
  // Moves every message of one exchange: the receives from and sends to each peer (at most one
  // of each per peer, matched in call order on both sides, tags checked where the transport
  // carries them). Waits at most `timeout` seconds; raises distributed_error naming api, `rank`
  // and the peers not answered (timeout, or a peer that closed its connection).
  virtual void exchange(const char* api, int rank, int tag, const std::vector<Message>& sends,
                        const std::vector<Message>& recvs, double timeout) = 0;
  // Ends the transport at finalize() (MPI_Finalize, closing sockets); later exchanges raise.
  virtual void finalize() = 0;
  // Makes an exchange in flight on another thread (a split collective's, on the communicator's
  // progress thread) raise soon, naming the finalize, and every later one at once: called at
  // finalize() before the progress thread is joined, so exit never waits out a timeout.
  virtual void cancel() = 0;
};

// "1.5" for 1.5 seconds, "1" for 1 (messages).
std::string format_seconds(double s);
// RUNE_DISTRIBUTED_TIMEOUT as set now, in seconds (ir/env.def's default, 300, when unset or
// empty); raises distributed_error naming api and the value when it is not a positive number.
double timeout_from_env(const char* api);

// The world of an MPI launcher: sets rank and size. Raises where rune was built without MPI.
std::unique_ptr<Transport> mpi_world(const char* api, int& rank, int& size);
// Whether this process was started by an MPI launcher (its environment says so).
bool under_mpi_launcher();
// The TCP world of `size` ranks meeting at `master` ("host:port", rank 0 listens there): every
// rank connects to every other; raises naming the ranks missing at `timeout` seconds.
std::unique_ptr<Transport> tcp_world(const char* api, int rank, int size, const std::string& master,
                                     double timeout);

}  // namespace rune::distributed::detail
