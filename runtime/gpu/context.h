// Per-device state of a GPU (CUDA:n, HIP:n): the driver, the device's facts, its one stream,
// a caching device allocator and a caching pinned-host allocator.
//
// Invariant: all work of a device (kernels, copies) is queued on its one stream, so a block
// released to the caching allocator and handed to the next request is only touched again by
// work queued after everything that used it: reuse needs no event and no synchronisation.
// Host memory that a queued copy reads or writes (pinned staging) is only reused after a wait.
#pragma once
#include <memory>
#include <string>

#include "runtime/allocator.h"
#include "runtime/gpu/driver.h"
#include "runtime/stream.h"

namespace runtime::gpu {

class Context {
 public:
  Context(Device d, const DriverTable& drv);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Device device() const { return device_; }
  const DriverTable& driver() const { return drv_; }
  const DeviceInfo& info() const { return info_; }
  Handle handle() const { return stream_handle_; }  // the driver stream
  Stream* stream() { return stream_.get(); }        // the runtime::Stream (waits, host tasks)
  Allocator& allocator() { return *device_alloc_; }
  Allocator& pinned() { return *pinned_alloc_; }

  // Makes the device current on the calling thread (a thread-local compare when it is).
  void make_current();
  // Throws std::runtime_error "<api>: <what> failed: <driver error>" when rc != 0.
  void check(int rc, const char* what) const;
  // Blocks until the device ran its queued work (driver errors throw; no stream failures).
  void sync();

 private:
  Device device_;
  const DriverTable& drv_;
  DeviceInfo info_;
  Handle stream_handle_ = nullptr;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Allocator> device_alloc_, pinned_alloc_;
};

// The context of a GPU device, created on first use. Throws std::invalid_argument
// "<api>: device CUDA:0 is unavailable: <why>" when the driver cannot be loaded, initialised,
// has no such device, or the device cannot be set up; the reason is kept, so a second request
// raises the same message and nothing is half set up.
Context& context(Device d, const char* api);
// "" when `d` can be used, else why not (the text after "is unavailable: ").
std::string unavailable_reason(Device d);
// The number of devices of `kind` (0 when its driver is unavailable).
int device_count(DeviceKind kind);

}  // namespace runtime::gpu
