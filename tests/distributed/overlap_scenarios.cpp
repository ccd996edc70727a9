// Split collectives and data_parallel's overlapped buckets on 2 ranks over TCP: this binary
// starts copies of itself as the ranks (as tcp_rendezvous.cpp does), each scenario in a fresh
// world, and checks how each rank exits. Scenarios (argv[1]):
//   order:    the compiled step's listing (RUNE_PROFILE of rank 0) has every bucket's start
//             before later backward kernels and the waits after them; rank 1 makes its call only
//             once rank 0 blocks in its first wait, so rank 0 ran the starts and the kernels after
//             them while no bucket could have been reduced (a snapshot of rank 0's listing taken
//             as it blocks shows them, and no wait); the results equal the path without overlap.
//   timeout:  rank 1 never makes the call (timeout 1 s): rank 0's wait raises the blocking
//             call's message, naming the API and rank 1, and the communicator is broken.
//   dp_timeout: the same inside data_parallel's compiled step: "rune::data_parallel: ...".
//   mismatch: the ranks start all_reduce on float32 [3] and [4]: both waits name both shapes.
//   orphan:   a program fails (a mismatched blocking collective) between its start and its
//             wait: the error is raised on both ranks, the ticket it left is dropped at
//             finalize(), the process exits normally.
//   exit_in_flight: rank 0 drops a started all_reduce that rank 1 never joins (timeout 300 s)
//             and returns from main: finalize() cancels it, rank 0 exits 0 at once (the launcher
//             kills a rank after 60 s), then rank 1 exits.
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "core/io_internal.h"
#include "core/nx.h"
#include "distributed/async_collectives.h"
#include "distributed/data_parallel.h"
#include "distributed/host/progress_queue.h"
#include "rank_launcher.h"
#include "runtime/profile.h"
#include "trace/rune.h"

namespace dist = rune::distributed;
using nx::Tensor;
using Clock = std::chrono::steady_clock;

struct Mlp {
  Tensor w1, b1, w2, b2, w3, b3;
};
RUNE_TREE(Mlp, w1, b1, w2, b2, w3, b3)

namespace {

int failures = 0;
void expect(bool ok, const std::string& what) {
  if (!ok) {
    std::fprintf(stderr, "FAIL (rank %s): %s\n", std::getenv("RUNE_RANK"), what.c_str());
    ++failures;
  }
}
bool has(const std::string& s, const std::string& part) {
  return s.find(part) != std::string::npos;
}
bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() &&
         nx::io::read_bytes(a, "test") == nx::io::read_bytes(b, "test");
}
std::string dir() { return std::getenv("OVERLAP_DIR"); }
bool exists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}
void touch(const std::string& path) { std::ofstream(path) << "1\n"; }
// Waits until `path` exists (at most 30 s: false then).
bool await_file(const std::string& path) {
  for (auto end = Clock::now() + std::chrono::seconds(30); Clock::now() < end;) {
    if (exists(path)) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return false;
}
std::string message_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const std::exception& e) {
    return e.what();
  }
  return "";
}

// The names of the kernel events of a RUNE_PROFILE file, in recording order (a step is recorded
// when it ends, on the thread running the program).
std::vector<std::string> kernel_events(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> names;
  for (std::string line; std::getline(in, line);) {
    if (!has(line, "\"cat\":\"kernel\"")) continue;
    const size_t at = line.find("\"name\":\"") + 8;
    names.push_back(line.substr(at, line.find('"', at) - at));
  }
  return names;
}

auto mlp_step = [](const Mlp& p, const Tensor& xs, const Tensor& ys) {
  auto loss = [&](const Mlp& q) {
    Tensor h = nx::tanh(nx::matmul(xs, q.w1) + q.b1);
    h = nx::tanh(nx::matmul(h, q.w2) + q.b2);
    Tensor e = nx::matmul(h, q.w3) + q.b3 - ys;
    return nx::mean(e * e);
  };
  return rune::value_and_grad(loss, p);
};

Mlp mlp(const dist::Communicator& comm) {
  const int64_t h = 64;
  Mlp m{nx::randn(nx::key(1), nx::float32, {8, h}),       nx::zeros(nx::float32, {h}),
        nx::randn(nx::key(2), nx::float32, {h, h}) * 0.1, nx::zeros(nx::float32, {h}),
        nx::randn(nx::key(3), nx::float32, {h, 4}) * 0.1, nx::zeros(nx::float32, {4})};
  return dist::broadcast_tree(comm, m);
}

