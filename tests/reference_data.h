// Reader of the committed reference files tests/data/{numpy,jax}_reference.txt, written by
// tools/refgen/gen_reference.py (the line format is described there), and the element
// comparison both differential tests use.
#pragma once
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "test_util.h"

namespace ref {

using nx::DType;
using nx::Shape;
using nx::Tensor;
using rt::Value;

struct RefTensor {
  DType dtype;
  Shape shape;
  std::vector<Value> vals;
  Tensor make() const { return rt::tensor(dtype, shape, vals); }
};

struct Case {
  char kind = 0;  // 'V' value, 'E' error, 'G' gradient
  std::string name, op;
  std::map<std::string, std::string> attrs;
  std::vector<RefTensor> ins, outs;
  std::string message;      // E: the start of the expected error
  uint64_t ulps = 0;        // V: the bound in ulps
  double rel = 0, abs = 0;  // G: |got - want| <= rel |want| + abs max(1, max |want|)

  double f(const std::string& k) const {
    return std::bit_cast<double>(std::stoull(attrs.at(k), nullptr, 16));
  }
  int64_t i(const std::string& k) const { return std::stoll(attrs.at(k)); }
  nx::Axes axes(const std::string& k) const {
    nx::Axes r;
    std::string s = attrs.at(k);
    size_t p = 0;
    while (p < s.size()) {
      size_t q = s.find(':', p);
      if (q == std::string::npos) q = s.size();
      r.push_back(std::stoi(s.substr(p, q - p)));
      p = q + 1;
    }
    return r;
  }
};

inline std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> r;
  size_t p = 0;
  for (;;) {
    size_t q = s.find(sep, p);
    r.push_back(s.substr(p, q == std::string::npos ? std::string::npos : q - p));
    if (q == std::string::npos) return r;
    p = q + sep.size();
  }
}

inline DType dtype_named(const std::string& n) {
  for (DType t : rt::kAllTypes)
    if (rt::dname(t) == n) return t;
  throw std::runtime_error("reference data: unknown dtype " + n);
}

// dtype[d0,d1]:hex,hex
inline RefTensor parse_tensor(const std::string& s) {
  RefTensor t;
  size_t lb = s.find('['), rb = s.find(']'), colon = s.find(':', rb);
  t.dtype = dtype_named(s.substr(0, lb));
  std::string dims = s.substr(lb + 1, rb - lb - 1);
  if (!dims.empty())
    for (const auto& d : split(dims, ",")) t.shape.push_back(std::stoll(d));
  std::string data = s.substr(colon + 1);
  if (!data.empty())
    for (const auto& h : split(data, ","))
      t.vals.push_back(rt::bits(t.dtype, std::stoull(h, nullptr, 16)));
  if (static_cast<int64_t>(t.vals.size()) != ir::numel(t.shape))
    throw std::runtime_error("reference data: element count does not match the shape in " + s);
  return t;
}

inline std::vector<RefTensor> parse_tensors(const std::string& s) {
  std::vector<RefTensor> r;
  for (const auto& p : split(s, " ; ")) r.push_back(parse_tensor(p));
  return r;
}

inline std::vector<Case> load(const std::string& file) {
  std::ifstream in(std::string(RUNE_TEST_DATA_DIR) + "/" + file);
  if (!in) throw std::runtime_error("cannot open reference data " + file);
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    auto f = split(line, " | ");
    auto head = split(f.at(0), " ");
    Case c;
    c.kind = head.at(0)[0];
    c.name = head.at(1);
    c.op = head.at(2);
    if (head.at(3) != "-")
      for (const auto& kv : split(head.at(3), ",")) {
        auto eq = kv.find('=');
        c.attrs[kv.substr(0, eq)] = kv.substr(eq + 1);
      }
    c.ins = parse_tensors(f.at(1));
    if (c.kind == 'E') {
      c.message = f.at(2);
    } else {
      c.outs = parse_tensors(f.at(2));
      if (c.kind == 'G') {
        auto tol = split(f.at(3), " ");
        c.rel = std::stod(tol.at(0));
        c.abs = std::stod(tol.at(1));
      } else {
        c.ulps = std::stoull(f.at(3));
      }
    }
    cases.push_back(c);
  }
  return cases;
}

// Element comparison of the reference tests: NaN matches any NaN; infinities match exactly; zeros
// match exactly (signed) unless `signed_zeros` is false; other values within `ulps`.
inline ::testing::AssertionResult close(const Tensor& got, const RefTensor& want, uint64_t ulps,
                                        bool signed_zeros = true) {
  if (got.dtype() != want.dtype)
    return ::testing::AssertionFailure()
           << "dtype " << rt::dname(got.dtype()) << ", want " << rt::dname(want.dtype);
  if (got.shape() != want.shape)
    return ::testing::AssertionFailure()
           << "shape " << rt::show(got.shape()) << ", want " << rt::show(want.shape);
  auto g = rt::read(got);
  auto exact_here = [&](size_t k) -> uint64_t {
    const Value& w = want.vals[k];
    if (!ir::is_float(w.dtype) || std::isinf(w.f) || std::isinf(g[k].f)) return 0;
    if (w.f == 0 && signed_zeros) return 0;
    return ulps;
  };
  if (!signed_zeros)
    for (size_t k = 0; k < g.size(); ++k)
      if (ir::is_float(g[k].dtype) && g[k].f == 0 && want.vals[k].f == 0) g[k] = want.vals[k];
  // A tolerance of 0 means equal bits, so a finite value must not land on an infinity or zero.
  return rt::match(g, want.vals, {}, exact_here);
}

// The gradient comparison: NaN matches any NaN, infinities match exactly, a zero (either sign)
// within abs max(1, max |want|) (JAX flushes sigmoid'(-745) to 0; rune keeps the subnormal),
// other values within rel |want| + abs max(1, max |want|) (JAX's float64 CPU transcendentals are
// not correctly rounded, so its derivatives are a reference for rules, not for last bits).
inline ::testing::AssertionResult near(const Tensor& got, const RefTensor& want, double rel,
                                       double abs) {
  if (got.dtype() != want.dtype || got.shape() != want.shape)
    return ::testing::AssertionFailure()
           << got.describe() << ", want " << rt::dname(want.dtype) << " " << rt::show(want.shape);
  auto g = nx::to_vector<double>(got);
  double scale = 1;
  for (const auto& w : want.vals)
    if (std::isfinite(w.f)) scale = std::max(scale, std::fabs(w.f));
  std::ostringstream msg;
  size_t bad = 0;
  for (size_t k = 0; k < g.size(); ++k) {
    double w = want.vals[k].f;
    bool ok;
    if (std::isnan(w))
      ok = std::isnan(g[k]);
    else if (std::isinf(w) || std::isinf(g[k]))
      ok = g[k] == w;
    else if (w == 0 || g[k] == 0)
      ok = std::fabs(g[k] - w) <= abs * scale;
    else
      ok = std::fabs(g[k] - w) <= rel * std::fabs(w) + abs * scale;
    if (ok) continue;
    if (++bad <= 8) {
      msg.precision(17);
      msg << "\n  [" << k << "]: got " << g[k] << ", want " << w;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << g.size() << " elements differ" << msg.str();
}

}  // namespace ref
