// Hugging Face GPT-2 checkpoints (nn/hf_gpt2.h, docs/nn.md "Hugging Face GPT-2"): config.json
// read with nlohmann::json (the library that reads safetensors headers), transformers' tensor
// names mapped onto rune::nn::GPT2's tree and checked (name, dtype, shape) before anything is
// built, every problem named in one error; and the same directory written from a GPT2.
#include "nn/hf_gpt2.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <stdexcept>
#include <utility>
#include <vector>

#include "ir/shape.h"
#include "nn/errors.h"
#include "nn/torch_interop.h"

namespace rune::nn {

namespace {

using nlohmann::json;
using nx::Shape;

[[noreturn]] void fail(const std::string& api, const std::string& file, const std::string& msg) {
  detail::fail(api, (file.empty() ? "" : "'" + file + "': ") + msg);
}

std::string json_text(const json& v) {
  std::string s = v.dump();
  return s.size() > 60 ? s.substr(0, 57) + "..." : s;
}

GPT2Config parse_config(const std::string& api, const std::string& text, const std::string& file) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    fail(api, file, std::string("config.json is not valid JSON: ") + e.what());
  }
  if (!j.is_object())
    fail(api, file, "config.json is not a JSON object (it is " + json_text(j) + ")");
  GPT2Config c;
  // Sizes are positive integers up to 2^40, so that 4 n_embd and the shapes computed from them
  // cannot overflow (a larger model's tensors would not fit in memory anyway).
  auto positive = [&](const char* key, int64_t& out) {
    auto it = j.find(key);
    if (it == j.end()) return;  // transformers' default
    // nlohmann::json reads a non-negative integer as unsigned, a negative one as signed.
    if (!it->is_number_unsigned() || it->get<uint64_t>() < 1 ||
        it->get<uint64_t>() > (uint64_t{1} << 40))
      fail(api, file,
           std::string("'") + key + "' must be a positive integer (at most 2^40), got " +
               json_text(*it));
    out = it->get<int64_t>();
  };
  auto number = [&](const char* key, double& out, bool zero_ok) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_number() || !(it->get<double>() > 0 || (zero_ok && it->get<double>() == 0)))
      fail(api, file,
           std::string("'") + key + "' must be a " + (zero_ok ? "non-negative" : "positive") +
               " number, got " + json_text(*it));
    out = it->get<double>();
  };
  // A bool field whose other value this model does not compute.
  auto flag = [&](const char* key, bool supported, const char* why) {
    auto it = j.find(key);
    if (it == j.end()) return;
    if (!it->is_boolean())
      fail(api, file, std::string("'") + key + "' must be true or false, got " + json_text(*it));
    if (it->get<bool>() != supported)
      fail(api, file,
           std::string("'") + key + "' is " + (supported ? "false" : "true") +
               ", which rune::nn::GPT2 does not compute (" + why + ")");
  };
  if (auto it = j.find("model_type"); it != j.end() && *it != "gpt2")
    fail(api, file, "'model_type' is " + json_text(*it) + ", not \"gpt2\"");
  positive("vocab_size", c.vocab_size);
  positive("n_positions", c.n_positions);
  positive("n_embd", c.n_embd);
  positive("n_layer", c.n_layer);
  positive("n_head", c.n_head);
  if (auto it = j.find("n_inner"); it != j.end() && !it->is_null()) positive("n_inner", c.n_inner);
  number("layer_norm_epsilon", c.layer_norm_epsilon, false);
  number("initializer_range", c.initializer_range, true);
  for (auto [key, out] : {std::pair<const char*, double*>{"embd_pdrop", &c.embd_pdrop},
                          {"attn_pdrop", &c.attn_pdrop},
                          {"resid_pdrop", &c.resid_pdrop}}) {
    number(key, *out, true);
    if (!(*out < 1))
      fail(api, file, std::string("'") + key + "' must be in [0, 1), got " + json_text(j[key]));
  }
  if (c.n_embd % c.n_head)
    fail(api, file,
         "'n_head' " + std::to_string(c.n_head) + " does not divide 'n_embd' " +
             std::to_string(c.n_embd));
  if (auto it = j.find("activation_function");
      it != j.end() && *it != "gelu_new" && *it != "gelu_pytorch_tanh")
    fail(api, file,
         "'activation_function' " + json_text(*it) +
             " is not supported (\"gelu_new\" or \"gelu_pytorch_tanh\": GELU's tanh "
             "approximation)");
  flag("scale_attn_weights", true, "its attention scales the scores by head_dim^-1/2");
  flag("scale_attn_by_inverse_layer_idx", false, "no per-layer scaling");
  flag("add_cross_attention", false, "no cross-attention");
  flag("tie_word_embeddings", true, "its output projection is wte.weight");
  return c;
}

std::string read_text(const std::string& api, const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(api, path, "cannot open the file");
  std::ostringstream s;
  s << in.rdbuf();
  if (in.bad()) fail(api, path, "cannot read the file");
  return s.str();
}

