// ulp-report: measures rune's transcendentals (exp log sin cos tan tanh pow atan2 exp2 log2 expm1
// log1p sinh cosh asin acos atan erf erfc rsqrt, and sigmoid for information) against MPFR, eagerly
// on large arrays as users call them, for float32, float64 (random bit patterns plus dense draws in
// each function's hard regions, and every special value) and float16 / bfloat16 (every bit pattern;
// pow and atan2 on a 2-D grid plus sweeps). Prints one row per function and dtype and exits 1 where
// a documented bound (docs/numerics.md: under 1 ulp for every transcendental, tighter than
// docs/semantics.md §5.3's, which is shown beside it) is broken or a special value (C99 Annex F) is
// not exact. See ulp_core.h for the error measure.
//
//   ulp-report [--n N] [--grid G] [--threads T] [--seed S] [--func exp,log,...]
//              [--dtype float32,float64,float16,bfloat16] [--regions] [--markdown]
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "tools/ulp-report/ulp_core.h"

namespace {

struct Options {
  size_t n = 10'000'000;
  size_t grid = 1536;
  int threads = 0;
  uint64_t seed = 1;
  std::vector<std::string> funcs, dtypes;
  bool regions = false, markdown = false;
};

std::vector<std::string> split(const std::string& s) {
  std::vector<std::string> v;
  std::stringstream ss(s);
  for (std::string t; std::getline(ss, t, ',');)
    if (!t.empty()) v.push_back(t);
  return v;
}

const char* kUsage =
    "usage: ulp-report [--n N] [--grid G] [--threads T] [--seed S] [--func exp,log,...]\n"
    "                  [--dtype float32,float64,float16,bfloat16] [--regions] [--markdown]\n"
    "  --n N        random inputs per function for float32 and float64 (default 10000000)\n"
    "  --grid G     float16/bfloat16 pow and atan2: G x G random pairs (default 1536)\n"
    "  --threads T  threads for MPFR (default: every core)\n"
    "  --regions    the error per input region for every row (always shown for a broken row)\n"
    "  --markdown   the summary again as a markdown table\n"
    "functions: exp log sin cos tan tanh pow atan2 sigmoid exp2 log2 expm1 log1p sinh cosh asin "
    "acos\n"
    "           atan erf erfc rsqrt (sigmoid: outside the contract, held to its documented bound)\n"
    "exit status: 0 all bounds hold, 1 a bound is broken or a special value is not exact, 2 "
    "usage\n";

[[noreturn]] void usage(const char* msg) {
  std::fprintf(stderr, "ulp-report: %s\n%s", msg, kUsage);
  std::exit(2);
}

struct Row {
  const ulp::Function* f;
  const ulp::Format* t;
  double bound;     // documented (docs/numerics.md): the one checked
  double contract;  // docs/semantics.md §5.3 (< 0: none), for reference
  ulp::Stats s;
  double seconds;
  bool broken() const { return s.over > 0 || s.special_fail > 0; }
};

std::string num(double v) {
  char buf[32];
  if (std::isinf(v)) return "inf";
  if (v < 100)
    std::snprintf(buf, sizeof buf, "%.3f", v);
  else
    std::snprintf(buf, sizeof buf, "%.3g", v);
  return buf;
}

std::string bound_str(double b) {
  if (b < 0) return "-";
  char buf[16];
  std::snprintf(buf, sizeof buf, "%g", b);
  return buf;
}

std::string status(const Row& r) {
  if (!r.broken()) return "ok";
  std::string s = "BROKEN:";
  if (r.s.over) s.append(" ").append(std::to_string(r.s.over)).append(" over bound");
  if (r.s.over && r.s.special_fail) s.append(",");
  if (r.s.special_fail) s.append(" ").append(std::to_string(r.s.special_fail)).append(" special");
  return s;
}

void print_row(const Row& r) {
  std::printf(
      "%-8s %-9s %10s %9s %10lld %6s %8s %9s   %s\n", r.f->name, r.t->name, num(r.s.max).c_str(),
      num(r.s.mean()).c_str(), static_cast<long long>(r.s.n), bound_str(r.bound).c_str(),
      bound_str(r.contract).c_str(),
      (std::to_string(r.s.special_n - r.s.special_fail) + "/" + std::to_string(r.s.special_n))
          .c_str(),
      status(r).c_str());
  std::fflush(stdout);
}

void print_details(const Row& r, bool all_regions) {
  std::printf("    worst: %s (%s ulp)  [%.1f s: rune %.1f s, MPFR %.1f s]\n",
              ulp::describe(*r.f, r.s.worst).c_str(), num(r.s.worst.err).c_str(), r.seconds,
              r.s.seconds_rune, r.s.seconds_mpfr);
  if (r.s.zero_sign)
    std::printf("    note: %lld results rounding to zero carry the other sign\n",
                static_cast<long long>(r.s.zero_sign));
  if (all_regions || r.broken()) {
    for (const auto& [name, R] : r.s.regions) {
      if (R.n == 0) continue;
      std::printf("    %-34s n=%-9lld max %-10s mean %-7s over %lld\n", name.c_str(),
                  static_cast<long long>(R.n), num(R.max).c_str(),
                  num(R.n ? R.sum / R.n : 0).c_str(), static_cast<long long>(R.over));
      if (R.over) std::printf("        worst: %s\n", ulp::describe(*r.f, R.worst).c_str());
    }
  }
  for (const auto& w : r.s.failures)
    std::printf("    special failure: %s: %s\n", w.why.c_str(), ulp::describe(*r.f, w).c_str());
  std::fflush(stdout);
}

const char* kHeader =
    "function dtype        max ulp  mean ulp     inputs  bound contract  specials   status\n";

}  // namespace

