// Fault scenarios of rune::distributed, run under mpirun -np 2 by tests/distributed/
// CMakeLists.txt; exits 0 only when each rank saw the failure it should, with its message.
//   never_calls: rank 1 never makes the all_reduce; rank 0 must raise within its 1 s timeout,
//                naming the collective, itself and rank 1 (rank 1 waits 3 s, then finalizes).
//   mismatch:    rank 0 passes float32 [4], rank 1 float32 [3]: both raise naming both; the
//                communicator is broken after.
//   world_size:  RUNE_WORLD_SIZE=3 under -np 2: init must raise naming both numbers.
//   dies:        rank 1 _exits after one all_reduce, while rank 0 is in the next (see below).
//   jit_mismatch: as mismatch, with the all_reduce inside a rune::jit program: the compiled
//                program raises on both ranks naming both shapes, and the argument is intact.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

#include "core/nx.h"
#include "distributed/collectives.h"
#include "trace/jit.h"

namespace dist = rune::distributed;

static int expect_message(const std::string& what, const std::vector<std::string>& parts) {
  for (const auto& p : parts)
    if (what.find(p) == std::string::npos) {
      std::fprintf(stderr, "FAIL: message lacks '%s': %s\n", p.c_str(), what.c_str());
      return 1;
    }
  std::printf("ok: %s\n", what.c_str());
  return 0;
}

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "world_size") {
    try {
      dist::init();
    } catch (const dist::distributed_error& e) {
      return expect_message(e.what(),
                            {"rune::distributed::init", "started 2 ranks", "RUNE_WORLD_SIZE=3"});
    }
    std::fprintf(stderr, "FAIL: init accepted a world of the wrong size\n");
    return 1;
  }
  if (mode == "never_calls") {
    dist::Communicator comm = dist::init();
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::seconds(3));
      return 0;
    }
    auto x = nx::create(nx::float32, {4}, {1, 2, 3, 4});
    auto t0 = std::chrono::steady_clock::now();
    try {
      dist::all_reduce(comm, x);
    } catch (const dist::distributed_error& e) {
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      if (s > 2.5) {
        std::fprintf(stderr, "FAIL: raised after %.2f s, timeout 1 s\n", s);
        return 1;
      }
      int rc = expect_message(e.what(), {"rune::distributed::all_reduce",
                                         "rank 0 timed out after 1 s", "waiting for rank 1"});
      // The communicator is broken now: the next call raises at once, naming the first failure.
      try {
        dist::all_gather(comm, x);
      } catch (const dist::distributed_error& e2) {
        return rc |
               expect_message(e2.what(), {"rune::distributed::all_gather", "broken", "timed out"});
      }
      std::fprintf(stderr, "FAIL: a broken communicator accepted a call\n");
      return 1;
    }
    std::fprintf(stderr, "FAIL: all_reduce returned without rank 1\n");
    return 1;
  }
  if (mode == "dies") {
    // Rank 1 exits (_exit, no MPI_Finalize) while rank 0 waits in an all_reduce with a long
    // timeout: Open MPI's launcher must end the whole job, so rank 0 never returns from it (the
    // ctest wraps mpirun in tests/distributed/expect_job_ends.sh: nonzero, soon, with a message).
    dist::Communicator comm = dist::init();
    auto x = nx::ones(nx::float32, {1000});
    dist::all_reduce(comm, x);  // both ranks are up
    if (comm.rank() == 1) {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));  // rank 0 is waiting by now
      std::_Exit(std::getenv("DIES_WITH_0") ? 0 : 3);
    }
    try {
      dist::all_reduce(comm, x);
      std::fprintf(stderr, "FAIL: all_reduce returned without rank 1\n");
    } catch (const dist::distributed_error& e) {
      std::fprintf(stderr, "FAIL: rank 0 outlived rank 1 until: %s\n", e.what());
    }
    return 1;
  }
  if (mode == "mismatch") {
    dist::Communicator comm = dist::init();
    const int r = comm.rank();
    auto x = nx::zeros(nx::float32, {r == 0 ? 4 : 3});
    try {
      dist::all_reduce(comm, x);
    } catch (const dist::distributed_error& e) {
      int rc =
          expect_message(e.what(), {"rune::distributed::all_reduce: the ranks disagree: rank 1 "
                                    "passed float32 [3] (op sum) but rank 0 passed float32 [4] "
                                    "(op sum) (seen on rank " +
                                    std::to_string(r) + ")"});
      try {
        dist::all_reduce(comm, x);
      } catch (const dist::distributed_error& e2) {
        return rc | expect_message(e2.what(), {"broken by an earlier failure", "disagree"});
      }
      std::fprintf(stderr, "FAIL: a broken communicator accepted a call\n");
      return 1;
    }
    std::fprintf(stderr, "FAIL: rank %d: mismatched shapes were accepted\n", r);
    return 1;
  }
  if (mode == "jit_mismatch") {
    dist::Communicator comm = dist::init();
    const int r = comm.rank();
    auto x = nx::create(nx::float32, {r == 0 ? 4 : 3}, std::vector<double>(r == 0 ? 4 : 3, 1.5));
    auto f =
        rune::jit([comm](const nx::Tensor& v) { return dist::all_reduce(comm, v * 2.0) + 1.0; });
    try {
      f(x);
    } catch (const dist::distributed_error& e) {
      int rc =
          expect_message(e.what(), {"rune::distributed::all_reduce: the ranks disagree: rank 1 "
                                    "passed float32 [3] (op sum) but rank 0 passed float32 "
                                    "[4] (op sum) (seen on rank " +
                                    std::to_string(r) + ")"});
      if (nx::to_vector<float>(x) != std::vector<float>(r == 0 ? 4 : 3, 1.5f)) {
        std::fprintf(stderr, "FAIL: the argument changed\n");
        return 1;
      }
      return rc;
    }
    std::fprintf(stderr, "FAIL: rank %d: mismatched shapes were accepted inside jit\n", r);
    return 1;
  }
  std::fprintf(stderr,
               "usage: distributed_faults never_calls|mismatch|jit_mismatch|world_size|dies\n");
  return 2;
}
