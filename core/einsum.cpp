// nx::einsum (core/ops.h, docs/model-math.md). The subscripts are parsed into one label per axis
// of each operand (an ellipsis expands to one internal label per axis it stands for, aligned
// right and broadcast as numpy does); each operand first takes the diagonals its repeated letters
// name (a strided slice: exact) and sums the labels no one else uses; the operands then contract
// left to right, each pair as one nx::matmul of [batch, M, K] x [batch, K, N], so einsum shares
// matmul's accumulation order (and its bits: einsum("ij,jk->ik", a, b) is matmul(a, b)).
#include <algorithm>

#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;

namespace {

const char* kApi = "nx::einsum";

// In a parsed operand or output, kEllipsis stands for "..."; after expand(), the labels of the
// axes it stands for are the characters 1..kMaxEllipsisAxes (never letters, never printed: the
// errors about them name the ellipsis).
constexpr char kEllipsis = '.';
constexpr int kMaxEllipsisAxes = 31;

struct Spec {
  std::vector<std::string> inputs;
  std::string output;
  std::vector<std::string> written;  // each operand's subscript as written, for messages
};

bool is_letter(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
char ellipsis_label(int j) { return static_cast<char>(1 + j); }

[[noreturn]] void bad(const std::string& subscripts, const std::string& why) {
  fail(kApi, "subscripts \"" + subscripts + "\": " + why);
}

// Letters and at most one "..." (kept as one kEllipsis) of one operand or of the output.
std::string parse_term(const std::string& subscripts, const std::string& term, const char* what) {
  std::string out;
  for (size_t i = 0; i < term.size(); ++i) {
    const char c = term[i];
    if (c == '.') {
      if (term.compare(i, 3, "...") != 0)
        bad(subscripts, std::string("'.' in ") + what + " is not part of an ellipsis \"...\"");
      if (out.find(kEllipsis) != std::string::npos)
        bad(subscripts, std::string(what) + " \"" + term + "\" has more than one ellipsis");
      out += kEllipsis;
      i += 2;
    } else if (is_letter(c)) {
      out += c;
    } else {
      bad(subscripts, std::string("'") + c + "' in " + what + " is not a letter");
    }
  }
  return out;
}

// "ab,bc->ac" (explicit) or "ab,bc" (implicit: the ellipsis's axes, then the letters used once in
// alphabetical order, as numpy). Spaces are ignored.
Spec parse(const std::string& subscripts, size_t operands) {
  std::string s;
  for (char c : subscripts)
    if (c != ' ') s += c;
  Spec spec;
  const size_t arrow = s.find("->");
  const std::string lhs = arrow == std::string::npos ? s : s.substr(0, arrow);
  size_t start = 0;
  while (true) {
    const size_t comma = lhs.find(',', start);
    spec.written.push_back(lhs.substr(start, comma - start));
    spec.inputs.push_back(parse_term(subscripts, spec.written.back(), "an operand"));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (spec.inputs.size() != operands)
    bad(subscripts, std::to_string(spec.inputs.size()) + " operand subscripts for " +
                        std::to_string(operands) + " operands");
  bool any_ellipsis = false;
  for (const auto& in : spec.inputs) any_ellipsis |= in.find(kEllipsis) != std::string::npos;
  if (arrow == std::string::npos) {
    if (any_ellipsis) spec.output += kEllipsis;
    for (char c = 'A'; c <= 'z'; ++c) {
      if (!is_letter(c)) continue;
      int count = 0;
      for (const auto& in : spec.inputs)
        count += static_cast<int>(std::count(in.begin(), in.end(), c));
      if (count == 1) spec.output += c;
    }
    return spec;
  }
  spec.output = parse_term(subscripts, s.substr(arrow + 2), "the output");
  if (spec.output.find(kEllipsis) != std::string::npos && !any_ellipsis)
    bad(subscripts, "the output has an ellipsis and no operand has one");
  for (size_t p = 0; p < spec.output.size(); ++p) {
    const char c = spec.output[p];
    if (c == kEllipsis) continue;
    if (spec.output.find(c) < p)
      bad(subscripts, std::string("output letter '") + c + "' appears twice");
    bool found = false;
    for (const auto& in : spec.inputs) found |= in.find(c) != std::string::npos;
    if (!found) bad(subscripts, std::string("output letter '") + c + "' is in no operand");
  }
  return spec;
}

std::string show(const Shape& s) { return ir::to_string(s); }

// Replaces each ellipsis by the labels of the axes it stands for: an operand's ellipsis covers
// its axes that no letter names, aligned right against the broadcast of all of them (numpy's
// rule: extents equal or 1). Fills `broadcast` with the broadcast extents. Checks the letter
// counts: every check runs before any op.
void expand(const std::string& subscripts, Spec& spec, const std::vector<Tensor>& xs,
            Shape& broadcast) {
  std::vector<Shape> covered(xs.size());
  size_t axes = 0;
  for (size_t o = 0; o < xs.size(); ++o) {
    const std::string& term = spec.inputs[o];
    const bool has = term.find(kEllipsis) != std::string::npos;
    const int letters = static_cast<int>(term.size()) - (has ? 1 : 0);
    const Tensor& x = xs[o];
    if (letters > x.ndim() || (!has && letters != x.ndim()))
      bad(subscripts, "operand subscript \"" + spec.written[o] + "\" has " +
                          std::to_string(letters) + " letters for " + x.describe());
    if (has) {
      const size_t at = term.find(kEllipsis);
      covered[o] = Shape(x.shape().begin() + static_cast<long>(at),
                         x.shape().begin() + static_cast<long>(at) + (x.ndim() - letters));
      axes = std::max(axes, covered[o].size());
    }
  }
  if (axes > static_cast<size_t>(kMaxEllipsisAxes))
    bad(subscripts, "an ellipsis stands for " + std::to_string(axes) + " axes (at most " +
                        std::to_string(kMaxEllipsisAxes) + ")");
  broadcast.assign(axes, 1);
  for (size_t o = 0; o < xs.size(); ++o) {
    const size_t off = axes - covered[o].size();
    for (size_t j = 0; j < covered[o].size(); ++j) {
      const int64_t e = covered[o][j];
      int64_t& b = broadcast[off + j];
      if (e != 1 && b != 1 && e != b) {
        std::string parts;
        for (size_t p = 0; p < xs.size(); ++p)
          if (!covered[p].empty())
            parts += (parts.empty() ? "" : ", ") + show(covered[p]) + " of " + xs[p].describe();
        bad(subscripts, "the axes of the ellipsis do not broadcast: " + parts);
      }
      if (e != 1) b = e;
    }
  }
  auto labels = [](size_t from, size_t to) {
    std::string s;
    for (size_t j = from; j < to; ++j) s += ellipsis_label(static_cast<int>(j));
    return s;
  };
  for (size_t o = 0; o < xs.size(); ++o) {
    std::string& term = spec.inputs[o];
    const size_t at = term.find(kEllipsis);
    if (at != std::string::npos) term.replace(at, 1, labels(axes - covered[o].size(), axes));
  }
  const size_t at = spec.output.find(kEllipsis);
  if (at != std::string::npos) {
    spec.output.replace(at, 1, labels(0, axes));
  } else if (axes > 0) {
    bad(subscripts, "an operand's ellipsis stands for " + std::to_string(axes) +
                        (axes == 1 ? " axis" : " axes") + " and the output has no ellipsis");
  }
}

// Each operand has one label per axis, and a letter has one extent wherever it appears (within
// an operand: a diagonal; across operands: a contraction or batch axis).
void validate(const std::string& subscripts, const Spec& spec, const std::vector<Tensor>& xs) {
  for (size_t o = 0; o < xs.size(); ++o) {
    const std::string& letters = spec.inputs[o];
    const Tensor& x = xs[o];
    for (size_t p = 0; p < letters.size(); ++p) {
      size_t q = letters.find(letters[p]);
      if (q < p && x.shape()[q] != x.shape()[p])
        bad(subscripts, std::string("letter '") + letters[p] + "' has extents " +
                            std::to_string(x.shape()[q]) + " and " + std::to_string(x.shape()[p]) +
                            " in " + x.describe());
    }
  }
  for (size_t o = 1; o < xs.size(); ++o) {
    for (size_t p = 0; p < spec.inputs[o].size(); ++p) {
      const char c = spec.inputs[o][p];
      if (!is_letter(c)) continue;  // an ellipsis axis: broadcast by expand()
      for (size_t f = 0; f < o; ++f) {
        const size_t q = spec.inputs[f].find(c);
        if (q == std::string::npos) continue;
        const int64_t ea = xs[f].shape()[q], eb = xs[o].shape()[p];
        if (ea != eb)
          bad(subscripts, std::string("letter '") + c + "' has extent " + std::to_string(ea) +
                              " in " + xs[f].describe() + " and " + std::to_string(eb) + " in " +
                              xs[o].describe());
        break;
      }
    }
  }
}

// An operand with one label per axis, each label once.
struct Labeled {
  Tensor t;
  std::string letters;
  int64_t extent(char c) const { return t.shape()[letters.find(c)]; }
};

// Drops the ellipsis axes of extent 1 that broadcast against a longer one (a reshape: the other
// operands carry that label).
Labeled squeeze_broadcast(const Tensor& x, const std::string& letters, const Shape& broadcast) {
  Shape keep_shape;
  std::string keep;
  for (size_t d = 0; d < letters.size(); ++d) {
    const char c = letters[d];
    if (!is_letter(c) && x.shape()[d] == 1 && broadcast[static_cast<size_t>(c - 1)] != 1) continue;
    keep_shape.push_back(x.shape()[d]);
    keep += c;
  }
  if (keep.size() == letters.size()) return {x, letters};
  return {reshape(x, keep_shape), keep};
}

// Takes the diagonal of each repeated letter: its two axes move last, flatten, and every
// (n + 1)-th element is kept.
Labeled diagonals(Labeled x) {
  Tensor t = x.t;
  std::string letters = x.letters;
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

// Sums the axes of x whose labels are not in `keep`.
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

// x permuted so its labels read `order` (a permutation of them).
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

bool has(const std::string& s, char c) { return s.find(c) != std::string::npos; }

// x and y contracted into the labels of `needed` that either has: labels in both and needed are
// batch axes, in both and not needed contracted (k), in one only its rows (m) or columns (n).
// One nx::matmul of [batch, M, K] x [batch, K, N]; the result's labels are batch + m + n.
Labeled contract(Labeled x, Labeled y, const std::string& needed) {
  x = sum_unused(x, needed + y.letters);
  y = sum_unused(y, needed + x.letters);
  std::string batch, m, k, n;
  for (char c : x.letters) {
    if (has(y.letters, c)) {  // one extent in both (validate, squeeze_broadcast)
      (has(needed, c) ? batch : k) += c;
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
  return {reshape(matmul(lhs, rhs), full), batch + m + n};
}

}  // namespace

Tensor einsum(const std::string& subscripts, const std::vector<Tensor>& operands) {
  OpScope scope_(kApi, operands);
  if (operands.empty()) fail(kApi, "subscripts \"" + subscripts + "\": needs an operand");
  Spec spec = parse(subscripts, operands.size());
  for (size_t o = 1; o < operands.size(); ++o) require_same_dtype(kApi, operands[0], operands[o]);
  Shape broadcast;
  expand(subscripts, spec, operands, broadcast);
  validate(subscripts, spec, operands);
  // Left to right: after operand o, a label is still needed if the output or a later operand
  // has it.
  auto needed_after = [&](size_t o) {
    std::string s = spec.output;
    for (size_t p = o + 1; p < operands.size(); ++p) s += spec.inputs[p];
    return s;
  };
  Labeled x = sum_unused(diagonals(squeeze_broadcast(operands[0], spec.inputs[0], broadcast)),
                         operands.size() == 1 ? spec.output : needed_after(0) + spec.inputs[1]);
  for (size_t o = 1; o < operands.size(); ++o) {
    Labeled y = diagonals(squeeze_broadcast(operands[o], spec.inputs[o], broadcast));
    x = contract(x, y, needed_after(o));
  }
  return identity_result(arrange(x, spec.output));
}

Tensor einsum(const std::string& subscripts, const Tensor& a) {
  return einsum(subscripts, std::vector<Tensor>{a});
}

Tensor einsum(const std::string& subscripts, const Tensor& a, const Tensor& b) {
  return einsum(subscripts, std::vector<Tensor>{a, b});
}

}  // namespace nx
