#include "runtime/device.h"

#include <stdexcept>

namespace runtime {

std::string Device::name() const {
  switch (kind) {
    case DeviceKind::CPU:
      return index == 0 ? "CPU" : "CPU:" + std::to_string(index);
    case DeviceKind::CUDA:
      return "CUDA:" + std::to_string(index);
    case DeviceKind::HIP:
      return "HIP:" + std::to_string(index);
  }
  return "?";
}

Device Device::parse(const std::string& s, const char* api) {
  auto colon = s.find(':');
  std::string k = s.substr(0, colon);
  int idx = 0;
  if (colon != std::string::npos) {
    try {
      size_t used = 0;
      idx = std::stoi(s.substr(colon + 1), &used);
      if (used != s.size() - colon - 1 || idx < 0) throw std::invalid_argument("");
    } catch (const std::exception&) {
      throw std::invalid_argument(std::string(api) + ": bad device name \"" + s + "\"");
    }
  }
  if (k == "CPU") return {DeviceKind::CPU, idx};
  if (k == "CUDA") return {DeviceKind::CUDA, idx};
  if (k == "HIP") return {DeviceKind::HIP, idx};
  throw std::invalid_argument(std::string(api) + ": unknown device \"" + s +
                              "\" (expected CPU, CUDA:n or HIP:n)");
}

}  // namespace runtime
