#include "runtime/stream.h"

#include <map>
#include <stdexcept>

#include "ir/env.h"
#include "runtime/gpu/context.h"

namespace runtime {

Stream::Stream(Device d) : device_(d), worker_([this] { loop(); }) {}

Stream::Stream(Device d, std::function<void()> device_wait)
    : device_(d), device_wait_(std::move(device_wait)) {}

Stream::~Stream() {
  if (!worker_.joinable()) return;
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

size_t Stream::queue_depth() {
  static const size_t depth = [] {
    return static_cast<size_t>(ir::env::integer(ir::env::Var::StreamQueueDepth));  // >= 1
  }();
  return depth;
}

void Stream::enqueue(std::function<void()> task) {
  if (device_wait_) {
    // A device stream's host tasks run at a wait: a full queue runs them now (the device work
    // they follow first), keeping their failures for the next wait as a wait would.
    bool full;
    {
      std::lock_guard l(mu_);
      full = queue_.size() >= queue_depth();
    }
    if (full) wait_device();
    std::lock_guard l(mu_);
    queue_.push_back(std::move(task));
    return;
  }
  {
    // A full queue blocks the caller until the worker took a task, as a GPU launch queue does,
    // so a loop that never waits holds a bounded amount of queued work and its memory. The
    // worker itself never blocks here (a task that enqueues must not wait on its own stream).
    std::unique_lock l(mu_);
    if (std::this_thread::get_id() != worker_.get_id())
      space_cv_.wait(l, [&] { return queue_.size() < queue_depth(); });
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

// The device ran everything queued before this call, then the host tasks run in order; every
// failure is recorded for the wait that raises it.
void Stream::wait_device() {
  std::lock_guard w(wait_mu_);
  try {
    device_wait_();
  } catch (...) {
    record_failure(std::current_exception());
  }
  for (;;) {
    std::function<void()> task;
    {
      std::lock_guard l(mu_);
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    try {
      task();
    } catch (...) {
      record_failure(std::current_exception());
    }
  }
}

void Stream::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock l(mu_);
      cv_.wait(l, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    space_cv_.notify_one();
    try {
      task();
    } catch (...) {
      record_failure(std::current_exception());
    }
    {
      std::lock_guard l(mu_);
      busy_ = false;
      if (queue_.empty()) idle_cv_.notify_all();
    }
  }
}

void Stream::record_failure(std::exception_ptr e) {
  std::lock_guard l(mu_);
  if (!failure_) failure_ = e;
}

void Stream::synchronize() {
  std::exception_ptr e;
  if (device_wait_) {
    wait_device();
    std::lock_guard l(mu_);
    e = failure_;
    failure_ = nullptr;
  } else {
    std::unique_lock l(mu_);
    idle_cv_.wait(l, [&] { return queue_.empty() && !busy_; });
    e = failure_;
    failure_ = nullptr;
  }
  if (e) std::rethrow_exception(e);
}

void Event::record(Stream* stream) {
  state_ = std::make_shared<State>();
  if (!stream) return;
  state_->done = false;
  if (stream->device_wait_) {
    state_->device_stream = stream;  // the driver orders it; wait() waits on the device
    return;
  }
  stream->enqueue([s = state_] {
    std::lock_guard l(s->mu);
    s->done = true;
    s->cv.notify_all();
  });
}

void Event::wait() {
  if (Stream* s = state_->device_stream) {
    s->wait_device();
    std::lock_guard l(state_->mu);
    state_->done = true;
    return;
  }
  std::unique_lock l(state_->mu);
  state_->cv.wait(l, [&] { return state_->done; });
}

bool Event::done() {
  std::lock_guard l(state_->mu);
  return state_->done;
}

bool is_async(Device d) { return d.kind != DeviceKind::CPU || d.index != 0; }

Stream* stream_for(Device d, const char* api) {
  if (!is_async(d)) return nullptr;
  if (d.kind != DeviceKind::CPU) return gpu::context(d, api).stream();
  static std::mutex mu;
  static auto* streams = new std::map<int, std::unique_ptr<Stream>>;  // live for the process
  std::lock_guard l(mu);
  auto& s = (*streams)[d.index];
  if (!s) s = std::make_unique<Stream>(d);
  return s.get();
}

}  // namespace runtime
