// A fake NCCL (libfake_nccl.so) for tests without a GPU: the entry points rune loads
// (distributed/gpu/gpu_collectives.h), over the fake CUDA driver's device memory, which is host
// memory (tests/gpu_runtime/fake_driver.h). The ranks of a communicator are devices of this
// process: ncclCommInitAll, or ncclCommInitRank with one unique id from several threads (or one
// thread inside a group). Loaded through rune's own dlopen path (RUNE_NCCL_LIBRARY).
//
// Semantics kept from NCCL: every rank posts the same collectives in the same order; a call
// returns once its data is in place (the fake's stream order: the fake driver runs everything
// at once, so a call blocks until every rank posted it); inside ncclGroupStart / ncclGroupEnd the
// calls only post, and ncclGroupEnd waits for them, so one thread can drive every rank.
//
// Deliberately not NCCL's order: ncclAllReduce and ncclReduceScatter sum in REVERSE rank order,
// ((x_{n-1} + x_{n-2}) + ...) + x_0, so a test that gets rank-order bits proves they came from
// rune's own fold, not from this library. Max is plain `a > b ? a : b` in that order (no NaN
// rule), again unlike rune's.
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {

enum Result { kSuccess = 0, kInternal = 3, kInvalidArgument = 4, kInvalidUsage = 5 };
enum Kind { kAllReduce, kAllGather, kReduceScatter, kBroadcast };
const char* kind_name(int k) {
  static const char* names[] = {"ncclAllReduce", "ncclAllGather", "ncclReduceScatter",
                                "ncclBroadcast"};
  return names[k];
}

thread_local std::string last_error;
int fail(int rc, std::string what) {
  last_error = "fake nccl: " + std::move(what);
  return rc;
}

size_t type_size(int t) {
  switch (t) {
    case 0:
    case 1:
      return 1;
    case 6:
    case 9:
      return 2;
    case 2:
    case 3:
    case 7:
      return 4;
    case 4:
    case 5:
    case 8:
      return 8;
  }
  return 0;
}

struct Op {
  int kind;
  const void* send;
  void* recv;
  size_t count;
  int type, red, root;
  void* stream;
};

struct Clique {
  explicit Clique(int n) : n(n), pending(static_cast<size_t>(n)), done(static_cast<size_t>(n)) {}
  const int n;
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::deque<Op>> pending;  // per rank, posted and not yet run
  std::vector<uint64_t> done;           // per rank, how many of its calls ran
  std::vector<uint64_t> posted = std::vector<uint64_t>(static_cast<size_t>(n));
  std::vector<bool> joined = std::vector<bool>(static_cast<size_t>(n));
  std::string error;  // a mismatch between ranks: every later call fails with it
};

struct Comm {
  std::shared_ptr<Clique> clique;
  int rank;
  void* last_stream = nullptr;
};

std::mutex registry_mu;
std::map<std::string, std::shared_ptr<Clique>> registry;  // ncclCommInitRank's cliques, by id
std::atomic<int> id_serial{0};
std::map<std::string, std::atomic<int>>& calls() {
  static std::map<std::string, std::atomic<int>> c;
  return c;
}
std::mutex calls_mu;
void count(const char* name) {
  std::lock_guard lock(calls_mu);
  ++calls()[name];
}

template <class T>
void reduce_reverse(const std::vector<const Op*>& ops, size_t offset, size_t n, int red, T* out) {
  const int w = static_cast<int>(ops.size());
  std::vector<T> acc(n);
  std::memcpy(acc.data(), static_cast<const T*>(ops[static_cast<size_t>(w - 1)]->send) + offset,
              n * sizeof(T));
  for (int r = w - 2; r >= 0; --r) {
    const T* x = static_cast<const T*>(ops[static_cast<size_t>(r)]->send) + offset;
    for (size_t i = 0; i < n; ++i)
      acc[i] = red == 2 ? (acc[i] > x[i] ? acc[i] : x[i]) : acc[i] + x[i];
  }
  std::memcpy(out, acc.data(), n * sizeof(T));
}

// Reduces elements [offset, offset + n) of every rank's send buffer into out.
bool reduce(const std::vector<const Op*>& ops, size_t offset, size_t n, void* out) {
  const Op& o = *ops[0];
  if (o.red != 0 && o.red != 2) return false;  // sum and max only
  switch (o.type) {
    case 2:
      reduce_reverse(ops, offset, n, o.red, static_cast<int32_t*>(out));
      return true;
    case 4:
      reduce_reverse(ops, offset, n, o.red, static_cast<int64_t*>(out));
      return true;
    case 7:
      reduce_reverse(ops, offset, n, o.red, static_cast<float*>(out));
      return true;
    case 8:
      reduce_reverse(ops, offset, n, o.red, static_cast<double*>(out));
      return true;
  }
  return false;
}

// Runs the front call of every rank (all posted); under the clique's lock.
void run_front(Clique& c) {
  std::vector<Op> front;
  for (auto& q : c.pending) front.push_back(q.front());
  for (int r = 1; r < c.n && c.error.empty(); ++r) {
    const Op &a = front[0], &b = front[static_cast<size_t>(r)];
    if (a.kind != b.kind || a.count != b.count || a.type != b.type || a.red != b.red ||
        a.root != b.root)
      c.error = "rank " + std::to_string(r) + " called " + kind_name(b.kind) + "(count " +
                std::to_string(b.count) + ", type " + std::to_string(b.type) + ") but rank 0 " +
                kind_name(a.kind) + "(count " + std::to_string(a.count) + ", type " +
                std::to_string(a.type) + ")";
  }
  if (c.error.empty()) {
    std::vector<const Op*> ops;
    for (const Op& o : front) ops.push_back(&o);
    const size_t isz = type_size(front[0].type), n = front[0].count;
    // Inputs may alias outputs (in-place calls): read every input before writing.
    std::vector<std::vector<uint8_t>> in;
    for (const Op& o : front) {
      const size_t bytes = (o.kind == kReduceScatter ? n * static_cast<size_t>(c.n) : n) * isz;
      in.emplace_back(static_cast<const uint8_t*>(o.send),
                      static_cast<const uint8_t*>(o.send) + bytes);
    }
    std::vector<Op> copies = front;
    for (size_t r = 0; r < copies.size(); ++r) copies[r].send = in[r].data();
    ops.clear();
    for (const Op& o : copies) ops.push_back(&o);
    for (int r = 0; r < c.n && c.error.empty(); ++r) {
      const Op& o = front[static_cast<size_t>(r)];
      auto* out = static_cast<uint8_t*>(o.recv);
      switch (o.kind) {
        case kAllGather:
          for (int q = 0; q < c.n; ++q)
            std::memcpy(out + static_cast<size_t>(q) * n * isz, in[static_cast<size_t>(q)].data(),
                        n * isz);
          break;
        case kBroadcast:
          std::memcpy(out, in[static_cast<size_t>(o.root)].data(), n * isz);
          break;
        case kAllReduce:
          if (!reduce(ops, 0, n, out))
            c.error =
                "no reduction " + std::to_string(o.red) + " for type " + std::to_string(o.type);
          break;
        case kReduceScatter:
          if (!reduce(ops, static_cast<size_t>(r) * n, n, out))
            c.error =
                "no reduction " + std::to_string(o.red) + " for type " + std::to_string(o.type);
          break;
      }
    }
  }
  for (int r = 0; r < c.n; ++r) {
    c.pending[static_cast<size_t>(r)].pop_front();
    ++c.done[static_cast<size_t>(r)];
  }
  c.cv.notify_all();
}

struct Ticket {
  std::shared_ptr<Clique> clique;
  int rank;
  uint64_t n;
};
thread_local int group_depth = 0;
thread_local std::vector<Ticket> group_tickets;

int wait(const Ticket& t) {
  Clique& c = *t.clique;
  std::unique_lock lock(c.mu);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (c.done[static_cast<size_t>(t.rank)] < t.n)
    if (c.cv.wait_until(lock, deadline) == std::cv_status::timeout)
      return fail(kInternal, "rank " + std::to_string(t.rank) +
                                 " timed out after 30 s waiting for the other ranks' calls");
  if (!c.error.empty()) return fail(kInvalidUsage, c.error);
  return kSuccess;
}

int post(void* comm, Op op) {
  if (!comm) return fail(kInvalidArgument, std::string(kind_name(op.kind)) + ": comm is null");
  if (!type_size(op.type))
    return fail(kInvalidArgument, "unknown data type " + std::to_string(op.type));
  auto& cm = *static_cast<Comm*>(comm);
  count(kind_name(op.kind));
  cm.last_stream = op.stream;
  Ticket t{cm.clique, cm.rank, 0};
  {
    std::lock_guard lock(cm.clique->mu);
    Clique& c = *cm.clique;
    if (!c.error.empty()) return fail(kInvalidUsage, c.error);
    c.pending[static_cast<size_t>(cm.rank)].push_back(op);
    t.n = ++c.posted[static_cast<size_t>(cm.rank)];
    bool all = true;
    for (auto& q : c.pending) all &= !q.empty();
    if (all) run_front(c);
  }
  if (group_depth > 0) {
    group_tickets.push_back(t);
    return kSuccess;
  }
  return wait(t);
}

}  // namespace

