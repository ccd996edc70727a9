// Devices. A tensor's placement is a Device; the host is "CPU". GPU backends (CUDA, HIP) add
// kinds with their own allocator, compiler, program loader and stream.
#pragma once
#include <string>

namespace runtime {

enum class DeviceKind : uint8_t { CPU, CUDA, HIP };

struct Device {
  DeviceKind kind = DeviceKind::CPU;
  int index = 0;
  bool operator==(const Device&) const = default;
  std::string name() const;  // "CPU", "CPU:1", "CUDA:0", "HIP:0"
  static Device cpu() { return {}; }
  // Parses a name as printed by name(); throws std::invalid_argument naming `api`.
  static Device parse(const std::string& s, const char* api);
};

}  // namespace runtime
