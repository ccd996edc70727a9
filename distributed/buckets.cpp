#include "distributed/buckets.h"

namespace rune::distributed::detail {

std::vector<std::vector<size_t>> plan_buckets(const std::vector<LeafSize>& leaves,
                                              size_t cap_bytes) {
  std::vector<std::vector<size_t>> buckets;
  std::vector<bool> placed(leaves.size(), false);
  for (size_t first = 0; first < leaves.size(); ++first) {
    if (placed[first]) continue;
    const ir::DType t = leaves[first].dtype;
    std::vector<size_t> open;
    size_t open_bytes = 0;
    for (size_t i = first; i < leaves.size(); ++i) {
      if (leaves[i].dtype != t) continue;
      placed[i] = true;
      if (!open.empty() && open_bytes + leaves[i].bytes > cap_bytes) {
        buckets.push_back(std::move(open));
        open.clear();
        open_bytes = 0;
      }
      open.push_back(i);
      open_bytes += leaves[i].bytes;
    }
    buckets.push_back(std::move(open));
  }
  return buckets;
}

}  // namespace rune::distributed::detail
