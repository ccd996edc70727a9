// Data-parallel training of the spirals MLP of samples/mlp.cpp on every rank of an MPI job
// (`mpirun -np 2 build/samples/data_parallel`). Each rank computes the loss and gradients of its
// half of the batch with one compiled step; rune::data_parallel all-reduces them in rank order,
// and every rank applies the same compiled SGD update.
//
// It then checks its own guarantees and exits 1 where one fails:
//   - every rank ends with the same parameters, bit for bit (all_gather of each leaf);
//   - they are the parameters one process gets running the same compiled step on shard 0, 1, ...
//     and summing the gradients in rank order (the reference, computed on every rank).
#include "distributed/data_parallel.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>

#include "trace/rune.h"

using nx::Tensor;
namespace dist = rune::distributed;

struct Mlp {
  Tensor w1, b1, w2, b2;
};
RUNE_TREE(Mlp, w1, b1, w2, b2)

// Two spirals of n points each, interleaved (point i of class 0, then of class 1), so that every
// contiguous shard holds both classes; labels one-hot.
std::pair<Tensor, Tensor> spirals(int n) {
  std::mt19937 rng(0);
  std::normal_distribution<double> noise(0, 0.15);
  std::vector<double> xy, onehot;
  for (int i = 0; i < n; ++i)
    for (int c = 0; c < 2; ++c) {
      double t = 0.25 + 3.0 * i / n;
      double a = t * 3.0 + c * M_PI;
      xy.push_back(t * std::cos(a) + noise(rng));
      xy.push_back(t * std::sin(a) + noise(rng));
      onehot.push_back(c == 0);
      onehot.push_back(c == 1);
    }
  return {nx::create(nx::float32, {2 * n, 2}, xy), nx::create(nx::float32, {2 * n, 2}, onehot)};
}

Tensor logits(const Mlp& m, const Tensor& x) {
  return nx::matmul(nx::tanh(nx::matmul(x, m.w1) + m.b1), m.w2) + m.b2;
}

bool same_bits(const Tensor& a, const Tensor& b) {
  auto x = nx::to_vector<float>(a), y = nx::to_vector<float>(b);
  return x.size() == y.size() && std::memcmp(x.data(), y.data(), x.size() * sizeof(float)) == 0;
}

int main() {
  dist::Communicator comm = dist::init();
  const int rank = comm.rank(), world = comm.size();
  auto [x, y] = spirals(200);
  const int64_t hidden = 32;
  auto k = nx::split(nx::key(42));
  Mlp init{nx::randn(k.first, nx::float32, {2, hidden}) * std::sqrt(1.0 / 2),
           nx::zeros(nx::float32, {hidden}),
           nx::randn(k.second, nx::float32, {hidden, 2}) * std::sqrt(1.0 / hidden),
           nx::zeros(nx::float32, {2})};
  // Every rank starts from rank 0's parameters.
  init = dist::broadcast_tree(comm, init, 0);

  auto grad_step = [](const Mlp& m, const Tensor& xs, const Tensor& ys) {
    auto loss = [&](const Mlp& p) {
      return nx::mean(-nx::sum(ys * nx::log_softmax(logits(p, xs), 1), {1}));
    };
    return rune::value_and_grad(loss, m);
  };
  auto dp = rune::data_parallel(grad_step, comm);
  const double lr = 1.0;
  auto update = rune::jit([lr](const Mlp& m, const Mlp& g) {
    return Mlp{m.w1 - g.w1 * lr, m.b1 - g.b1 * lr, m.w2 - g.w2 * lr, m.b2 - g.b2 * lr};
  });

  const int steps = std::getenv("DP_STEPS") ? std::atoi(std::getenv("DP_STEPS")) : 300;
  Mlp model = init;
  Tensor loss;
  for (int i = 1; i <= steps; ++i) {
    auto [l, g] = dp(model, x, y);
    loss = l;
    model = update(model, g);
    if (rank == 0 && i % 100 == 0) std::printf("step %d  loss %.4f\n", i, nx::item<float>(loss));
  }

  // The single-process reference: the same compiled step on each shard, summed in rank order.
  Mlp ref = init;
  const int64_t n = x.shape()[0] / world;
  for (int i = 1; i <= steps; ++i) {
    std::pair<Tensor, Mlp> sum;
    for (int r = 0; r < world; ++r) {
      auto xs = nx::slice(x, {nx::Slice{r * n, (r + 1) * n}});
      auto ys = nx::slice(y, {nx::Slice{r * n, (r + 1) * n}});
      auto part = dp.local_step(ref, xs, ys);
      sum = r == 0 ? part
                   : std::make_pair(
                         sum.first + part.first,
                         rune::tree_map([](const Tensor& a, const Tensor& b) { return a + b; },
                                        sum.second, part.second));
    }
    Mlp mean = rune::tree_map([world](const Tensor& a) { return a / world; }, sum.second);
    ref = update(ref, mean);
  }

  bool ranks_agree = true, equals_reference = true;
  auto leaves = rune::tree_leaves(model), ref_leaves = rune::tree_leaves(ref);
  for (size_t i = 0; i < leaves.size(); ++i) {
    Tensor all = dist::all_gather(comm, leaves[i]);
    for (int r = 0; r < world; ++r) ranks_agree &= same_bits(nx::index(all, 0, r), leaves[i]);
    equals_reference &= same_bits(leaves[i], ref_leaves[i]);
  }
  auto correct = nx::equal(nx::argmax(logits(model, x), 1), nx::argmax(y, 1));
  float accuracy = nx::item<float>(nx::mean(nx::cast(correct, nx::float32)));
  if (rank == 0)
    std::printf(
        "%d ranks, %d steps: accuracy %.3f; parameters identical on every rank: %s; "
        "equal to the single-process reference: %s\n",
        world, steps, accuracy, ranks_agree ? "yes" : "NO", equals_reference ? "yes" : "NO");
  else if (!ranks_agree || !equals_reference)
    std::fprintf(stderr, "rank %d: ranks agree %d, equals reference %d\n", rank, ranks_agree,
                 equals_reference);
  return ranks_agree && equals_reference ? 0 : 1;
}
