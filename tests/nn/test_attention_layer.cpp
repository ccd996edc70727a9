// rune::nn::MultiHeadAttention (nn/attention.h, docs/nn.md) against torch.nn.MultiheadAttention:
// torch's weights and outputs (tests/data/torch/mha*.safetensors, written by
// tools/refgen/gen_torch_state_dicts.py) for self-attention with a key padding mask and a causal
// mask and for batch-second cross-attention with a per-head float mask, eagerly and compiled on
// CPU, CPU:1 and the fake CUDA:0; torch's state_dict names and layouts (in_proj_weight [3E, E]);
// torch's initialisation; padding that equals dropping the padded keys; dropout in training;
// gradients against central differences; errors.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "nn/nn.h"
#include "test_util.h"
#include "window_test_util.h"

namespace {

namespace nn = rune::nn;
using nx::Shape;
using nx::Tensor;
using nx::random::fold_in;
using window_test::bits;
using window_test::expect_error;
using window_test::f64;
using window_test::host;
using window_test::values;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

std::string data(const std::string& file) {
  static const std::filesystem::path dir = [] {
    if (const char* env = std::getenv("RUNE_TORCH_DATA")) return std::filesystem::path(env);
    for (std::filesystem::path d :
         {std::filesystem::path(__FILE__).parent_path() / ".." / "data" / "torch",
          std::filesystem::path("tests/data/torch"), std::filesystem::path("../tests/data/torch")})
      if (std::filesystem::exists(d / "mha_io.safetensors")) return d;
    return std::filesystem::path("tests/data/torch");
  }();
  return (dir / file).string();
}

const nx::TensorMap& io() {
  static const nx::TensorMap m = nx::load(data("mha_io.safetensors"));
  return m;
}

Tensor key(uint32_t i) { return fold_in(nx::random::key(41), i); }

// rune within float32 rounding of torch's float32 output and of the float64 evaluation of the
// same weights: |rune - torch| <= 2^-20 max(1, |torch|), |rune - f64| <= 2^-21 max(1, |f64|)
// (8 and 4 float32 ulps at 1; the bound of tests/nn/test_torch_interop.cpp). Returns the
// largest |rune - torch| and |rune - f64|.
std::pair<double, double> expect_matches_torch(const Tensor& got, const std::string& call,
                                               const std::string& what) {
  const Tensor& want = io().at(call + ".y");
  EXPECT_EQ(got.shape(), want.shape()) << what;
  EXPECT_EQ(got.dtype(), nx::float32) << what;
  std::vector<double> g = nx::to_array(host(got)), t = nx::to_array(want),
                      t64 = nx::to_array(io().at(call + ".y64"));
  double d32 = 0, d64 = 0;
  int bad = 0;
  for (size_t i = 0; i < g.size() && i < t.size(); ++i) {
    d32 = std::max(d32, std::fabs(g[i] - t[i]));
    d64 = std::max(d64, std::fabs(g[i] - t64[i]));
    if ((!(std::fabs(g[i] - t[i]) <= std::ldexp(1.0, -20) * std::max(1.0, std::fabs(t[i]))) ||
         !(std::fabs(g[i] - t64[i]) <= std::ldexp(1.0, -21) * std::max(1.0, std::fabs(t64[i])))) &&
        bad++ < 5)
      ADD_FAILURE() << what << " [" << i << "]: rune " << g[i] << ", torch " << t[i] << ", float64 "
                    << t64[i];
  }
  return {d32, d64};
}

std::string header(const nx::TensorMap& m) {
  std::string s;
  for (const auto& [name, t] : m) s += name + " " + t.describe() + "\n";
  return s;
}

nn::MultiHeadAttention loaded(bool batch_first, const char* device = "CPU") {
  nn::MultiHeadAttention m =
      nn::MultiHeadAttention::init(key(0), 16, 4, {.batch_first = batch_first});
  return nn::load_torch_state_dict(m, data("mha.safetensors"),
                                   {.device = nx::Device::parse(device, "test")});
}

class MhaDevices : public ::testing::TestWithParam<const char*> {
 protected:
  Tensor on(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(MhaDevices, MatchesTorchEagerAndCompiled) {
  const std::string dev = GetParam();
  // Self-attention, batch first, torch's masks: True masks a key.
  nn::MultiHeadAttention self = loaded(true, GetParam());
  Tensor x = on(io().at("self.x"));
  nn::AttentionMasks masks{.key_padding_mask = on(io().at("self.kpm")),
                           .attn_mask = on(io().at("self.causal"))};
  auto run_self = [](const nn::MultiHeadAttention& m, const Tensor& x,
                     const nn::AttentionMasks& k) { return m(x, x, x, k); };
  // nn::AttentionMasks is not a tree: the compiled call captures the masks.
  Tensor eager = run_self(self, x, masks);
  Tensor compiled = rune::jit([&](const nn::MultiHeadAttention& m, const Tensor& x) {
    return run_self(m, x, masks);
  })(self, x);
  EXPECT_EQ(eager.device(), x.device());
  auto [s32, s64] = expect_matches_torch(eager, "self", "self-attention eager on " + dev);
  expect_matches_torch(compiled, "self", "self-attention compiled on " + dev);
  EXPECT_EQ(bits(eager), bits(compiled)) << "self-attention on " << dev;
  // causal = true is the same triangle as torch's bool attn_mask.
  EXPECT_EQ(bits(self(x, x, x, {.key_padding_mask = masks.key_padding_mask, .causal = true})),
            bits(eager));

  // Cross-attention, batch second, a float mask per (batch, head).
  nn::MultiHeadAttention cross = loaded(false, GetParam());
  Tensor q = on(io().at("cross.q")), k = on(io().at("cross.k")), v = on(io().at("cross.v"));
  nn::AttentionMasks cm{.attn_mask = on(io().at("cross.mask"))};
  Tensor ce = cross(q, k, v, cm);
  Tensor cc = rune::jit([&](const nn::MultiHeadAttention& m, const Tensor& q, const Tensor& k,
                            const Tensor& v) { return m(q, k, v, cm); })(cross, q, k, v);
  auto [c32, c64] = expect_matches_torch(ce, "cross", "cross-attention eager on " + dev);
  expect_matches_torch(cc, "cross", "cross-attention compiled on " + dev);
  EXPECT_EQ(bits(ce), bits(cc)) << "cross-attention on " << dev;
  std::printf(
      "MultiHeadAttention on %-6s |rune - torch| <= %.3g (self), %.3g (cross); "
      "|rune - f64| <= %.3g, %.3g\n",
      dev.c_str(), s32, c32, s64, c64);
}

// A padded key is the same as no key: the second sequence (3 real tokens of 5) gives, at its
// real positions, the bits of a call on its first 3 tokens alone.
TEST_P(MhaDevices, PaddingEqualsDroppingThePaddedKeys) {
  nn::MultiHeadAttention m = loaded(true, GetParam());
  Tensor x = on(io().at("self.x"));
  Tensor y = m(x, x, x, {.key_padding_mask = on(io().at("self.kpm")), .causal = true});
  Tensor x1 = nx::slice(x, {{1, 2}, {0, 3}});
  Tensor y1 = m(x1, x1, x1, {.causal = true});
  EXPECT_EQ(bits(nx::slice(y, {{1, 2}, {0, 3}})), bits(y1));
}

// Dropout on the weights in training (a key per call from the Context), none in evaluation.
TEST_P(MhaDevices, DropoutInTraining) {
  nn::MultiHeadAttention m =
      nn::MultiHeadAttention::init(on(key(1)), 8, 2, {.dropout = 0.5, .batch_first = true});
  Tensor x = on(f64({2, 6, 8}, values({2, 6, 8}, 3)));
  x = nx::cast(x, nx::float32);
  auto train = [](const nn::MultiHeadAttention& m, const Tensor& x, const Tensor& k) {
    nn::Context ctx = nn::Context::train(k);
    return m(x, x, x, {}, ctx);
  };
  Tensor k = on(key(2));
  Tensor a = train(m, x, k);
  EXPECT_EQ(bits(rune::jit(train)(m, x, k)), bits(a)) << "compiled";
  EXPECT_NE(bits(a), bits(m(x))) << "dropout changed nothing";
  nn::Context eval;
  EXPECT_EQ(bits(m(x, x, x, {}, eval)), bits(m(x)));
  // The weights dropped are nx::random::dropout's with the context's first key.
  nx::nn::AttentionOptions o{.dropout = 0.5, .dropout_key = fold_in(k, 0)};
  auto heads = [](const Tensor& t) {  // [N, L, E] -> [N, H, L, d]
    return nx::permute(nx::reshape(t, {2, 6, 2, 4}), {0, 2, 1, 3});
  };
  Tensor qkv = m.in_proj(x);
  Tensor y = nx::nn::scaled_dot_product_attention(heads(nx::slice(qkv, {{}, {}, {0, 8}})),
                                                  heads(nx::slice(qkv, {{}, {}, {8, 16}})),
                                                  heads(nx::slice(qkv, {{}, {}, {16, 24}})), o);
  EXPECT_EQ(bits(m.out_proj(nx::reshape(nx::permute(y, {0, 2, 1, 3}), {2, 6, 8}))), bits(a));
}

INSTANTIATE_TEST_SUITE_P(Devices, MhaDevices, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

TEST(Mha, StateDictHasTorchsNamesAndLayouts) {
  nn::MultiHeadAttention fresh = nn::MultiHeadAttention::init(key(3), 16, 4);
  EXPECT_EQ(header(nn::torch_state_dict(fresh)), header(nx::load(data("mha.safetensors"))));
  nn::MultiHeadAttention m = loaded(true);
  nx::TensorMap t = nx::load(data("mha.safetensors"));
  EXPECT_EQ(bits(m.in_proj.weight), bits(nx::transpose(t.at("in_proj_weight"))));
  EXPECT_EQ(bits(*m.in_proj.bias), bits(t.at("in_proj_bias")));
  EXPECT_EQ(bits(m.out_proj.weight), bits(nx::transpose(t.at("out_proj.weight"))));
  // Inside a model: the prefix stays, in_proj's leaves take torch's names.
  auto sd = nn::torch_state_dict(std::vector<nn::MultiHeadAttention>{fresh});
  EXPECT_TRUE(sd.count("0.in_proj_weight") && sd.count("0.in_proj_bias") &&
              sd.count("0.out_proj.weight") && sd.count("0.out_proj.bias"))
      << header(sd);
  // Save -> load is bit for bit; without biases, torch's bias=False names.
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("rune-mha-" + std::to_string(::getpid()) + ".safetensors"))
                               .string();
  nn::save_torch_state_dict(m, path);
  nn::MultiHeadAttention back = nn::load_torch_state_dict(fresh, path);
  std::filesystem::remove(path);
  EXPECT_EQ(bits(back.in_proj.weight), bits(m.in_proj.weight));
  EXPECT_EQ(bits(*back.out_proj.bias), bits(*m.out_proj.bias));
  EXPECT_EQ(
      header(nn::torch_state_dict(nn::MultiHeadAttention::init(key(3), 16, 4, {.bias = false}))),
      "in_proj_weight float32 [48, 16]\nout_proj.weight float32 [16, 16]\n");
}

// torch's _reset_parameters: in_proj xavier_uniform over [3E, E], out_proj Linear's default,
// both biases zero.
TEST(Mha, TorchsInitialisation) {
  const int64_t e = 64;
  nn::MultiHeadAttention m = nn::MultiHeadAttention::init(key(4), e, 8);
  const double bound = std::sqrt(6.0 / (4.0 * e));
  auto w = nx::to_array(m.in_proj.weight);
  double sum = 0, sq = 0, mx = 0;
  for (double x : w) sum += x, sq += x * x, mx = std::max(mx, std::fabs(x));
  const double n = static_cast<double>(w.size());
  EXPECT_LE(mx, bound);
  EXPECT_GT(mx, 0.99 * bound);
  EXPECT_NEAR(sum / n, 0, 4 * bound / std::sqrt(3 * n));
  // U(-b, b) has variance b^2 / 3; its estimate's standard deviation is about 0.9 b^2 / sqrt(n).
  EXPECT_NEAR(sq / n, bound * bound / 3, 4 * 0.9 * bound * bound / std::sqrt(n));
  for (double b : nx::to_array(*m.in_proj.bias)) EXPECT_EQ(b, 0.0);
  for (double b : nx::to_array(*m.out_proj.bias)) EXPECT_EQ(b, 0.0);
  EXPECT_EQ(bits(m.out_proj.weight), bits(nn::Linear::init(fold_in(key(4), 1), e, e).weight));
  EXPECT_EQ(nn::count_params(m), 3 * e * e + 3 * e + e * e + e);
  EXPECT_EQ(m.in_proj.weight.shape(), (Shape{e, 3 * e}));
}

// rune::grad through the layer against central differences of the layer itself (float64).
TEST(Mha, GradientsAgainstCentralDifferences) {
  nn::MultiHeadAttention m =
      nn::MultiHeadAttention::init(key(5), 4, 2, {.batch_first = true, .dtype = nx::float64});
  Tensor x = f64({2, 3, 4}, values({2, 3, 4}, 6)), mem = f64({2, 5, 4}, values({2, 5, 4}, 7));
  Tensor r = f64({2, 3, 4}, values({2, 3, 4}, 8));
  Tensor kpm = nx::cast(f64({2, 5}, {0, 0, 0, 1, 1, 0, 0, 0, 0, 0}), nx::bool_);
  auto loss = [&](const nn::MultiHeadAttention& p, const Tensor& x) {
    return nx::sum(p(x, mem, mem, {.key_padding_mask = kpm}) * r);
  };
  auto [gm, gx] = rune::grad(loss, rune::argnums<0, 1>)(m, x);
  auto check = [&](const std::string& name, Tensor& leaf, const Tensor& g) {
    auto base = nx::to_array(leaf), got = nx::to_array(g);
    for (size_t i = 0; i < base.size(); i += 3) {
      auto at = [&](double d) {
        auto v = base;
        v[i] += d;
        Tensor saved = leaf;
        leaf = f64(saved.shape(), v);
        double s = nx::item<double>(loss(m, x));
        leaf = saved;
        return s;
      };
      const double h = 1e-6, fd = (at(h) - at(-h)) / (2 * h);
      EXPECT_NEAR(got[i], fd, 1e-7 * std::max(1.0, std::fabs(fd))) << name << "[" << i << "]";
    }
  };
  check("in_proj.weight", m.in_proj.weight, gm.in_proj.weight);
  check("in_proj.bias", *m.in_proj.bias, *gm.in_proj.bias);
  check("out_proj.weight", m.out_proj.weight, gm.out_proj.weight);
  check("x", x, gx);
}

TEST(Mha, Errors) {
  const std::string api = "rune::nn::MultiHeadAttention:";
  expect_error([] { nn::MultiHeadAttention::init(key(0), 10, 4); },
               {api, "num_heads 4 must be positive and divide embed_dim 10"});
  expect_error([] { nn::MultiHeadAttention::init(key(0), 8, 2, {.dropout = 1}); },
               {api, "dropout must be in [0, 1), got 1"});
  nn::MultiHeadAttention m = nn::MultiHeadAttention::init(key(0), 8, 2, {.batch_first = true});
  Tensor x = nx::cast(f64({2, 3, 8}, values({2, 3, 8}, 1)), nx::float32);
  Tensor y = nx::cast(f64({2, 3, 6}, values({2, 3, 6}, 2)), nx::float32);
  expect_error([&] { m(y); }, {api, "embed_dim 8", "query float32 [2, 3, 6]"});
  expect_error([&] { m(nx::reshape(x, {48})); }, {api, "query must be [L, N, E]"});
  expect_error(
      [&] {
        m(x, x, x, {.key_padding_mask = host(nx::ones(nx::bool_, {3, 3}))});
      },
      {api, "key_padding_mask must be [2, 3]", "got bool [3, 3]"});
  expect_error(
      [&] {
        m(x, x, x, {.attn_mask = host(nx::ones(nx::bool_, {2, 3, 3}))});
      },
      {api, "attn_mask must be [L, S] [3, 3] or [N * num_heads, L, S] [4, 3, 3]",
       "got bool [2, 3, 3]"});
  expect_error(
      [&] {
        m(x, x, x, {.attn_mask = host(nx::ones(nx::int32, {3, 3}))});
      },
      {api, "attn_mask must be bool or the query's dtype float32; got int32 [3, 3]"});
  nn::Context ctx = nn::Context::train();
  nn::MultiHeadAttention d = nn::MultiHeadAttention::init(key(0), 8, 2, {.dropout = 0.1});
  expect_error([&] { d(x, x, x, {}, ctx); }, {api, "needs a key"});
}

}  // namespace
