// nx::save / nx::load: the format from the extension, the tensors a file's bytes become, and
// the trees of tensors named by their paths (docs/checkpoints.md).
#include <algorithm>
#include <cstring>
#include <set>
#include <stdexcept>

#include "core/io_internal.h"
#include "core/ops.h"

namespace nx {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

enum class Format { Safetensors, Npz, Npy, Unknown };

Format format_of(const std::string& path) {
  if (ends_with(path, ".safetensors")) return Format::Safetensors;
  if (ends_with(path, ".npz")) return Format::Npz;
  if (ends_with(path, ".npy")) return Format::Npy;
  return Format::Unknown;
}

}  // namespace

std::vector<uint8_t> to_bytes(const Tensor& x) { return io::read_bytes(x, "nx::to_bytes"); }

void save(const std::string& path, const TensorMap& tensors) {
  const char* api = "nx::save";
  for (const auto& [name, t] : tensors)
    if (!t.defined()) io::bad(api, path, "tensor '" + name + "' is undefined");
  switch (format_of(path)) {
    case Format::Safetensors:
      return io::save_safetensors(api, path, tensors);
    case Format::Npz:
      return io::save_npz(api, path, tensors);
    case Format::Npy:
      io::bad(api, path, "a .npy file holds one tensor: use nx::save_npy(path, tensor)");
    case Format::Unknown:
      break;
  }
  io::bad(api, path, "unknown extension (expected .safetensors or .npz)");
}

TensorMap load(const std::string& path, std::optional<Device> device) {
  return detail::load_as("nx::load", path, device);
}

TensorMap detail::load_as(const char* api, const std::string& path, std::optional<Device> device) {
  switch (format_of(path)) {
    case Format::Safetensors:
      return io::load_safetensors(api, path, device);
    case Format::Npz:
      return io::load_npz(api, path, device);
    case Format::Npy:
      io::bad(api, path, "a .npy file holds one tensor: use nx::load_npy(path)");
    case Format::Unknown:
      break;
  }
  io::bad(api, path, "unknown extension (expected .safetensors or .npz)");
}

void save_npy(const std::string& path, const Tensor& t) {
  const char* api = "nx::save_npy";
  if (!t.defined()) io::bad(api, path, "the tensor is undefined");
  std::string header = io::npy_header(api, path, "the tensor", t.dtype(), t.shape());
  io::AtomicFile f(api, path);
  f.write(header.data(), header.size());
  std::vector<uint8_t> bytes = io::read_bytes(t, api);
  f.write(bytes.data(), bytes.size());
  f.commit();
}

Tensor load_npy(const std::string& path, std::optional<Device> device) {
  const char* api = "nx::load_npy";
  io::FileBytes m(api, path);
  return io::npy_parse(api, path, "the tensor", m.data(), m.size(), device);
}

namespace detail {

TensorMap tree_map(const char* api, const std::string& file, const std::vector<std::string>& paths,
                   const std::vector<Tensor>& leaves) {
  TensorMap out;
  for (size_t i = 0; i < leaves.size(); ++i) {
    std::string name = leaf_name(paths[i]);
    if (!out.emplace(name, leaves[i]).second)
      io::bad(api, file, "two leaves of the tree have the path '" + name + "'");
  }
  return out;
}

std::vector<Tensor> match_leaves(const char* api, const std::string& file, TensorMap loaded,
                                 const std::vector<std::string>& paths,
                                 const std::vector<Tensor>& like, std::optional<Device> device) {
  std::set<std::string> wanted;
  for (const auto& p : paths) wanted.insert(leaf_name(p));
  for (const auto& [name, t] : loaded)
    if (!wanted.count(name))
      io::bad(api, file,
              "the file holds tensor '" + name + "' (" + t.describe() +
                  "), which is no leaf of the tree");
  std::vector<Tensor> out;
  out.reserve(like.size());
  for (size_t i = 0; i < like.size(); ++i) {
    std::string name = leaf_name(paths[i]);
    auto it = loaded.find(name);
    if (it == loaded.end())
      io::bad(api, file,
              "leaf '" + name + "' (" + like[i].describe() + ") is missing from the file");
    const Tensor& t = it->second;
    if (t.dtype() != like[i].dtype() || t.shape() != like[i].shape())
      io::bad(api, file,
              "leaf '" + name + "' is " + like[i].describe() + " in the tree but " + t.describe() +
                  " in the file");
    Device d = device ? *device : like[i].device();
    out.push_back(d == t.device() ? t : place(t, d));
  }
  return out;
}

}  // namespace detail

namespace io {

uint64_t checked_bytes(const char* api, const std::string& file, const std::string& what, DType t,
                       const Shape& shape) {
  int64_t n;
  try {
    n = ir::checked_numel(api, shape);
  } catch (const std::invalid_argument&) {
    bad(api, file,
        what + " has shape " + ir::to_string(shape) + ", more than " +
            std::to_string(ir::kMaxElements) + " elements");
  }
  return static_cast<uint64_t>(n) * static_cast<uint64_t>(ir::itemsize(t));
}

Tensor make_tensor(const char* api, const std::string& file, const std::string& what, DType t,
                   const Shape& shape, const uint8_t* p, bool byteswap, bool fortran,
                   std::optional<Device> device) {
  int64_t n = ir::numel(shape);
  size_t isz = static_cast<size_t>(ir::itemsize(t));
  size_t nbytes = static_cast<size_t>(n) * isz;
  if (t == DType::Bool)
    for (int64_t i = 0; i < n; ++i)
      if (p[i] > 1)
        bad(api, file,
            what + " is bool but element " + std::to_string(i) + " is the byte " +
                std::to_string(p[i]) + " (not 0 or 1)");
  Shape stored = shape;
  if (fortran) std::reverse(stored.begin(), stored.end());
  Tensor x;
  if (byteswap && isz > 1) {
    std::vector<uint8_t> swapped(p, p + nbytes);
    for (size_t i = 0; i < nbytes; i += isz)
      std::reverse(swapped.begin() + i, swapped.begin() + i + isz);
    x = host_from_bytes(t, stored, swapped.data());
  } else {
    x = host_from_bytes(t, stored, p);
  }
  if (fortran && shape.size() > 1) {
    Axes perm;
    for (int d = static_cast<int>(shape.size()) - 1; d >= 0; --d) perm.push_back(d);
    x = contiguous(permute(x, perm));
  }
  if (device && *device != Device::cpu()) x = place(x, *device);
  return x;
}

}  // namespace io

}  // namespace nx
