// One data-parallel training step of an MLP on 2 ranks, its gradient buckets' all_reduce
// overlapped with the backward pass (the default) or reduced after the step returns
// (set_overlap(false)): the median step time of each and their ratio.
//   mpirun -np 2 build/bench/bench_data_parallel [rounds] [steps per round] [bucket KiB]
// (or over TCP: RUNE_RANK, RUNE_WORLD_SIZE, RUNE_MASTER_ADDR). The two modes alternate, round by
// round, so load on the machine hits both alike. A step is the data-parallel call and a read of
// the loss; each step's time is the slowest rank's.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "core/nx.h"
#include "distributed/data_parallel.h"
#include "trace/rune.h"

namespace dist = rune::distributed;
using nx::Tensor;

struct Mlp {
  Tensor w1, b1, w2, b2, w3, b3, w4, b4;
};
RUNE_TREE(Mlp, w1, b1, w2, b2, w3, b3, w4, b4)

namespace {
double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

int main(int argc, char** argv) {
  const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
  const int steps = argc > 2 ? std::atoi(argv[2]) : 10;
  const size_t bucket_kib = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1024;
  dist::Communicator comm = dist::init();
  const int64_t batch = 256, in = 256, hidden = 1024, out = 10;
  auto layer = [](uint64_t seed, int64_t a, int64_t b) {
    return nx::randn(nx::key(seed), nx::float32, {a, b}) *
           (1.0 / std::sqrt(static_cast<double>(a)));
  };
  Mlp m{layer(1, in, hidden),     nx::zeros(nx::float32, {hidden}),
        layer(2, hidden, hidden), nx::zeros(nx::float32, {hidden}),
        layer(3, hidden, hidden), nx::zeros(nx::float32, {hidden}),
        layer(4, hidden, out),    nx::zeros(nx::float32, {out})};
  m = dist::broadcast_tree(comm, m);
  Tensor x = nx::randn(nx::key(5), nx::float32, {batch, in});
  Tensor y = nx::randn(nx::key(6), nx::float32, {batch, out});
  auto step = [](const Mlp& p, const Tensor& xs, const Tensor& ys) {
    auto loss = [&](const Mlp& q) {
      Tensor h = nx::tanh(nx::matmul(xs, q.w1) + q.b1);
      h = nx::tanh(nx::matmul(h, q.w2) + q.b2);
      h = nx::tanh(nx::matmul(h, q.w3) + q.b3);
      Tensor e = nx::matmul(h, q.w4) + q.b4 - ys;
      return nx::mean(e * e);
    };
    return rune::value_and_grad(loss, p);
  };
  auto dp = rune::data_parallel(step, comm);
  dp.set_bucket_bytes(bucket_kib << 10);
  std::vector<double> times[2];
  std::vector<float> losses[2];
  for (int round = 0; round < rounds; ++round)
    for (int mode = 0; mode < 2; ++mode) {
      dp.set_overlap(mode == 0);
      for (int s = -1; s < steps; ++s) {  // s == -1: warm-up (compiles on the first round)
        dist::all_reduce(comm, nx::zeros(nx::float32, {1}));  // line the ranks up
        auto t0 = std::chrono::steady_clock::now();
        auto [loss, g] = dp(m, x, y);
        const float l = nx::item<float>(loss);
        (void)nx::item<float>(nx::sum(g.w1));
        double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        t = nx::item<double>(
            dist::all_reduce(comm, nx::create(nx::float64, {}, {t}), dist::ReduceOp::Max));
        if (s < 0) continue;
        times[mode].push_back(t);
        losses[mode].push_back(l);
      }
    }
  if (comm.rank() == 0) {
    const double on = median(times[0]), off = median(times[1]);
    std::printf(
        "data_parallel MLP %lldx%lld-%lld-%lld-%lld-%lld, %d ranks over %s, buckets of "
        "%zu KiB, %zu steps each\n",
        static_cast<long long>(batch), static_cast<long long>(in), static_cast<long long>(hidden),
        static_cast<long long>(hidden), static_cast<long long>(hidden), static_cast<long long>(out),
        comm.size(), comm.transport(), bucket_kib, times[0].size());
    std::printf("  overlapped     median %.2f ms\n", on * 1e3);
    std::printf("  not overlapped median %.2f ms\n", off * 1e3);
    std::printf("  ratio (not overlapped / overlapped) %.3f\n", off / on);
    std::printf(
        "  same loss bits in both modes: %s\n",
        std::memcmp(losses[0].data(), losses[1].data(), losses[0].size() * 4) == 0 ? "yes" : "no");
  }
}
