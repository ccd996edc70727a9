// Greedy shrinking: tries smaller programs (a step deleted, its readers reading its first
// argument instead; an output dropped; a donation or check dropped; an input's extent reduced
// or its layout made contiguous) and keeps each one that still fails the same way (the same
// mode, the same category), until none does or the budget is spent.
#pragma once
#include <chrono>
#include <functional>

#include "fuzz/differential.h"

namespace fuzz {

// p without step k: later references to k read `sub` instead; slots above k shift down.
inline std::optional<Program> delete_step(const Program& p, int k) {
  const Step& s = p.steps[k];
  int sub = s.args.empty() ? -1 : s.args[0];
  Program q;
  auto remap = [&](int v) -> int { return v == k ? sub : v > k ? v - 1 : v; };
  for (int j = 0; j < static_cast<int>(p.steps.size()); ++j) {
    if (j == k) continue;
    Step t = p.steps[j];
    for (auto& a : t.args) {
      a = remap(a);
      if (a < 0) return std::nullopt;
    }
    q.steps.push_back(t);
  }
  for (int out : p.outputs) {
    int v = remap(out);
    if (v < 0) continue;
    if (std::find(q.outputs.begin(), q.outputs.end(), v) == q.outputs.end()) q.outputs.push_back(v);
  }
  if (q.outputs.empty()) return std::nullopt;
  // A donated slot read again, twice in one step, or returned would change what the program
  // means (eager: reading a dead value); such a candidate is not the same program made smaller.
  std::vector<int> donated_at(q.steps.size(), -1);
  for (int j = 0; j < static_cast<int>(q.steps.size()); ++j) {
    const Step& t = q.steps[j];
    for (size_t i = 0; i < t.args.size(); ++i) {
      int a = t.args[i];
      if (donated_at[a] >= 0) return std::nullopt;
      if (t.donate[i] && std::count(t.args.begin(), t.args.end(), a) != 1) return std::nullopt;
    }
    if (!t.expect_error)
      for (size_t i = 0; i < t.args.size(); ++i)
        if (t.donate[i]) donated_at[t.args[i]] = j;
  }
  for (int out : q.outputs)
    if (donated_at[out] >= 0) return std::nullopt;
  if (!q.steps.empty() && q.steps.back().kind == Kind::Input) return std::nullopt;
  return q;
}

// Every one-change-smaller variant of p, roughly most-shrinking first.
inline std::vector<Program> candidates(const Program& p) {
  std::vector<Program> c;
  for (int k = static_cast<int>(p.steps.size()) - 1; k >= 0; --k)
    if (auto q = delete_step(p, k)) c.push_back(*q);
  for (size_t i = 0; p.outputs.size() > 1 && i < p.outputs.size(); ++i) {
    Program q = p;
    q.outputs.erase(q.outputs.begin() + i);
    c.push_back(q);
  }
  for (size_t k = 0; k < p.steps.size(); ++k) {
    for (size_t i = 0; i < p.steps[k].donate.size(); ++i)
      if (p.steps[k].donate[i]) {
        Program q = p;
        q.steps[k].donate[i] = false;
        c.push_back(q);
      }
    const Step& s = p.steps[k];
    if (s.kind != Kind::Input) continue;
    for (size_t d = 0; d < s.shape.size(); ++d) {
      for (int64_t to : {int64_t{1}, s.shape[d] / 2, s.shape[d] - 1}) {
        if (to < 1 || to >= s.shape[d]) continue;
        Program q = p;
        q.steps[k].shape[d] = to;
        c.push_back(q);
      }
    }
    if (s.layout != Layout::Contig) {
      Program q = p;
      q.steps[k].layout = Layout::Contig;
      c.push_back(q);
    }
  }
  return c;
}

struct ShrinkResult {
  Program program;
  Failure failure;
  int tries = 0;
};

// Shrinks p, which fails with f, keeping each candidate that `fails` judges to fail the same way;
// for at most `seconds`.
using FailsFn = std::function<std::optional<Failure>(Program&)>;
inline ShrinkResult shrink_with(const Program& p, const Failure& f, const FailsFn& fails,
                                double seconds) {
  auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  ShrinkResult r{p, f, 0};
  bool progress = true;
  while (progress && elapsed() < seconds) {
    progress = false;
    for (Program& q : candidates(r.program)) {
      if (elapsed() >= seconds) break;
      ++r.tries;
      std::optional<Failure> g;
      try {
        g = fails(q);
      } catch (...) {
        continue;  // a candidate the harness cannot run is not smaller in any useful way
      }
      if (g && g->same_kind(f)) {
        r.program = q;
        r.failure = *g;
        progress = true;
        break;
      }
    }
  }
  return r;
}

// Shrinks p (which fails with f under opt): only the disagreeing mode runs again (the baseline
// always runs).
inline ShrinkResult shrink(const Program& p, const Failure& f, const Options& opt, double seconds) {
  Options o = opt;
  o.modes.clear();
  for (const Mode& m : opt.modes)
    if (m.name() == f.mode) o.modes.push_back(m);
  return shrink_with(
      p, f, [&o](Program& q) { return differential(q, o); }, seconds);
}

}  // namespace fuzz
