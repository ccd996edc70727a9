#include "runtime/gpu/driver.h"

#include <dlfcn.h>

#include <mutex>

namespace runtime::gpu {

namespace {

struct Slot {
  std::once_flag once;
  const DriverTable* forced = nullptr;
  DriverLoad load;
};
Slot& slot(DeviceKind kind) {
  static Slot cuda, hip;
  return kind == DeviceKind::HIP ? hip : cuda;
}

}  // namespace

const DriverLoad& driver_for(DeviceKind kind) {
  Slot& s = slot(kind);
  std::call_once(s.once, [&] {
    if (s.forced)
      s.load.table = s.forced;
    else
      s.load = kind == DeviceKind::HIP ? load_hip_driver() : load_cuda_driver();
  });
  return s.load;
}

void set_driver_for_testing(DeviceKind kind, const DriverTable* table) {
  slot(kind).forced = table;
}

Library Library::open_first(const std::vector<std::string>& names) {
  Library lib;
  for (const auto& n : names) {
    lib.handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) {
      lib.name = n;
      return lib;
    }
    const char* e = dlerror();
    lib.tried += "\n  " + n + ": " + (e ? e : "not found");
  }
  return lib;
}

void* Library::symbol(const char* sym, std::string* missing) const {
  void* p = handle ? dlsym(handle, sym) : nullptr;
  if (!p && missing) {
    if (!missing->empty()) *missing += ", ";
    *missing += std::string("symbol ") + sym + " not found in " + name;
  }
  return p;
}

std::string driver_error(const DriverTable& d, const char* what, int code) {
  const char* s = d.error_string ? d.error_string(code) : nullptr;
  return std::string(d.api) + ": " + what + " failed: " + (s ? s : "unknown error") + " (" +
         std::to_string(code) + ")";
}

}  // namespace runtime::gpu
