// PyTorch checkpoints for rune::nn models (nn/torch_interop.h, docs/nn.md): state_dicts written
// by torch (tests/data/torch, from tools/refgen/gen_torch_state_dicts.py: an MLP Sequential, a
// CNN with Conv2d, BatchNorm2d with trained running statistics, MaxPool2d, Flatten and Linear,
// and an Embedding + LayerNorm + Linear module) loaded into the matching rune::nn models on CPU,
// CPU:1 and the fake CUDA:0, whose eager and compiled outputs match torch's float32 outputs
// within the measured bound; save -> load round trips bit for bit; saved files with exactly
// torch's names, dtypes and shapes (and torch's bits); channels-last convolutions against
// channels-first ones; renames; errors naming the API and the values.
//
// RUNE_TORCH_INTEROP_SAVE_DIR=<dir> makes the round-trip test also write <dir>/<model>.safetensors
// for `gen_torch_state_dicts.py --check <dir>` (torch loading rune's files).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "nn/nn.h"
#include "nn/torch_interop.h"
#include "test_util.h"
#include "window_test_util.h"

namespace {

namespace nn = rune::nn;
using nx::Shape;
using nx::Tensor;
using nx::random::fold_in;
using window_test::bits;
using window_test::expect_error;
using window_test::host;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// The reference files: RUNE_TORCH_DATA (set by ctest), else tests/data/torch found beside this
// source file (__FILE__ may be relative to the build directory), the working directory or its
// parent.
std::string data(const std::string& file) {
  static const std::filesystem::path dir = [] {
    if (const char* env = std::getenv("RUNE_TORCH_DATA")) return std::filesystem::path(env);
    for (std::filesystem::path d :
         {std::filesystem::path(__FILE__).parent_path() / ".." / "data" / "torch",
          std::filesystem::path("tests/data/torch"), std::filesystem::path("../tests/data/torch")})
      if (std::filesystem::exists(d / "io.safetensors")) return d;
    return std::filesystem::path("tests/data/torch");
  }();
  return (dir / file).string();
}

// A directory of this process's own, removed at exit.
std::string temp_dir() {
  static const struct Dir {
    std::filesystem::path path = std::filesystem::temp_directory_path() /
                                 ("rune-torch-interop-" + std::to_string(::getpid()));
    Dir() { std::filesystem::create_directories(path); }
    ~Dir() {
      std::error_code ec;
      std::filesystem::remove_all(path, ec);
    }
  } dir;
  return dir.path.string();
}

const nx::TensorMap& io() {
  static const nx::TensorMap m = nx::load(data("io.safetensors"));
  return m;
}

Tensor key(uint32_t i) { return fold_in(nx::random::key(41), i); }

// The rune::nn models of the generator's torch models (other weights: they are loaded).
auto make_mlp() {
  return nn::Sequential{nn::Linear::init(key(0), 8, 16), nn::ReLU{},
                        nn::Linear::init(key(1), 16, 4)};
}
auto make_cnn(bool last = false) {
  const nx::Padding one{{1, 1}, {1, 1}};
  return nn::Sequential{
      nn::Conv::init(key(2), 3, 6, {3, 3}, {.padding = one, .channels_last = last}),
      nn::BatchNorm::init(6, {.channels_last = last}),
      nn::ReLU{},
      nn::Conv::init(key(3), 6, 8, {3, 3},
                     {.strides = {2, 2}, .padding = one, .bias = false, .channels_last = last}),
      nn::MaxPool::init({2, 2}, {.channels_last = last}),
      nn::Flatten{},
      nn::Linear::init(key(4), 32, 5)};
}
struct EmbedNet {
  nn::Embedding emb;
  nn::LayerNorm ln;
  nn::Linear head;
  Tensor operator()(const Tensor& ids) const { return head(ln(emb(ids))); }
  static EmbedNet init(const Tensor& k) {
    return {nn::Embedding::init(fold_in(k, 0), 20, 12), nn::LayerNorm::init(12),
            nn::Linear::init(fold_in(k, 1), 12, 7)};
  }
};
using Mlp = decltype(make_mlp());
using Cnn = decltype(make_cnn());

}  // namespace

RUNE_TREE(EmbedNet, emb, ln, head)

