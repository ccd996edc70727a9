#include "runtime/allocator.h"

#include <atomic>
#include <cstdlib>
#include <new>
#include <stdexcept>

#include "runtime/gpu/context.h"

namespace runtime {

// Sizes round up to 64 bytes below 4 KiB, then to 1/8 steps of the power of two, so reuse
// is likely and waste is at most 12.5%.
size_t Allocator::round_size(size_t n) {
  if (n == 0) return 64;
  if (n <= 4096) return (n + 63) & ~size_t(63);
  size_t p = size_t(1) << (63 - __builtin_clzll(n));
  size_t step = p / 8;
  return (n + step - 1) / step * step;
}

void* Allocator::allocate(size_t nbytes) {
  size_t r = round_size(nbytes);
  {
    std::lock_guard lock(mu_);
    auto it = free_.find(r);
    if (it != free_.end() && !it->second.empty()) {
      void* p = it->second.back();
      it->second.pop_back();
      st_.cached -= r;
      st_.in_use += r;
      st_.peak = std::max(st_.peak, st_.in_use);
      ++st_.hits;
      return p;
    }
  }
  void* p = system_alloc(r);
  if (!p) {
    empty_cache();
    p = system_alloc(r);
    if (!p) throw std::bad_alloc();
  }
  std::lock_guard lock(mu_);
  st_.in_use += r;
  st_.peak = std::max(st_.peak, st_.in_use);
  ++st_.misses;
  return p;
}

void Allocator::release(void* p, size_t nbytes) {
  size_t r = round_size(nbytes);
  std::lock_guard lock(mu_);
  free_[r].push_back(p);
  st_.in_use -= r;
  st_.cached += r;
}

AllocatorStats Allocator::stats() {
  std::lock_guard lock(mu_);
  return st_;
}
void Allocator::reset_peak() {
  std::lock_guard lock(mu_);
  st_.peak = st_.in_use;
}
void Allocator::empty_cache() {
  std::map<size_t, std::vector<void*>> blocks;
  {
    std::lock_guard lock(mu_);
    blocks.swap(free_);
    st_.cached = 0;
  }
  for (auto& [size, ptrs] : blocks)
    for (void* p : ptrs) system_free(p, size);
}

namespace {
class HostAllocator final : public Allocator {
  void* system_alloc(size_t n) override { return std::aligned_alloc(64, n); }
  void system_free(void* p, size_t) override { std::free(p); }
};
}  // namespace

Allocator& host_allocator() {
  static auto* a = new HostAllocator;  // outlives every buffer
  return *a;
}

Buffer::Buffer(Device d, size_t n, Allocator* a) : device(d), nbytes(n), alloc(a) {
  data = a->allocate(n);
}
Buffer::Buffer(Device d, void* borrowed_data, size_t n, std::function<void()> release)
    : device(d), data(borrowed_data), nbytes(n), release_borrowed(std::move(release)) {}
Buffer::~Buffer() {
  if (alloc)
    alloc->release(data, nbytes);
  else if (release_borrowed)
    release_borrowed();
}

namespace {
std::atomic<OpNameSource> g_op_name{nullptr};
}  // namespace

void set_op_name_source(OpNameSource f) { g_op_name.store(f); }

BufferRef allocate(Device d, size_t nbytes) {
  // Every CPU device (the synchronous host and the asynchronous CPU:n) uses host memory.
  Allocator& a = d.kind == DeviceKind::CPU ? host_allocator()
                                           : gpu::context(d, "runtime::allocate").allocator();
  try {
    return std::make_shared<Buffer>(d, nbytes, &a);
  } catch (const std::bad_alloc&) {
    // Allocator::allocate has already emptied the cache and retried. The shared_ptr's control
    // block failing is the same condition and gets the same message.
    OpNameSource src = g_op_name.load();
    const char* op = src ? src() : nullptr;
    auto st = a.stats();
    throw OutOfMemory(std::string(op ? op : "runtime::allocate") + ": out of memory on " +
                      d.name() + " allocating " + std::to_string(nbytes) + " bytes (" +
                      std::to_string(st.in_use) + " bytes in use)");
  }
}

Allocator& device_allocator(Device d) {
  if (d.kind == DeviceKind::CPU) return host_allocator();
  return gpu::context(d, "runtime::device_allocator").allocator();
}

}  // namespace runtime
