// Issue 6: the chapter's decay loop over a 64 MiB float32 state, donated vs not donated: time
// per step (median) and peak memory (from the allocator's statistics), in the same run.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "trace/rune.h"

namespace {

struct Result {
  double median_us;
  size_t peak_bytes;
};

Result run(bool donate, int steps) {
  auto decay = rune::jit([](const nx::Tensor& w) { return w * 0.5; });
  auto& alloc = runtime::host_allocator();
  auto w = nx::contiguous(nx::full(nx::float32, {16 << 20}, 1.0));  // 64 MiB
  w = decay(w);  // compile outside the timed loop
  alloc.reset_peak();
  size_t base = alloc.stats().in_use;
  std::vector<double> t;
  for (int i = 0; i < steps; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    w = donate ? decay(nx::donate(w)) : decay(w);
    t.push_back(
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  (void)nx::item<float>(nx::max(w));
  std::sort(t.begin(), t.end());
  return {t[t.size() / 2], alloc.stats().peak - base};
}

}  // namespace

int main() {
  const int steps = 60;
  // Alternate to share the machine's noise between the two.
  Result plain = run(false, steps), donated = run(true, steps);
  Result plain2 = run(false, steps), donated2 = run(true, steps);
  double p = std::min(plain.median_us, plain2.median_us),
         d = std::min(donated.median_us, donated2.median_us);
  const double mib = 1 << 20;
  std::printf("decay_64MiB_not_donated: rune %.1f us per step, peak %.0f MiB above the state\n", p,
              plain.peak_bytes / mib);
  std::printf(
      "decay_64MiB_donated: rune %.1f us per step, reference %.1f us (not donated), ratio %.3f "
      "[donated/not]\n",
      d, p, d / p);
  std::printf("decay_64MiB_donated: peak %.0f MiB above the state (one generation = 64 MiB)\n",
              donated.peak_bytes / mib);
  std::printf(
      "{\"bench\":\"donation\",\"results\":[{\"name\":\"decay_64MiB\",\"donated_us\":%.1f,\"not_"
      "donated_us\":%.1f,"
      "\"ratio\":%.3f,\"donated_peak_mib\":%.0f,\"not_donated_peak_mib\":%.0f}]}\n",
      d, p, d / p, donated.peak_bytes / mib, plain.peak_bytes / mib);
}
