// Ranks without an MPI launcher, for the TCP rendezvous tests (tcp_rendezvous.cpp,
// overlap_scenarios.cpp): the test binary starts copies of itself as the ranks, as
// torch.distributed's launcher does, with RUNE_RANK, RUNE_WORLD_SIZE and RUNE_MASTER_ADDR set.
#pragma once
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <functional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace rank_launcher {

// A free TCP port on the loopback interface (bound, read, closed).
inline int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a);
  socklen_t len = sizeof a;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

// Starts one copy of `self` per (rank, world size) of `ranks`, each running
// `self <scenario> rank` with the rendezvous variables and RUNE_DISTRIBUTED_TIMEOUT=`timeout`
// set (an MPI launcher's own variables unset); `child_env(rank)` sets more in the child before
// it starts, `on_exit(i)` runs when the i-th process has exited. Returns the exit codes (a
// process still running after 60 s is killed: -1).
inline std::vector<int> launch(const char* self, const std::string& scenario,
                               const std::vector<std::pair<int, int>>& ranks, const char* timeout,
                               const std::function<void(int rank)>& child_env = {},
                               const std::function<void(size_t i)>& on_exit = {}) {
  const std::string master = "127.0.0.1:" + std::to_string(free_port());
  std::vector<pid_t> pids;
  for (auto [r, world] : ranks) {
    pid_t pid = ::fork();
    if (pid == 0) {
      ::setenv("RUNE_RANK", std::to_string(r).c_str(), 1);
      ::setenv("RUNE_WORLD_SIZE", std::to_string(world).c_str(), 1);
      ::setenv("RUNE_MASTER_ADDR", master.c_str(), 1);
      ::setenv("RUNE_DISTRIBUTED_TIMEOUT", timeout, 1);
      if (child_env) child_env(r);
      for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) ::unsetenv(v);
      ::execl(self, self, scenario.c_str(), "rank", static_cast<char*>(nullptr));
      std::_Exit(127);
    }
    pids.push_back(pid);
  }
  std::vector<int> codes(pids.size(), -2);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  for (size_t left = pids.size(); left > 0;) {
    for (size_t i = 0; i < pids.size(); ++i) {
      if (codes[i] != -2) continue;
      int status = 0;
      if (::waitpid(pids[i], &status, WNOHANG) == pids[i]) {
        codes[i] = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
        if (on_exit) on_exit(i);
        --left;
      }
    }
    if (left == 0) break;
    if (std::chrono::steady_clock::now() > deadline) {
      for (size_t i = 0; i < pids.size(); ++i)
        if (codes[i] == -2) {
          ::kill(pids[i], SIGKILL);
          ::waitpid(pids[i], nullptr, 0);
          codes[i] = -1;
        }
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return codes;
}

}  // namespace rank_launcher