int order() {
  dist::Communicator comm = dist::init();
  const int r = comm.rank();
  Mlp m = mlp(comm);
  Tensor x = nx::randn(nx::key(4), nx::float32, {32, 8}),
         y = nx::randn(nx::key(5), nx::float32, {32, 4});
  auto dp = rune::data_parallel(mlp_step, comm);
  dp.set_bucket_bytes(4096);  // several buckets: w3 and b3 alone ready first, w1 last
  dp(m, x, y);                // compiles (both ranks)
  dist::all_reduce(comm, nx::zeros(nx::float32, {1}));  // both ranks are past it
  std::pair<Tensor, Mlp> got;
  if (r == 0) {
    const std::string before = runtime::profile_flush();
    expect(!before.empty(), "RUNE_PROFILE is set for rank 0");
    const size_t skip = kernel_events(before).size();
    std::vector<std::string> at_block;
    int blocked = 0;
    dist::detail::ProgressQueue::set_before_block([&] {
      if (blocked++) return;
      at_block = kernel_events(runtime::profile_flush());  // what ran before rank 1 starts
      touch(dir() + "/blocked");
    });
    got = dp(m, x, y);
    dist::detail::ProgressQueue::set_before_block({});
    expect(blocked >= 1, "rank 0 blocked in a wait (rank 1 had not started)");
    std::vector<std::string> all = kernel_events(runtime::profile_flush());
    all.erase(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(skip));
    at_block.erase(at_block.begin(),
                   at_block.begin() + static_cast<std::ptrdiff_t>(std::min(skip, at_block.size())));
    std::string listing;
    for (const auto& n : all) listing += "  " + n + "\n";
    std::printf("rank 0: the overlapped step's steps, in order:\n%s", listing.c_str());
    auto index = [&](const std::vector<std::string>& v, const std::string& part, bool last) {
      int found = -1;
      for (size_t i = 0; i < v.size(); ++i)
        if (has(v[i], part) && (found < 0 || last)) found = static_cast<int>(i);
      return found;
    };
    const int first_start = index(all, "bucket_start", false),
              last_start = index(all, "bucket_start", true);
    const int first_wait = index(all, "bucket_wait", false);
    int starts = 0, waits = 0, gemms_between = 0;
    for (int i = 0; i < static_cast<int>(all.size()); ++i) {
      starts += has(all[i], "bucket_start");
      waits += has(all[i], "bucket_wait");
      gemms_between += i > first_start && i < first_wait && has(all[i], "gemm");
    }
    expect(starts >= 3 && starts == waits, "one start and one wait per bucket (" +
                                               std::to_string(starts) + ", " +
                                               std::to_string(waits) + ")");
    expect(first_start >= 0 && last_start < first_wait, "every start before every wait");
    expect(gemms_between >= 2, "backward products run between the first start and the first wait");
    // The snapshot taken as rank 0 blocked: every start and the kernels after the first, no wait.
    int snap_starts = 0, snap_gemms_after_start = 0, snap_waits = 0;
    bool seen_start = false;
    for (const auto& n : at_block) {
      seen_start |= has(n, "bucket_start");
      snap_starts += has(n, "bucket_start");
      snap_waits += has(n, "bucket_wait");
      snap_gemms_after_start += seen_start && has(n, "gemm");
    }
    expect(snap_starts == starts && snap_waits == 0 && snap_gemms_after_start == gemms_between,
           "before rank 1 started, rank 0 had run every start and the backward products after "
           "the first (" +
               std::to_string(snap_starts) + " starts, " + std::to_string(snap_gemms_after_start) +
               " products, " + std::to_string(snap_waits) + " waits)");
  } else {
    expect(await_file(dir() + "/blocked"), "rank 0 blocked in its wait");
    got = dp(m, x, y);
  }
  dp.set_overlap(false);
  auto want = dp(m, x, y);
  expect(same_bytes(got.first, want.first), "the loss has the bits of the path without overlap");
  auto [a, da] = rune::tree_flatten(got.second);
  auto [b, db] = rune::tree_flatten(want.second);
  for (size_t i = 0; i < a.size(); ++i)
    expect(same_bytes(a[i], b[i]), "gradient " + std::to_string(i) + " has the same bits");
  if (failures == 0) std::printf("rank %d: ok\n", r);
  return failures ? 1 : 0;
}

int timeout() {
  dist::Communicator comm = dist::init();
  dist::all_reduce(comm, nx::ones(nx::float32, {4}));                // both ranks are up
  if (comm.rank() == 1) return await_file(dir() + "/done") ? 0 : 1;  // never makes the call
  dist::PendingCollective h = dist::all_reduce_start(comm, nx::ones(nx::float32, {4}));
  std::string m = message_of([&] { h.wait(); });
  expect(m == "rune::distributed::all_reduce: rank 0 timed out after 1 s waiting for rank 1 (a "
              "rank that died, never joined or never made this call; RUNE_DISTRIBUTED_TIMEOUT "
              "sets the limit)",
         "the wait raises the blocking call's message: " + m);
  m = message_of([&] { dist::all_reduce(comm, nx::ones(nx::float32, {4})); });
  expect(has(m,
             "rune::distributed::all_reduce: rank 0: the communicator is broken by an earlier "
             "failure: rune::distributed::all_reduce: rank 0 timed out"),
         "later calls name the failure: " + m);
  touch(dir() + "/done");
  if (failures == 0) std::printf("rank 0: ok: %s\n", m.c_str());
  return failures ? 1 : 0;
}

