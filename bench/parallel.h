// Splits work over threads as rune's pool does; shared by the hand-written reference loops.
#pragma once
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <thread>
#include <vector>

namespace bench {

// Runs fn over [0, n) on `threads` threads (the caller is one), handing out a few chunks per
// thread from a shared counter, as rune's pool does, so a core busy with something else slows
// the run down by its share instead of stalling a fixed half. Chunks are multiples of 16
// floats (a cache line). Spawning costs tens of microseconds, negligible at 16M elements.
template <class F>
void parallel(int64_t n, int threads, F fn) {
  threads = std::max(1, threads);
  int64_t chunks = threads == 1 ? 1 : int64_t{threads} * 4;
  int64_t per = ((n + chunks - 1) / chunks + 15) / 16 * 16;
  std::atomic<int64_t> next{0};
  auto work = [&] {
    for (int64_t c; (c = next.fetch_add(1)) < chunks;) {
      int64_t lo = std::min(n, c * per), hi = std::min(n, (c + 1) * per);
      if (lo < hi) fn(lo, hi);
    }
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < threads - 1; ++t) workers.emplace_back(work);
  work();
  for (auto& w : workers) w.join();
}

}  // namespace bench
