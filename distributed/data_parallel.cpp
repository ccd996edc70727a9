// rune::data_parallel over devices of one process: the checks and the in-order mean
// (distributed/data_parallel.h).
#include "distributed/data_parallel.h"

#include <string>

#include "distributed/gpu/gpu_communicator_impl.h"

namespace rune::distributed::detail {

void check_devices(const char* api, const std::vector<nx::Device>& devices) {
  if (devices.empty()) throw distributed_error(std::string(api) + ": no devices given");
  for (size_t i = 0; i < devices.size(); ++i)
    for (size_t j = 0; j < i; ++j)
      if (devices[i] == devices[j])
        throw distributed_error(std::string(api) + ": device " + devices[i].name() +
                                " is listed twice (at " + std::to_string(j) + " and " +
                                std::to_string(i) + ")");
}

std::vector<GpuCommunicator> gpu_group_for(const std::vector<nx::Device>& devices) {
  const runtime::DeviceKind kind = devices[0].kind;
  if (kind != runtime::DeviceKind::CUDA && kind != runtime::DeviceKind::HIP) return {};
  for (const nx::Device& d : devices)
    if (d.kind != kind) return {};
  const auto which =
      kind == runtime::DeviceKind::CUDA ? GpuCollectives::Nccl : GpuCollectives::Rccl;
  if (!gpu_collective_library(which).error.empty()) return {};
  return gpu_communicators(devices);
}

std::vector<nx::Tensor> mean_over_gpus(const char* api, const std::vector<GpuCommunicator>& comms,
                                       const std::vector<std::vector<nx::Tensor>>& parts,
                                       nx::Device home) {
  std::vector<nx::Tensor> out;
  for (size_t k = 0; k < parts[0].size(); ++k) {
    const nx::Tensor& first = parts[0][k];
    if (!ir::is_float(first.dtype()))
      throw distributed_error(std::string(api) + ": result leaf " + std::to_string(k) + " is " +
                              first.describe() + ": the mean over devices needs float leaves");
    std::vector<nx::Tensor> xs;
    for (const auto& p : parts) xs.push_back(p[k]);
    std::vector<nx::Tensor> r = all_reduce(comms, xs, ReduceOp::Mean);
    nx::Tensor kept = r[0];
    for (size_t i = 0; i < comms.size(); ++i)
      if (comms[i].device() == home) kept = r[i];
    out.push_back(kept.device() == home ? kept : nx::place(kept, home));
  }
  return out;
}

std::vector<nx::Tensor> mean_in_order(const char* api,
                                      const std::vector<std::vector<nx::Tensor>>& parts,
                                      nx::Device home) {
  const size_t n = parts.size(), leaves = parts[0].size();
  std::vector<nx::Tensor> out;
  for (size_t k = 0; k < leaves; ++k) {
    const nx::Tensor& first = parts[0][k];
    const nx::DType t = first.dtype();
    if (!ir::is_float(t))
      throw distributed_error(std::string(api) + ": result leaf " + std::to_string(k) + " is " +
                              first.describe() + ": the mean over devices needs float leaves");
    // ((x_0 + x_1) + x_2) ... / n in the leaf's dtype (16-bit floats: in float32, rounded once):
    // all_reduce(Mean)'s fold, so the bits of the same shards over n ranks.
    const nx::DType wide = ir::is_half(t) ? nx::float32 : t;
    nx::Tensor acc = nx::cast(nx::place(first, nx::Device::cpu()), wide);
    for (size_t i = 1; i < n; ++i)
      acc = acc + nx::cast(nx::place(parts[i][k], nx::Device::cpu()), wide);
    acc = nx::cast(acc / static_cast<double>(n), t);
    out.push_back(home == nx::Device::cpu() ? acc : nx::place(acc, home));
  }
  return out;
}

}  // namespace rune::distributed::detail
