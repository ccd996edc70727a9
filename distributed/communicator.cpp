// The MPI transport of rune::distributed (or, built without MPI, errors saying so).
#include "distributed/communicator.h"

#include <chrono>
#include <cstdlib>
#include <mutex>
#include <set>
#include <string>
#include <thread>

#ifdef RUNE_HAVE_MPI
// C bindings only (Open MPI's mpi.h pulls in its C++ bindings from C++ otherwise).
#define OMPI_SKIP_MPICXX 1
#define MPICH_SKIP_MPICXX 1
#include <mpi.h>
#endif

namespace rune::distributed {

namespace {
constexpr double kDefaultTimeout = 300;

[[maybe_unused]] [[noreturn]] void no_mpi(const char* api) {
  throw distributed_error(std::string(api) +
                          ": rune was built without MPI (install libopenmpi-dev openmpi-bin, "
                          "tools/setup-deps, and reconfigure)");
}

[[maybe_unused]] std::string format_seconds(double s) {
  std::string t = std::to_string(s);
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}

// An environment variable as a positive integer or -1 where unset; raises naming it when bad.
[[maybe_unused]] long env_int(const char* api, const char* name) {
  const char* v = std::getenv(name);
  if (!v || !*v) return -1;
  char* end = nullptr;
  long n = std::strtol(v, &end, 10);
  if (*end || n < 0)
    throw distributed_error(std::string(api) + ": " + name + "='" + v +
                            "' is not a non-negative integer");
  return n;
}
}  // namespace

struct Communicator::Impl {
  int rank = 0, size = 1;
  double timeout = kDefaultTimeout;
  std::string broken;  // the failure that broke it ("" while healthy)
#ifdef RUNE_HAVE_MPI
  MPI_Comm comm = MPI_COMM_NULL;
#endif
};

bool available() {
#ifdef RUNE_HAVE_MPI
  return true;
#else
  return false;
#endif
}

int Communicator::rank() const { return impl("rune::distributed::Communicator::rank").rank; }
int Communicator::size() const { return impl("rune::distributed::Communicator::size").size; }
double Communicator::timeout_seconds() const {
  return impl("rune::distributed::Communicator::timeout_seconds").timeout;
}
void Communicator::set_timeout(double seconds) {
  if (!(seconds > 0))
    throw distributed_error("rune::distributed::Communicator::set_timeout: " +
                            std::to_string(seconds) + " s is not positive");
  impl("rune::distributed::Communicator::set_timeout").timeout = seconds;
}
Communicator::Impl& Communicator::impl(const char* api) const {
  if (!impl_)
    throw distributed_error(std::string(api) +
                            ": the communicator is empty (use rune::distributed::init())");
  return *impl_;
}

namespace {
std::mutex g_mu;
std::shared_ptr<Communicator::Impl> g_world;
bool g_finalized = false;
}  // namespace

#ifdef RUNE_HAVE_MPI

void finalize() {
  std::lock_guard lock(g_mu);
  if (g_finalized || !g_world) return;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) {
    if (g_world->comm != MPI_COMM_NULL) MPI_Comm_free(&g_world->comm);
    MPI_Finalize();
  }
  g_finalized = true;
}

Communicator init() {
  const char* api = "rune::distributed::init";
  std::lock_guard lock(g_mu);
  if (g_finalized) throw distributed_error(std::string(api) + ": MPI was already finalized");
  if (g_world) return Communicator(g_world);
  double timeout = kDefaultTimeout;
  if (const char* t = std::getenv("RUNE_DISTRIBUTED_TIMEOUT"); t && *t) {
    char* end = nullptr;
    timeout = std::strtod(t, &end);
    if (*end || !(timeout > 0))
      throw distributed_error(std::string(api) + ": RUNE_DISTRIBUTED_TIMEOUT='" + t +
                              "' is not a positive number of seconds");
  }
  long want_size = env_int(api, "RUNE_WORLD_SIZE"), want_rank = env_int(api, "RUNE_RANK");
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // Only the calling thread talks to MPI (rune's thread pool never does).
    MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided);
  }
  auto w = std::make_shared<Communicator::Impl>();
  // A private copy of the world: rune's messages never match the application's own.
  MPI_Comm_dup(MPI_COMM_WORLD, &w->comm);
  MPI_Comm_set_errhandler(w->comm, MPI_ERRORS_RETURN);
  MPI_Comm_rank(w->comm, &w->rank);
  MPI_Comm_size(w->comm, &w->size);
  w->timeout = timeout;
  // A launch that disagrees with RUNE_WORLD_SIZE / RUNE_RANK: MPI is finalized before raising, so
  // the process can exit cleanly with the error (the launcher then reports its status).
  auto fail = [&](const std::string& what) {
    MPI_Comm_free(&w->comm);
    MPI_Finalize();
    g_finalized = true;
    throw distributed_error(what);
  };
  if (want_size >= 0 && want_size != w->size)
    fail(std::string(api) + ": the launcher started " + std::to_string(w->size) +
         " ranks but RUNE_WORLD_SIZE=" + std::to_string(want_size) + " (rank " +
         std::to_string(w->rank) + ")");
  if (want_rank >= 0 && want_rank != w->rank)
    fail(std::string(api) + ": the launcher made this process rank " + std::to_string(w->rank) +
         " but RUNE_RANK=" + std::to_string(want_rank));
  g_world = w;
  std::atexit([] { finalize(); });
  return Communicator(g_world);
}

