// rune::data_parallel over devices of one process: the checks and the in-order mean
// (distributed/data_parallel.h).
#include "distributed/data_parallel.h"

#include <string>

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

std::vector<nx::Tensor> mean_in_order(const char* api,
                                      const std::vector<std::vector<nx::Tensor>>& parts,
                                      nx::Device home) {
  const size_t n = parts.size(), leaves = parts[0].size();
  std::vector<nx::Tensor> out;
  for (size_t k = 0; k < leaves; ++k) {
    const nx::Tensor& first = parts[0][k];
    if (!ir::is_float(first.dtype()) || ir::is_half(first.dtype()))
      throw distributed_error(std::string(api) + ": result leaf " + std::to_string(k) + " is " +
                              first.describe() +
                              ": the mean over devices needs float32 or float64 leaves");
    // ((x_0 + x_1) + x_2) ... / n in the leaf's dtype: all_reduce(Mean)'s fold, so the bits
    // of the same shards over n ranks.
    nx::Tensor acc = nx::place(first, nx::Device::cpu());
    for (size_t i = 1; i < n; ++i) acc = acc + nx::place(parts[i][k], nx::Device::cpu());
    acc = acc / static_cast<double>(n);
    out.push_back(home == nx::Device::cpu() ? acc : nx::place(acc, home));
  }
  return out;
}

}  // namespace rune::distributed::detail
