// Checkpoints (docs/checkpoints.md): nx::save / nx::load of named tensors and of trees of
// tensors to .safetensors, .npz and .npy files. Round trips are bit-exact; files are written
// atomically (a temporary file, fsync, rename); a corrupt, truncated or hostile file raises a
// clear error beginning with the API name and naming the file, and is never trusted for a size.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/tensor.h"
#include "core/tree.h"

namespace nx {

using TensorMap = std::map<std::string, Tensor>;

// The raw bits of x's elements in C order (x.size() * itemsize bytes, little-endian as the host).
// Waits for x's value (a read); a value on another device is copied to the host first.
std::vector<uint8_t> to_bytes(const Tensor& x);

// Saves named tensors; the format is the extension's: .safetensors or .npz. Values are read
// (waited for, copied to the host) one at a time and written in C order. The file is written to
// a temporary of its own (`path.tmp.<pid>.<n>`), synced and renamed over `path`: on any error the
// temporary is removed and an existing `path` is left untouched.
void save(const std::string& path, const TensorMap& tensors);
// Loads every tensor of a .safetensors or .npz file, on the host or on `device`.
TensorMap load(const std::string& path, std::optional<Device> device = std::nullopt);

// A .npy file holds one tensor.
void save_npy(const std::string& path, const Tensor& t);
Tensor load_npy(const std::string& path, std::optional<Device> device = std::nullopt);

// An IDX file (MNIST's and Fashion-MNIST's format; gzip-compressed too, recognised by its
// magic): the tensor of the file's dtype (uint8, int8, int16, int32, float32, float64) and
// shape, on the host or on `device` (core/io_idx.cpp, docs/conv.md). A bad magic, a truncated
// file or sizes that do not match the file's length raise std::invalid_argument naming the API
// and the path; nothing is allocated beyond what the file holds (inflated).
Tensor load_idx(const std::string& path, std::optional<Device> device = std::nullopt);

namespace detail {
// nx::load under the name of the API the user called (errors begin with `api`: nx::load_into's
// name its own call, not nx::load).
TensorMap load_as(const char* api, const std::string& path, std::optional<Device> device);
// The name a leaf is saved under: its tree path (core/tree.h), "0" for a tree that is one tensor.
inline std::string leaf_name(const std::string& path) { return path.empty() ? "0" : path; }
TensorMap tree_map(const char* api, const std::string& file, const std::vector<std::string>& paths,
                   const std::vector<Tensor>& leaves);
// The loaded tensors in the order of `paths`, checked against `like` (dtype and shape), placed on
// `device`, or on each like-leaf's device when none is given.
std::vector<Tensor> match_leaves(const char* api, const std::string& file, TensorMap loaded,
                                 const std::vector<std::string>& paths,
                                 const std::vector<Tensor>& like, std::optional<Device> device);
}  // namespace detail

// Saves a tree of tensors (a RUNE_TREE struct, vectors, tuples, ...), each leaf named by its
// tree path: {w, b} saves "w" and "b"; a std::vector<Params> saves "0.w", "0.b", "1.w", ...
template <class T>
requires(!std::is_convertible_v<const T&, const TensorMap&>) void save(const std::string& path,
                                                                       const T& tree) {
  Flat f;
  std::vector<std::string> paths;
  f.paths = &paths;
  Tree<T>::flatten(tree, f, "");
  save(path, detail::tree_map("nx::save", path, paths, f.leaves));
}

// Fills `tree` (a tree of the same structure, e.g. freshly initialised parameters) from a file
// saved by nx::save(path, tree): every leaf must be in the file with its dtype and shape, and the
// file must hold nothing else; otherwise std::invalid_argument names the missing, extra or
// mismatched leaf and `tree` is left as it was. Each loaded leaf goes on `device`, or, when none
// is given, on the device of the leaf it replaces.
template <class T>
void load_into(const std::string& path, T& tree, std::optional<Device> device = std::nullopt) {
  Flat f;
  std::vector<std::string> paths;
  f.paths = &paths;
  Tree<T>::flatten(tree, f, "");
  std::vector<Tensor> leaves = detail::match_leaves(
      "nx::load_into", path, detail::load_as("nx::load_into", path, std::nullopt), paths, f.leaves,
      device);
  Unflat u{leaves, f.tokens};
  tree = Tree<T>::build(u);
}

}  // namespace nx
