// Issue 41: nx::nn::scaled_dot_product_attention under rune::jit, float32, causal, B = 8 batches
// x H = 8 heads x D = 64, at T = 128 and T = 1024 queries and keys: the forward pass, and the
// forward pass with the gradients of sum(attention(q, k, v) * dy) with respect to q, k and v.
// bench/compare_attention.py measures torch's F.scaled_dot_product_attention (its fused CPU
// kernel) on the same workloads in the same run of bench/run.
//
// rune's attention is a composition (docs/attention.md: the formula, causal attention in blocks of
// 128 query rows) whose forward pass the host compiles to one attention kernel per block
// (docs/attention.md, "The fused kernel"), and whose gradient program (dy does not depend on y)
// to one attention gradient kernel per block ("The gradient"). --unfused sets
// RUNE_FUSE_ATTENTION=0 (read once per process, so before anything compiles): the same programs
// as their separate kernels, rows named ..._unfused; bench/run runs both, one after the other.
// Usage: bench_attention [--reps N] [--only-t T] [--unfused].
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <tuple>

#include "bench/common.h"
#include "trace/rune.h"

using nx::Tensor;

namespace {

constexpr int64_t kB = 8, kH = 8, kD = 64;

bool g_unfused = false;

std::string name(const char* what, int64_t t) {
  return std::string("sdpa_causal_") + what + "_b8h8t" + std::to_string(t) + "d64" +
         (g_unfused ? "_unfused" : "");
}

}  // namespace

int main(int argc, char** argv) {
  int reps = 7;
  int64_t only_t = 0;
  bool unfused = false;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--unfused")) {
      unfused = true;
      continue;
    }
    if (i + 1 >= argc) break;
    if (!std::strcmp(argv[i], "--reps"))
      reps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--only-t"))
      only_t = std::atoll(argv[++i]);
  }
  if (unfused) setenv("RUNE_FUSE_ATTENTION", "0", 1);
  g_unfused = unfused;
  bench::Report r("attention");
  auto attention = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    nx::nn::AttentionOptions o;
    o.causal = true;
    return nx::nn::scaled_dot_product_attention(q, k, v, o);
  };
  auto fwd = rune::jit(attention);
  auto grads = rune::jit([&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dy) {
    return rune::grad([&](const Tensor& q, const Tensor& k,
                          const Tensor& v) { return nx::sum(attention(q, k, v) * dy); },
                      rune::argnums<0, 1, 2>)(q, k, v);
  });
  for (int64_t t : {int64_t{128}, int64_t{1024}}) {
    if (only_t && t != only_t) continue;
    const nx::Shape s{kB, kH, t, kD};
    Tensor key = nx::random::key(41);
    Tensor q = nx::random::normal(nx::random::fold_in(key, 0), s);
    Tensor k = nx::random::normal(nx::random::fold_in(key, 1), s);
    Tensor v = nx::random::normal(nx::random::fold_in(key, 2), s);
    Tensor dy = nx::random::normal(nx::random::fold_in(key, 3), s);
    Tensor y, gq, gk, gv;
    // Fewer repetitions at T = 1024 (a forward pass is 2 B H T^2 D = 8.6 GFLOP of products).
    const int n = t >= 1024 ? std::max(3, reps / 2) : reps;
    auto [f_us] = bench::medians_us(n, 1, [&] {
      y = fwd(q, k, v);
      nx::wait(y);
    });
    r.time(name("fwd", t), f_us);
    auto [g_us] = bench::medians_us(n, 1, [&] {
      std::tie(gq, gk, gv) = grads(q, k, v, dy);
      nx::wait(gv);
    });
    r.time(name("fwd_bwd", t), g_us);
    // Causal products only count the lower triangle: about half of 2 B H T^2 D per product.
    const double flops = 2.0 * kB * kH * t * t * kD;  // both products of the forward, halved
    char buf[160];
    std::snprintf(buf, sizeof buf, "%.1f GFLOP/s of the causal forward's products (%.3g GFLOP)",
                  flops / (f_us * 1e3), flops / 1e9);
    r.note(name("fwd", t) + "_check", buf);
  }
  r.print_json();
}
