#include "runtime/gpu/transfer.h"

#include <algorithm>
#include <cstring>

namespace runtime::gpu {

namespace {
constexpr size_t kDirect = 64 << 10;  // below this, no staging
constexpr size_t kChunk = 64 << 20;   // staging block size
DevPtr dev(const void* p) { return reinterpret_cast<uintptr_t>(p); }
}  // namespace

void copy_to_device(Context& c, void* dst, const void* src, size_t n) {
  if (n == 0) return;
  c.make_current();
  const DriverTable& d = c.driver();
  if (n <= kDirect) {
    c.check(d.memcpy_htod(dev(dst), src, n, c.handle()), "memcpy_htod");
    return;
  }
  size_t chunk = std::min(n, kChunk);
  void* stage = c.pinned().allocate(chunk);
  try {
    for (size_t off = 0; off < n; off += chunk) {
      size_t m = std::min(chunk, n - off);
      if (off > 0) c.sync();  // the previous block's copy has read the staging memory
      std::memcpy(stage, static_cast<const char*>(src) + off, m);
      c.check(d.memcpy_htod(dev(dst) + off, stage, m, c.handle()), "memcpy_htod");
    }
    c.sync();
  } catch (...) {
    c.pinned().release(stage, chunk);
    throw;
  }
  c.pinned().release(stage, chunk);
}

void copy_to_host(Context& c, void* dst, const void* src, size_t n) {
  c.make_current();
  if (n == 0) {
    c.sync();
    return;
  }
  const DriverTable& d = c.driver();
  size_t chunk = std::min(n, kChunk);
  void* stage = c.pinned().allocate(chunk);
  try {
    for (size_t off = 0; off < n; off += chunk) {
      size_t m = std::min(chunk, n - off);
      c.check(d.memcpy_dtoh(stage, dev(src) + off, m, c.handle()), "memcpy_dtoh");
      c.sync();
      std::memcpy(static_cast<char*>(dst) + off, stage, m);
    }
  } catch (...) {
    c.pinned().release(stage, chunk);
    throw;
  }
  c.pinned().release(stage, chunk);
}

void copy_on_device(Context& c, void* dst, const void* src, size_t n) {
  if (n == 0) return;
  c.make_current();
  c.check(c.driver().memcpy_dtod(dev(dst), dev(src), n, c.handle()), "memcpy_dtod");
}

}  // namespace runtime::gpu
