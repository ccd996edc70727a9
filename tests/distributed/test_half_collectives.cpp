// float16 and bfloat16 reductions (docs/distributed.md, Guarantees): every element folded in
// float32 in rank order and rounded once to the 16-bit type. Run on 2 ranks with the other
// collectives tests and on 3 ranks alone (distributed.half_collectives_3_ranks), where rounding
// once differs from rounding after every addition, which the tests check they can tell apart.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "core/nx.h"
#include "distributed/collectives.h"
#include "ir/dtype.h"
#include "trace/jit.h"
#include "world.h"

namespace dist = rune::distributed;
using nx::Tensor;

namespace {
using rune_test::world;

// Rank r's values: ties at float16's and at bfloat16's precision next to 1 (rounding once or at
// every step differ there), a sum past float16's largest finite value, values that do not round
// exactly, signed zeros.
std::vector<double> input_of(int r) {
  return {r == 0 ? 1.0 : std::ldexp(1.0, -11),
          r == 0 ? 1.0 : std::ldexp(1.0, -8),
          60000.0,
          0.1 * (r + 1),
          r == 0 ? -0.0 : 0.0,
          -3.3 + r,
          r == 0 ? 1e-4 : -1e-4 / 3,
          2.0 / 3 * (r + 1)};
}

Tensor tensor_of(nx::DType t, int r) {
  auto v = input_of(r);
  return nx::create(t, {static_cast<int64_t>(v.size())}, v);
}

float round16(nx::DType t, float f) {
  return t == nx::float16 ? ir::f16_bits_to_f32(ir::f32_to_f16_bits(f))
                          : ir::bf16_bits_to_f32(ir::f32_to_bf16_bits(f));
}

// The documented result: float32 sums of the ranks' values left to right, (divided by the
// size), rounded once. With `every_step`, the rounding after each addition instead (NCCL's way).
std::vector<float> reference(nx::DType t, int w, bool mean, bool every_step = false) {
  std::vector<float> acc = nx::to_vector<float>(tensor_of(t, 0));
  for (int r = 1; r < w; ++r) {
    auto x = nx::to_vector<float>(tensor_of(t, r));
    for (size_t i = 0; i < acc.size(); ++i) {
      acc[i] = acc[i] + x[i];
      if (every_step) acc[i] = round16(t, acc[i]);
    }
  }
  for (float& a : acc) a = round16(t, mean ? a / static_cast<float>(w) : a);
  return acc;
}

// The 16-bit values, widened exactly (an injective map, -0 included), compared bit for bit.
bool same_bits(const Tensor& x, const std::vector<float>& want) {
  auto got = nx::to_vector<float>(x);
  return got.size() == want.size() &&
         std::memcmp(got.data(), want.data(), got.size() * sizeof(float)) == 0;
}

std::string show(const std::vector<float>& v) {
  std::string s;
  for (float f : v) s += std::to_string(f) + " ";
  return s;
}
}  // namespace

TEST(HalfCollectives, AllReduceFoldsInFloat32InRankOrderAndRoundsOnce) {
  auto comm = world();
  const int w = comm.size();
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor x = tensor_of(t, comm.rank());
    Tensor s = dist::all_reduce(comm, x);
    EXPECT_EQ(s.dtype(), t);
    EXPECT_TRUE(same_bits(s, reference(t, w, false)))
        << ir::name(t) << ": " << show(nx::to_vector<float>(s)) << " vs "
        << show(reference(t, w, false));
    Tensor m = dist::all_reduce(comm, x, dist::ReduceOp::Mean);
    EXPECT_TRUE(same_bits(m, reference(t, w, true))) << ir::name(t);
    if (t == nx::float16) {
      EXPECT_TRUE(std::isinf(nx::to_vector<float>(s)[2]));
    }  // 60000 * w
    // On 3 or more ranks these inputs tell rounding once from rounding at every step.
    if (w >= 3) {
      EXPECT_NE(reference(t, w, false), reference(t, w, false, true)) << ir::name(t);
    }
  }
}

TEST(HalfCollectives, ReduceScatterIsTheBlockOfTheAllReduce) {
  auto comm = world();
  const int w = comm.size(), r = comm.rank();
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    // w blocks of the 8 values each: rank r's input repeated.
    std::vector<Tensor> reps(static_cast<size_t>(w), tensor_of(t, r));
    Tensor x = nx::concatenate(reps, 0);
    Tensor got = dist::reduce_scatter(comm, x, dist::ReduceOp::Mean);
    EXPECT_EQ(got.shape(), nx::Shape({8}));
    EXPECT_TRUE(same_bits(got, reference(t, w, true))) << ir::name(t);
  }
}

TEST(HalfCollectives, MaxIsExactWithNaNAndSignedZero) {
  auto comm = world();
  const int r = comm.rank();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor x = nx::create(
        t, {4}, {r == 0 ? 1.5 : 2.5, r == 1 ? nan : 1.0, r == 0 ? -0.0 : 0.0, -65504.0 + r});
    auto got = nx::to_vector<float>(dist::all_reduce(comm, x, dist::ReduceOp::Max));
    EXPECT_EQ(got[0], 2.5f);
    EXPECT_TRUE(std::isnan(got[1])) << ir::name(t);
    EXPECT_EQ(got[2], 0.0f);
    EXPECT_FALSE(std::signbit(got[2]));
    EXPECT_EQ(got[3], nx::to_vector<float>(nx::create(t, {}, {-65504.0 + (comm.size() - 1)}))[0]);
  }
}

TEST(HalfCollectives, InsideJitTheBitsOfTheEagerCall) {
  auto comm = world();
  for (nx::DType t : {nx::float16, nx::bfloat16}) {
    Tensor x = tensor_of(t, comm.rank());
    auto f = rune::jit([comm](const Tensor& v) { return dist::all_reduce(comm, v); });
    EXPECT_TRUE(same_bits(f(x), reference(t, comm.size(), false))) << ir::name(t);
  }
}