// The tensors of a state_dict taken by name, each checked against its wanted shape (float32);
// the problems are collected and raised together by finish().
class Taker {
 public:
  Taker(std::string api, std::string file, const nx::TensorMap& tensors, nx::Device device)
      : api_(std::move(api)), file_(std::move(file)), tensors_(tensors), device_(device) {
    for (const auto& [name, t] : tensors)
      if (name.starts_with("transformer.")) prefix_ = "transformer.";
  }

  // The tensor named prefix + `name`, [shape] float32 (`layout` explains the shape in errors),
  // on the device; an empty tensor when it is missing or mismatched (finish() then raises).
  nx::Tensor take(const std::string& name, const Shape& shape, const std::string& layout = "") {
    const std::string key = prefix_ + name;
    const std::string want = "float32 " + ir::to_string(shape) + layout;
    auto it = tensors_.find(key);
    if (it == tensors_.end()) {
      missing_.push_back("'" + key + "' (" + want + ")");
      return {};
    }
    used_.insert(key);
    const nx::Tensor& t = it->second;
    if (t.dtype() != nx::float32 || t.shape() != shape) {
      mismatched_.push_back("tensor '" + key + "' is " + t.describe() + " in the file, want " +
                            want);
      return {};
    }
    return t.device() == device_ ? t : nx::place(t, device_);
  }

  // Names taken without a tensor of the model: the attention's mask buffers.
  void ignore(const std::string& name) {
    if (tensors_.count(prefix_ + name)) used_.insert(prefix_ + name);
  }

  // lm_head.weight (never prefixed): absent, or the very values of wte.weight (tied).
  void tied_head(const std::string& wte_name) {
    auto head = tensors_.find("lm_head.weight");
    if (head == tensors_.end()) return;
    used_.insert(head->first);
    auto wte = tensors_.find(prefix_ + wte_name);
    if (wte == tensors_.end()) return;  // reported as missing
    const nx::Tensor &h = head->second, &w = wte->second;
    if (h.dtype() != w.dtype() || h.shape() != w.shape())
      mismatched_.push_back("tensor 'lm_head.weight' is " + h.describe() + ", want " +
                            w.describe() + " (the head is tied to '" + wte->first + "')");
    else if (nx::to_bytes(h) != nx::to_bytes(w))
      mismatched_.push_back("tensor 'lm_head.weight' differs from '" + wte->first +
                            "' (rune::nn::GPT2's head is tied to the input embedding; an untied "
                            "head is not supported)");
  }

  void finish() const {
    std::vector<std::string> problems = mismatched_;
    auto listing = [](const std::vector<std::string>& items) {
      std::string s;
      for (size_t i = 0; i < items.size() && i < 8; ++i) s += (i ? ", " : "") + items[i];
      if (items.size() > 8) s += ", and " + std::to_string(items.size() - 8) + " more";
      return s;
    };
    if (!missing_.empty())
      problems.push_back("missing tensor" + std::string(missing_.size() > 1 ? "s " : " ") +
                         listing(missing_));
    std::vector<std::string> unexpected;
    for (const auto& [name, t] : tensors_)
      if (!used_.count(name)) unexpected.push_back("'" + name + "' (" + t.describe() + ")");
    if (!unexpected.empty())
      problems.push_back("unexpected tensor" + std::string(unexpected.size() > 1 ? "s " : " ") +
                         listing(unexpected) + ", which no parameter of the model takes");
    if (problems.empty()) return;
    std::string msg;
    for (const auto& s : problems) msg += (msg.empty() ? "" : "; ") + s;
    fail(api_, file_, msg);
  }

 private:
  std::string api_, file_;
  const nx::TensorMap& tensors_;
  nx::Device device_;
  std::string prefix_;
  std::set<std::string> used_;
  std::vector<std::string> missing_, mismatched_;
};

