// Memory over time in a long-running process whose shapes vary (variable sequence lengths, the
// last batch of an epoch): compiled calls and eager ops over many distinct shapes. Prints the
// process RSS, the host allocator's bytes in use and cached, and the compile caches' sizes at
// regular points, so growth is visible; the reference is the RSS after the first round of
// shapes of the first phase run (ratio = RSS now / RSS then).
// Usage: bench_memory [calls] [distinct shapes] [jit|eager|both (default)]
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "codegen/compile.h"
#include "ir/node.h"
#include "trace/rune.h"

namespace {

double rss_mib() {
  std::ifstream f("/proc/self/statm");
  long pages = 0, resident = 0;
  f >> pages >> resident;
  return static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

void report(const char* phase, long i, double ref) {
  auto st = runtime::host_allocator().stats();
  double rss = rss_mib();
  std::printf(
      "%-8s %8ld  rss %8.1f MiB  ratio %5.2f  in_use %8.1f MiB  cached %8.1f MiB  nodes %9zu\n",
      phase, i, rss, ref > 0 ? rss / ref : 1.0, st.in_use / 1048576.0, st.cached / 1048576.0,
      ir::interned_nodes());
  std::fflush(stdout);
}

}  // namespace

int main(int argc, char** argv) {
  long calls = argc > 1 ? std::atol(argv[1]) : 100000;
  long shapes = argc > 2 ? std::atol(argv[2]) : 10000;
  std::string phases = argc > 3 ? argv[3] : "both";
  if (phases != "jit" && phases != "eager" && phases != "both") {
    std::fprintf(stderr, "bench_memory: phase must be jit, eager or both, not '%s'\n", argv[3]);
    return 2;
  }
  long every = calls / 10 > 0 ? calls / 10 : 1;
  auto step = rune::jit([](const nx::Tensor& x) { return nx::tanh(x * 0.5 + 1.0); });
  double ref = 0;
  for (long i = 0; phases != "eager" && i < calls; ++i) {
    long n = 1 + (i % shapes);
    nx::Tensor x = nx::full(nx::float32, {n}, 0.25);
    nx::Tensor y = step(x);
    if (i % 7 == 0) (void)nx::item<float>(nx::sum(y));
    if (i + 1 == shapes) ref = rss_mib();
    if ((i + 1) % every == 0) report("jit", i + 1, ref);
  }
  for (long i = 0; phases != "jit" && i < calls; ++i) {
    long n = 1 + (i % shapes);
    nx::Tensor x = nx::full(nx::float32, {n}, 0.25);
    nx::Tensor y = nx::exp(x) + 1.0;
    if (phases == "eager" && i + 1 == shapes) ref = rss_mib();
    if ((i + 1) % every == 0) report("eager", i + 1, ref);
  }
  return 0;
}