namespace {

template <class M>
std::string model_bits(const M& m) {
  std::string s;
  rune::tree_map_with_path(
      [&](const std::string& p, const Tensor& t) {
        s += p + " " + bits(t) + "\n";
        return t;
      },
      m);
  return s;
}

// The measured difference of rune's float32 output from torch's float32 output (and from the
// float64 evaluation of the same weights).
struct Diff {
  double max_abs = 0, max_ulps = 0, max_abs64_rune = 0, max_abs64_torch = 0;
};
Diff compare(const Tensor& got, const std::string& model) {
  std::vector<double> g = nx::to_array(host(got)), t = nx::to_array(io().at(model + ".y")),
                      t64 = nx::to_array(io().at(model + ".y64"));
  Diff d;
  for (size_t i = 0; i < g.size(); ++i) {
    // float32's ulp at max(1, |torch|).
    const float at = static_cast<float>(std::max(1.0, std::fabs(t[i])));
    const double ulp = std::nextafter(at, std::numeric_limits<float>::infinity()) - at;
    d.max_abs = std::max(d.max_abs, std::fabs(g[i] - t[i]));
    d.max_ulps = std::max(d.max_ulps, std::fabs(g[i] - t[i]) / ulp);
    d.max_abs64_rune = std::max(d.max_abs64_rune, std::fabs(g[i] - t64[i]));
    d.max_abs64_torch = std::max(d.max_abs64_torch, std::fabs(t[i] - t64[i]));
  }
  return d;
}

// rune's output within float32 rounding of torch's float32 output and of the float64 evaluation
// of the same weights: |rune - torch| <= 2^-20 max(1, |torch|) and |rune - f64| <= 2^-21 max(1,
// |f64|) (8 and 4 float32 ulps at 1). Measured on x86-64 (printed by LoadedModelsMatchTorch):
// |rune - torch| <= 2.4e-7 and |rune - f64| <= 1.6e-7, while torch's own |torch - f64| reaches
// 2.0e-7.
void expect_matches_torch(const Tensor& got, const std::string& model, const std::string& what) {
  const Tensor& want = io().at(model + ".y");
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), nx::float32) << what;
  std::vector<double> g = nx::to_array(host(got)), t = nx::to_array(want),
                      t64 = nx::to_array(io().at(model + ".y64"));
  int bad = 0;
  for (size_t i = 0; i < g.size() && bad < 5; ++i)
    if (!(std::fabs(g[i] - t[i]) <= std::ldexp(1.0, -20) * std::max(1.0, std::fabs(t[i]))) ||
        !(std::fabs(g[i] - t64[i]) <= std::ldexp(1.0, -21) * std::max(1.0, std::fabs(t64[i])))) {
      ADD_FAILURE() << what << " [" << i << "]: rune " << g[i] << ", torch " << t[i] << ", float64 "
                    << t64[i];
      ++bad;
    }
}

// Names, dtypes and shapes of a state_dict, and with its bits.
std::string header(const nx::TensorMap& m) {
  std::string s;
  for (const auto& [name, t] : m) s += name + " " + t.describe() + "\n";
  return s;
}
std::string map_bits(const nx::TensorMap& m) {
  std::string s;
  for (const auto& [name, t] : m) s += name + " " + bits(t) + "\n";
  return s;
}

// ---- names and layouts ----

TEST(TorchInterop, StateDictHasTorchsNamesAndShapes) {
  // Before any load: the fresh models' state_dicts name and shape every tensor as torch's do.
  EXPECT_EQ(header(nn::torch_state_dict(make_mlp())), header(nx::load(data("mlp.safetensors"))));
  EXPECT_EQ(header(nn::torch_state_dict(make_cnn())), header(nx::load(data("cnn.safetensors"))));
  EXPECT_EQ(header(nn::torch_state_dict(make_cnn(true))),
            header(nx::load(data("cnn.safetensors"))));
  EXPECT_EQ(header(nn::torch_state_dict(EmbedNet::init(key(5)))),
            header(nx::load(data("embed.safetensors"))));
  // The Linear weight is the transpose, the rest the leaves themselves.
  Mlp m = make_mlp();
  nx::TensorMap sd = nn::torch_state_dict(m);
  EXPECT_EQ(bits(sd.at("0.weight")), bits(nx::transpose(m.get<0>().weight)));
  EXPECT_EQ(bits(sd.at("2.bias")), bits(*m.get<2>().bias));
  EXPECT_EQ(bits(nn::torch_state_dict(make_cnn()).at("1.num_batches_tracked")),
            bits(nx::scalar(nx::int64, 0)));
  EXPECT_EQ(bits(nn::torch_state_dict(make_cnn(), {.num_batches_tracked = 10})
                     .at("1.num_batches_tracked")),
            bits(nx::scalar(nx::int64, 10)));
}

