// .safetensors (Hugging Face): an 8-byte little-endian header length N, N bytes of JSON
// {"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, "__metadata__": {...}},
// then the data, each tensor's bytes at [begin, end) from the data's start, in C order.
// The header is parsed with nlohmann::json; every size and offset is checked against the file.
#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>

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

// Deeper than any safetensors header (which is 3 levels: the object of tensors, a tensor's
// object, its shape), deep enough for any value a writer might add to a tensor's entry.
constexpr int kMaxDepth = 64;
// As .npy files (numpy's own limit).
constexpr size_t kMaxDims = 64;

// A tensor of the header.
struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin, end;
};

// The header read as a stream of JSON events (nlohmann's SAX interface), keeping only the
// entries: no document tree is built, so memory is bounded by the entries themselves (a name
// and at most kMaxDims dimensions each), not by the header's size or nesting (a tree of a 20 MB
// header nested 10^7 levels deep took 1.4 GB before it could be refused), and nesting beyond
// kMaxDepth is refused as it is met. Every violation raises through bad() from the callback.
class HeaderReader final : public nlohmann::json_sax<nlohmann::json> {
 public:
  HeaderReader(const char* api, const std::string& file, uint64_t data_size)
      : api_(api), file_(file), data_size_(data_size) {}
  const std::vector<Entry>& entries() const { return entries_; }

