#include "runtime/gpu/context.h"

#include <atomic>
#include <map>
#include <mutex>
#include <stdexcept>

namespace runtime::gpu {

namespace {

// Device memory: the block's address is the device pointer. Freeing waits for the device,
// so no queued kernel still uses a block given back to the driver.
class DeviceAllocator final : public Allocator {
 public:
  explicit DeviceAllocator(Context& c) : c_(c) {}

 private:
  void* system_alloc(size_t n) override {
    c_.make_current();
    DevPtr p = 0;
    if (c_.driver().mem_alloc(&p, n) != 0) return nullptr;  // the allocator empties its cache
    return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
  }
  void system_free(void* p, size_t) override {
    c_.make_current();
    c_.sync();
    c_.driver().mem_free(reinterpret_cast<uintptr_t>(p));
  }
  Context& c_;
};

// Page-locked host memory for staging transfers.
class PinnedAllocator final : public Allocator {
 public:
  explicit PinnedAllocator(Context& c) : c_(c) {}

 private:
  void* system_alloc(size_t n) override {
    c_.make_current();
    void* p = nullptr;
    if (c_.driver().host_alloc(&p, n) != 0) return nullptr;
    return p;
  }
  void system_free(void* p, size_t) override {
    c_.make_current();
    c_.driver().host_free(p);
  }
  Context& c_;
};

thread_local Context* tl_current = nullptr;

// Per device kind: the driver initialised once, and the device count; per device: a context
// or the reason it could not be made.
struct KindState {
  std::once_flag once;
  const DriverTable* drv = nullptr;
  std::string error;
  int count = 0;
  std::mutex mu;
  std::map<int, std::unique_ptr<Context>> contexts;
  std::map<int, std::string> failed;
  std::atomic<Context*> fast[16] = {};  // contexts already made: no lock on the hot path
};
KindState& kind_state(DeviceKind k) {
  static auto* cuda = new KindState;  // contexts live for the process
  static auto* hip = new KindState;
  KindState& s = k == DeviceKind::HIP ? *hip : *cuda;
  std::call_once(s.once, [&] {
    const DriverLoad& load = driver_for(k);
    if (!load.table) {
      s.error = load.error;
      return;
    }
    const DriverTable& d = *load.table;
    if (int rc = d.init()) {
      s.error = driver_error(d, k == DeviceKind::HIP ? "hipInit" : "cuInit", rc);
      return;
    }
    if (int rc = d.device_count(&s.count)) {
      s.error = driver_error(d, "device_count", rc);
      return;
    }
    s.drv = &d;
  });
  return s;
}

std::string plural(int n, const char* api) {
  return std::to_string(n) + " " + api + (n == 1 ? " device" : " devices");
}

std::string reason_locked(KindState& s, Device d) {
  const char* api = d.kind == DeviceKind::HIP ? "HIP" : "CUDA";
  if (!s.drv) return s.error;
  if (s.count == 0) return std::string("the ") + api + " driver reports no device";
  if (d.index >= s.count)
    return "this machine has " + plural(s.count, api) + " (" + api + ":0" +
           (s.count > 1 ? " to " + std::string(api) + ":" + std::to_string(s.count - 1) : "") + ")";
  if (auto it = s.failed.find(d.index); it != s.failed.end()) return it->second;
  return "";
}

}  // namespace

Context::Context(Device d, const DriverTable& drv) : device_(d), drv_(drv) {
  check(drv_.set_current(d.index), "set_current");
  tl_current = this;
  char buf[256] = {};
  check(drv_.device_name(d.index, buf, sizeof buf), "device_name");
  info_.name = buf;
  check(drv_.device_arch(d.index, buf, sizeof buf), "device_arch");
  info_.arch = buf;
  check(drv_.multiprocessors(d.index, &info_.multiprocessors), "multiprocessors");
  check(drv_.warp_size(d.index, &info_.warp_size), "warp_size");
  info_.kind = d.kind;
  describe_capabilities(info_);
  if (drv_.adjust_info) drv_.adjust_info(info_);
  check(drv_.stream_create(&stream_handle_), "stream_create");
  stream_ = std::make_unique<Stream>(d, [this] {
    make_current();
    sync();
  });
  device_alloc_ = std::make_unique<DeviceAllocator>(*this);
  pinned_alloc_ = std::make_unique<PinnedAllocator>(*this);
}

Context::~Context() {
  if (tl_current == this) tl_current = nullptr;
}

void Context::make_current() {
  if (tl_current == this) return;
  check(drv_.set_current(device_.index), "set_current");
  tl_current = this;
}

void Context::check(int rc, const char* what) const {
  if (rc != 0) throw std::runtime_error(driver_error(drv_, what, rc));
}

void Context::sync() { check(drv_.stream_synchronize(stream_handle_), "stream_synchronize"); }

Context& context(Device d, const char* api) {
  KindState& s = kind_state(d.kind);
  if (d.index >= 0 && d.index < 16)
    if (Context* c = s.fast[d.index].load(std::memory_order_acquire)) return *c;
  std::lock_guard l(s.mu);
  std::string why = reason_locked(s, d);
  if (why.empty()) {
    auto& c = s.contexts[d.index];
    if (c) return *c;
    try {
      c = std::make_unique<Context>(d, *s.drv);
      if (d.index < 16) s.fast[d.index].store(c.get(), std::memory_order_release);
      return *c;
    } catch (const std::exception& e) {
      s.contexts.erase(d.index);
      why = s.failed[d.index] = e.what();
    }
  }
  throw std::invalid_argument(std::string(api) + ": device " + d.name() +
                              " is unavailable: " + why);
}

std::string unavailable_reason(Device d) {
  KindState& s = kind_state(d.kind);
  std::lock_guard l(s.mu);
  return reason_locked(s, d);
}

int device_count(DeviceKind kind) {
  KindState& s = kind_state(kind);
  return s.drv ? s.count : 0;
}

}  // namespace runtime::gpu
