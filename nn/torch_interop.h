// PyTorch checkpoints for rune::nn models (docs/nn.md, "PyTorch checkpoints"): a torch
// `state_dict` saved as safetensors loaded into the matching rune::nn model, and a rune::nn model
// saved as a state_dict torch's `model.load_state_dict(safetensors.torch.load_file(path))`
// accepts.
//
// Names: a leaf's tree path is its torch name (a Sequential's layers are "0.", "1.", ... as
// torch's; struct fields are attribute names; std::vector elements ModuleList indices), passed
// through options.rename when the names differ. Layouts, per layer:
//   Linear                       weight [in, out] <-> torch's [out, in] (transposed)
//   Conv, ConvTranspose          channels first: as they are (torch's kernel layouts);
//                                channels last: [k..., in / g, out] <-> [out, in / g, k...]
//                                (Conv), [k..., in, out / g] <-> [in, out / g, k...]
//                                (ConvTranspose)
//   MultiHeadAttention           in_proj.weight [E, 3E] <-> torch's in_proj_weight [3E, E]
//                                (transposed), in_proj.bias <-> in_proj_bias; out_proj a Linear
//   BatchNorm                    running_mean / running_var as torch's buffers; torch's
//                                num_batches_tracked is accepted and ignored when loading and
//                                written (options.num_batches_tracked) when saving
//   every other leaf             as it is (Embedding, LayerNorm, RMSNorm, GroupNorm, your own)
// The layers are recognised by their fields and statics as rune::nn's trees flatten them (a
// struct of your own whose fields are exactly Linear's, `Tensor weight; std::optional<Tensor>
// bias;`, counts as a Linear).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "core/io.h"
#include "core/tensor.h"
#include "core/tree.h"