  bool null() override { return scalar("null"); }
  bool boolean(bool v) override { return scalar(v ? "true" : "false"); }
  bool number_integer(number_integer_t v) override { return scalar(std::to_string(v)); }
  bool number_unsigned(number_unsigned_t v) override {
    if (in_ == In::Shape && depth_ == 3) {
      if (v > static_cast<uint64_t>(INT64_MAX)) return scalar(std::to_string(v));
      if (cur_.shape.size() == kMaxDims)
        fail(what() + " has more than " + std::to_string(kMaxDims) + " dimensions");
      cur_.shape.push_back(static_cast<int64_t>(v));
      return true;
    }
    if (in_ == In::Offsets && depth_ == 3) {
      if (++offsets_ > 2) fail(what() + " has data_offsets of more than two integers");
      (offsets_ == 1 ? cur_.begin : cur_.end) = v;
      return true;
    }
    return scalar(std::to_string(v));
  }
  bool number_float(number_float_t, const string_t& text) override { return scalar(text); }
  bool string(string_t& v) override {
    if (in_ == In::Tensor && depth_ == 2 && field_ == "dtype") {
      const Name* found = nullptr;
      for (const auto& n : kNames)
        if (v == n.name) found = &n;
      if (!found)
        fail(what() + " has dtype " + v + ", which rune lacks (it has " + known_names() + ")");
      cur_.dtype = found->dtype;
      return true;
    }
    return scalar("\"" + v + "\"");
  }
  bool binary(binary_t&) override { return scalar("binary data"); }
  bool key(string_t& k) override {
    if (depth_ == 1) {
      name_ = k;
      if (!names_.insert(k).second)
        fail("header names " + (k == "__metadata__" ? k : "tensor '" + k + "'") + " twice");
    } else if (depth_ == 2 && in_ == In::Tensor) {
      field_ = k;
      if ((k == "dtype" || k == "shape" || k == "data_offsets") && !fields_.insert(k).second)
        fail(what() + " has two '" + k + "' keys");
    } else if (depth_ == 2 && in_ == In::Metadata) {
      field_ = k;
    }
    return true;
  }
  bool start_object(std::size_t) override { return open(true); }
  bool start_array(std::size_t) override { return open(false); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool parse_error(std::size_t, const std::string&, const nlohmann::json::exception& e) override {
    fail(std::string("header is not valid JSON: ") + e.what());
  }

 private:
  // Where the reader is: the value being read at depth_ (0: before the header's object).
  enum class In { Top, Tensors, Tensor, Metadata, Shape, Offsets, Skip };

  [[noreturn]] void fail(const std::string& msg) const { bad(api_, file_, msg); }
  std::string what() const { return quoted(name_); }

  // A value that is no object or array, shown as `shown` where it is wrong.
  bool scalar(const std::string& shown) {
    const std::string text = shown.size() > 40 ? shown.substr(0, 37) + "..." : shown;
    switch (in_) {
      case In::Top:
        fail("header is not a JSON object (it is " + text + ")");
      case In::Tensors:  // a tensor's value or __metadata__ that is no object
        if (name_ == "__metadata__") fail("__metadata__ is not an object");
        fail(what() + " is not a JSON object");
      case In::Metadata:
        if (text.empty() || text[0] != '"')
          fail("__metadata__ entry '" + field_ + "' is not a string");
        return true;
      case In::Tensor:
        if (field_ == "dtype") fail(what() + " has a dtype that is not a string");
        if (field_ == "shape") fail(what() + " has a shape that is not an array");
        if (field_ == "data_offsets")
          fail(what() + " has data_offsets " + text + ", not two integers >= 0");
        return true;  // a key rune does not read: ignored, as the reference reader does
      case In::Shape:
        fail(what() + " has shape dimension " + std::to_string(cur_.shape.size()) + " = " + text +
             ": dimensions must be integers >= 0 (at most 2^63 - 1)");
      case In::Offsets:
        fail(what() + " has data_offsets holding " + text + ", not two integers >= 0");
      case In::Skip:
        return true;
    }
    return true;
  }

  bool open(bool object) {
    if (depth_ >= kMaxDepth)
      fail("header nests JSON more than " + std::to_string(kMaxDepth) +
           " levels deep (a safetensors header has 3)");
    const char* kind = object ? "an object" : "an array";
    switch (in_) {
      case In::Top:
        if (!object) fail("header is not a JSON object (it is an array)");
        in_ = In::Tensors;
        break;
      case In::Tensors:
        if (!object) return scalar(kind);
        if (name_ == "__metadata__") {
          in_ = In::Metadata;
        } else {
          in_ = In::Tensor;
          cur_ = Entry{name_, DType::Float32, {}, 0, 0};
          fields_.clear();
          field_.clear();
        }
        break;
      case In::Metadata:
        fail("__metadata__ entry '" + field_ + "' is not a string");
      case In::Tensor:
        if (field_ == "shape" && !object) {
          in_ = In::Shape;
        } else if (field_ == "data_offsets" && !object) {
          in_ = In::Offsets;
          offsets_ = 0;
        } else if (field_ == "dtype" || field_ == "shape" || field_ == "data_offsets") {
          return scalar(kind);
        } else {
          in_ = In::Skip;  // a key rune does not read: its value is skipped, nothing kept
          skip_from_ = depth_;
        }
        break;
      case In::Shape:
      case In::Offsets:
        return scalar(kind);
      case In::Skip:
        break;
    }
    ++depth_;
    return true;
  }

  bool close() {
    --depth_;
    switch (in_) {
      case In::Tensors:
        in_ = In::Top;  // the end of the header's object
        break;
      case In::Metadata:
        in_ = In::Tensors;
        break;
      case In::Tensor:
        finish_tensor();
        in_ = In::Tensors;
        break;
      case In::Shape:
        in_ = In::Tensor;
        break;
      case In::Offsets:
        if (offsets_ != 2) fail(what() + " has data_offsets that are not two integers >= 0");
        in_ = In::Tensor;
        break;
      case In::Skip:
        if (depth_ == skip_from_) in_ = In::Tensor;
        break;
      case In::Top:
        break;
    }
    return true;
  }

  // The checks of one tensor's entry against itself and the data's size.
  void finish_tensor() {
    if (!fields_.count("dtype") || !fields_.count("shape") || !fields_.count("data_offsets"))
      fail(what() + " lacks one of dtype, shape and data_offsets");
    const uint64_t begin = cur_.begin, end = cur_.end;
    if (begin > end)
      fail(what() + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           "]: the end is before the start");
    if (end > data_size_)
      fail(what() + " has data_offsets [" + std::to_string(begin) + ", " + std::to_string(end) +
           "] past the end of the data (" + std::to_string(data_size_) + " bytes)");
    const uint64_t nbytes = checked_bytes(api_, file_, what(), cur_.dtype, cur_.shape);
    if (nbytes != end - begin)
      fail(what() + " is " + name_of(cur_.dtype) + " " + ir::to_string(cur_.shape) + " (" +
           size_text(nbytes) + " bytes) but its data_offsets span " + std::to_string(end - begin) +
           " bytes");
    entries_.push_back(std::move(cur_));
  }

  const char* api_;
  const std::string& file_;
  const uint64_t data_size_;
  In in_ = In::Top;
  int depth_ = 0, skip_from_ = 0;
  std::string name_, field_;      // the current tensor's name; the current key below it
  std::set<std::string> names_;   // every name of the header (duplicates are refused)
  std::set<std::string> fields_;  // the keys of the current tensor rune reads
  Entry cur_{};
  int offsets_ = 0;
  std::vector<Entry> entries_;
};

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
  FileBytes m(api, path);
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
  const uint64_t data_size = size - 8 - hlen;
  const uint8_t* data = p + 8 + hlen;
  HeaderReader reader(api, path, data_size);
  nlohmann::json::sax_parse(p + 8, p + 8 + hlen, &reader);
  const std::vector<Entry>& entries = reader.entries();
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
