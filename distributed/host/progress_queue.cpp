#include "distributed/host/progress_queue.h"

#include "distributed/communicator.h"

namespace rune::distributed::detail {

namespace {
std::mutex g_hook_mu;
std::function<void()> g_before_block;
}  // namespace

void ProgressQueue::set_before_block(std::function<void()> hook) {
  std::lock_guard lock(g_hook_mu);
  g_before_block = std::move(hook);
}

ProgressQueue::~ProgressQueue() { stop("rune::distributed: the communicator was destroyed", {}); }

uint64_t ProgressQueue::submit(const std::string& api, Job job) {
  std::lock_guard lock(mu_);
  if (stopped_)
    throw distributed_error(api + ": the communicator is finalized (no collective can start)");
  const uint64_t id = next_++;
  tickets_[id] = std::make_shared<Ticket>();
  jobs_.emplace_back(id, std::move(job));
  if (!thread_.joinable()) {
    thread_ = std::thread([this] { loop(); });
    thread_id_ = thread_.get_id();
  }
  cv_.notify_all();
  return id;
}

void ProgressQueue::loop() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopped_ || !jobs_.empty(); });
    if (stopped_) return;
    auto [id, job] = std::move(jobs_.front());
    jobs_.pop_front();
    running_ = true;
    lock.unlock();
    std::vector<uint8_t> result;
    std::exception_ptr error;
    try {
      job(result);
    } catch (...) {
      error = std::current_exception();
    }
    job = nullptr;  // its buffers go now, not at the next job
    lock.lock();
    running_ = false;
    if (auto it = tickets_.find(id); it != tickets_.end()) {  // else abandoned
      it->second->done = true;
      it->second->error = error;
      it->second->result = std::move(result);
    }
    cv_.notify_all();
  }
}

std::vector<uint8_t> ProgressQueue::wait(const std::string& api, uint64_t id) {
  std::unique_lock lock(mu_);
  auto it = tickets_.find(id);
  if (it == tickets_.end())
    throw distributed_error(api +
                            ": no collective in flight with this handle (it was waited "
                            "for already, or the communicator was finalized)");
  std::shared_ptr<Ticket> t = it->second;
  if (!t->done) {
    std::function<void()> hook;
    {
      std::lock_guard h(g_hook_mu);
      hook = g_before_block;
    }
    if (hook) {
      lock.unlock();
      hook();
      lock.lock();
    }
    cv_.wait(lock, [&] { return t->done || !tickets_.count(id); });
  }
  tickets_.erase(id);
  if (!t->done)  // dropped by stop()
    throw distributed_error(api + ": " + why_);
  if (t->error) std::rethrow_exception(t->error);
  return std::move(t->result);
}

void ProgressQueue::abandon(uint64_t id) {
  std::lock_guard lock(mu_);
  tickets_.erase(id);
}

void ProgressQueue::drain() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [&] { return stopped_ || (jobs_.empty() && !running_); });
}

bool ProgressQueue::on_queue_thread() const {
  std::lock_guard lock(mu_);
  return thread_.joinable() && std::this_thread::get_id() == thread_id_;
}

void ProgressQueue::stop(const std::string& why, const std::function<void()>& cancel) {
  std::deque<std::pair<uint64_t, Job>> unrun;
  {
    std::lock_guard lock(mu_);
    if (stopped_) return;
    stopped_ = true;
    why_ = why;
    unrun.swap(jobs_);
    for (auto& [id, job] : unrun)
      if (auto it = tickets_.find(id); it != tickets_.end()) {
        it->second->done = true;
        it->second->error = std::make_exception_ptr(distributed_error("rune::distributed: " + why));
      }
    cv_.notify_all();
  }
  unrun.clear();
  if (cancel) cancel();  // ends the running job's exchange promptly
  if (thread_.joinable()) {
    if (std::this_thread::get_id() == thread_.get_id())
      thread_.detach();  // stop() from a job (cannot happen today): never join oneself
    else
      thread_.join();
  }
  std::lock_guard lock(mu_);
  tickets_.clear();
  cv_.notify_all();
}

size_t ProgressQueue::tickets() const {
  std::lock_guard lock(mu_);
  return tickets_.size();
}

}  // namespace rune::distributed::detail
