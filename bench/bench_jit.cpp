// Issue 3: compiled calls. (a) a cache-hit rune::jit call on 3 elements against one eager op,
// goal < 0.5 us; (b) a math chain on 16M float32 against a hand-fused C++ loop, goal within
// 1.25x; (c) first-call latency with a cold and a warm disk cache, measured in child
// processes (this binary re-run with --first-call) so no in-process cache helps.
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

#include "bench/common.h"
#include "bench/reference.h"
#include "trace/rune.h"

namespace {

constexpr int64_t kBig = int64_t{1} << 24;  // 16M elements

nx::Tensor affine(const nx::Tensor& x) { return x * 2.0 + 1.0; }
nx::Tensor chain(const nx::Tensor& x) { return (x * 2.0 + 1.0) * nx::tanh(x) - nx::exp(-x * x); }

// The chain's input: the same numbers for rune and the reference, spanning tanh's curve.
void fill_chain_input(bench::AlignedFloats& v) {
  std::mt19937 gen(42);
  std::uniform_real_distribution<float> d(-3.0f, 3.0f);
  for (int64_t i = 0; i < v.size(); ++i) v[i] = d(gen);
}

void small_call(bench::Report& r) {
  try {
    nx::Tensor x = nx::create(nx::float32, {3}, {1, 2, 3});
    nx::Tensor y = nx::create(nx::float32, {3}, {4, 5, 6});
    auto f = rune::jit(affine);
    nx::Tensor out, e;
    auto [call_us, eager_us] = bench::per_call_us(
        30, 10000, [&] { out = f(x); }, [&] { e = x + y; });
    r.add("jit_call_3", call_us, "eager_op", eager_us, 0.5, /*goal_abs_us=*/true);
    auto v = nx::to_vector<float>(out);
    char buf[96];
    std::snprintf(buf, sizeof buf, "f(x) = [%g, %g, %g], traces = %zu", v[0], v[1], v[2],
                  f.traces());
    r.note("jit_call_3_check", buf);
  } catch (const std::exception& e) {
    r.skip("jit_call_3", e.what());
  }
}

void big_chain(bench::Report& r) {
  bench::AlignedFloats in(kBig), ref(kBig);
  fill_chain_input(in);
  int threads = bench::reference_threads();
  auto fused = [&] { bench::chain_kernel(in.data(), ref.data(), kBig, threads); };
  try {
    nx::Tensor x = nx::from_bytes(nx::float32, {kBig}, in.data());
    auto g = rune::jit(chain);
    nx::Tensor y;
    auto [rune_us, ref_us] = bench::medians_us(
        10, 2, [&] { y = g(x); }, fused);
    r.add("jit_chain_16M", rune_us, "fused_loop", ref_us, 1.25);
    auto got = nx::to_vector<float>(y);
    double max_err = 0;
    for (int64_t i = 0; i < kBig; ++i)
      max_err = std::max(max_err, double(std::fabs(got[i] - ref[i])));
    char buf[96];
    std::snprintf(buf, sizeof buf, "max |rune - reference| = %.3g, reference threads = %d", max_err,
                  threads);
    r.note("jit_chain_16M_check", buf);
  } catch (const std::exception& e) {
    r.skip("jit_chain_16M", e.what(), "fused_loop", bench::medians_us(10, 2, fused)[0],
           "rune/ref <= 1.25x");
  }
}

// Child mode: times the first call of a fresh compiled function in this process, then steady ones.
// The input comes from from_bytes, which compiles nothing, so the first call pays for all
// of rune's start-up (LLVM included) as a user's first call would.
int first_call_child(const std::string& which) {
  try {
    bench::AlignedFloats in(kBig);
    fill_chain_input(in);
    nx::Tensor x = nx::from_bytes(nx::float32, {kBig}, in.data());
    auto g = rune::jit(which == "affine" ? affine : chain);
    auto t0 = bench::Clock::now();
    nx::Tensor y = g(x);
    auto t1 = bench::Clock::now();
    // Steady calls for scale; dropping the result first lets the allocator recycle its
    // buffer, as in a loop, instead of page-faulting a fresh one.
    double steady_us = bench::medians_us(3, 0, [&] {
      y = nx::Tensor();
      y = g(x);
    })[0];
    std::printf("first_call_us %.3f steady_call_us %.3f\n", bench::elapsed_us(t0, t1), steady_us);
    return 0;
  } catch (const std::exception& e) {
    std::printf("error: %s\n", e.what());
    return 1;
  }
}

struct ChildResult {
  bool ok = false;
  double first_us = 0, steady_us = 0;
  std::string error;
};

ChildResult run_child(const std::string& exe, const std::string& cache_dir,
                      const std::string& which) {
  std::string cmd =
      "RUNE_CACHE_DIR='" + cache_dir + "' '" + exe + "' --first-call " + which + " 2>&1";
  ChildResult c;
  FILE* p = popen(cmd.c_str(), "r");
  if (!p) {
    c.error = "popen failed";
    return c;
  }
  std::string out;
  char buf[512];
  while (std::fgets(buf, sizeof buf, p)) out += buf;
  int status = pclose(p);
  size_t at = out.find("first_call_us ");
  if (status == 0 && at != std::string::npos &&
      std::sscanf(out.c_str() + at, "first_call_us %lf steady_call_us %lf", &c.first_us,
                  &c.steady_us) == 2) {
    c.ok = true;
  } else {
    size_t e = out.find("error: ");
    c.error = e != std::string::npos
                  ? out.substr(e + 7)
                  : "child exited with status " + std::to_string(status) + ": " + out;
  }
  return c;
}

// name: the workload's prefix; which: the function the child compiles (chain or affine).
void first_call(bench::Report& r, const std::string& name, const std::string& which) {
  std::string exe = std::filesystem::read_symlink("/proc/self/exe");
  char tmpl[] = "/tmp/rune-bench-cache-XXXXXX";
  if (!mkdtemp(tmpl)) {
    r.skip(name + "_cold", "mkdtemp failed");
    return;
  }
  std::string dir = tmpl;
  ChildResult cold = run_child(exe, dir, which);  // empty cache: traces, compiles, stores
  ChildResult warm = cold.ok ? run_child(exe, dir, which) : cold;  // loads stored kernels
  std::filesystem::remove_all(dir);
  if (!cold.ok) {
    r.skip(name + "_cold", cold.error);
    return;
  }
  // Against a cache-hit call, so the ratio is how many steady calls one first call costs.
  r.add(name + "_cold", cold.first_us, "steady_call", cold.steady_us);
  if (warm.ok)
    r.add(name + "_warm", warm.first_us, "steady_call", warm.steady_us);
  else
    r.skip(name + "_warm", warm.error);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc > 2 && std::string(argv[1]) == "--first-call") return first_call_child(argv[2]);
  bench::Report r("jit");
  small_call(r);
  big_chain(r);
  first_call(r, "jit_first_call", "chain");
  // The same measurement on a function rune can compile today, for when the chain cannot.
  first_call(r, "jit_first_call_affine", "affine");
  r.print_json();
}
