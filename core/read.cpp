// Reading values back: waits for the value (the host is synchronous), follows the view.
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <optional>
#include <type_traits>

#include "core/donation.h"
#include "core/io_internal.h"
#include "core/prim.h"

namespace nx {

using namespace detail;

namespace {

// Calls fn(value) for every element of x in C order.
template <class F>
void for_each_value(const Tensor& x, const char* api, F&& fn) {
  // A traced value: its tracer raises (naming nx::where). A concrete value is read the same
  // way inside or outside a trace: a wait on its device, then the donation and poison checks.
  if (x.is_traced()) current_interpreter().check_readable(x, api);
  StorageReads reading;  // registered before the checks: no consumer writes into x meanwhile
  reading.add(x);
  eager_interpreter().check_readable(x, api);
  // A GPU value is read from a host copy (the wait above already raised any failure).
  if (x.device().kind != runtime::DeviceKind::CPU) {
    // The copy is part of this read, not an op reading x: under the reader's own scope (with
    // no arguments) it consumes nothing, as a read on the host consumes nothing.
    OpScope reader(api, {});
    Tensor host = place(x, Device::cpu());
    for_each_value(host, api, std::forward<F>(fn));
    return;
  }
  const auto& im = x.impl();
  const char* base = static_cast<const char*>(im.buffer->data);
  int64_t isz = ir::itemsize(im.dtype);
  int64_t n = x.size();
  int nd = x.ndim();
  std::vector<int64_t> idx(nd, 0);
  for (int64_t k = 0; k < n; ++k) {
    int64_t off = im.view.offset;
    for (int d = 0; d < nd; ++d) off += idx[d] * im.view.strides[d];
    uint64_t bits = 0;
    std::memcpy(&bits, base + off * isz, isz);
    fn(ir::Value::from_bits(im.dtype, bits));
    for (int d = nd - 1; d >= 0; --d) {
      if (++idx[d] < im.shape[d]) break;
      idx[d] = 0;
    }
  }
}

}  // namespace

// Raw bits in C order: the same checks and waits as every read, then a copy of the view.
std::vector<uint8_t> io::read_bytes(const Tensor& x, const char* api) {
  if (x.is_traced()) current_interpreter().check_readable(x, api);
  StorageReads reading;
  reading.add(x);
  eager_interpreter().check_readable(x, api);
  if (x.device().kind != runtime::DeviceKind::CPU) {
    OpScope reader(api, {});
    Tensor host = place(x, Device::cpu());
    return read_bytes(host, api);
  }
  const auto& im = x.impl();
  const size_t isz = static_cast<size_t>(ir::itemsize(im.dtype));
  const int64_t n = x.size();
  std::vector<uint8_t> out(static_cast<size_t>(n) * isz);
  if (n == 0) return out;
  const uint8_t* base = static_cast<const uint8_t*>(im.buffer->data);
  const int nd = x.ndim();
  // Copy runs along the last axis when it is contiguous; otherwise element by element.
  const bool inner = nd == 0 || im.view.strides[nd - 1] == 1 || im.shape[nd - 1] == 1;
  const int64_t run = inner && nd > 0 ? im.shape[nd - 1] : 1;
  const int outer_nd = inner && nd > 0 ? nd - 1 : nd;
  std::vector<int64_t> idx(nd, 0);
  for (int64_t k = 0; k < n; k += run) {
    int64_t off = im.view.offset;
    for (int d = 0; d < outer_nd; ++d) off += idx[d] * im.view.strides[d];
    std::memcpy(out.data() + static_cast<size_t>(k) * isz, base + off * static_cast<int64_t>(isz),
                static_cast<size_t>(run) * isz);
    for (int d = outer_nd - 1; d >= 0; --d) {
      if (++idx[d] < im.shape[d]) break;
      idx[d] = 0;
    }
  }
  return out;
}

namespace {

template <class T>
T convert(const ir::Value& v) {
  if constexpr (std::is_floating_point_v<T>)
    return static_cast<T>(v.as_double());
  else if constexpr (std::is_same_v<T, bool>)
    return ir::is_float(v.dtype) ? v.f != 0 : v.i != 0;
  else
    return ir::is_float(v.dtype) ? static_cast<T>(v.f) : static_cast<T>(v.i);
}

// Shortest decimal that reads back as the same value of dtype t.
std::string format_float(DType t, double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[64];
  if (t == DType::Float64) {
    auto r = std::to_chars(buf, buf + sizeof buf, v);
    return std::string(buf, r.ptr);
  }
  if (t == DType::Float32) {
    auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
    return std::string(buf, r.ptr);
  }
  // 16-bit floats: the fewest significant digits that round back to the same value, printed
  // in the same plain-or-exponent style as float32 (the shortest form of that decimal).
  for (int p = 1; p <= 6; ++p) {
    auto r =
        std::to_chars(buf, buf + sizeof buf, static_cast<float>(v), std::chars_format::general, p);
    float shortest = std::strtof(std::string(buf, r.ptr).c_str(), nullptr);
    if (ir::round_to(t, shortest) == v) {
      auto q = std::to_chars(buf, buf + sizeof buf, shortest);
      return std::string(buf, q.ptr);
    }
  }
  auto r = std::to_chars(buf, buf + sizeof buf, static_cast<float>(v));
  return std::string(buf, r.ptr);
}

std::string format_value(const ir::Value& v) {
  if (ir::is_float(v.dtype)) return format_float(v.dtype, v.f);
  if (v.dtype == DType::Bool) return v.i ? "true" : "false";
  if (v.dtype == DType::UInt64) return std::to_string(static_cast<uint64_t>(v.i));
  return std::to_string(v.i);
}

}  // namespace

namespace {

// The dtype whose elements are stored as T (bool: none, its elements are bytes).
template <class T>
constexpr std::optional<DType> stored_as() {
  if constexpr (std::is_same_v<T, float>) return DType::Float32;
  if constexpr (std::is_same_v<T, double>) return DType::Float64;
  if constexpr (std::is_same_v<T, int8_t>) return DType::Int8;
  if constexpr (std::is_same_v<T, int16_t>) return DType::Int16;
  if constexpr (std::is_same_v<T, int32_t>) return DType::Int32;
  if constexpr (std::is_same_v<T, int64_t>) return DType::Int64;
  if constexpr (std::is_same_v<T, uint8_t>) return DType::UInt8;
  if constexpr (std::is_same_v<T, uint16_t>) return DType::UInt16;
  if constexpr (std::is_same_v<T, uint32_t>) return DType::UInt32;
  if constexpr (std::is_same_v<T, uint64_t>) return DType::UInt64;
  return std::nullopt;
}

}  // namespace

template <class T>
std::vector<T> to_vector(const Tensor& x) {
  // Elements already stored as T: their bytes, copied run by run (the same reads and checks;
  // converting element by element through ir::Value took ~10x longer on large arrays).
  if constexpr (stored_as<T>().has_value()) {
    if (*stored_as<T>() == x.dtype()) {
      std::vector<uint8_t> bytes = io::read_bytes(x, "nx::to_vector");
      std::vector<T> out(bytes.size() / sizeof(T));
      if (!bytes.empty()) std::memcpy(out.data(), bytes.data(), bytes.size());
      return out;
    }
  }
  std::vector<T> out;
  out.reserve(static_cast<size_t>(x.size()));
  for_each_value(x, "nx::to_vector", [&](const ir::Value& v) { out.push_back(convert<T>(v)); });
  return out;
}
template std::vector<float> to_vector<float>(const Tensor&);
template std::vector<double> to_vector<double>(const Tensor&);
template std::vector<int32_t> to_vector<int32_t>(const Tensor&);
template std::vector<int64_t> to_vector<int64_t>(const Tensor&);
template std::vector<uint8_t> to_vector<uint8_t>(const Tensor&);
template std::vector<bool> to_vector<bool>(const Tensor&);
template std::vector<int8_t> to_vector<int8_t>(const Tensor&);
template std::vector<int16_t> to_vector<int16_t>(const Tensor&);
template std::vector<uint16_t> to_vector<uint16_t>(const Tensor&);
template std::vector<uint32_t> to_vector<uint32_t>(const Tensor&);
template std::vector<uint64_t> to_vector<uint64_t>(const Tensor&);

std::vector<double> to_array(const Tensor& x) {
  std::vector<double> out;
  for_each_value(x, "nx::to_array", [&](const ir::Value& v) { out.push_back(v.as_double()); });
  return out;
}

template <class T>
T item(const Tensor& x) {
  if (x.defined() && !x.is_traced() && x.size() != 1)
    fail("nx::item", x.describe() + " has " + std::to_string(x.size()) + " elements, not 1");
  T r{};
  for_each_value(x, "nx::item", [&](const ir::Value& v) { r = convert<T>(v); });
  return r;
}
template float item<float>(const Tensor&);
template double item<double>(const Tensor&);
template int32_t item<int32_t>(const Tensor&);
template int64_t item<int64_t>(const Tensor&);
template uint8_t item<uint8_t>(const Tensor&);
template bool item<bool>(const Tensor&);
template int8_t item<int8_t>(const Tensor&);
template int16_t item<int16_t>(const Tensor&);
template uint16_t item<uint16_t>(const Tensor&);
template uint32_t item<uint32_t>(const Tensor&);
template uint64_t item<uint64_t>(const Tensor&);

namespace {
// x printed, read under the name of the entry point the user called (a dead or traced value
// raises like every other read).
std::string format_tensor(const Tensor& x, const char* api) {
  std::string head = x.describe() + " ";
  const Shape& s = x.shape();
  // Summarise long axes as numpy does: above 1000 elements, 3 items at each end.
  const bool summarise = x.size() > 1000;
  const int64_t edge = 3;
  // Only the printed items are read: each summarised axis is cut to its 2 * edge end items
  // first, so printing a huge value (a broadcast of 2^40 elements, say) reads at most
  // (2 * edge)^ndim of them. The cuts are views and one gather on x's device, made inside an op
  // scope without arguments so they consume no donation (printing never did).
  Tensor src = x;
  Shape rs = s;  // src's shape
  if (summarise && !x.is_traced()) {
    check_alive(x, api);  // the cuts below are nested ops, which check nothing themselves
    static const std::vector<Tensor> kNoArgs;
    OpScope scope_(api, kNoArgs);
    CreateOn on(x.device());  // the gather's masks and constants live with x
    for (size_t d = 0; d < s.size(); ++d) {
      if (s[d] <= 2 * edge) continue;
      std::vector<Slice> head_cut(d + 1), tail_cut(d + 1);
      head_cut[d] = {0, edge, 1};
      tail_cut[d] = {s[d] - edge, s[d], 1};
      src = concatenate({slice(src, head_cut), slice(src, tail_cut)}, static_cast<int>(d));
      rs[d] = 2 * edge;
    }
  }
  std::vector<std::string> vals;
  for_each_value(src, api, [&](const ir::Value& v) { vals.push_back(format_value(v)); });
  if (s.empty()) return head + vals[0];
  // Position in src of item i of axis d (items past the first `edge` of a cut axis are its last).
  auto at = [&](size_t d, int64_t i) { return rs[d] == s[d] || i < edge ? i : i - (s[d] - rs[d]); };
  std::vector<int64_t> strides(s.size(), 1);
  for (size_t d = s.size() - 1; d > 0; --d) strides[d - 1] = strides[d] * rs[d];
  std::string indent(head.size(), ' ');
  std::string out = head;
  // Recursive print of the sub-array at axis d starting at flat offset `base`.
  auto rec = [&](auto&& self, size_t d, int64_t base) -> void {
    out += "[";
    int64_t n = s[d];
    for (int64_t i = 0; i < n; ++i) {
      if (summarise && n > 2 * edge && i == edge) {
        out += d + 1 == s.size() ? "..., " : "...,\n" + indent + std::string(d + 1, ' ');
        i = n - edge - 1;
        continue;
      }
      if (d + 1 == s.size()) {
        out += vals[base + at(d, i)];
      } else {
        self(self, d + 1, base + at(d, i) * strides[d]);
      }
      if (i + 1 < n) out += d + 1 == s.size() ? ", " : ",\n" + indent + std::string(d + 1, ' ');
    }
    out += "]";
  };
  rec(rec, 0, 0);
  return out;
}

}  // namespace

std::string to_string(const Tensor& x) { return format_tensor(x, "nx::to_string"); }

void print(const Tensor& x) { std::cout << format_tensor(x, "nx::print") << "\n"; }

}  // namespace nx
