#include "runtime/gpu/driver.h"

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

std::string driver_error(const DriverTable& d, const char* what, int code) {
  const char* s = d.error_string ? d.error_string(code) : nullptr;
  return std::string(d.api) + ": " + what + " failed: " + (s ? s : "unknown error") + " (" +
         std::to_string(code) + ")";
}

}  // namespace runtime::gpu
