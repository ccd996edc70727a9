// Hugging Face GPT-2 (nn/gpt2.h, nn/hf_gpt2.h, docs/nn.md "Hugging Face GPT-2"): the checkpoint
// transformers' save_pretrained wrote (tests/data/hf_gpt2, from tools/refgen/gen_hf_gpt2.py: a
// random GPT2LMHeadModel, vocab 97, 64 positions, n_embd 32, 2 layers, 4 heads) loaded on CPU,
// CPU:1 and the fake CUDA:0; its logits, eager and compiled, within the measured bound of
// transformers' float32 logits and of the float64 evaluation of the same weights; the greedy
// continuation of 20 tokens equal to transformers' generate; names with and without
// "transformer.", the legacy mask buffers, a tied lm_head; GPT2::init; errors naming the API and
// the tensor, the field or the file.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "gpu_runtime/fake_driver.h"
#include "nn/nn.h"
#include "test_util.h"
#include "window_test_util.h"

namespace {

namespace nn = rune::nn;
namespace fs = std::filesystem;
using nx::Shape;
using nx::Tensor;
using window_test::bits;
using window_test::expect_error;
using window_test::host;

const bool installed = fake_gpu::install_fake_cuda_unless_hooked();

// The checkpoint's directory: RUNE_HF_GPT2_DATA (set by ctest), else tests/data/hf_gpt2 beside
// this source file, the working directory or its parent.
std::string data_dir() {
  static const fs::path dir = [] {
    if (const char* env = std::getenv("RUNE_HF_GPT2_DATA")) return fs::path(env);
    for (fs::path d : {fs::path(__FILE__).parent_path() / ".." / "data" / "hf_gpt2",
                       fs::path("tests/data/hf_gpt2"), fs::path("../tests/data/hf_gpt2")})
      if (fs::exists(d / "reference.safetensors")) return d;
    return fs::path("tests/data/hf_gpt2");
  }();
  return dir.string();
}
std::string data(const std::string& file) { return (fs::path(data_dir()) / file).string(); }

const nx::TensorMap& ref() {
  static const nx::TensorMap m = nx::load(data("reference.safetensors"));
  return m;
}

// A fresh directory of this process's own under a temporary root removed at exit.
std::string temp_dir(const std::string& name) {
  static const struct Root {
    fs::path path = fs::temp_directory_path() / ("rune-hf-gpt2-" + std::to_string(::getpid()));
    ~Root() {
      std::error_code ec;
      fs::remove_all(path, ec);
    }
  } root;
  fs::path d = root.path / name;
  fs::remove_all(d);
  fs::create_directories(d);
  return d.string();
}

std::string read(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}
void write(const std::string& path, const std::string& text) { std::ofstream(path) << text; }

// config.json with `from` replaced by `to` (which must occur).
std::string edited_config(const std::string& from, const std::string& to) {
  std::string s = read(data("config.json"));
  size_t at = s.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  return at == std::string::npos ? s : s.replace(at, from.size(), to);
}

// A checkpoint directory: config.json's text and model.safetensors' tensors.
std::string checkpoint(const std::string& name, const std::string& config,
                       const nx::TensorMap& tensors) {
  std::string d = temp_dir(name);
  write(d + "/config.json", config);
  nx::save(d + "/model.safetensors", tensors);
  return d;
}

template <class M>
std::string model_bits(const M& m) {
  std::string s;
  for (const auto& [p, t] : nn::named_params(m)) s += p + " " + bits(t) + "\n";
  return s;
}

// The largest |got - want| over the elements and the largest |want|.
struct Diff {
  double max_abs = 0, scale = 0;
};
Diff diff(const Tensor& got, const Tensor& want) {
  std::vector<double> g = nx::to_array(host(got)), w = nx::to_array(host(want));
  Diff d;
  for (size_t i = 0; i < g.size(); ++i) {
    d.max_abs = std::max(d.max_abs, std::fabs(g[i] - w[i]));
    d.scale = std::max(d.scale, std::fabs(w[i]));
  }
  return d;
}

// rune's float32 logits against transformers' float32 logits and the float64 evaluation of the
// same weights (reference.safetensors), relative to the largest |logit| (about 9.4):
//   |rune - f64| <= 2^-20 max|logit|           (8 float32 ulps of the largest logit)
//   |rune - transformers| <= 2^-19 max|logit|  (the sum of rune's and transformers' own errors,
//                                                each about 2^-20 of max|logit|)
// Measured on x86-64 (printed by LogitsMatchTransformers, the same on every device):
// |rune - f64| <= 5.4e-6 (5.6e-7 of max|logit|), transformers' own |f32 - f64| <= 1.0e-5 (1.06e-6,
// just over 2^-20 = 9.5e-7) and |rune - transformers| <= 1.2e-5 (1.28e-6). The exact GELU in place
// of the tanh form misses by 2.8e-3, a lost causal mask by far more.
const double kVsTransformers = std::ldexp(1.0, -19), kVsFloat64 = std::ldexp(1.0, -20);

void expect_logits(const Tensor& got, const std::string& which, const std::string& what) {
  const Tensor& want = ref().at(which);
  const Tensor& want64 = ref().at(which == "logits" ? "logits64" : which + "_64");
  ASSERT_EQ(got.shape(), want.shape()) << what;
  ASSERT_EQ(got.dtype(), nx::float32) << what;
  Diff d = diff(got, want), d64 = diff(got, want64);
  EXPECT_LE(d.max_abs, kVsTransformers * d.scale) << what << ": |rune - transformers|";
  EXPECT_LE(d64.max_abs, kVsFloat64 * d64.scale) << what << ": |rune - float64|";
}

class HFGPT2Devices : public ::testing::TestWithParam<const char*> {
 protected:
  nx::Device device() const { return nx::Device::parse(GetParam(), "test"); }
  Tensor place(const Tensor& t) const { return nx::place(t, GetParam()); }
};

TEST_P(HFGPT2Devices, LogitsMatchTransformers) {
  nn::GPT2 m = nn::load_hf_gpt2(data_dir(), {.device = device()});
  for (const auto& [path, t] : nn::named_params(m)) EXPECT_EQ(t.device(), device()) << path;
  auto logits = [](const nn::GPT2& model, const Tensor& ids) { return model(ids); };
  auto compiled = rune::jit(logits);
  for (const std::string suffix : {"", "1"}) {
    Tensor ids = place(ref().at("prompt" + suffix));
    Tensor eager = logits(m, ids), jitted = compiled(m, ids);
    EXPECT_EQ(eager.device(), device());
    const std::string what = "prompt" + suffix + " on " + GetParam();
    expect_logits(eager, "logits" + suffix, what + " eager");
    expect_logits(jitted, "logits" + suffix, what + " compiled");
    EXPECT_EQ(bits(eager), bits(jitted)) << what;
    Diff d = diff(jitted, ref().at("logits" + suffix)),
         d64 = diff(jitted, ref().at(suffix.empty() ? "logits64" : "logits1_64")),
         t64 = diff(ref().at("logits" + suffix),
                    ref().at(suffix.empty() ? "logits64" : "logits1_64"));
    std::printf(
        "%-7s on %-6s max|logit| %.3g; |rune - transformers| <= %.3g (%.3g of max), |rune - f64| "
        "<= %.3g (%.3g), |transformers - f64| <= %.3g (%.3g)\n",
        ("prompt" + suffix).c_str(), GetParam(), d.scale, d.max_abs, d.max_abs / d.scale,
        d64.max_abs, d64.max_abs / d64.scale, t64.max_abs, t64.max_abs / t64.scale);
  }
  // B = 1: the first prompt alone gives that row's logits.
  Tensor one = nx::slice(place(ref().at("prompt")), {{0, 1}});
  Tensor want = nx::slice(ref().at("logits"), {{0, 1}});
  Diff d = diff(m(one), want);
  EXPECT_LE(d.max_abs, kVsTransformers * d.scale) << "B = 1 on " << GetParam();
}

TEST_P(HFGPT2Devices, GreedyContinuationEqualsTransformers) {
  nn::GPT2 m = nn::load_hf_gpt2(data_dir(), {.device = device()});
  auto generate = [](const nn::GPT2& model, const Tensor& prompt) {
    return nn::greedy_generate(model, prompt, 20);
  };
  auto compiled = rune::jit(generate);
  // The fake CUDA:0 runs each launch's threads as fibers: 40 forward passes of the B = 2 prompt
  // take it seconds, so it skips the B = 1 prompt, which the host devices run.
  const bool cuda = device().kind == runtime::DeviceKind::CUDA;
  for (const std::string suffix : {"", "1"}) {
    if (cuda && suffix == "1") continue;
    Tensor prompt = place(ref().at("prompt" + suffix));
    const Tensor& want = ref().at("greedy" + suffix);
    Tensor eager = generate(m, prompt), jitted = compiled(m, prompt);
    EXPECT_EQ(eager.device(), device());
    EXPECT_EQ(eager.describe(), want.describe());
    EXPECT_EQ(jitted.describe(), want.describe());
    EXPECT_EQ(nx::to_array(host(eager)), nx::to_array(want))
        << "prompt" << suffix << " eager on " << GetParam();
    EXPECT_EQ(nx::to_array(host(jitted)), nx::to_array(want))
        << "prompt" << suffix << " compiled on " << GetParam();
  }
}

// Training mode: transformers' dropout sites, each drawing the context's next key in order (the
// embeddings, then per block the attention weights and the two residual branches), the same
// bits eagerly and compiled; evaluation and zero rates are model(ids).
TEST_P(HFGPT2Devices, TrainingDropoutSitesDrawTheContextKeysInOrder) {
  nn::GPT2Config c{.vocab_size = 11,
                   .n_positions = 8,
                   .n_embd = 8,
                   .n_layer = 2,
                   .n_head = 2,
                   .embd_pdrop = 0.25,
                   .attn_pdrop = 0.5,
                   .resid_pdrop = 0.125};
  const nn::GPT2 m = nn::GPT2::init(place(nx::random::key(5)), c);
  for (const auto& [path, t] : nn::named_params(m)) EXPECT_EQ(t.device(), device()) << path;
  const Tensor ids = place(nx::create(nx::int32, {2, 6}, {1, 2, 3, 4, 5, 6, 10, 9, 8, 7, 0, 1}));
  const Tensor key = place(nx::random::key(9));
  auto train = [](const nn::GPT2& model, const Tensor& x, const Tensor& k) {
    nn::Context ctx = nn::Context::train(k);
    return model(x, ctx);
  };
  // The forward pass written out with the sites' keys fold_in(key, 0), (key, 1), ...
  uint32_t site = 0;
  auto drop = [&](const Tensor& x, double rate) {
    return nx::random::dropout(nx::random::fold_in(key, site++), x, rate);
  };
  Tensor x = drop(m.wte(ids) + nx::slice(m.wpe.weight, {{0, 6}}), 0.25);
  for (const nn::GPT2Block& b : m.h) {
    Tensor qkv = b.attn.c_attn(b.ln_1(x));
    auto heads = [&](int64_t part) {
      Tensor t = nx::slice(qkv, {{}, {}, {part * 8, (part + 1) * 8}});
      return nx::permute(nx::reshape(t, {2, 6, 2, 4}), {0, 2, 1, 3});
    };
    nx::nn::AttentionOptions o{.causal = true, .dropout = 0.5};
    o.dropout_key = nx::random::fold_in(key, site++);
    Tensor y = nx::nn::scaled_dot_product_attention(heads(0), heads(1), heads(2), o);
    x = x + drop(b.attn.c_proj(nx::reshape(nx::permute(y, {0, 2, 1, 3}), {2, 6, 8})), 0.125);
    x = x + drop(b.mlp.c_proj(nx::gelu(b.mlp.c_fc(b.ln_2(x)))), 0.125);
  }
  Tensor want = nx::reshape(
      nx::matmul(nx::reshape(m.ln_f(x), {12, 8}), nx::transpose(m.wte.weight)), {2, 6, 11});
  Tensor eager = train(m, ids, key);
  EXPECT_EQ(bits(eager), bits(want)) << GetParam();
  EXPECT_EQ(bits(rune::jit(train)(m, ids, key)), bits(eager)) << GetParam();
  EXPECT_NE(bits(train(m, ids, place(nx::random::key(10)))), bits(eager)) << GetParam();
  // Evaluation, and training with zero rates (no key needed), are model(ids).
  nn::Context eval;
  EXPECT_EQ(bits(m(ids, eval)), bits(m(ids))) << GetParam();
  nn::GPT2 still = m;
  still.embd_pdrop = still.attn_pdrop = still.resid_pdrop = 0.0;
  nn::Context no_key = nn::Context::train();
  EXPECT_EQ(bits(still(ids, no_key)), bits(m(ids))) << GetParam();
  nn::Context missing = nn::Context::train();
  expect_error([&] { m(ids, missing); },
               {"rune::nn::GPT2: a training pass with dropout needs a key"});
}

INSTANTIATE_TEST_SUITE_P(Devices, HFGPT2Devices, ::testing::Values("CPU", "CPU:1", "CUDA:0"),
                         [](const auto& info) {
                           std::string s = info.param;
                           return s == "CPU:1" ? std::string("CPU1") : s.substr(0, s.find(':'));
                         });

// ---- names, config, layouts ----

TEST(HFGPT2, TreePathsAreTransformersNames) {
  nn::GPT2 m = nn::load_hf_gpt2(data_dir());
  const nx::TensorMap file = nx::load(data("model.safetensors"));
  std::vector<std::string> paths, names;
  for (const auto& [path, t] : nn::named_params(m)) paths.push_back("transformer." + path);
  for (const auto& [name, t] : file) names.push_back(name);
  std::sort(paths.begin(), paths.end());
  EXPECT_EQ(paths, names);
  int64_t total = 0;
  for (const auto& [name, t] : file) total += t.size();
  EXPECT_EQ(nn::count_params(m), total);
  // Conv1D's [in, out] is Linear's: the weights are the file's, untransposed.
  EXPECT_EQ(m.h[1].attn.c_attn.weight.shape(), (Shape{32, 96}));
  EXPECT_EQ(bits(m.h[1].attn.c_attn.weight), bits(file.at("transformer.h.1.attn.c_attn.weight")));
  EXPECT_EQ(bits(m.h[0].mlp.c_proj.weight), bits(file.at("transformer.h.0.mlp.c_proj.weight")));
  EXPECT_EQ(bits(*m.ln_f.bias), bits(file.at("transformer.ln_f.bias")));
  nn::GPT2Config c = m.config();
  EXPECT_EQ(c.vocab_size, 97);
  EXPECT_EQ(c.n_positions, 64);
  EXPECT_EQ(c.n_embd, 32);
  EXPECT_EQ(c.n_layer, 2);
  EXPECT_EQ(c.n_head, 4);
  EXPECT_EQ(c.inner(), 128);
  EXPECT_EQ(c.layer_norm_epsilon, 1e-5);
  nn::GPT2Config r = nn::read_hf_gpt2_config(data("config.json"));
  EXPECT_EQ(r.initializer_range, 0.5);
  EXPECT_EQ(r.n_head, 4);
  // The dropout rates are read, held by the model and written back.
  nn::GPT2Config d = nn::parse_hf_gpt2_config(
      "{\"vocab_size\": 5, \"n_positions\": 4, \"n_embd\": 4, \"n_layer\": 1, \"n_head\": 1, "
      "\"embd_pdrop\": 0.25, \"attn_pdrop\": 0, \"resid_pdrop\": 0.5}");
  EXPECT_EQ(d.embd_pdrop, 0.25);
  EXPECT_EQ(d.attn_pdrop, 0.0);
  EXPECT_EQ(d.resid_pdrop, 0.5);
  nn::GPT2 dm = nn::from_hf_gpt2_state_dict(d, [&] {
    nx::TensorMap own;
    for (const auto& [path, t] : nn::named_params(nn::GPT2::init(nx::random::key(0), d)))
      own.emplace(path, t);
    return own;
  }());
  EXPECT_EQ(dm.config().embd_pdrop, 0.25);
  EXPECT_EQ(dm.config().resid_pdrop, 0.5);
}

TEST(HFGPT2, OtherNamingsLoadTheSameModel) {
  const nn::GPT2 want = nn::load_hf_gpt2(data_dir());
  const nn::GPT2Config c = nn::read_hf_gpt2_config(data("config.json"));
  const nx::TensorMap file = nx::load(data("model.safetensors"));
  // GPT2Model's names (no "transformer."), older transformers' mask buffers and an explicit
  // lm_head.weight equal to wte.weight.
  nx::TensorMap bare;
  for (const auto& [name, t] : file)
    bare.emplace(name.substr(std::string("transformer.").size()), t);
  EXPECT_EQ(model_bits(nn::from_hf_gpt2_state_dict(c, bare)), model_bits(want));
  nx::TensorMap legacy = bare;
  for (int i = 0; i < 2; ++i) {
    legacy.emplace("h." + std::to_string(i) + ".attn.bias",
                   nx::tril(nx::ones(nx::float32, {1, 1, 64, 64})));
    legacy.emplace("h." + std::to_string(i) + ".attn.masked_bias", nx::scalar(nx::float32, -1e4));
  }
  legacy.emplace("lm_head.weight", bare.at("wte.weight"));
  EXPECT_EQ(model_bits(nn::from_hf_gpt2_state_dict(c, legacy)), model_bits(want));
  nx::TensorMap prefixed = file;
  prefixed.emplace("lm_head.weight", file.at("transformer.wte.weight"));
  EXPECT_EQ(model_bits(nn::from_hf_gpt2_state_dict(c, prefixed)), model_bits(want));
  // A missing field of config.json takes GPT2Config's default, as transformers does.
  nn::GPT2Config d = nn::parse_hf_gpt2_config("{\"n_layer\": 3, \"n_inner\": null}");
  EXPECT_EQ(d.n_layer, 3);
  EXPECT_EQ(d.n_embd, 768);
  EXPECT_EQ(d.vocab_size, 50257);
  EXPECT_EQ(d.inner(), 3072);
  EXPECT_EQ(nn::parse_hf_gpt2_config("{\"n_inner\": 7, \"activation_function\": "
                                     "\"gelu_pytorch_tanh\"}")
                .inner(),
            7);
}

TEST(HFGPT2, InitHasTransformersShapesAndScales) {
  nn::GPT2Config c{.vocab_size = 97,
                   .n_positions = 64,
                   .n_embd = 32,
                   .n_layer = 2,
                   .n_head = 4,
                   .initializer_range = 0.5};
  nn::GPT2 m = nn::GPT2::init(nx::random::key(3), c);
  // The same names and shapes as the file; loaded from a state_dict of its own tensors it is
  // itself.
  nx::TensorMap own;
  for (const auto& [path, t] : nn::named_params(m)) own.emplace(path, t);
  const nx::TensorMap file = nx::load(data("model.safetensors"));
  for (const auto& [name, t] : file) {
    auto it = own.find(name.substr(std::string("transformer.").size()));
    ASSERT_NE(it, own.end()) << name;
    EXPECT_EQ(it->second.describe(), t.describe()) << name;
  }
  EXPECT_EQ(own.size(), file.size());
  EXPECT_EQ(model_bits(nn::from_hf_gpt2_state_dict(c, own)), model_bits(m));
  // Standard deviations: 0.5 for weights and embeddings, 0.5 / sqrt(2 n_layer) = 0.25 for the
  // residual projections, within 5 standard errors of the sample's (sigma / sqrt(2 n)); biases
  // zero and LayerNorms one.
  auto expect_std = [](const Tensor& t, double sigma, const std::string& what) {
    std::vector<double> v = nx::to_array(t);
    double s2 = 0;
    for (double x : v) s2 += x * x;
    const double s = std::sqrt(s2 / static_cast<double>(v.size()));
    EXPECT_NEAR(s, sigma, 5 * sigma / std::sqrt(2.0 * static_cast<double>(v.size()))) << what;
  };
  expect_std(m.wte.weight, 0.5, "wte");
  expect_std(m.h[0].attn.c_attn.weight, 0.5, "c_attn");
  expect_std(m.h[1].mlp.c_fc.weight, 0.5, "c_fc");
  expect_std(nx::concatenate({nx::reshape(m.h[0].attn.c_proj.weight, {-1}),
                              nx::reshape(m.h[1].mlp.c_proj.weight, {-1})}),
             0.25, "c_proj");
  EXPECT_EQ(bits(*m.h[1].attn.c_proj.bias), bits(nx::zeros(nx::float32, {32})));
  EXPECT_EQ(bits(m.h[0].ln_2.weight), bits(nx::ones(nx::float32, {32})));
  EXPECT_NE(bits(m.h[0].attn.c_attn.weight), bits(m.h[1].attn.c_attn.weight));
  EXPECT_EQ(m.config().n_head, 4);
  // Generation from it runs and keeps the prompt.
  Tensor prompt = nx::create(nx::int32, {1, 3}, {1, 2, 3});
  Tensor out = nn::greedy_generate(m, prompt, 5);
  EXPECT_EQ(out.describe(), "int32 [1, 8]");
  EXPECT_EQ(bits(nx::slice(out, {{}, {0, 3}})), bits(prompt));
}

// RUNE_HF_GPT2_SAVE_DIR=<dir> makes this test also write the checkpoint to <dir> for
// `gen_hf_gpt2.py --check <dir>` (transformers loading rune's files).
TEST(HFGPT2, SaveLoadRoundTripsWithTransformersNames) {
  const nn::GPT2 m = nn::load_hf_gpt2(data_dir());
  const std::string dir = temp_dir("saved");
  nn::save_hf_gpt2(m, dir);
  if (const char* out = std::getenv("RUNE_HF_GPT2_SAVE_DIR")) nn::save_hf_gpt2(m, out);
  EXPECT_EQ(model_bits(nn::load_hf_gpt2(dir)), model_bits(m));
  // The file holds save_pretrained's names, shapes and bits.
  nx::TensorMap saved = nx::load(dir + "/model.safetensors"),
                original = nx::load(data("model.safetensors"));
  ASSERT_EQ(saved.size(), original.size());
  for (const auto& [name, t] : original) {
    ASSERT_TRUE(saved.count(name)) << name;
    EXPECT_EQ(bits(saved.at(name)), bits(t)) << name;
  }
  const std::string config = read(dir + "/config.json");
  for (const char* field :
       {"\"model_type\": \"gpt2\"", "\"vocab_size\": 97", "\"n_positions\": 64", "\"n_embd\": 32",
        "\"n_layer\": 2", "\"n_head\": 4", "\"n_inner\": null", "\"layer_norm_epsilon\": 1e-05",
        "\"activation_function\": \"gelu_new\"", "\"tie_word_embeddings\": true",
        "\"GPT2LMHeadModel\""})
    EXPECT_NE(config.find(field), std::string::npos) << field << " in\n" << config;
  // A model of other shapes writes its own (n_inner given when it is not 4 n_embd).
  nn::GPT2 small = nn::GPT2::init(nx::random::key(1), {.vocab_size = 11,
                                                       .n_positions = 8,
                                                       .n_embd = 8,
                                                       .n_layer = 1,
                                                       .n_head = 2,
                                                       .n_inner = 12,
                                                       .layer_norm_epsilon = 1e-6});
  nn::save_hf_gpt2(small, dir);
  nn::GPT2Config c = nn::read_hf_gpt2_config(dir + "/config.json");
  EXPECT_EQ(c.inner(), 12);
  EXPECT_EQ(c.layer_norm_epsilon, 1e-6);
  EXPECT_EQ(model_bits(nn::load_hf_gpt2(dir)), model_bits(small));
  expect_error(
      [&] {
        nn::GPT2 half = small;
        half.wpe.weight = nx::cast(half.wpe.weight, nx::float16);
        nn::save_hf_gpt2(half, dir);
      },
      {"rune::nn::save_hf_gpt2: '",
       "tensor 'wpe.weight' is float16 [8, 8]; the checkpoint is "
       "float32"});
}

// ---- errors ----

TEST(HFGPT2, TensorErrorsNameTheApiAndTheTensor) {
  const nn::GPT2Config c = nn::read_hf_gpt2_config(data("config.json"));
  const nx::TensorMap file = nx::load(data("model.safetensors"));
  const std::string api = "rune::nn::from_hf_gpt2_state_dict: ";
  expect_error(
      [&] {
        nx::TensorMap m = file;
        m.erase("transformer.h.1.ln_2.bias");
        nn::from_hf_gpt2_state_dict(c, m);
      },
      {api + "missing tensor 'transformer.h.1.ln_2.bias' (float32 [32])"});
  expect_error(
      [&] {  // a torch.nn.Linear layout [out, in] where Conv1D's [in, out] belongs
        nx::TensorMap m = file;
        m["transformer.h.0.attn.c_attn.weight"] =
            nx::transpose(file.at("transformer.h.0.attn.c_attn.weight"));
        nn::from_hf_gpt2_state_dict(c, m);
      },
      {api,
       "tensor 'transformer.h.0.attn.c_attn.weight' is float32 [96, 32] in the file, want float32 "
       "[32, 96], Conv1D's [in, out] = [n_embd, 3 n_embd]"});
  expect_error(
      [&] {
        nx::TensorMap m = file;
        m["transformer.wpe.weight"] = nx::zeros(nx::float64, {64, 32});
        nn::from_hf_gpt2_state_dict(c, m);
      },
      {api,
       "tensor 'transformer.wpe.weight' is float64 [64, 32] in the file, want float32 [64, "
       "32], [n_positions, n_embd]"});
  expect_error(
      [&] {  // a config with fewer layers than the file
        nn::GPT2Config one = c;
        one.n_layer = 1;
        nn::from_hf_gpt2_state_dict(one, file);
      },
      {api, "unexpected tensors 'transformer.h.1.attn.c_attn.bias' (float32 [96])",
       "which no parameter of the model takes"});
  expect_error(
      [&] {  // names of two styles: the unprefixed one is unexpected
        nx::TensorMap m = file;
        m.emplace("wte.weight", file.at("transformer.wte.weight"));
        nn::from_hf_gpt2_state_dict(c, m);
      },
      {api, "unexpected tensor 'wte.weight' (float32 [97, 32])"});
  expect_error(
      [&] {
        nx::TensorMap m = file;
        m.emplace("lm_head.weight", file.at("transformer.wte.weight") * 2.0);
        nn::from_hf_gpt2_state_dict(c, m);
      },
      {api, "tensor 'lm_head.weight' differs from 'transformer.wte.weight'", "untied head"});
  // Every problem in one message.
  expect_error(
      [&] {
        nx::TensorMap m = file;
        m.erase("transformer.ln_f.weight");
        m.erase("transformer.ln_f.bias");
        m["transformer.h.0.mlp.c_fc.bias"] = nx::zeros(nx::float32, {127});
        nn::from_hf_gpt2_state_dict(c, m);
      },
      {api + "tensor 'transformer.h.0.mlp.c_fc.bias' is float32 [127] in the file, want "
             "float32 [128]",
       "missing tensors 'transformer.ln_f.weight' (float32 [32]), 'transformer.ln_f.bias' "
       "(float32 [32])"});
  // Through load_hf_gpt2: the API and the file.
  expect_error(
      [&] {
        nx::TensorMap m = file;
        m.erase("transformer.wte.weight");
        nn::load_hf_gpt2(checkpoint("missing", read(data("config.json")), m));
      },
      {"rune::nn::load_hf_gpt2: '",
       "model.safetensors': missing tensor 'transformer.wte.weight' "
       "(float32 [97, 32], [vocab_size, n_embd])"});
}

TEST(HFGPT2, ConfigErrorsNameTheApiAndTheField) {
  const nx::TensorMap file = nx::load(data("model.safetensors"));
  auto load = [&](const std::string& config) {
    nn::load_hf_gpt2(checkpoint("config", config, file));
  };
  const std::string api = "rune::nn::load_hf_gpt2: '";
  expect_error([&] { load("{\"n_embd\": 32,"); },
               {api, "config.json': config.json is not valid JSON: "});
  expect_error([&] { load("[1, 2]"); }, {api, "config.json is not a JSON object (it is [1,2])"});
  expect_error([&] { load(edited_config("\"n_head\": 4", "\"n_head\": 5")); },
               {api, "config.json': 'n_head' 5 does not divide 'n_embd' 32"});
  expect_error([&] { load(edited_config("\"n_layer\": 2", "\"n_layer\": \"two\"")); },
               {api, "'n_layer' must be a positive integer (at most 2^40), got \"two\""});
  expect_error([&] { load(edited_config("\"n_embd\": 32", "\"n_embd\": 32.0")); },
               {api, "'n_embd' must be a positive integer (at most 2^40), got 32.0"});
  expect_error([&] { load(edited_config("\"vocab_size\": 97", "\"vocab_size\": 0")); },
               {api, "'vocab_size' must be a positive integer (at most 2^40), got 0"});
  expect_error(
      [&] { load(edited_config("\"n_embd\": 32", "\"n_embd\": 4611686018427387904")); },
      {api, "'n_embd' must be a positive integer (at most 2^40), got 4611686018427387904"});
  expect_error(
      [&] { load(edited_config("\"layer_norm_epsilon\": 1e-05", "\"layer_norm_epsilon\": -1")); },
      {api, "'layer_norm_epsilon' must be a positive number, got -1"});
  expect_error([&] { load(edited_config("\"attn_pdrop\": 0.1", "\"attn_pdrop\": 1.0")); },
               {api, "'attn_pdrop' must be in [0, 1), got 1.0"});
  expect_error([&] { load(edited_config("\"embd_pdrop\": 0.1", "\"embd_pdrop\": -0.5")); },
               {api, "'embd_pdrop' must be a non-negative number, got -0.5"});
  expect_error([&] { load(edited_config("\"gelu_new\"", "\"relu\"")); },
               {api, "'activation_function' \"relu\" is not supported"});
  expect_error(
      [&] { load(edited_config("\"model_type\": \"gpt2\"", "\"model_type\": \"llama\"")); },
      {api, "'model_type' is \"llama\", not \"gpt2\""});
  expect_error(
      [&] {
        load(edited_config("\"tie_word_embeddings\": true", "\"tie_word_embeddings\": false"));
      },
      {api, "'tie_word_embeddings' is false, which rune::nn::GPT2 does not compute"});
  expect_error(
      [&] { load(edited_config("\"scale_attn_weights\": true", "\"scale_attn_weights\": 1")); },
      {api, "'scale_attn_weights' must be true or false, got 1"});
  // A config whose shapes disagree with the file's tensors: the tensors are named.
  expect_error([&] { load(edited_config("\"vocab_size\": 97", "\"vocab_size\": 98")); },
               {api,
                "tensor 'transformer.wte.weight' is float32 [97, 32] in the file, want "
                "float32 [98, 32]"});
  expect_error([] { nn::parse_hf_gpt2_config("{\"n_head\": -2}", "my.json"); },
               {"rune::nn::parse_hf_gpt2_config: 'my.json': 'n_head' must be a positive integer"});
  expect_error([] { nn::read_hf_gpt2_config("/nonexistent/config.json"); },
               {"rune::nn::read_hf_gpt2_config: '/nonexistent/config.json': cannot open"});
  // The directory's files.
  const std::string empty = temp_dir("empty");
  expect_error([&] { nn::load_hf_gpt2(empty); }, {api, "': no config.json"});
  write(empty + "/config.json", read(data("config.json")));
  expect_error([&] { nn::load_hf_gpt2(empty); }, {api, "': no model.safetensors"});
  write(empty + "/model.safetensors.index.json", "{}");
  expect_error([&] { nn::load_hf_gpt2(empty); },
               {api, "a sharded checkpoint (model.safetensors.index.json) is not read"});
}

TEST(HFGPT2, CallErrorsNameTheApiAndTheValues) {
  const nn::GPT2 m = nn::load_hf_gpt2(data_dir());
  expect_error(
      [&] {
        m(nx::zeros(nx::float32, {1, 4}));
      },
      {"rune::nn::GPT2: ids must be integer token ids [B, T], got float32 [1, 4]"});
  expect_error([&] { m(nx::zeros(nx::int64, {4})); }, {"rune::nn::GPT2: ids must be", "int64 [4]"});
  expect_error(
      [&] {
        m(nx::zeros(nx::int64, {1, 65}));
      },
      {"rune::nn::GPT2: the sequence length T must be in [1, n_positions 64], got int64 "
       "[1, 65]"});
  expect_error(
      [&] {
        nn::greedy_generate(m, nx::zeros(nx::int64, {2, 50}), 15);
      },
      {"rune::nn::greedy_generate: the prompt's 50 tokens and 15 new ones exceed "
       "n_positions 64"});
  expect_error(
      [&] {
        nn::greedy_generate(m, nx::zeros(nx::int64, {1, 3}), -1);
      },
      {"rune::nn::greedy_generate: new_tokens must be >= 0, got -1"});
  expect_error(
      [&] {
        nn::greedy_generate(m, nx::zeros(nx::float32, {1, 3}), 2);
      },
      {"rune::nn::greedy_generate: prompt must be integer token ids [B, T0]"});
  Tensor p = nx::create(nx::int64, {1, 2}, {4, 5});
  EXPECT_EQ(bits(nn::greedy_generate(m, p, 0)), bits(p));
  expect_error([] { nn::GPT2::init(nx::random::key(0), {.n_embd = 30, .n_head = 4}); },
               {"rune::nn::GPT2::init: n_head 4 must divide n_embd 30"});
}

}  // namespace
