// The MPI transport (or, built without MPI, errors saying so): a private duplicate of
// MPI_COMM_WORLD; every message is posted nonblocking and polled against the deadline.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <thread>

#include "distributed/host/transport.h"

#ifdef RUNE_HAVE_MPI
// C bindings only (Open MPI's mpi.h pulls in its C++ bindings from C++ otherwise).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace rune::distributed::detail {

#ifdef RUNE_HAVE_MPI

namespace {

class MpiTransport final : public Transport {
 public:
  explicit MpiTransport(MPI_Comm comm) : comm_(comm) {}
  const char* name() const override { return "MPI"; }
  void finalize() override {
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (finalized) return;
    if (comm_ != MPI_COMM_NULL) MPI_Comm_free(&comm_);
    MPI_Finalize();
  }
  void cancel() override { cancelled_ = true; }

  void exchange(const char* api, int rank, int tag, const std::vector<Message>& sends,
                const std::vector<Message>& recvs, double timeout) override {
    // One thread at a time talks to MPI (initialised MPI_THREAD_SERIALIZED): a program with a
    // collective may run on a CPU:n device's stream thread, and split collectives move their
    // messages on the communicator's progress thread (distributed/host/progress_queue.h). Every MPI
    // call of the transport is made under this lock, so SERIALIZED is enough.
    std::lock_guard lock(mu_);
    if (comm_ == MPI_COMM_NULL)
      throw distributed_error(std::string(api) + ": MPI was already finalized");
    // Receives first, so a peer's eager send always finds its buffer posted.
    std::vector<MPI_Request> reqs;
    std::vector<int> peer_of;
    std::vector<bool> is_recv;
    auto cancel_all = [&] {
      for (size_t i = 0; i < reqs.size(); ++i) {
        if (reqs[i] == MPI_REQUEST_NULL) continue;
        if (is_recv[i]) MPI_Cancel(&reqs[i]);
        MPI_Request_free(&reqs[i]);
      }
    };
    auto post = [&](const Message& m, bool recv) {
      if (m.bytes > static_cast<size_t>(INT32_MAX)) {
        cancel_all();
        throw distributed_error(std::string(api) + ": a message of " + std::to_string(m.bytes) +
                                " bytes is over MPI's 2 GiB count limit");
      }
      MPI_Request r;
      int rc = recv
                   ? MPI_Irecv(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, tag, comm_, &r)
                   : MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, tag, comm_, &r);
      if (rc != MPI_SUCCESS) {
        cancel_all();
        throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) + ": MPI_I" +
                                (recv ? "recv" : "send") + " with rank " + std::to_string(m.peer) +
                                " failed (MPI error " + std::to_string(rc) + ")");
      }
      reqs.push_back(r);
      peer_of.push_back(m.peer);
      is_recv.push_back(recv);
    };
    for (const auto& m : recvs) post(m, true);
    for (const auto& m : sends) post(m, false);
    // Poll with MPI_Testall against the deadline (MPI_Waitall could block forever on a rank
    // that died or never joined). MPI moves large (rendezvous) messages only while it is
    // polled, so the first 200 ms spin (yielding the core to any thread ready to run: the
    // kernels a split collective overlaps, other ranks sharing the cores); a longer wait (a late
    // peer) polls every 200 us, so it does not hold a core.
    auto start = std::chrono::steady_clock::now();
    auto deadline = start + std::chrono::duration<double>(timeout);
    auto spin_until = start + std::chrono::milliseconds(200);
    for (;;) {
      int done = 0;
      MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
      if (done) return;
      if (cancelled_) {
        cancel_all();
        throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) +
                                ": the communicator was finalized with this collective in flight");
      }
      auto now = std::chrono::steady_clock::now();
      if (now > deadline) break;
      if (now > spin_until)
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      else
        std::this_thread::yield();
    }
    std::set<int> unanswered;
    for (size_t i = 0; i < reqs.size(); ++i)
      if (reqs[i] != MPI_REQUEST_NULL) unanswered.insert(peer_of[i]);
    cancel_all();
    std::string waiting;
    for (int p : unanswered) waiting += (waiting.empty() ? " " : ", ") + std::to_string(p);
    throw distributed_error(std::string(api) + ": rank " + std::to_string(rank) +
                            " timed out after " + format_seconds(timeout) + " s waiting for rank" +
                            waiting +
                            " (a rank that died, never joined or never made this call; "
                            "RUNE_DISTRIBUTED_TIMEOUT sets the limit)");
  }

 private:
  MPI_Comm comm_;
  std::mutex mu_;
  std::atomic<bool> cancelled_{false};
};

}  // namespace

std::unique_ptr<Transport> mpi_world(const char*, int& rank, int& size) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_SERIALIZED, &provided);
  }
  MPI_Comm comm;
  // A private copy of the world: rune's messages never match the application's own.
  MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm, &rank);
  MPI_Comm_size(comm, &size);
  return std::make_unique<MpiTransport>(comm);
}

#else  // built without MPI

std::unique_ptr<Transport> mpi_world(const char* api, int&, int&) {
  throw distributed_error(std::string(api) +
                          ": rune was built without MPI (install libopenmpi-dev openmpi-bin, "
                          "tools/setup-deps, and reconfigure; or start the ranks with RUNE_RANK, "
                          "RUNE_WORLD_SIZE and RUNE_MASTER_ADDR for the TCP transport)");
}

#endif

}  // namespace rune::distributed::detail
