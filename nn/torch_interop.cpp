// PyTorch state_dicts for rune::nn models (nn/torch_interop.h, docs/nn.md): which leaves are
// which layers' tensors (from the flattened tree's paths and tokens), torch's names and layouts,
// and the errors of a load.
#include "nn/torch_interop.h"

#include <map>
#include <set>
#include <stdexcept>

#include "core/io_internal.h"
#include "core/ops.h"
#include "ir/dtype.h"
#include "ir/shape.h"

namespace rune::nn {

std::function<std::string(const std::string&)> rename_prefixes(
    std::vector<std::pair<std::string, std::string>> pairs) {
  return [pairs = std::move(pairs)](const std::string& path) -> std::string {
    for (const auto& [from, to] : pairs) {
      std::string rest;
      if (from.empty()) {
        rest = path;
      } else if (path == from) {
        rest = "";
      } else if (path.size() > from.size() && path.compare(0, from.size(), from) == 0 &&
                 path[from.size()] == '.') {
        rest = path.substr(from.size() + 1);
      } else {
        continue;
      }
      return rest.empty() ? to : nx::join(to, rest);
    }
    return path;
  };
}

namespace detail {

namespace {

using nx::Tensor;

bool strictly_under(const std::string& path, const std::string& prefix) {
  if (prefix.empty()) return !path.empty();
  return path.size() > prefix.size() && path.compare(0, prefix.size(), prefix) == 0 &&
         path[prefix.size()] == '.';
}

std::string parent(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? "" : path.substr(0, dot);
}

std::string last(const std::string& path) {
  size_t dot = path.rfind('.');
  return dot == std::string::npos ? path : path.substr(dot + 1);
}

// The first component of a path relative to a layer, two for the fields of a convolution's spec
// ("spec.strides").
std::string field_of(const std::string& relative) {
  size_t dot = relative.find('.');
  std::string first = relative.substr(0, dot);
  if (first != "spec" || dot == std::string::npos) return first;
  size_t dot2 = relative.find('.', dot + 1);
  return relative.substr(0, dot2);
}

enum class Kind { other, linear, conv, conv_transpose, batch_norm, multi_head_attention };

struct Layer {
  Kind kind = Kind::other;
  bool channels_last = false;
};

const std::set<std::string> kLinear{"weight", "bias"};
const std::set<std::string> kConv{
    "weight",       "bias",      "spec.strides", "spec.dilation",
    "spec.padding", "spec.same", "spec.groups",  "spec.channels_last"};
const std::set<std::string> kConvTranspose{
    "weight",        "bias",        "spec.strides",      "spec.padding", "spec.output_padding",
    "spec.dilation", "spec.groups", "spec.channels_last"};
const std::set<std::string> kMultiHeadAttention{"in_proj", "out_proj", "num_heads", "dropout",
                                                "batch_first"};
const std::set<std::string> kBatchNorm{"weight",   "bias", "running_mean", "running_var",
                                       "momentum", "eps",  "channels_last"};

// The layer whose tokens surround token t (a leaf of the layer at `prefix`): rune::nn's layers
// flatten their fields contiguously, so the layer is the run of tokens strictly under `prefix`
// around t, recognised by its field names (and an optional bias: kSome / kNone first).
Layer describe(const std::string& prefix, size_t t, const std::vector<int64_t>& tokens,
               const std::vector<std::string>& token_paths, const Tensor& leaf) {
  size_t lo = t, hi = t;
  while (lo > 0 && strictly_under(token_paths[lo - 1], prefix)) --lo;
  while (hi + 1 < tokens.size() && strictly_under(token_paths[hi + 1], prefix)) ++hi;
  const size_t skip = prefix.empty() ? 0 : prefix.size() + 1;
  std::set<std::string> fields;
  std::map<std::string, size_t> first;  // the first token of each field
  for (size_t i = lo; i <= hi; ++i) {
    std::string f = field_of(token_paths[i].substr(skip));
    if (fields.insert(f).second) first[f] = i;
  }
  auto optional_at = [&](const std::string& f) {
    return tokens[first.at(f)] == nx::kSome || tokens[first.at(f)] == nx::kNone;
  };
  auto static_at = [&](const std::string& f) {
    size_t i = first.at(f);
    return tokens[i] == nx::kStatic && i + 1 <= hi ? tokens[i + 1] : 0;
  };
  Layer l;
  if (fields == kLinear && optional_at("bias") && leaf.ndim() == 2) {
    l.kind = Kind::linear;
  } else if (fields == kConv && optional_at("bias")) {
    l.kind = Kind::conv;
    l.channels_last = static_at("spec.channels_last") != 0;
  } else if (fields == kConvTranspose && optional_at("bias")) {
    l.kind = Kind::conv_transpose;
    l.channels_last = static_at("spec.channels_last") != 0;
  } else if (fields == kBatchNorm) {
    l.kind = Kind::batch_norm;
  } else if (fields == kMultiHeadAttention) {
    l.kind = Kind::multi_head_attention;
  }
  return l;
}

nx::Axes to_torch_perm(TorchLayout layout, int r) {
  nx::Axes p;
  switch (layout) {
    case TorchLayout::same:
      for (int i = 0; i < r; ++i) p.push_back(i);
      break;
    case TorchLayout::linear:
      p = {1, 0};
      break;
    case TorchLayout::conv_last:  // [k..., in, out] -> [out, in, k...]
      p = {r - 1, r - 2};
      for (int i = 0; i < r - 2; ++i) p.push_back(i);
      break;
    case TorchLayout::conv_transpose_last:  // [k..., in, out] -> [in, out, k...]
      p = {r - 2, r - 1};
      for (int i = 0; i < r - 2; ++i) p.push_back(i);
      break;
  }
  return p;
}

nx::Axes inverse(const nx::Axes& p) {
  nx::Axes q(p.size());
  for (size_t i = 0; i < p.size(); ++i) q[static_cast<size_t>(p[i])] = static_cast<int>(i);
  return q;
}

bool identity(const nx::Axes& p) {
  for (size_t i = 0; i < p.size(); ++i)
    if (p[i] != static_cast<int>(i)) return false;
  return true;
}

nx::Shape permuted(const nx::Shape& s, const nx::Axes& p) {
  nx::Shape r;
  for (int a : p) r.push_back(s[static_cast<size_t>(a)]);
  return r;
}

std::string text(nx::DType t, const nx::Shape& s) {
  return std::string(ir::name(t)) + " " + ir::to_string(s);
}

// "(torch's [out, in] of the Linear weight '0.weight' float32 [8, 16])" for a changed layout.
std::string layout_note(TorchLayout layout, const std::string& path, const Tensor& leaf) {
  const char* what = nullptr;
  switch (layout) {
    case TorchLayout::same:
      return "";
    case TorchLayout::linear:
      what = "torch's [out, in] of the rune::nn::Linear weight";
      break;
    case TorchLayout::conv_last:
      what = "torch's [out, in / groups, k...] of the channels-last rune::nn::Conv weight";
      break;
    case TorchLayout::conv_transpose_last:
      what = "torch's [in, out / groups, k...] of the channels-last rune::nn::ConvTranspose weight";
      break;
  }
  return std::string(" (") + what + " '" + path + "' " + leaf.describe() + ")";
}

std::string name_of(const TorchOptions& options, const std::string& path) {
  std::string p = nx::detail::leaf_name(path);
  return options.rename ? options.rename(p) : p;
}

[[noreturn]] void fail(const char* api, const std::string& file, const std::string& msg) {
  throw std::invalid_argument(std::string(api) + ": " + (file.empty() ? "" : "'" + file + "': ") +
                              msg);
}

// "a, b, c" of at most 8 items, then "and N more".
std::string listing(const std::vector<std::string>& items) {
  std::string s;
  for (size_t i = 0; i < items.size() && i < 8; ++i) s += (i ? ", " : "") + items[i];
  if (items.size() > 8) s += ", and " + std::to_string(items.size() - 8) + " more";
  return s;
}

}  // namespace

TorchPlan torch_plan(const std::vector<int64_t>& tokens,
                     const std::vector<std::string>& token_paths,
                     const std::vector<std::string>& paths, const std::vector<Tensor>& leaves) {
  if (token_paths.size() != tokens.size() || paths.size() != leaves.size())
    throw std::logic_error("rune::nn: a tree flattened without a path for each token");
  std::vector<size_t> leaf_token;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (tokens[i] == nx::kStatic || tokens[i] == nx::kList) {
      ++i;  // the static's value or the list's length
    } else if (tokens[i] == nx::kLeaf) {
      leaf_token.push_back(i);
    }
  }
  if (leaf_token.size() != leaves.size())
    throw std::logic_error("rune::nn: a tree's tokens do not match its leaves");
  TorchPlan plan;
  plan.paths = paths;
  plan.names = paths;
  std::map<std::string, Layer> layers;
  auto layer_at = [&](const std::string& prefix, size_t i) {
    auto it = layers.find(prefix);
    if (it == layers.end()) {
      it = layers.emplace(prefix, describe(prefix, leaf_token[i], tokens, token_paths, leaves[i]))
               .first;
      if (it->second.kind == Kind::batch_norm) plan.batch_norms.push_back(prefix);
    }
    return it;
  };
  for (size_t i = 0; i < leaves.size(); ++i) {
    const std::string prefix = parent(paths[i]), field = last(paths[i]);
    auto it = layer_at(prefix, i);
    // MultiHeadAttention's in_proj Linear is torch's in_proj_weight / in_proj_bias.
    if (last(prefix) == "in_proj" &&
        layer_at(parent(prefix), i)->second.kind == Kind::multi_head_attention)
      plan.names[i] = nx::join(parent(prefix), "in_proj_" + field);
    TorchLayout layout = TorchLayout::same;
    if (field == "weight") {
      const Layer& l = it->second;
      if (l.kind == Kind::linear) {
        layout = TorchLayout::linear;
      } else if (l.channels_last && leaves[i].ndim() >= 3) {
        if (l.kind == Kind::conv) layout = TorchLayout::conv_last;
        if (l.kind == Kind::conv_transpose) layout = TorchLayout::conv_transpose_last;
      }
    }
    plan.layouts.push_back(layout);
  }
  return plan;
}

nx::TensorMap to_torch(const char* api, const TorchPlan& plan, const std::vector<Tensor>& leaves,
                       const TorchOptions& options) {
  nx::TensorMap out;
  std::map<std::string, std::string> source;  // torch name -> rune path, for duplicates
  auto add = [&](const std::string& path, const std::string& name, const Tensor& t) {
    if (name.empty()) return;
    auto [it, fresh] = source.emplace(name, path);
    if (!fresh)
      fail(api, "",
           "the rune paths '" + it->second + "' and '" + path + "' both map to torch name '" +
               name + "' (check options.rename)");
    out.emplace(name, t);
  };
  for (size_t i = 0; i < leaves.size(); ++i) {
    const Tensor& t = leaves[i];
    nx::Axes p = to_torch_perm(plan.layouts[i], static_cast<int>(t.ndim()));
    add(nx::detail::leaf_name(plan.paths[i]), name_of(options, plan.names[i]),
        identity(p) ? t : nx::permute(t, p));
  }
  for (const std::string& bn : plan.batch_norms) {
    const std::string path = nx::join(bn, "num_batches_tracked");
    add(path, name_of(options, path),
        nx::scalar(nx::int64, static_cast<double>(options.num_batches_tracked)));
  }
  return out;
}

std::vector<Tensor> from_torch(const char* api, const std::string& file,
                               const nx::TensorMap& loaded, const TorchPlan& plan,
                               const std::vector<Tensor>& like, const TorchOptions& options) {
  std::set<std::string> used;
  std::map<std::string, std::string> source;
  std::vector<std::string> missing, mismatched;
  std::vector<Tensor> out;
  out.reserve(like.size());
  auto claim = [&](const std::string& path, const std::string& name) {
    auto [it, fresh] = source.emplace(name, path);
    if (!fresh)
      fail(api, file,
           "the rune paths '" + it->second + "' and '" + path + "' both map to torch name '" +
               name + "' (check options.rename)");
    used.insert(name);
  };
  for (size_t i = 0; i < like.size(); ++i) {
    const std::string& path = plan.paths[i];
    const std::string name = name_of(options, plan.names[i]);
    const Tensor& l = like[i];
    if (name.empty()) {
      out.push_back(l);
      continue;
    }
    claim(path, name);
    nx::Axes p = to_torch_perm(plan.layouts[i], static_cast<int>(l.ndim()));
    const std::string want = text(l.dtype(), permuted(l.shape(), p));
    const std::string leaf =
        name == nx::detail::leaf_name(path) ? "" : " for the leaf '" + path + "'";
    auto it = loaded.find(name);
    if (it == loaded.end()) {
      if (!options.allow_missing)
        missing.push_back("'" + name + "'" + leaf + " (" + want + ")" +
                          layout_note(plan.layouts[i], path, l));
      out.push_back(l);
      continue;
    }
    const Tensor& t = it->second;
    if (t.dtype() != l.dtype() || t.shape() != permuted(l.shape(), p)) {
      mismatched.push_back("tensor '" + name + "'" + leaf + " is " + t.describe() +
                           " in the file, want " + want + layout_note(plan.layouts[i], path, l));
      out.push_back(l);
      continue;
    }
    Tensor v = identity(p) ? t : nx::contiguous(nx::permute(t, inverse(p)));
    nx::Device d = options.device ? *options.device : l.device();
    out.push_back(v.device() == d ? v : nx::place(v, d));
  }
  // torch's BatchNorm counter: taken (not an unexpected tensor) and ignored.
  for (const std::string& bn : plan.batch_norms) {
    const std::string path = nx::join(bn, "num_batches_tracked");
    const std::string name = name_of(options, path);
    if (!name.empty() && loaded.count(name)) claim(path, name);
  }
  std::vector<std::string> unexpected;
  if (!options.allow_unexpected)
    for (const auto& [name, t] : loaded)
      if (!used.count(name)) unexpected.push_back("'" + name + "' (" + t.describe() + ")");
  std::vector<std::string> problems = mismatched;
  if (!missing.empty())
    problems.push_back("missing tensor" + std::string(missing.size() > 1 ? "s " : " ") +
                       listing(missing) + " (options.allow_missing keeps the model's values)");
  if (!unexpected.empty())
    problems.push_back("unexpected tensor" + std::string(unexpected.size() > 1 ? "s " : " ") +
                       listing(unexpected) +
                       ", which no leaf takes (options.allow_unexpected ignores them)");
  if (!problems.empty()) {
    std::string msg;
    for (const auto& s : problems) msg += (msg.empty() ? "" : "; ") + s;
    fail(api, file, msg);
  }
  return out;
}

nx::TensorMap load_file(const char* api, const std::string& path) {
  return nx::detail::load_as(api, path, std::nullopt);
}

void save_file(const char* api, const std::string& path, const nx::TensorMap& tensors) {
  auto ends = [&](const std::string& e) {
    return path.size() >= e.size() && path.compare(path.size() - e.size(), e.size(), e) == 0;
  };
  if (ends(".safetensors")) return nx::io::save_safetensors(api, path, tensors);
  if (ends(".npz")) return nx::io::save_npz(api, path, tensors);
  nx::io::bad(api, path, "unknown extension (expected .safetensors or .npz)");
}

}  // namespace detail

}  // namespace rune::nn
