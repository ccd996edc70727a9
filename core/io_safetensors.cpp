// .safetensors (Hugging Face): an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data, each tensor's bytes at [begin, end) from the data's start, in C order.
// The header is parsed with nlohmann::json; every size and offset is checked against the file.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>

#include "core/io_internal.h"

namespace nx::io {

namespace {

struct Name {
  DType dtype;
  const char* name;
};
constexpr Name kNames[] = {
    {DType::Bool, "BOOL"},   {DType::UInt8, "U8"},      {DType::UInt16, "U16"},
    {DType::UInt32, "U32"},  {DType::UInt64, "U64"},    {DType::Int8, "I8"},
    {DType::Int16, "I16"},   {DType::Int32, "I32"},     {DType::Int64, "I64"},
    {DType::Float16, "F16"}, {DType::BFloat16, "BF16"}, {DType::Float32, "F32"},
    {DType::Float64, "F64"}};

// "BOOL, U8, ...": the codes of kNames, for the error naming a dtype rune lacks.
std::string known_names() {
  std::string r;
  for (const auto& n : kNames) r += std::string(r.empty() ? "" : ", ") + n.name;
  return r;
}

const char* name_of(DType t) {
  for (const auto& n : kNames)
    if (n.dtype == t) return n.name;
  return "?";
}

// The largest header we accept (the Rust reference implementation's limit is 100 MB).
constexpr uint64_t kMaxHeader = 100'000'000;

std::string quoted(const std::string& name) { return "tensor '" + name + "'"; }

}  // namespace

void save_safetensors(const char* api, const std::string& path, const TensorMap& tensors) {
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name == "__metadata__")
      bad(api, path, "the name '__metadata__' is reserved by safetensors");
    uint64_t n = static_cast<uint64_t>(t.size()) * static_cast<uint64_t>(ir::itemsize(t.dtype()));
    header[name] = {{"dtype", name_of(t.dtype())},
                    {"shape", t.shape()},
                    {"data_offsets", {offset, offset + n}}};
    offset += n;
  }
  std::string text;
  try {
    text = header.dump();
  } catch (const nlohmann::json::exception&) {
    bad(api, path, "a tensor name is not valid UTF-8, which safetensors' JSON header requires");
  }
  // Spaces pad the header so the data starts 8-aligned, as the reference writer does.
  while (text.size() % 8) text += ' ';
  uint64_t len = text.size();
  uint8_t le[8];
  for (int i = 0; i < 8; ++i) le[i] = static_cast<uint8_t>(len >> (8 * i));
  AtomicFile f(api, path);
  f.write(le, 8);
  f.write(text.data(), text.size());
  for (const auto& [name, t] : tensors) {
    std::vector<uint8_t> bytes = read_bytes(t, api);
    f.write(bytes.data(), bytes.size());
  }
  f.commit();
}

TensorMap load_safetensors(const char* api, const std::string& path, std::optional<Device> device) {
  MappedFile m(api, path);
  const uint8_t* p = m.data();
  const uint64_t size = m.size();
  if (size < 8)
    bad(api, path,
        "has " + std::to_string(size) + " bytes, fewer than the 8 of a safetensors header length");
  uint64_t hlen = 0;
  for (int i = 0; i < 8; ++i) hlen |= static_cast<uint64_t>(p[i]) << (8 * i);
  if (hlen > size - 8)
    bad(api, path, "header claims " + size_text(hlen) + " bytes, file has " + std::to_string(size));
  if (hlen > kMaxHeader)
    bad(api, path,
        "header claims " + std::to_string(hlen) + " bytes, more than the limit of " +
            std::to_string(kMaxHeader));
  nlohmann::json header;
  try {
    header = nlohmann::json::parse(p + 8, p + 8 + hlen);
  } catch (const nlohmann::json::exception& e) {
    bad(api, path, std::string("header is not valid JSON: ") + e.what());
  }
  if (!header.is_object()) bad(api, path, "header is JSON but not an object");
  const uint64_t data_size = size - 8 - hlen;
  const uint8_t* data = p + 8 + hlen;

  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object()) bad(api, path, "__metadata__ is not an object");
      for (auto mt = v.begin(); mt != v.end(); ++mt)
        if (!mt.value().is_string())
          bad(api, path, "__metadata__ entry '" + mt.key() + "' is not a string");
      continue;
    }
    std::string what = quoted(name);
    if (!v.is_object()) bad(api, path, what + " is not a JSON object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || sh == v.end() || off == v.end())
      bad(api, path, what + " lacks one of dtype, shape and data_offsets");
    if (!dt->is_string()) bad(api, path, what + " has a dtype that is not a string");
    const std::string dname = dt->get<std::string>();
    const Name* found = nullptr;
    for (const auto& n : kNames)
      if (dname == n.name) found = &n;
    if (!found)
      bad(api, path,
          what + " has dtype " + dname + ", which rune lacks (it has " + known_names() + ")");
    if (!sh->is_array()) bad(api, path, what + " has a shape that is not an array");
    Shape shape;
    for (const auto& d : *sh) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        bad(api, path, what + " has shape " + sh->dump() + ": dimensions must be integers >= 0");
      shape.push_back(static_cast<int64_t>(d.get<uint64_t>()));
    }
    if (!off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
        !(*off)[1].is_number_unsigned())
      bad(api, path, what + " has data_offsets " + off->dump() + ", not two integers >= 0");
    uint64_t begin = (*off)[0].get<uint64_t>(), end = (*off)[1].get<uint64_t>();
    if (begin > end)
      bad(api, path,
          what + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
              "]: the end is before the start");
    if (end > data_size)
      bad(api, path,
          what + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
              "] past the end of the data (" + std::to_string(data_size) + " bytes)");
    uint64_t nbytes = checked_bytes(api, path, what, found->dtype, shape);
    if (nbytes != end - begin)
      bad(api, path,
          what + " is " + dname + " " + ir::to_string(shape) + " (" + size_text(nbytes) +
              " bytes) but its data_offsets span " + std::to_string(end - begin) + " bytes");
    entries.push_back({name, found->dtype, std::move(shape), begin, end});
  }
  // As the reference reader: the tensors tile the data exactly, without gaps or overlaps.
  std::vector<const Entry*> order;
  for (const auto& e : entries) order.push_back(&e);
  std::sort(order.begin(), order.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  for (const Entry* e : order) {
    if (e->begin < at)
      bad(api, path,
          quoted(e->name) + " at bytes [" + std::to_string(e->begin) + ", " +
              std::to_string(e->end) + ") overlaps the tensor before it (which ends at " +
              std::to_string(at) + ")");
    if (e->begin > at)
      bad(api, path,
          "bytes [" + std::to_string(at) + ", " + std::to_string(e->begin) +
              ") of the data belong to no tensor (before " + quoted(e->name) + ")");
    at = e->end;
  }
  if (at != data_size)
    bad(api, path,
        "the tensors end at byte " + std::to_string(at) + " of the data, which has " +
            std::to_string(data_size));
  TensorMap out;
  for (const auto& e : entries)
    out.emplace(e.name, make_tensor(api, path, quoted(e.name), e.dtype, e.shape, data + e.begin,
                                    false, false, device));
  return out;
}

}  // namespace nx::io
