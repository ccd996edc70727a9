// nx::einsum for one and two operands (core/ops.h, docs/model-math.md). The subscripts are parsed
// into letters per operand; each operand first takes the diagonals its repeated letters name
// (a strided slice: exact) and sums the letters no one else uses; two operands then contract as
// one nx::matmul of [batch, M, K] x [batch, K, N], so einsum shares matmul's accumulation order
// (and its bits: einsum("ij,jk->ik", a, b) is matmul(a, b)).
#include <algorithm>

#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;

namespace {

const char* kApi = "nx::einsum";

struct Spec {
  std::vector<std::string> inputs;
  std::string output;
};

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

[[noreturn]] void bad(const std::string& subscripts, const std::string& why) {
  fail(kApi, "subscripts \"" + subscripts + "\": " + why);
}

// "ab,bc->ac" (explicit) or "ab,bc" (implicit: the letters used once, in alphabetical order, as
// numpy). Spaces are ignored.
Spec parse(const std::string& subscripts, size_t operands) {
  std::string s;
  for (char c : subscripts)
    if (c != ' ') s += c;
  Spec spec;
  size_t arrow = s.find("->");
  std::string lhs = arrow == std::string::npos ? s : s.substr(0, arrow);
  std::string cur;
  for (char c : lhs) {
    if (c == ',') {
      spec.inputs.push_back(cur);
      cur.clear();
    } else if (is_letter(c)) {
      cur += c;
    } else {
      bad(subscripts, std::string("'") + c + "' is not a letter (ellipses are not supported)");
    }
  }
  spec.inputs.push_back(cur);
  if (spec.inputs.size() != operands)
    bad(subscripts, std::to_string(spec.inputs.size()) + " operand subscripts for " +
                        std::to_string(operands) + " operands");
  if (arrow == std::string::npos) {
    for (char c = 'A'; c <= 'z'; ++c) {
      if (!is_letter(c)) continue;
      int count = 0;
      for (const auto& in : spec.inputs)
        count += static_cast<int>(std::count(in.begin(), in.end(), c));
      if (count == 1) spec.output += c;
    }
    return spec;
  }
  for (char c : s.substr(arrow + 2)) {
    if (!is_letter(c)) bad(subscripts, std::string("'") + c + "' in the output is not a letter");
    if (std::count(spec.output.begin(), spec.output.end(), c))
      bad(subscripts, std::string("output letter '") + c + "' appears twice");
    bool found = false;
    for (const auto& in : spec.inputs) found |= in.find(c) != std::string::npos;
    if (!found) bad(subscripts, std::string("output letter '") + c + "' is in no operand");
    spec.output += c;
  }
  return spec;
}

// Every check before any op runs: each operand has one letter per axis, and a letter has one
// extent wherever it appears (within an operand: a diagonal; across operands: a contraction or
// batch axis).
void validate(const std::string& subscripts, const Spec& spec, const std::vector<Tensor>& xs) {
  for (size_t o = 0; o < xs.size(); ++o) {
    const std::string& letters = spec.inputs[o];
    const Tensor& x = xs[o];
    if (static_cast<int>(letters.size()) != x.ndim())
      bad(subscripts, "operand subscript \"" + letters + "\" has " +
                          std::to_string(letters.size()) + " letters for " + x.describe());
    for (size_t p = 0; p < letters.size(); ++p) {
      size_t q = letters.find(letters[p]);
      if (q < p && x.shape()[q] != x.shape()[p])
        bad(subscripts, std::string("letter '") + letters[p] + "' has extents " +
                            std::to_string(x.shape()[q]) + " and " + std::to_string(x.shape()[p]) +
                            " in " + x.describe());
    }
  }
  if (xs.size() < 2) return;
  for (size_t p = 0; p < spec.inputs[0].size(); ++p) {
    const char c = spec.inputs[0][p];
    size_t q = spec.inputs[1].find(c);
    if (q == std::string::npos) continue;
    int64_t ea = xs[0].shape()[p], eb = xs[1].shape()[q];
    if (ea != eb)
      bad(subscripts, std::string("letter '") + c + "' has extent " + std::to_string(ea) + " in " +
                          xs[0].describe() + " and " + std::to_string(eb) + " in " +
                          xs[1].describe());
  }
}

// An operand with one letter per axis, each letter once.
struct Labeled {
  Tensor t;
  std::string letters;
  int64_t extent(char c) const { return t.shape()[letters.find(c)]; }
};

// Takes the diagonal of each repeated letter: its two axes move last, flatten, and every
// (n + 1)-th element is kept.
Labeled diagonals(const Tensor& x, std::string letters) {
  Tensor t = x;
  for (size_t p = 0; p < letters.size(); ++p) {
    size_t q = letters.find(letters[p], p + 1);
    if (q == std::string::npos) continue;
    const int64_t n = t.shape()[p];  // = t.shape()[q] (validate)
    Axes perm;
    for (int d = 0; d < t.ndim(); ++d)
      if (d != static_cast<int>(p) && d != static_cast<int>(q)) perm.push_back(d);
    perm.push_back(static_cast<int>(p));
    perm.push_back(static_cast<int>(q));
    Shape flat(perm.size() - 1);
    for (size_t d = 0; d + 2 < perm.size(); ++d) flat[d] = t.shape()[perm[d]];
    flat.back() = n * n;
    std::vector<Slice> keep(flat.size());
    keep.back() = Slice{0, n * n, n + 1};
    t = slice(reshape(permute(t, perm), flat), keep);
    std::string rest;
    for (size_t d = 0; d + 2 < perm.size(); ++d) rest += letters[perm[d]];
    letters = rest + letters[p];
    p = static_cast<size_t>(-1);  // the letters moved: rescan from the start
  }
  return {t, letters};
}

// Sums the axes of x whose letters are not in `keep`.
Labeled sum_unused(Labeled x, const std::string& keep) {
  Axes axes;
  std::string rest;
  for (size_t d = 0; d < x.letters.size(); ++d) {
    if (keep.find(x.letters[d]) == std::string::npos)
      axes.push_back(static_cast<int>(d));
    else
      rest += x.letters[d];
  }
  if (axes.empty()) return x;
  return {sum(x.t, axes), rest};
}

// x permuted so its letters read `order` (a permutation of them).
Tensor arrange(const Labeled& x, const std::string& order) {
  Axes perm;
  for (char c : order) perm.push_back(static_cast<int>(x.letters.find(c)));
  bool same = true;
  for (size_t d = 0; d < perm.size(); ++d) same &= perm[d] == static_cast<int>(d);
  return same ? x.t : permute(x.t, perm);
}

int64_t product(const Labeled& x, const std::string& letters) {
  int64_t n = 1;
  for (char c : letters) n *= x.extent(c);
  return n;
}

}  // namespace