int main(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto val = [&]() -> std::string {
      if (i + 1 >= argc) usage(("missing value for " + a).c_str());
      return argv[++i];
    };
    if (a == "--n")
      o.n = std::stoull(val());
    else if (a == "--grid")
      o.grid = std::stoull(val());
    else if (a == "--threads")
      o.threads = std::stoi(val());
    else if (a == "--seed")
      o.seed = std::stoull(val());
    else if (a == "--func")
      o.funcs = split(val());
    else if (a == "--dtype")
      o.dtypes = split(val());
    else if (a == "--regions")
      o.regions = true;
    else if (a == "--markdown")
      o.markdown = true;
    else if (a == "-h" || a == "--help")
      return std::printf("%s", kUsage), 0;
    else
      usage(("unknown option " + a).c_str());
  }
  if (o.threads <= 0) o.threads = std::max(1u, std::thread::hardware_concurrency());
  std::vector<const ulp::Function*> fs;
  if (o.funcs.empty())
    for (const auto& f : ulp::functions()) fs.push_back(&f);
  for (const auto& n : o.funcs) {
    const ulp::Function* f = ulp::find_function(n);
    if (!f) usage(("unknown function " + n).c_str());
    fs.push_back(f);
  }
  std::vector<const ulp::Format*> ts;
  if (o.dtypes.empty()) ts = {&ulp::kFloat32, &ulp::kFloat64, &ulp::kFloat16, &ulp::kBFloat16};
  for (const auto& n : o.dtypes) {
    const ulp::Format* t = n == "float32"    ? &ulp::kFloat32
                           : n == "float64"  ? &ulp::kFloat64
                           : n == "float16"  ? &ulp::kFloat16
                           : n == "bfloat16" ? &ulp::kBFloat16
                                             : nullptr;
    if (!t) usage(("unknown dtype " + n).c_str());
    ts.push_back(t);
  }

  using Clock = std::chrono::steady_clock;
  auto start = Clock::now();
  std::printf(
      "ulp-report: rune vs MPFR (correctly rounded to 128 bits for float64, 64 bits for the "
      "others); %zu random inputs per function for "
      "float32/float64 plus special values; float16/bfloat16 exhaustive (pow/atan2: %zux%zu grid "
      "plus "
      "sweeps); %d threads\n\n%s",
      o.n, o.grid, o.grid, o.threads, kHeader);
  std::fflush(stdout);
  std::vector<Row> rows;
  bool failed = false;
  for (const auto* f : fs) {
    for (const auto* t : ts) {
      Row r{f, t, ulp::documented_bound(*f, t->dtype), ulp::bound(*f, t->dtype), {}, 0};
      auto t0 = Clock::now();
      try {
        if (t->p >= 24) {
          const size_t chunk = 1 << 20;
          for (size_t part = 0, done = 0; done < o.n; ++part, done += chunk) {
            size_t len = std::min(chunk, o.n - done);
            ulp::Inputs in = ulp::random_inputs(*f, *t, len, o.seed, part);
            ulp::run(*f, *t, in, r.bound, o.threads, r.s, chunk);
          }
          ulp::run(*f, *t, ulp::special_inputs(*f, *t), r.bound, o.threads, r.s);
        } else {
          ulp::run(*f, *t, ulp::half_inputs(*f, *t, o.grid, o.seed), r.bound, o.threads, r.s);
        }
      } catch (const std::exception& e) {
        std::printf("%-8s %-9s error: %s\n", f->name, t->name, e.what());
        failed = true;
        continue;
      }
      r.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
      print_row(r);
      print_details(r, o.regions);
      failed |= r.broken();
      rows.push_back(std::move(r));
    }
  }
  double total = std::chrono::duration<double>(Clock::now() - start).count();
  std::printf("\nSummary (%.0f s):\n%s", total, kHeader);
  for (const auto& r : rows) print_row(r);
  if (o.markdown) {
    std::printf(
        "\n| function | dtype | max ulp | mean ulp | inputs | bound | contract | specials exact | "
        "status |\n"
        "|---|---|---:|---:|---:|---:|---:|---:|---|\n");
    for (const auto& r : rows)
      std::printf("| %s | %s | %s | %s | %lld | %s | %s | %lld/%lld | %s |\n", r.f->name, r.t->name,
                  num(r.s.max).c_str(), num(r.s.mean()).c_str(), static_cast<long long>(r.s.n),
                  bound_str(r.bound).c_str(), bound_str(r.contract).c_str(),
                  static_cast<long long>(r.s.special_n - r.s.special_fail),
                  static_cast<long long>(r.s.special_n), status(r).c_str());
  }
  std::printf("\n%s\n",
              failed ? "ulp-report: FAILED (a bound is broken or a special value is not exact)"
                     : "ulp-report: all bounds hold");
  return failed ? 1 : 0;
}
