#include "runtime/stream.h"

#include <map>
#include <stdexcept>

namespace runtime {

Stream::Stream(Device d) : device_(d), worker_([this] { loop(); }) {}

Stream::~Stream() {
  {
    std::lock_guard l(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

void Stream::enqueue(std::function<void()> task) {
  {
    std::lock_guard l(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
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
  {
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
  stream->enqueue([s = state_] {
    std::lock_guard l(s->mu);
    s->done = true;
    s->cv.notify_all();
  });
}

void Event::wait() {
  std::unique_lock l(state_->mu);
  state_->cv.wait(l, [&] { return state_->done; });
}

bool Event::done() {
  std::lock_guard l(state_->mu);
  return state_->done;
}

bool is_async(Device d) { return d.kind != DeviceKind::CPU || d.index != 0; }

Stream* stream_for(Device d) {
  if (!is_async(d)) return nullptr;
  if (d.kind != DeviceKind::CPU)
    throw std::invalid_argument("runtime: device " + d.name() +
                                " is not available in this build (no " +
                                (d.kind == DeviceKind::CUDA ? "CUDA" : "HIP") + " backend)");
  static std::mutex mu;
  static auto* streams = new std::map<int, std::unique_ptr<Stream>>;  // live for the process
  std::lock_guard l(mu);
  auto& s = (*streams)[d.index];
  if (!s) s = std::make_unique<Stream>(d);
  return s.get();
}

}  // namespace runtime