Tensor einsum(const std::string& subscripts, const Tensor& a) {
  OpScope scope_(kApi, {&a});
  Spec spec = parse(subscripts, 1);
  validate(subscripts, spec, {a});
  Labeled x = sum_unused(diagonals(a, spec.inputs[0]), spec.output);
  return identity_result(arrange(x, spec.output));
}

Tensor einsum(const std::string& subscripts, const Tensor& a, const Tensor& b) {
  OpScope scope_(kApi, {&a, &b});
  Spec spec = parse(subscripts, 2);
  require_same_dtype(kApi, a, b);
  validate(subscripts, spec, {a, b});
  Labeled x = diagonals(a, spec.inputs[0]);
  Labeled y = diagonals(b, spec.inputs[1]);
  auto has = [](const std::string& s, char c) { return s.find(c) != std::string::npos; };
  // Letters each operand must keep: those of the output and of the other operand.
  x = sum_unused(x, spec.output + y.letters);
  y = sum_unused(y, spec.output + x.letters);
  std::string batch, m, k, n;  // batch: both and output; k: both, not output
  for (char c : x.letters) {
    if (has(y.letters, c)) {  // one extent in both (validate)
      (has(spec.output, c) ? batch : k) += c;
    } else {
      m += c;
    }
  }
  for (char c : y.letters)
    if (!has(x.letters, c)) n += c;
  const int64_t nb = product(x, batch), nm = product(x, m), nk = product(x, k), nn = product(y, n);
  Tensor lhs = reshape(arrange(x, batch + m + k), {nb, nm, nk});
  Tensor rhs = reshape(arrange(y, batch + k + n), {nb, nk, nn});
  Shape full;
  for (char c : batch) full.push_back(x.extent(c));
  for (char c : m) full.push_back(x.extent(c));
  for (char c : n) full.push_back(y.extent(c));
  Labeled r{reshape(matmul(lhs, rhs), full), batch + m + n};
  return identity_result(arrange(r, spec.output));
}

}  // namespace nx
