// The state behind a GpuCommunicator (distributed/gpu/gpu_communicator.h), for the files that queue
// its collectives; and the header check between the ranks of one process.
#pragma once
#include <condition_variable>
#include <map>
#include <mutex>
#include <string>
#include <vector>

#include "distributed/gpu/gpu_communicator.h"

namespace rune::distributed {

namespace detail {
// What every rank of an in-process GPU communicator passed to its k-th collective, compared
// between the threads driving the ranks (the host communicator's check_headers does this
// between processes). Rounds are freed once every rank has compared them.
class LocalHeaders {
 public:
  // `timeout`: seconds a rank waits for the others (RUNE_DISTRIBUTED_TIMEOUT, as a host
  // communicator's).
  LocalHeaders(int ranks, double timeout)
      : n_(ranks), timeout_(timeout), next_(static_cast<size_t>(ranks)) {}
  // Posts rank `rank`'s next collective (`call`: its name; `what`: dtype, shape, op or root)
  // and waits (at most the timeout) for every rank's; raises on every rank naming the
  // first rank that differs from rank 0 (or the ranks missing at the timeout). After a failure
  // the communicator is broken, as a host one (distributed/communicator.h): a rank that timed
  // out no longer lines up with the others' calls, so every later check raises naming it.
  void check(const char* api, int rank, const std::string& call, const std::string& what);

 private:
  struct Round {
    std::vector<std::string> call, what;
    std::vector<bool> posted;
    int compared = 0;
  };
  const int n_;
  const double timeout_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint64_t> next_;  // per rank, the round of its next call
  std::map<uint64_t, Round> rounds_;
  std::string broken_;  // the first failure ("" while none)
};
}  // namespace detail

struct GpuCommunicator::Impl {
  GpuCollectives which = GpuCollectives::Nccl;
  const GpuCollectiveLibrary* lib = nullptr;
  void* comm = nullptr;  // ncclComm_t
  int rank = 0, size = 1;
  nx::Device device;
  bool native = false;
  // One process per rank: the host communicator the headers are checked over.
  Communicator host;
  // Several devices of this process: the check between their threads.
  std::shared_ptr<detail::LocalHeaders> local;
  ~Impl();
};

namespace detail {
// "<api>: <call> failed on <device> (<library>): <ncclGetErrorString> (<rc>): <ncclGetLastError>"
std::string gpu_collective_error(const GpuCollectiveLibrary& lib, const std::string& api,
                                 const char* call, int rc, void* comm, const nx::Device& device);
}  // namespace detail

}  // namespace rune::distributed