namespace detail {

void mark_broken(const Communicator& comm, const std::string& what) {
  auto& im = comm.impl("rune::distributed");
  if (im.broken.empty()) im.broken = what;
}

void exchange(const Communicator& comm, const char* api, int tag, const std::vector<Message>& sends,
              const std::vector<Message>& recvs) {
  auto& im = comm.impl(api);
  if (!im.broken.empty())
    throw distributed_error(std::string(api) + ": rank " + std::to_string(im.rank) +
                            ": the communicator is broken by an earlier failure: " + im.broken);
  // Receives first, so a peer's eager send always finds its buffer posted.
  std::vector<MPI_Request> reqs;
  std::vector<int> peer_of;
  std::vector<bool> is_recv;
  auto post = [&](const Message& m, bool recv) {
    if (m.bytes > static_cast<size_t>(INT32_MAX))
      throw distributed_error(std::string(api) + ": a message of " + std::to_string(m.bytes) +
                              " bytes is over MPI's 2 GiB count limit");
    MPI_Request r;
    int rc = recv
                 ? MPI_Irecv(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, tag, im.comm, &r)
                 : MPI_Isend(m.data, static_cast<int>(m.bytes), MPI_BYTE, m.peer, tag, im.comm, &r);
    if (rc != MPI_SUCCESS) {
      std::string what = std::string(api) + ": rank " + std::to_string(im.rank) + ": MPI_I" +
                         (recv ? "recv" : "send") + " with rank " + std::to_string(m.peer) +
                         " failed (MPI error " + std::to_string(rc) + ")";
      mark_broken(comm, what);
      throw distributed_error(what);
    }
    reqs.push_back(r);
    peer_of.push_back(m.peer);
    is_recv.push_back(recv);
  };
  for (const auto& m : recvs) post(m, true);
  for (const auto& m : sends) post(m, false);
  // Poll with MPI_Testall against the deadline (MPI_Waitall could block forever on a rank that
  // died or never joined). MPI moves large (rendezvous) messages only while it is polled, so the
  // first 200 ms spin; a longer wait (a late peer) polls every 200 us, so it does not hold a core.
  auto start = std::chrono::steady_clock::now();
  auto deadline = start + std::chrono::duration<double>(im.timeout);
  auto spin_until = start + std::chrono::milliseconds(200);
  for (;;) {
    int done = 0;
    MPI_Testall(static_cast<int>(reqs.size()), reqs.data(), &done, MPI_STATUSES_IGNORE);
    if (done) return;
    auto now = std::chrono::steady_clock::now();
    if (now > deadline) break;
    if (now > spin_until) std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  std::set<int> unanswered;
  for (size_t i = 0; i < reqs.size(); ++i) {
    if (reqs[i] == MPI_REQUEST_NULL) continue;
    unanswered.insert(peer_of[i]);
    if (is_recv[i]) MPI_Cancel(&reqs[i]);
    MPI_Request_free(&reqs[i]);
  }
  std::string waiting;
  for (int p : unanswered) waiting += (waiting.empty() ? " " : ", ") + std::to_string(p);
  std::string what = std::string(api) + ": rank " + std::to_string(im.rank) + " timed out after " +
                     format_seconds(im.timeout) + " s waiting for rank" + waiting +
                     " (a rank that died, never joined or never made this call; "
                     "RUNE_DISTRIBUTED_TIMEOUT sets the limit)";
  mark_broken(comm, what);
  throw distributed_error(what);
}

}  // namespace detail

#else  // built without MPI

void finalize() {}
Communicator init() { no_mpi("rune::distributed::init"); }
namespace detail {
void mark_broken(const Communicator&, const std::string&) {}
void exchange(const Communicator&, const char* api, int, const std::vector<Message>&,
              const std::vector<Message>&) {
  no_mpi(api);
}
}  // namespace detail

#endif

}  // namespace rune::distributed
