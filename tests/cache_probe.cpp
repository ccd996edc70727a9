// A small program for the disk-cache test: runs a few ops, prints their results and then
// codegen::compile_stats() as "compiled=N disk=M". With the argument "common-eager" it runs
// common eager ops (draws, arithmetic with scalars, transcendentals, casts, fills, reductions,
// broadcasts, a transposed copy) on shapes no other test uses, the set-up of a model's
// parameters, instead. With "llvm-maps" it runs the default ops and then prints "libLLVM
// mapped: yes|no" (from /proc/self/maps).
#include <cstdio>
#include <fstream>
#include <string>

#include "codegen/compile.h"
#include "core/nx.h"

int main(int argc, char** argv) {
  if (argc > 1 && std::string(argv[1]) == "common-eager") {
    auto [k1, k2] = nx::split(nx::key(11));
    nx::Tensor w = nx::randn(k1, nx::float32, {23, 7}) * 0.25 + 0.5;
    nx::Tensor b = nx::zeros(nx::float32, {7});
    nx::Tensor u = nx::rand(k2, nx::float64, {5, 3, 2});
    nx::Tensor h = nx::tanh(w) * nx::exp(-w) - nx::sqrt(nx::abs(w));
    nx::Tensor m = nx::where(u < 0.5, u, 1.0 - u);
    nx::print(nx::cast(h, nx::float64) * 3.0);
    nx::print(b + 1.0);
    nx::print(nx::cast(m, nx::float32) / 2.0);
    // Reductions, a centring, a bias and a transposed copy (sized kernels).
    nx::print(nx::mean(w, {1}));
    nx::print(nx::sum(u, {0}));
    nx::print(nx::argmax(w, 1));
    nx::print(nx::max(w - nx::mean(w, {1}, true), {0}));
    nx::print(nx::contiguous(nx::transpose(w + b)));
    auto s = codegen::compile_stats();
    std::printf("compiled=%zu disk=%zu\n", s.kernels_compiled, s.kernels_from_disk);
    return 0;
  }
  nx::Tensor x = nx::create(nx::float32, {2, 3}, {1, 2, 3, 4, 5, 6});
  nx::print(x * 2.0 + 1.0);
  nx::print(nx::sum(nx::transpose(x), {1}));
  nx::print(nx::max(nx::cast(x, nx::int32), {0}));
  nx::print(nx::where(x > 3.0, x, nx::neg(x)));
  if (argc > 1 && std::string(argv[1]) == "llvm-maps") {
    std::ifstream maps("/proc/self/maps");
    std::string line;
    bool mapped = false;
    while (std::getline(maps, line)) mapped = mapped || line.find("libLLVM") != std::string::npos;
    std::printf("libLLVM mapped: %s\n", mapped ? "yes" : "no");
  }
  auto s = codegen::compile_stats();
  std::printf("compiled=%zu disk=%zu\n", s.kernels_compiled, s.kernels_from_disk);
  return 0;
}
