// Streams: the queue of work of an asynchronous device. The host (CPU) is synchronous and has
// none. `CPU:n` for n >= 1 is an asynchronous host device whose stream is a thread running
// tasks in order, exactly as a GPU stream does: it is how the asynchronous paths (checks raised
// at the next wait, poisoned results) run in CI without a GPU.
//
// A wait (runtime::synchronize, a read, a transfer) blocks until the queued work is done and
// raises the first failure recorded since the last wait; later failures of that interval are
// dropped with it.
//
// A GPU (CUDA:n, HIP:n) queues its kernels and copies on the driver's stream, from the caller's
// thread (runtime/gpu); its runtime::Stream is a device stream: no worker thread, the wait is
// the driver's stream synchronize, and enqueued host tasks (the reads of check results) run at
// the next wait, after the device work, in order. Such tasks never wait on their own stream.
#pragma once
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>

#include "runtime/device.h"

namespace runtime {

class Stream {
 public:
  explicit Stream(Device d);
  // A device stream: `device_wait` blocks until the device ran its queued work (throwing the
  // driver's error, which becomes the stream's failure).
  Stream(Device d, std::function<void()> device_wait);
  ~Stream();
  // Queues a task. At most queue_depth() tasks wait at once: a host stream blocks the caller
  // until there is room; a device stream runs its waiting host tasks first.
  void enqueue(std::function<void()> task);
  // RUNE_STREAM_QUEUE_DEPTH (default 64), read once.
  static size_t queue_depth();
  // Waits for every queued task; rethrows (and clears) the first failure since the last wait.
  void synchronize();
  // Records a failure to be raised at the next wait (a task's exception is recorded too).
  void record_failure(std::exception_ptr e);
  Device device() const { return device_; }

 private:
  void loop();
  void wait_device();  // device stream: the device wait, then the host tasks
  Device device_;
  std::function<void()> device_wait_;  // set for a device stream
  std::recursive_mutex wait_mu_;       // device stream: one wait at a time
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_, space_cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false, stop_ = false;
  std::exception_ptr failure_;
  std::thread worker_;  // host streams only
  friend class Event;
};

// A point in a stream's work: record() marks everything queued so far; wait() blocks until that
// work ran (without raising the stream's failures: those belong to the stream's next wait).
// On the synchronous host an event is complete as soon as it is recorded.
class Event {
 public:
  void record(Stream* stream);
  void wait();
  bool done();

 private:
  struct State {
    std::mutex mu;
    std::condition_variable cv;
    bool done = true;
    Stream* device_stream = nullptr;  // recorded on a device stream: wait() waits on it
  };
  std::shared_ptr<State> state_ = std::make_shared<State>();
};

// The stream of an asynchronous device, or nullptr for the synchronous host. Throws
// std::invalid_argument "<api>: device CUDA:0 is unavailable: <why>" when it does not exist here.
Stream* stream_for(Device d, const char* api = "runtime");
bool is_async(Device d);

// A result's failure state, shared by the tensors that view it: set when the work producing it
// failed (a failing check, or a poisoned input), so every read raises that failure.
struct Poison {
  std::mutex mu;
  std::exception_ptr error;
  void set(std::exception_ptr e) {
    std::lock_guard l(mu);
    if (!error) error = e;
  }
  std::exception_ptr get() {
    std::lock_guard l(mu);
    return error;
  }
};

}  // namespace runtime
