// One program through every mode, compared: the baseline is eager on the host; every other
// mode must raise the same exception (type and message) or return the same bits; the same
// program without its donations must return the baseline's bits too; each step whose result the
// scalar reference fixes (reference.h) must match it; and no run may breach the contract
// (executor.h). The first disagreement is the program's Failure.
#pragma once
#include "fuzz/executor.h"
#include "fuzz/reference.h"

namespace fuzz {

struct Options {
  std::vector<Mode> modes;  // compared against the baseline (eager on CPU)
  bool reference = true;
  bool nodonate = true;  // also compare against the program with no donations
};

struct Failure {
  std::string mode;      // the run that disagrees
  std::string category;  // outputs differ | error differs | breach | reference | unexpected error
  std::string detail;
  bool shared_donation = false;  // the program donated storage another live value reaches
  // The same disagreement: the same mode and category (for an unexpected error, raised by the
  // same entry point, so shrinking cannot swap it for another op's error).
  bool same_kind(const Failure& o) const {
    return mode == o.mode && category == o.category &&
           (category != "unexpected error" || api(detail) == api(o.detail));
  }
  static std::string api(const std::string& d) {
    auto at = d.find("::", d.find(": ") == std::string::npos ? 0 : d.find(": "));
    if (at == std::string::npos) return "";
    auto b = d.rfind(' ', at), e = d.find(':', at + 2);
    return d.substr(b == std::string::npos ? 0 : b + 1, e - (b == std::string::npos ? 0 : b + 1));
  }
  std::string summary() const {
    return mode + ": " + category + ": " + detail +
           (shared_donation ? " [donates storage shared with a live value]" : "");
  }
};

inline Program without_donations(Program p) {
  for (auto& s : p.steps) s.donate.assign(s.args.size(), false);
  return p;
}
inline bool has_donations(const Program& p) {
  for (auto& s : p.steps)
    for (bool d : s.donate)
      if (d) return true;
  return false;
}

// Whether slot s is computed by moving its inputs' elements only (views, pad, where): then its
// NaNs keep their bits. Arithmetic promises a NaN for a NaN operand, not which one (a GPU
// returns its canonical NaN, and the order of operands of a sum that meets two NaNs picks one),
// so elsewhere any NaN matches any NaN of the same dtype (docs/testing.md).
inline bool moves_only(const Program& p, int s) {
  const Step& st = p.steps[s];
  switch (st.kind) {
    case Kind::Input:
      return true;
    case Kind::Reshape:
    case Kind::Slice:
    case Kind::Flip:
    case Kind::Permute:
    case Kind::Transpose:
    case Kind::BroadcastTo:
    case Kind::Pad:
      return moves_only(p, st.args[0]);
    case Kind::Where:
      return moves_only(p, st.args[1]) && moves_only(p, st.args[2]);
    case Kind::Take:  // an element of x at a clamped index
    case Kind::TakeAlong:
    case Kind::DynSlice:
      return moves_only(p, st.args[0]);
    case Kind::DynUpdate:
      return moves_only(p, st.args[0]) && moves_only(p, st.args[1]);
    default:
      return false;
  }
}

// Equal bits, where a NaN matches any NaN unless nan_bits.
inline bool same_bits(const Bits& a, const Bits& b, bool nan_bits) {
  if (a == b) return true;
  if (nan_bits || a.dtype != b.dtype || a.shape != b.shape || !ir::is_float(a.dtype)) return false;
  for (int64_t k = 0; k < a.size(); ++k) {
    if (a.at(k) == b.at(k)) continue;
    auto x = ir::Value::from_bits(a.dtype, a.at(k)), y = ir::Value::from_bits(b.dtype, b.at(k));
    if (!(std::isnan(x.f) && std::isnan(y.f))) return false;
  }
  return true;
}

inline std::optional<Failure> compare(const Program& p, const Outcome& base, const Outcome& o,
                                      const std::string& mode, bool shared) {
  auto fail = [&](std::string cat, std::string detail) {
    return Failure{mode, std::move(cat), std::move(detail), shared};
  };
  if (!o.breaches.empty()) return fail("breach", o.breaches[0]);
  if (base.raised != o.raised || base.error != o.error)
    return fail("error differs", "baseline " + (base.raised ? base.error : "returned") + "; here " +
                                     (o.raised ? o.error : "returned"));
  for (size_t i = 0; i < base.outputs.size(); ++i)
    if (!same_bits(base.outputs[i], o.outputs[i], moves_only(p, p.outputs[i])))
      return fail("outputs differ", "output " + std::to_string(i) + ": baseline vs here: " +
                                        describe_difference(base.outputs[i], o.outputs[i]));
  return std::nullopt;
}

// Runs p in every mode. Identity ops return their argument itself, so a donated slot can be
// the very tensor a later step reads; such a program's donations are dropped (in p) first.
inline std::optional<Failure> differential(Program& p, const Options& opt) {
  Outcome base = run_eager(p, "CPU", false);
  if (base.alias) {
    p = without_donations(p);
    base = run_eager(p, "CPU", false);
  }
  const std::string bname = "eager on CPU";
  bool shared = base.shared_donation;
  if (!base.breaches.empty()) return Failure{bname, "breach", base.breaches[0], shared};
  if (base.raised) {
    bool expected =
        base.failed_step == static_cast<int>(p.steps.size()) - 1 && p.steps.back().expect_error;
    if (!expected && base.error.find(kCheckPrefix) == std::string::npos)
      return Failure{bname, "unexpected error",
                     "step " + std::to_string(base.failed_step) + ": " + base.error, shared};
  }
  bool donating = has_donations(p);
  if (opt.reference || (opt.nodonate && donating)) {
    Program plain = without_donations(p);
    Outcome nd = run_eager(plain, "CPU", opt.reference && !base.raised);
    if (opt.nodonate && donating)
      if (auto f = compare(p, base, nd, "eager on CPU without donations", shared)) return f;
    if (opt.reference && !nd.raised) {
      for (size_t k = 0; k < p.steps.size(); ++k) {
        const Step& s = p.steps[k];
        if (s.kind == Kind::Input) continue;
        std::vector<Host> args;
        for (int a : s.args) args.push_back(host_of(nd.slots[a]));
        auto want = reference(s, args, nd.slots[k]);
        if (!want) continue;
        std::string d = compare_to_reference(*want, nd.slots[k]);
        if (!d.empty())
          return Failure{bname, "reference", "step " + std::to_string(k) + ": " + d, shared};
      }
    }
  }
  for (const Mode& m : opt.modes)
    if (auto f = compare(p, base, run(p, m), m.name(), shared)) return f;
  return std::nullopt;
}

}  // namespace fuzz
