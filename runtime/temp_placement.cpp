#include "runtime/temp_placement.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>

namespace runtime {

TempPlacement place_temporaries(const std::vector<TempInterval>& temps, int64_t align) {
  if (align <= 0) throw std::logic_error("runtime: temporaries placed with alignment <= 0");
  const size_t n = temps.size();
  std::vector<int64_t> size(n);
  for (size_t i = 0; i < n; ++i) {
    if (temps[i].first > temps[i].last)
      throw std::logic_error("runtime: a temporary's interval ends before it starts");
    size[i] = (std::max<int64_t>(temps[i].bytes, 1) + align - 1) / align * align;
  }
  // Largest first; ties by the earlier first step, then by index (a deterministic order).
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), size_t{0});
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (size[a] != size[b]) return size[a] > size[b];
    if (temps[a].first != temps[b].first) return temps[a].first < temps[b].first;
    return a < b;
  });
  TempPlacement out;
  out.offset.assign(n, -1);
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> busy;  // [begin, end) of the live neighbours
  for (size_t t : order) {
    busy.clear();
    for (size_t p : placed)
      if (temps[p].first <= temps[t].last && temps[t].first <= temps[p].last)
        busy.push_back({out.offset[p], out.offset[p] + size[p]});
    std::sort(busy.begin(), busy.end());
    // The lowest gap between live neighbours (sorted by offset) that holds the temporary.
    int64_t at = 0;
    for (const auto& [begin, end] : busy) {
      if (begin >= at + size[t]) break;
      at = std::max(at, end);
    }
    out.offset[t] = at;
    out.bytes = std::max(out.bytes, at + size[t]);
    placed.push_back(t);
  }
  return out;
}

}  // namespace runtime
