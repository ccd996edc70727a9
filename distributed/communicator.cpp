// The communicator: rank, size, timeout and the broken state over one transport (MPI under an
// MPI launcher, TCP after a RUNE_MASTER_ADDR rendezvous; distributed/host/transport.h).
#include "distributed/communicator.h"

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <mutex>
#include <optional>
#include <string>

#include "distributed/host/progress_queue.h"
#include "distributed/host/transport.h"
#include "ir/env.h"

namespace rune::distributed {

namespace {
using ir::env::Var;

// A launch variable (RUNE_WORLD_SIZE, RUNE_RANK) as set now, as an integer in its ir/env.def
// row's range, or -1 where unset or empty; raises naming the variable, its value and the range
// when it is not (strtol's overflow included: a huge value is never clamped or wrapped into a
// small one). The range is the row's: the largest world, 2^20, is far beyond any TCP world (each
// rank holds a connection to every other) and any MPI job, small enough that the per-rank tables
// (a socket and an address per rank) stay a few MB and every rank fits an int.
long env_int(const char* api, Var var, const char* range_note) {
  const ir::env::VarInfo& row = ir::env::info(var);
  const std::optional<std::string> v = ir::env::value_now(var);
  if (!v || v->empty()) return -1;
  char* end = nullptr;
  errno = 0;
  long n = std::strtol(v->c_str(), &end, 10);
  const bool number = end != v->c_str() && !*end;
  if (!number || errno == ERANGE || n < row.int_min || n > row.int_max)
    throw distributed_error(std::string(api) + ": " + row.name + "='" + *v + "' is " +
                            (number ? "out of range" : "not an integer") +
                            ": it must be an integer in [" + std::to_string(row.int_min) + ", " +
                            std::to_string(row.int_max) + "]" + range_note);
  return n;
}
}  // namespace

namespace detail {
double timeout_from_env(const char* api) {
  const std::optional<std::string> t = ir::env::value_now(Var::DistributedTimeout);
  // The default is written once, as the row's (ir/env.def: "300").
  const char* text =
      t && !t->empty() ? t->c_str() : ir::env::info(Var::DistributedTimeout).default_text;
  char* end = nullptr;
  const double s = std::strtod(text, &end);
  if (end == text || *end || !(s > 0))
    throw distributed_error(std::string(api) + ": RUNE_DISTRIBUTED_TIMEOUT='" + text +
                            "' is not a positive number of seconds");
  return s;
}

bool under_mpi_launcher() {
  // Open MPI, MPICH / Hydra and PMIx launchers each set one of these in every rank (read at each
  // call: init may be retried).
  for (Var v : {Var::OmpiCommWorldSize, Var::PmiSize, Var::PmixRank})
    if (auto s = ir::env::value_now(v); s && !s->empty()) return true;
  return false;
}

std::string format_seconds(double s) {
  std::string t = std::to_string(s);
  t.erase(t.find_last_not_of('0') + 1);
  if (!t.empty() && t.back() == '.') t.pop_back();
  return t;
}
}  // namespace detail

struct Communicator::Impl {
  int rank = 0, size = 1;
  std::atomic<double> timeout{0};  // set by init(); read by the progress thread too
  std::mutex broken_mu;  // the progress thread may break it while the caller's thread reads
  std::string broken;    // the failure that broke it ("" while healthy)
  std::unique_ptr<detail::Transport> transport;
  // One exchange at a time (the calling thread's or the progress thread's; TCP's sockets are
  // not shared).
  std::mutex exchange_mu;
  std::mutex queue_mu;  // guards making `queue`
  std::unique_ptr<detail::ProgressQueue> queue;
  ~Impl() {
    if (queue) queue->stop("the communicator was destroyed", [this] { transport->cancel(); });
  }
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
const char* Communicator::transport() const {
  return impl("rune::distributed::Communicator::transport").transport->name();
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

void finalize() {
  std::lock_guard lock(g_mu);
  if (g_finalized || !g_world) return;
  // Split collectives still in flight (a start never waited for) end first: the running
  // exchange is cancelled, the queued ones fail, the progress thread is joined. Not under
  // queue_mu: the job being cancelled takes it in exchange() (the queue is never freed before
  // the communicator, so the pointer stays valid).
  detail::ProgressQueue* queue = nullptr;
  {
    std::lock_guard q(g_world->queue_mu);
    queue = g_world->queue.get();
  }
  if (queue)
    queue->stop("the communicator was finalized with this collective in flight",
                [w = g_world.get()] { w->transport->cancel(); });
  g_world->transport->finalize();
  g_finalized = true;
}

Communicator init() {
  const char* api = "rune::distributed::init";
  std::lock_guard lock(g_mu);
  if (g_finalized) throw distributed_error(std::string(api) + ": already finalized");
  if (g_world) return Communicator(g_world);
  // The launch variables are read at each call (ir::env::value_now), so an init refused for a
  // bad value can be retried once the environment is fixed.
  const double timeout = detail::timeout_from_env(api);
  const long want_size = env_int(api, Var::WorldSize, " (the number of ranks of the world)");
  const long want_rank = env_int(api, Var::Rank, " (this process's rank, below RUNE_WORLD_SIZE)");
  auto w = std::make_shared<Communicator::Impl>();
  w->timeout = timeout;
  const std::optional<std::string> master = ir::env::value_now(Var::MasterAddr);
  if (master && !master->empty() && !detail::under_mpi_launcher()) {
    // No launcher: the ranks meet over TCP at RUNE_MASTER_ADDR, as torch.distributed does.
    if (want_size < 0 || want_rank < 0)
      throw distributed_error(std::string(api) + ": RUNE_MASTER_ADDR is set but " +
                              (want_rank < 0 ? "RUNE_RANK" : "RUNE_WORLD_SIZE") +
                              " is not (a rendezvous without an MPI launcher needs RUNE_RANK, "
                              "RUNE_WORLD_SIZE and RUNE_MASTER_ADDR)");
    if (want_size < 1 || want_rank >= want_size)
      throw distributed_error(
          std::string(api) + ": RUNE_RANK=" + std::to_string(want_rank) +
          " is not a rank of a world of RUNE_WORLD_SIZE=" + std::to_string(want_size) +
          " (ranks are 0 to " + std::to_string(want_size - 1) + ")");
    w->rank = static_cast<int>(want_rank);
    w->size = static_cast<int>(want_size);
    w->transport = detail::tcp_world(api, w->rank, w->size, *master, timeout);
  } else {
    w->transport = detail::mpi_world(api, w->rank, w->size);
    // A launch that disagrees with RUNE_WORLD_SIZE / RUNE_RANK: MPI is finalized before
    // raising, so the process can exit cleanly with the error (the launcher reports its status).
    auto fail = [&](const std::string& what) {
      w->transport->finalize();
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
  }
  g_world = w;
  std::atexit([] { finalize(); });
  return Communicator(g_world);
}

namespace detail {

void mark_broken(const Communicator& comm, const std::string& what) {
  auto& im = comm.impl("rune::distributed");
  std::lock_guard lock(im.broken_mu);
  if (im.broken.empty()) im.broken = what;
}

ProgressQueue& progress_queue(const Communicator& comm, const char* api) {
  auto& im = comm.impl(api);
  std::lock_guard lock(im.queue_mu);
  if (!im.queue) im.queue = std::make_unique<ProgressQueue>();
  return *im.queue;
}

void exchange(const Communicator& comm, const char* api, int tag, const std::vector<Message>& sends,
              const std::vector<Message>& recvs) {
  auto& im = comm.impl(api);
  {
    // Messages keep the order of issue: a split collective started earlier moves its messages
    // first (the progress thread's own exchanges are those).
    ProgressQueue* q = nullptr;
    {
      std::lock_guard lock(im.queue_mu);
      q = im.queue.get();
    }
    if (q && !q->on_queue_thread()) q->drain();
  }
  std::lock_guard exchanging(im.exchange_mu);
  {
    std::lock_guard lock(im.broken_mu);
    if (!im.broken.empty())
      throw distributed_error(std::string(api) + ": rank " + std::to_string(im.rank) +
                              ": the communicator is broken by an earlier failure: " + im.broken);
  }
  try {
    im.transport->exchange(api, im.rank, tag, sends, recvs, im.timeout);
  } catch (const distributed_error& e) {
    // Messages of this call may still be in flight: the stream no longer lines up.
    mark_broken(comm, e.what());
    throw;
  }
}

}  // namespace detail

}  // namespace rune::distributed