// ---- loading, on every device ----

class TorchDevices : public ::testing::TestWithParam<const char*> {
 protected:
  nn::TorchOptions on() const { return {.device = nx::Device::parse(GetParam(), "test")}; }
  Tensor place(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(TorchDevices, LoadedModelsMatchTorch) {
  const std::string dev = GetParam();
  Mlp mlp = nn::load_torch_state_dict(make_mlp(), data("mlp.safetensors"), on());
  Cnn cnn = nn::load_torch_state_dict(make_cnn(), data("cnn.safetensors"), on());
  EmbedNet emb = nn::load_torch_state_dict(EmbedNet::init(key(5)), data("embed.safetensors"), on());
  rune::tree_map(
      [&](const Tensor& t) {
        EXPECT_EQ(t.device(), nx::Device::parse(GetParam(), "test"));
        return t;
      },
      std::make_tuple(mlp, cnn, emb));
  // The weights are torch's: the Linear's transposed, the running statistics the buffers.
  nx::TensorMap c = nx::load(data("cnn.safetensors"));
  EXPECT_EQ(bits(cnn.get<6>().weight), bits(nx::transpose(c.at("6.weight"))));
  EXPECT_EQ(bits(cnn.get<0>().weight), bits(c.at("0.weight")));
  EXPECT_EQ(bits(cnn.get<1>().running_mean), bits(c.at("1.running_mean")));
  EXPECT_EQ(bits(cnn.get<1>().running_var), bits(c.at("1.running_var")));
  EXPECT_FALSE(cnn.get<3>().bias.has_value());

  auto run_mlp = [](const Mlp& m, const Tensor& x) { return m(x); };
  auto run_cnn = [](const Cnn& m, const Tensor& x) { return m(x); };  // evaluation mode
  auto run_emb = [](const EmbedNet& m, const Tensor& ids) { return m(ids); };
  struct Case {
    std::string name;
    Tensor eager, compiled;
  };
  std::vector<Case> cases = {
      {"mlp", run_mlp(mlp, place(io().at("mlp.x"))),
       rune::jit(run_mlp)(mlp, place(io().at("mlp.x")))},
      {"cnn", run_cnn(cnn, place(io().at("cnn.x"))),
       rune::jit(run_cnn)(cnn, place(io().at("cnn.x")))},
      {"embed", run_emb(emb, place(io().at("embed.x"))),
       rune::jit(run_emb)(emb, place(io().at("embed.x")))},
  };
  for (const Case& k : cases) {
    EXPECT_EQ(k.eager.device(), nx::Device::parse(GetParam(), "test")) << k.name;
    expect_matches_torch(k.eager, k.name, k.name + " eager on " + dev);
    expect_matches_torch(k.compiled, k.name, k.name + " compiled on " + dev);
    EXPECT_EQ(bits(k.eager), bits(k.compiled)) << k.name << " on " << dev;
    Diff d = compare(k.compiled, k.name);
    std::printf(
        "%-5s on %-6s |rune - torch| <= %.3g (%.1f ulps of max(1, |torch|)); |rune - f64| "
        "<= %.3g, |torch - f64| <= %.3g\n",
        k.name.c_str(), dev.c_str(), d.max_abs, d.max_ulps, d.max_abs64_rune, d.max_abs64_torch);
  }
}

TEST_P(TorchDevices, SaveLoadRoundTripsBitForBit) {
  const std::string dir = temp_dir();
  const char* out = std::getenv("RUNE_TORCH_INTEROP_SAVE_DIR");
  if (out) std::filesystem::create_directories(out);
  auto check = [&](const auto& like, const std::string& name) {
    auto loaded = nn::load_torch_state_dict(like, data(name + ".safetensors"), on());
    const std::string path = dir + "/" + name + ".safetensors";
    nn::save_torch_state_dict(loaded, path);
    if (out) nn::save_torch_state_dict(loaded, std::string(out) + "/" + name + ".safetensors");
    // Loaded back into a model of other weights: the same bits, on the device asked for.
    auto back = nn::load_torch_state_dict(like, path, on());
    EXPECT_EQ(model_bits(back), model_bits(loaded)) << name << " on " << GetParam();
    // The saved file: torch's names, dtypes and shapes, and torch's bits (rune writes 0 for
    // num_batches_tracked, which it does not count).
    nx::TensorMap original = nx::load(data(name + ".safetensors")), saved = nx::load(path);
    EXPECT_EQ(header(saved), header(original)) << name;
    for (const auto& [k, t] : original) {
      if (k.ends_with("num_batches_tracked")) {
        EXPECT_EQ(bits(saved.at(k)), bits(nx::scalar(nx::int64, 0))) << k;
        continue;
      }
      EXPECT_EQ(bits(saved.at(k)), bits(t)) << name << " " << k;
    }
    std::filesystem::remove(path);
  };
  check(make_mlp(), "mlp");
  check(make_cnn(), "cnn");
  check(make_cnn(true), "cnn");
  check(EmbedNet::init(key(5)), "embed");
}

INSTANTIATE_TEST_SUITE_P(Devices, TorchDevices, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// ---- channels last ----

TEST(TorchInterop, ChannelsLastConvolutionsTakeTorchsKernels) {
  // The CNN loaded channels last: its convolutions and pool give the channels-first model's
  // values, transposed (the Flatten that follows orders features differently, so the head is
  // left out).
  Cnn first = nn::load_torch_state_dict(make_cnn(), data("cnn.safetensors"));
  auto last = nn::load_torch_state_dict(make_cnn(true), data("cnn.safetensors"));
  EXPECT_EQ(last.get<0>().weight.shape(), (Shape{3, 3, 3, 6}));
  auto trunk = [](const auto& m, const Tensor& x) {
    return m.template get<4>()(
        m.template get<3>()(nx::relu(m.template get<1>()(m.template get<0>()(x)))));
  };
  Tensor x = io().at("cnn.x");
  Tensor want = trunk(first, x), got = trunk(last, nx::permute(x, {0, 2, 3, 1}));
  std::vector<double> w = nx::to_array(want), g = nx::to_array(nx::permute(got, {0, 3, 1, 2}));
  ASSERT_EQ(w.size(), g.size());
  for (size_t i = 0; i < w.size(); ++i)
    EXPECT_NEAR(g[i], w[i], 1e-6 * std::max(1.0, std::fabs(w[i]))) << i;

  // ConvTranspose and a grouped Conv (rune only: saved channels first, loaded channels last).
  for (int64_t groups : {1, 2}) {
    auto ct = nn::ConvTranspose::init(key(6), 4, 6, {3, 2}, {.strides = {2, 1}, .groups = groups});
    auto cv = nn::Conv::init(key(7), 4, 6, {3, 2}, {.groups = groups});
    auto ct_last = nn::from_torch_state_dict(
        nn::ConvTranspose::init(key(8), 4, 6, {3, 2},
                                {.strides = {2, 1}, .groups = groups, .channels_last = true}),
        nn::torch_state_dict(ct));
    auto cv_last = nn::from_torch_state_dict(
        nn::Conv::init(key(9), 4, 6, {3, 2}, {.groups = groups, .channels_last = true}),
        nn::torch_state_dict(cv));
    EXPECT_EQ(ct_last.weight.shape(), (Shape{3, 2, 4, 6 / groups}));
    EXPECT_EQ(cv_last.weight.shape(), (Shape{3, 2, 4 / groups, 6}));
    EXPECT_EQ(header(nn::torch_state_dict(ct_last)) + map_bits(nn::torch_state_dict(ct_last)),
              header(nn::torch_state_dict(ct)) + map_bits(nn::torch_state_dict(ct)));
    EXPECT_EQ(map_bits(nn::torch_state_dict(cv_last)), map_bits(nn::torch_state_dict(cv)));
    Tensor xi = nx::random::normal(key(10), {2, 4, 5, 4});
    for (auto [a, b] : {std::make_pair(ct(xi), ct_last(nx::permute(xi, {0, 2, 3, 1}))),
                        std::make_pair(cv(xi), cv_last(nx::permute(xi, {0, 2, 3, 1})))}) {
      std::vector<double> va = nx::to_array(a), vb = nx::to_array(nx::permute(b, {0, 3, 1, 2}));
      ASSERT_EQ(va.size(), vb.size());
      for (size_t i = 0; i < va.size(); ++i) EXPECT_NEAR(vb[i], va[i], 1e-5) << "groups " << groups;
    }
  }
}

// ---- renames ----

TEST(TorchInterop, RenamesMapOtherNames) {
  // torch's Sequential(Linear, ReLU, Linear) into an nn::MLP, whose paths are layers.0, layers.1.
  auto rename = nn::rename_prefixes({{"layers.0", "0"}, {"layers.1", "2"}});
  EXPECT_EQ(rename("layers.1.bias"), "2.bias");
  EXPECT_EQ(rename("layers.10.bias"), "layers.10.bias");
  EXPECT_EQ(rename("layers.0"), "0");
  EXPECT_EQ(nn::rename_prefixes({{"", "module"}})("0.weight"), "module.0.weight");
  EXPECT_EQ(nn::rename_prefixes({{"model", ""}})("model.0.weight"), "0.weight");
  nn::MLP mlp = nn::load_torch_state_dict(nn::MLP::init(key(11), {8, 16, 4}),
                                          data("mlp.safetensors"), {.rename = rename});
  expect_matches_torch(mlp(io().at("mlp.x")), "mlp", "MLP renamed");
  EXPECT_EQ(header(nn::torch_state_dict(mlp, {.rename = rename})),
            header(nx::load(data("mlp.safetensors"))));
  // A wrapped model (DataParallel's "module." prefix) both ways.
  const std::string path = temp_dir() + "/wrapped.safetensors";
  nn::save_torch_state_dict(mlp, path, {.rename = nn::rename_prefixes({{"", "module"}})});
  nx::TensorMap wrapped = nx::load(path);
  EXPECT_TRUE(wrapped.count("module.layers.0.weight"));
  nn::MLP back = nn::load_torch_state_dict(nn::MLP::init(key(12), {8, 16, 4}), path,
                                           {.rename = nn::rename_prefixes({{"", "module"}})});
  EXPECT_EQ(model_bits(back), model_bits(mlp));
  std::filesystem::remove(path);
  // An empty name leaves a leaf out: a model whose head is not in the file keeps its head.
  EmbedNet fresh = EmbedNet::init(key(13));
  auto no_head = [](const std::string& p) { return p.starts_with("head.") ? std::string() : p; };
  nx::TensorMap sd = nx::load(data("embed.safetensors"));
  sd.erase("head.weight");
  sd.erase("head.bias");
  EmbedNet body = nn::from_torch_state_dict(fresh, sd, {.rename = no_head});
  EXPECT_EQ(bits(body.head.weight), bits(fresh.head.weight));
  EXPECT_EQ(bits(body.emb.weight), bits(sd.at("emb.weight")));
  EXPECT_FALSE(nn::torch_state_dict(body, {.rename = no_head}).count("head.weight"));
  // allow_missing and allow_unexpected: torch's strict=False.
  EmbedNet partial = nn::from_torch_state_dict(fresh, sd, {.allow_missing = true});
  EXPECT_EQ(bits(partial.head.weight), bits(fresh.head.weight));
  EXPECT_EQ(bits(partial.ln.bias.value()), bits(sd.at("ln.bias")));
  sd = nx::load(data("embed.safetensors"));
  sd.emplace("extra.weight", nx::zeros(nx::float32, {3}));
  EmbedNet more = nn::from_torch_state_dict(fresh, sd, {.allow_unexpected = true});
  EXPECT_EQ(bits(more.head.bias.value()), bits(sd.at("head.bias")));
  // A state_dict without num_batches_tracked (older torch) loads.
  nx::TensorMap c = nx::load(data("cnn.safetensors"));
  c.erase("1.num_batches_tracked");
  Cnn cnn = nn::from_torch_state_dict(make_cnn(), c);
  EXPECT_EQ(bits(cnn.get<1>().running_var), bits(c.at("1.running_var")));
}

// ---- errors ----

TEST(TorchInterop, ErrorsNameTheApiAndTheValues) {
  const Mlp like = make_mlp();
  const nx::TensorMap sd = nx::load(data("mlp.safetensors"));
  expect_error(
      [&] {
        nx::TensorMap m = sd;
        m.erase("2.bias");
        nn::from_torch_state_dict(like, m);
      },
      {"rune::nn::from_torch_state_dict: missing tensor '2.bias' (float32 [4])"});
  expect_error(
      [&] {
        nx::TensorMap m = sd;
        m.erase("2.weight");
        nn::from_torch_state_dict(like, m);
      },
      {"rune::nn::from_torch_state_dict", "missing tensor '2.weight' (float32 [4, 16])",
       "[out, in] of the rune::nn::Linear weight '2.weight' float32 [16, 4]"});
  expect_error(
      [&] {
        nx::TensorMap m = sd;
        m["0.weight"] = nx::zeros(nx::float32, {16, 9});
        nn::from_torch_state_dict(like, m);
      },
      {"rune::nn::from_torch_state_dict", "tensor '0.weight' is float32 [16, 9]",
       "want float32 [16, 8]", "float32 [8, 16]"});
  expect_error(
      [&] {
        nx::TensorMap m = sd;  // a rune-layout weight given as torch's
        m["0.weight"] = nx::transpose(sd.at("0.weight"));
        nn::from_torch_state_dict(like, m);
      },
      {"tensor '0.weight' is float32 [8, 16] in the file, want float32 [16, 8]"});
  expect_error(
      [&] {
        nx::TensorMap m = sd;
        m["0.bias"] = nx::zeros(nx::float64, {16});
        nn::from_torch_state_dict(like, m);
      },
      {"tensor '0.bias' is float64 [16]", "want float32 [16]"});
  expect_error(
      [&] {
        nx::TensorMap m = sd;
        m.emplace("3.weight", nx::zeros(nx::float32, {2, 3}));
        m.emplace("fc.bias", nx::zeros(nx::float32, {2}));
        nn::from_torch_state_dict(like, m);
      },
      {"rune::nn::from_torch_state_dict",
       "unexpected tensors '3.weight' (float32 [2, 3]), "
       "'fc.bias' (float32 [2])",
       "allow_unexpected"});
  // Every problem at once, missing leaves named by their rune paths when renamed.
  expect_error(
      [&] {
        nn::from_torch_state_dict(like, sd, {.rename = nn::rename_prefixes({{"0", "first"}})});
      },
      {"missing tensors 'first.weight' for the leaf '0.weight' (float32 [16, 8])",
       "'first.bias' for the leaf '0.bias' (float32 [16])",
       "unexpected tensors '0.bias' (float32 [16]), '0.weight' (float32 [16, 8])"});
  expect_error(
      [&] {
        nn::from_torch_state_dict(like, sd, {.rename = [](const std::string&) { return "x"; }});
      },
      {"rune::nn::from_torch_state_dict", "'0.weight' and '0.bias' both map to torch name 'x'"});
  expect_error(
      [&] { nn::torch_state_dict(like, {.rename = [](const std::string&) { return "x"; }}); },
      {"rune::nn::torch_state_dict", "both map to torch name 'x'"});
  // The channels-last Conv's expected torch shape.
  expect_error(
      [&] {
        nx::TensorMap c = nx::load(data("cnn.safetensors"));
        c["3.weight"] = nx::zeros(nx::float32, {3, 3, 6, 8});
        nn::from_torch_state_dict(make_cnn(true), c);
      },
      {"tensor '3.weight' is float32 [3, 3, 6, 8] in the file, want float32 [8, 6, 3, 3]",
       "channels-last rune::nn::Conv weight '3.weight' float32 [3, 3, 6, 8]"});
  // Files.
  expect_error([&] { nn::load_torch_state_dict(like, temp_dir() + "/model.pt"); },
               {"rune::nn::load_torch_state_dict: '", "model.pt': unknown extension"});
  expect_error([&] { nn::save_torch_state_dict(like, temp_dir() + "/model.pt"); },
               {"rune::nn::save_torch_state_dict: '", "model.pt': unknown extension"});
  expect_error([&] { nn::load_torch_state_dict(make_cnn(), data("mlp.safetensors")); },
               {"rune::nn::load_torch_state_dict: '", "mlp.safetensors': ",
                "tensor '0.weight' is float32 [16, 8] in the file, want float32 [6, 3, 3, 3]",
                "missing tensors '1.weight' (float32 [6])", "unexpected tensors '2.bias'"});
  try {
    nn::load_torch_state_dict(like, temp_dir() + "/absent.safetensors");
    ADD_FAILURE() << "no error";
  } catch (const std::runtime_error& e) {
    EXPECT_TRUE(std::string(e.what()).starts_with("rune::nn::load_torch_state_dict: '"))
        << e.what();
  }
}

}  // namespace