int dp_timeout() {
  dist::Communicator comm = dist::init();
  Mlp m = mlp(comm);
  if (comm.rank() == 1) return await_file(dir() + "/done") ? 0 : 1;
  auto dp = rune::data_parallel(mlp_step, comm);
  std::string msg = message_of([&] {
    dp(m, nx::ones(nx::float32, {4, 8}), nx::ones(nx::float32, {4, 4}));
  });
  expect(has(msg,
             "rune::data_parallel: rank 0 timed out after 1 s waiting for rank 1 (a rank "
             "that died, never joined or never made this call"),
         "the compiled step raises the bucket's timeout: " + msg);
  touch(dir() + "/done");
  if (failures == 0) std::printf("rank 0: ok: %s\n", msg.c_str());
  return failures ? 1 : 0;
}

int mismatch() {
  dist::Communicator comm = dist::init();
  const int r = comm.rank();
  dist::PendingCollective h = dist::all_reduce_start(comm, nx::ones(nx::float32, {3 + r}));
  std::string m = message_of([&] { h.wait(); });
  expect(m == "rune::distributed::all_reduce: the ranks disagree: rank 1 passed float32 [4] (op "
              "sum) but rank 0 passed float32 [3] (op sum) (seen on rank " +
                  std::to_string(r) + ")",
         "the wait names both shapes: " + m);
  if (failures == 0) std::printf("rank %d: ok: %s\n", r, m.c_str());
  return failures ? 1 : 0;
}

int orphan() {
  dist::Communicator comm = dist::init();
  const int r = comm.rank();
  auto f = rune::jit([comm](const Tensor& x, const Tensor& y) {
    dist::PendingCollective h = dist::all_reduce_start(comm, x);
    Tensor z = dist::all_reduce(comm, y);  // the ranks disagree on y's shape: it raises
    return h.wait() + nx::sum(z);
  });
  std::string m =
      message_of([&] { f(nx::ones(nx::float32, {5}), nx::ones(nx::float32, {3 + r})); });
  expect(has(m, "rune::distributed::all_reduce: the ranks disagree: rank 1 passed float32 [4]"),
         "the program raises the blocking collective's mismatch: " + m);
  expect(dist::detail::collectives_in_flight(comm) == 1,
         "the start without its wait holds its ticket until finalize");
  dist::finalize();
  expect(dist::detail::collectives_in_flight(comm) == 0, "finalize dropped it");
  if (failures == 0) std::printf("rank %d: ok\n", r);
  return failures ? 1 : 0;
}

int exit_in_flight() {
  dist::Communicator comm = dist::init();
  dist::all_reduce(comm, nx::ones(nx::float32, {4}));  // both ranks are up
  if (comm.rank() == 1) return await_file(dir() + "/rank0_exited") ? 0 : 1;
  dist::PendingCollective h = dist::all_reduce_start(comm, nx::ones(nx::float32, {1 << 16}));
  std::printf("rank 0: returning from main with a collective in flight\n");
  return 0;  // h is dropped, then finalize() at exit cancels its exchange
}

// Starts ranks 0 and 1 of a world of 2 running `scenario` (rank_launcher.h) with OVERLAP_DIR=d
// and rank 0's profile in d/rank0.json; when rank 0 exits, d/rank0_exited is created.
std::vector<int> launch(const char* self, const std::string& scenario, const std::string& d,
                        const char* timeout) {
  return rank_launcher::launch(
      self, scenario, {{0, 2}, {1, 2}}, timeout,
      [&](int r) {
        ::setenv("OVERLAP_DIR", d.c_str(), 1);
        if (r == 0) ::setenv("RUNE_PROFILE", (d + "/rank0.json").c_str(), 1);
      },
      [&](size_t i) {
        if (i == 0) touch(d + "/rank0_exited");
      });
}

}  // namespace

int main(int argc, char** argv) {
  const std::string scenario = argc > 1 ? argv[1] : "";
  if (argc > 2 && std::string(argv[2]) == "rank") {
    if (scenario == "order") return order();
    if (scenario == "timeout") return timeout();
    if (scenario == "dp_timeout") return dp_timeout();
    if (scenario == "mismatch") return mismatch();
    if (scenario == "orphan") return orphan();
    if (scenario == "exit_in_flight") return exit_in_flight();
    return 2;
  }
  const char* timeout = scenario == "timeout" || scenario == "dp_timeout" ? "1"
                        : scenario == "exit_in_flight"                    ? "300"
                                                                          : "20";
  if (scenario != "order" && scenario != "timeout" && scenario != "dp_timeout" &&
      scenario != "mismatch" && scenario != "orphan" && scenario != "exit_in_flight") {
    std::fprintf(
        stderr,
        "usage: overlap_scenarios order|timeout|dp_timeout|mismatch|orphan|exit_in_flight\n");
    return 2;
  }
  char tmpl[] = "/tmp/rune_overlap_XXXXXX";
  const char* d = ::mkdtemp(tmpl);
  if (!d) return 2;
  std::vector<int> codes = launch(argv[0], scenario, d, timeout);
  std::system(("rm -rf " + std::string(d)).c_str());
  for (size_t r = 0; r < codes.size(); ++r)
    if (codes[r] != 0) {
      std::fprintf(stderr, "FAIL: rank %zu exited with %d\n", r, codes[r]);
      return 1;
    }
  std::printf("%s: every rank passed\n", scenario.c_str());
  return 0;
}