namespace rune::nn {

struct TorchOptions {
  // The torch name of each rune path (after the layer mapping: "0.weight", and
  // "<bn>.num_batches_tracked" for each BatchNorm); empty: the path itself. A name "" leaves the
  // tensor out: not read when loading (the model keeps its value), not written when saving.
  std::function<std::string(const std::string&)> rename;
  // Loading: a tensor of the file that no leaf takes is an error unless allow_unexpected (torch's
  // strict=False for unexpected keys); a leaf the file lacks is an error unless allow_missing
  // (the leaf keeps the model's value).
  bool allow_unexpected = false;
  bool allow_missing = false;
  // Loading: where the tensors go; none: each on the device of the leaf it replaces.
  std::optional<nx::Device> device;
  // Saving: the value of each BatchNorm's num_batches_tracked (int64 []); rune does not count
  // batches (it matters to torch only for momentum=None).
  int64_t num_batches_tracked = 0;
};

// A rename for TorchOptions::rename from (rune prefix, torch prefix) pairs: a path equal to a
// prefix or beginning with it and a '.' takes the first matching pair's torch prefix; other paths
// stay as they are. An empty rune prefix matches every path ({"", "module"}: a torch model
// wrapped by DataParallel); an empty torch prefix removes the rune prefix.
//   rename_prefixes({{"layers.0", "0"}, {"layers.1", "2"}})   // nn::MLP <-> torch's Sequential
std::function<std::string(const std::string&)> rename_prefixes(
    std::vector<std::pair<std::string, std::string>> pairs);

namespace detail {
// How one leaf is stored in torch's state_dict.
enum class TorchLayout {
  same,                // as it is
  linear,              // [in, out] -> [out, in]
  conv_last,           // [k..., in / g, out] -> [out, in / g, k...]
  conv_transpose_last  // [k..., in, out / g] -> [in, out / g, k...]
};
// The leaves of a flattened model: their paths, layouts and the BatchNorms' prefixes.
struct TorchPlan {
  std::vector<std::string> paths;
  std::vector<std::string> names;  // torch's name of each leaf, before options.rename
  std::vector<TorchLayout> layouts;
  std::vector<std::string> batch_norms;  // the path of each BatchNorm ("1", "blocks.0.bn")
};
TorchPlan torch_plan(const std::vector<int64_t>& tokens,
                     const std::vector<std::string>& token_paths,
                     const std::vector<std::string>& paths, const std::vector<nx::Tensor>& leaves);
nx::TensorMap to_torch(const char* api, const TorchPlan& plan,
                       const std::vector<nx::Tensor>& leaves, const TorchOptions& options);
// `like`'s leaves replaced by the loaded ones (file: the path for messages, or "").
std::vector<nx::Tensor> from_torch(const char* api, const std::string& file,
                                   const nx::TensorMap& loaded, const TorchPlan& plan,
                                   const std::vector<nx::Tensor>& like,
                                   const TorchOptions& options);
nx::TensorMap load_file(const char* api, const std::string& path);
void save_file(const char* api, const std::string& path, const nx::TensorMap& tensors);

template <class M>
TorchPlan plan_of(const M& model, nx::Flat& f) {
  std::vector<std::string> paths, token_paths;
  f.paths = &paths;
  f.token_paths = &token_paths;
  nx::Tree<M>::flatten(model, f, "");
  f.paths = nullptr;
  f.token_paths = nullptr;
  return torch_plan(f.tokens, token_paths, paths, f.leaves);
}
template <class M>
M from_torch_tree(const char* api, const std::string& file, const M& like,
                  const nx::TensorMap& loaded, const TorchOptions& options) {
  nx::Flat f;
  TorchPlan plan = plan_of(like, f);
  std::vector<nx::Tensor> leaves = from_torch(api, file, loaded, plan, f.leaves, options);
  nx::Unflat u{leaves, f.tokens};
  return nx::Tree<M>::build(u);
}
}  // namespace detail

// The model's tensors under torch's names and in torch's layouts (what save_torch_state_dict
// writes; values are views or the leaves themselves, on their devices).
template <class M>
nx::TensorMap torch_state_dict(const M& model, const TorchOptions& options = {}) {
  nx::Flat f;
  detail::TorchPlan plan = detail::plan_of(model, f);
  return detail::to_torch("rune::nn::torch_state_dict", plan, f.leaves, options);
}

// `like` (a model of the same structure, e.g. freshly initialised) with its tensors taken from a
// torch state_dict in memory (names and layouts as torch_state_dict gives them). Each tensor must
// have the leaf's dtype and torch's shape of it; errors name the missing and unexpected tensors
// and a mismatch with both shapes.
template <class M>
M from_torch_state_dict(const M& like, const nx::TensorMap& state_dict,
                        const TorchOptions& options = {}) {
  return detail::from_torch_tree("rune::nn::from_torch_state_dict", "", like, state_dict, options);
}

// `like` with its tensors loaded from a torch state_dict saved as .safetensors
// (safetensors.torch.save_file(model.state_dict(), path)); .npz works too. torch's own .pt
// (pickle) files are not read: convert them with safetensors.torch.save_file.
template <class M>
M load_torch_state_dict(const M& like, const std::string& path, const TorchOptions& options = {}) {
  constexpr const char* api = "rune::nn::load_torch_state_dict";
  return detail::from_torch_tree(api, path, like, detail::load_file(api, path), options);
}

// Saves the model as a torch state_dict (.safetensors, or .npz by the extension): torch's names
// (after options.rename) and layouts, each BatchNorm's num_batches_tracked included, so
// model.load_state_dict(safetensors.torch.load_file(path)) accepts it. Written atomically
// (nx::save).
template <class M>
void save_torch_state_dict(const M& model, const std::string& path,
                           const TorchOptions& options = {}) {
  constexpr const char* api = "rune::nn::save_torch_state_dict";
  nx::Flat f;
  detail::TorchPlan plan = detail::plan_of(model, f);
  detail::save_file(api, path, detail::to_torch(api, plan, f.leaves, options));
}

}  // namespace rune::nn