extern "C" {

int ncclGetVersion(int* v) {
  *v = 22899;
  return kSuccess;
}

const char* ncclGetErrorString(int rc) {
  switch (rc) {
    case 0:
      return "no error";
    case 1:
      return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
    case 2:
      return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
    case 3:
      return "internal error - please report this issue to the NCCL developers";
    case 4:
      return "invalid argument (run with NCCL_DEBUG=WARN for details)";
    case 5:
      return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  }
  return "unknown result code";
}

const char* ncclGetLastError(void*) { return last_error.c_str(); }

int ncclGetUniqueId(void* id) {
  std::memset(id, 0, 128);
  std::snprintf(static_cast<char*>(id), 128, "fake-nccl %d %d", static_cast<int>(getpid()),
                id_serial++);
  return kSuccess;
}

struct UniqueId {
  char internal[128];
};

int ncclCommInitRank(void** comm, int nranks, UniqueId id, int rank) {
  count("ncclCommInitRank");
  if (nranks < 1 || rank < 0 || rank >= nranks)
    return fail(kInvalidArgument,
                "ncclCommInitRank: rank " + std::to_string(rank) + " of " + std::to_string(nranks));
  std::string key(id.internal, strnlen(id.internal, sizeof id.internal));
  if (key.rfind("fake-nccl", 0) != 0)
    return fail(kInvalidArgument, "ncclCommInitRank: not a fake-nccl unique id");
  std::lock_guard lock(registry_mu);
  auto& c = registry[key];
  if (!c) c = std::make_shared<Clique>(nranks);
  if (c->n != nranks)
    return fail(kInvalidUsage, "ncclCommInitRank: " + std::to_string(nranks) +
                                   " ranks, but the id's communicator has " + std::to_string(c->n));
  if (c->joined[static_cast<size_t>(rank)])
    return fail(kInvalidUsage, "ncclCommInitRank: rank " + std::to_string(rank) + " joined twice");
  c->joined[static_cast<size_t>(rank)] = true;
  *comm = new Comm{c, rank};
  return kSuccess;
}

int ncclCommInitAll(void** comms, int ndev, const int* devlist) {
  count("ncclCommInitAll");
  if (ndev < 1) return fail(kInvalidArgument, "ncclCommInitAll: ndev " + std::to_string(ndev));
  (void)devlist;
  auto c = std::make_shared<Clique>(ndev);
  for (int i = 0; i < ndev; ++i) comms[i] = new Comm{c, i};
  return kSuccess;
}

int ncclCommDestroy(void* comm) {
  count("ncclCommDestroy");
  delete static_cast<Comm*>(comm);
  return kSuccess;
}

int ncclGroupStart() {
  ++group_depth;
  return kSuccess;
}

int ncclGroupEnd() {
  if (group_depth == 0) return fail(kInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--group_depth > 0) return kSuccess;
  std::vector<Ticket> tickets;
  tickets.swap(group_tickets);
  int rc = kSuccess;
  for (const Ticket& t : tickets)
    if (int r = wait(t); r != kSuccess && rc == kSuccess) rc = r;
  return rc;
}

int ncclAllReduce(const void* send, void* recv, size_t count, int type, int op, void* comm,
                  void* stream) {
  return post(comm, {kAllReduce, send, recv, count, type, op, 0, stream});
}
int ncclAllGather(const void* send, void* recv, size_t count, int type, void* comm, void* stream) {
  return post(comm, {kAllGather, send, recv, count, type, 0, 0, stream});
}
int ncclReduceScatter(const void* send, void* recv, size_t count, int type, int op, void* comm,
                      void* stream) {
  return post(comm, {kReduceScatter, send, recv, count, type, op, 0, stream});
}
int ncclBroadcast(const void* send, void* recv, size_t count, int type, int root, void* comm,
                  void* stream) {
  return post(comm, {kBroadcast, send, recv, count, type, 0, root, stream});
}

// Test hooks (not NCCL's): the stream of a communicator's latest call, and how many times an
// entry point was called in this process.
void* fake_nccl_last_stream(void* comm) { return static_cast<Comm*>(comm)->last_stream; }
int fake_nccl_calls(const char* name) {
  std::lock_guard lock(calls_mu);
  auto it = calls().find(name);
  return it == calls().end() ? 0 : it->second.load();
}

}  // extern "C"