GPT2 from_state_dict(const std::string& api, const std::string& file, const GPT2Config& c,
                     const nx::TensorMap& tensors, const HFGPT2Options& options) {
  const int64_t C = c.n_embd, I = c.inner();
  Taker t(api, file, tensors, options.device ? *options.device : nx::default_device());
  auto linear = [&](const std::string& name, int64_t in, int64_t out, const char* layout) {
    Linear l;
    l.weight = t.take(name + ".weight", {in, out}, std::string(", Conv1D's [in, out] = ") + layout);
    l.bias = t.take(name + ".bias", {out});
    return l;
  };
  auto layer_norm = [&](const std::string& name) {
    LayerNorm l;
    l.weight = t.take(name + ".weight", {C});
    l.bias = t.take(name + ".bias", {C});
    l.eps = c.layer_norm_epsilon;
    return l;
  };
  GPT2 m;
  m.wte.weight = t.take("wte.weight", {c.vocab_size, C}, ", [vocab_size, n_embd]");
  m.wpe.weight = t.take("wpe.weight", {c.n_positions, C}, ", [n_positions, n_embd]");
  for (int64_t i = 0; i < c.n_layer; ++i) {
    const std::string p = "h." + std::to_string(i) + ".";
    GPT2Block b;
    b.ln_1 = layer_norm(p + "ln_1");
    b.attn.c_attn = linear(p + "attn.c_attn", C, 3 * C, "[n_embd, 3 n_embd]");
    b.attn.c_proj = linear(p + "attn.c_proj", C, C, "[n_embd, n_embd]");
    b.ln_2 = layer_norm(p + "ln_2");
    b.mlp.c_fc = linear(p + "mlp.c_fc", C, I, "[n_embd, n_inner]");
    b.mlp.c_proj = linear(p + "mlp.c_proj", I, C, "[n_inner, n_embd]");
    t.ignore(p + "attn.bias");
    t.ignore(p + "attn.masked_bias");
    m.h.push_back(std::move(b));
  }
  m.ln_f = layer_norm("ln_f");
  m.n_head = c.n_head;
  m.embd_pdrop = c.embd_pdrop, m.attn_pdrop = c.attn_pdrop, m.resid_pdrop = c.resid_pdrop;
  t.tied_head("wte.weight");
  t.finish();
  return m;
}

}  // namespace

GPT2Config parse_hf_gpt2_config(const std::string& json, const std::string& file) {
  return parse_config("rune::nn::parse_hf_gpt2_config", json, file);
}

GPT2Config read_hf_gpt2_config(const std::string& path) {
  constexpr const char* api = "rune::nn::read_hf_gpt2_config";
  return parse_config(api, read_text(api, path), path);
}

GPT2 from_hf_gpt2_state_dict(const GPT2Config& config, const nx::TensorMap& tensors,
                             const HFGPT2Options& options) {
  return from_state_dict("rune::nn::from_hf_gpt2_state_dict", "", config, tensors, options);
}

GPT2 load_hf_gpt2(const std::string& dir, const HFGPT2Options& options) {
  constexpr const char* api = "rune::nn::load_hf_gpt2";
  namespace fs = std::filesystem;
  const fs::path d(dir);
  const std::string config = (d / "config.json").string(),
                    weights = (d / "model.safetensors").string();
  if (!fs::exists(config)) fail(api, dir, "no config.json (save_pretrained writes one)");
  if (!fs::exists(weights)) {
    if (fs::exists(d / "model.safetensors.index.json"))
      fail(api, dir, "a sharded checkpoint (model.safetensors.index.json) is not read");
    if (fs::exists(d / "pytorch_model.bin"))
      fail(api, dir,
           "no model.safetensors; pytorch_model.bin (a pickle) is not read: save with "
           "save_pretrained(dir, safe_serialization=True)");
    fail(api, dir, "no model.safetensors");
  }
  const GPT2Config c = parse_config(api, read_text(api, config), config);
  return from_state_dict(api, weights, c, detail::load_file(api, weights), options);
}

void save_hf_gpt2(const GPT2& model, const std::string& dir) {
  constexpr const char* api = "rune::nn::save_hf_gpt2";
  namespace fs = std::filesystem;
  const GPT2Config c = model.config();
  nx::TensorMap tensors;
  for (const auto& [path, t] : named_params(model)) {
    if (t.dtype() != nx::float32)
      fail(api, dir, "tensor '" + path + "' is " + t.describe() + "; the checkpoint is float32");
    tensors.emplace("transformer." + path, t);
  }
  json j = {{"model_type", "gpt2"},
            {"architectures", {"GPT2LMHeadModel"}},
            {"vocab_size", c.vocab_size},
            {"n_positions", c.n_positions},
            {"n_embd", c.n_embd},
            {"n_layer", c.n_layer},
            {"n_head", c.n_head},
            {"n_inner", c.n_inner ? json(c.n_inner) : json(nullptr)},
            {"layer_norm_epsilon", c.layer_norm_epsilon},
            {"embd_pdrop", c.embd_pdrop},
            {"attn_pdrop", c.attn_pdrop},
            {"resid_pdrop", c.resid_pdrop},
            {"activation_function", "gelu_new"},
            {"tie_word_embeddings", true},
            {"dtype", "float32"}};
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) fail(api, dir, "cannot create the directory: " + ec.message());
  detail::save_file(api, (fs::path(dir) / "model.safetensors").string(), tensors);
  const fs::path config = fs::path(dir) / "config.json", tmp = config.string() + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << j.dump(2) << "\n";
    if (!out.flush()) fail(api, tmp.string(), "cannot write the file");
  }
  fs::rename(tmp, config, ec);
  if (ec) {
    const std::string why = ec.message();
    fs::remove(tmp, ec);
    fail(api, config.string(), "cannot rename the temporary file over it: " + why);
  }
}

}  // namespace rune::nn
