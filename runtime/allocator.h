// Buffers and the caching allocator. A freed block goes back to a per-size free list and is
// reused by the next request of the same rounded size, so a loop that allocates the same
// shapes every step stops paying for fresh memory (page faults on the host, cudaMalloc on a GPU).
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/device.h"

namespace runtime {

struct AllocatorStats {
  size_t in_use = 0;  // bytes held by live buffers (rounded sizes)
  size_t peak = 0;    // the most in_use has been since the last reset_peak()
  size_t cached = 0;  // bytes held in free lists, ready for reuse
  size_t hits = 0, misses = 0;
};

class Allocator {
 public:
  virtual ~Allocator() = default;
  void* allocate(size_t nbytes);
  void release(void* p, size_t nbytes);
  AllocatorStats stats();
  void reset_peak();
  void empty_cache();  // returns every cached block to the system
  static size_t round_size(size_t nbytes);

 protected:
  virtual void* system_alloc(size_t nbytes) = 0;
  virtual void system_free(void* p, size_t nbytes) = 0;

 private:
  std::mutex mu_;
  std::map<size_t, std::vector<void*>> free_;
  AllocatorStats st_;
};

// The host allocator: 64-byte aligned blocks.
Allocator& host_allocator();

// A block of device memory, returned to its allocator when the last reference goes.
//
// Who can observe it (donation, docs/semantics.md §3): `live_values` counts the live (not donated
// away) tensor values whose view reaches this storage, `reads` the reads in progress (an op or
// a compiled call between its argument checks and its launch, a read back to the host). A
// consumer may write into a donated value's storage only when, after it killed the donor, no
// live value and no other read reaches it. Raw BufferRef holders (queued stream tasks) are not
// counted: they run in stream order, before any later writer.
struct Buffer {
  Device device;
  void* data = nullptr;
  size_t nbytes = 0;
  Allocator* alloc = nullptr;
  std::atomic<int> live_values{0};
  std::atomic<int> reads{0};
  // Borrowed memory (nx::from_blob, nx::from_dlpack): rune did not allocate it and someone else
  // may still read or write it. `alloc` is null and `release_borrowed` (may be empty) runs
  // exactly once, when the last reference goes (the last view, or a queued stream task holding
  // it). A borrowed buffer is never written in place by a donation (docs/interop.md).
  std::function<void()> release_borrowed;
  bool borrowed() const { return alloc == nullptr; }
  Buffer(Device d, size_t n, Allocator* a);
  Buffer(Device d, void* borrowed_data, size_t n, std::function<void()> release);
  ~Buffer();
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
};
using BufferRef = std::shared_ptr<Buffer>;

// Raised when a buffer's memory cannot be had (the host's or a GPU's):
// "<op>: out of memory on <device> allocating <n> bytes (<m> bytes in use)", where <op> is the
// public operation running on this thread (set_op_name_source), else runtime::allocate.
class OutOfMemory : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
// Where allocation errors learn the public operation running on the calling thread. The runtime
// does not know the layers above it; core installs nx::OpScope::current_api here. Unset, or
// returning nullptr, errors name runtime::allocate.
using OpNameSource = const char* (*)();
void set_op_name_source(OpNameSource f);

// A buffer on `d`: host memory for every CPU device, the device's caching allocator for a GPU
// (runtime/gpu/context.h; throws naming the device when it is unavailable).
BufferRef allocate(Device d, size_t nbytes);
// The caching allocator of `d` (the host allocator for every CPU device), e.g. for its stats.
Allocator& device_allocator(Device d);

}  // namespace runtime
