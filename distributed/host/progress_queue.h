// A communicator's split collectives (distributed/async_collectives.h) in flight: one thread of
// the communicator's own runs their jobs (header and data exchanges) one after another, in the
// order they were submitted, while the submitting thread goes on (PyTorch's ProcessGroup work
// queue, XLA's async collective-start / collective-done). A job's outcome is a ticket, read by
// wait().
//
// Invariants: jobs run in submission order, one at a time, so the messages of a communicator
// keep one order on every rank (every rank submits the same jobs in the same order); any other
// exchange on the communicator first drains the queue (detail::exchange), so a blocking
// collective issued after a start moves its messages after the start's. Every job ends: each
// exchange has the communicator's deadline, and stop() (at finalize) cancels the one running and
// fails the ones queued, so no wait() and no exit hangs. A ticket lives until its wait() or
// abandon(), or until stop() drops every ticket.
#pragma once
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "distributed/communicator.h"

namespace rune::distributed::detail {

class ProgressQueue {
 public:
  // A job fills `result` or raises. A job that never ran (the queue stopped first) is destroyed
  // unrun, its ticket failing with stop()'s reason.
  using Job = std::function<void(std::vector<uint8_t>& result)>;
  ProgressQueue() = default;
  ~ProgressQueue();
  ProgressQueue(const ProgressQueue&) = delete;
  ProgressQueue& operator=(const ProgressQueue&) = delete;

  // Queues `job` after every job submitted before; returns its ticket (never 0). Raises naming
  // `api` once stop() ran.
  uint64_t submit(const std::string& api, Job job);
  // Blocks until ticket `id`'s job ended, drops the ticket and returns the job's result, or
  // rethrows the job's error. Raises naming `api` where the ticket is unknown (never issued,
  // already waited for or abandoned, or dropped by stop()). Calls `before_block` (when set) once
  // if it has to block.
  std::vector<uint8_t> wait(const std::string& api, uint64_t id);
  // Drops ticket `id` (its job still runs: the other ranks expect its messages).
  void abandon(uint64_t id);
  // Blocks until every job submitted so far has ended (their errors stay in their tickets).
  void drain();
  // Whether the calling thread is the queue's own.
  bool on_queue_thread() const;
  // Ends the queue: jobs not started fail with `why`, the running one is left to `cancel`
  // (called under no lock, e.g. the transport's cancel), the thread is joined, every ticket is
  // dropped (a wait blocked on one raises `why`). Later submits raise.
  void stop(const std::string& why, const std::function<void()>& cancel);
  // How many tickets are held (tests: nothing leaks).
  size_t tickets() const;

  // Tests: called on the waiting thread when a wait() is about to block (its job not ended).
  static void set_before_block(std::function<void()> hook);

 private:
  struct Ticket {
    bool done = false;
    std::exception_ptr error;
    std::vector<uint8_t> result;
  };
  void loop();

  mutable std::mutex mu_;
  std::condition_variable cv_;  // jobs queued, jobs ended, stop
  std::deque<std::pair<uint64_t, Job>> jobs_;
  std::map<uint64_t, std::shared_ptr<Ticket>> tickets_;
  uint64_t next_ = 1;
  bool running_ = false;  // a job is running on the thread
  bool stopped_ = false;
  std::string why_;
  std::thread thread_;  // started by the first submit
  std::thread::id thread_id_;
};

// comm's queue (made on first use; stopped, its running exchange cancelled, at finalize()).
ProgressQueue& progress_queue(const Communicator& comm, const char* api);

}  // namespace rune::distributed::detail
