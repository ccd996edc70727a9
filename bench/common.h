// Timing and reporting shared by the C++ benchmarks: medians of std::chrono timings, one
// human-readable line per workload and a final JSON line for bench/run.
#pragma once
#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace bench {

using Clock = std::chrono::steady_clock;

inline double elapsed_us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

// A 64-byte aligned float array, as rune's allocator gives: std::vector's 16-byte alignment
// would split every AVX-512 access across two cache lines and handicap the reference.
struct AlignedFloats {
  explicit AlignedFloats(int64_t n, float value = 0)
      : n(n), p(static_cast<float*>(std::aligned_alloc(64, (n * sizeof(float) + 63) / 64 * 64))) {
    std::fill(p, p + n, value);  // touches every page now, not inside a timed run
  }
  ~AlignedFloats() { std::free(p); }
  AlignedFloats(const AlignedFloats&) = delete;
  AlignedFloats& operator=(const AlignedFloats&) = delete;
  float* data() const { return p; }
  float& operator[](int64_t i) const { return p[i]; }
  int64_t size() const { return n; }
  int64_t n;
  float* p;
};

inline double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

// Medians of several functions timed in turn (f1 f2 ... f1 f2 ...), so on a shared, noisy
// machine each sees the same background load; `warmup` untimed rounds come first (compiles,
// page faults). Returns microseconds per run of each function.
template <class... F>
std::array<double, sizeof...(F)> medians_us(int reps, int warmup, F&&... f) {
  for (int i = 0; i < warmup; ++i) (f(), ...);
  std::array<std::vector<double>, sizeof...(F)> t;
  auto time_one = [](auto& g, std::vector<double>& out) {
    auto a = Clock::now();
    g();
    out.push_back(elapsed_us(a, Clock::now()));
  };
  for (int r = 0; r < reps; ++r) {
    size_t k = 0;
    (time_one(f, t[k++]), ...);
  }
  std::array<double, sizeof...(F)> m;
  for (size_t k = 0; k < m.size(); ++k) m[k] = median(t[k]);
  return m;
}

// The same for tiny functions: each timing covers `calls` back-to-back calls (one clock read
// per call would cost as much as the call), and the median is over `batches` such timings.
template <class... F>
std::array<double, sizeof...(F)> per_call_us(int batches, int calls, F&&... f) {
  auto loop = [calls](auto& g) {
    return [&g, calls] {
      for (int i = 0; i < calls; ++i) g();
    };
  };
  auto m = medians_us(batches, 1, loop(f)...);
  for (auto& v : m) v /= calls;
  return m;
}

// s as a JSON string literal, quotes included.
inline std::string json_str(const std::string& s) {
  std::string o(1, '"');
  for (char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += c;
    }
  }
  o += '"';
  return o;
}

// Collects results; ratio is always rune/reference, so above 1 means rune is slower.
class Report {
 public:
  explicit Report(std::string bench) : bench_(std::move(bench)) {}

  // goal_max: the ratio (or, with goal_abs_us, rune's time) a workload should stay under;
  // 0 means no goal.
  void add(const std::string& name, double rune_us, const std::string& ref_name, double ref_us,
           double goal_max = 0, bool goal_abs_us = false) {
    double ratio = rune_us / ref_us;
    std::string goal;
    bool met = false;
    char buf[128];
    if (goal_max > 0) {
      met = goal_abs_us ? rune_us < goal_max : ratio <= goal_max;
      std::snprintf(buf, sizeof buf, goal_abs_us ? "rune < %g us" : "rune/ref <= %gx", goal_max);
      goal = buf;
    }
    std::printf("%s: rune %.3f us, reference %.3f us, ratio %.3f  [rune/%s%s%s]\n", name.c_str(),
                rune_us, ref_us, ratio, ref_name.c_str(), goal.empty() ? "" : "; goal ",
                goal.empty() ? "" : (goal + (met ? ": MET" : ": NOT MET")).c_str());
    std::fflush(stdout);
    std::snprintf(buf, sizeof buf, "%.6g", rune_us);
    std::string e = "{\"name\":" + json_str(name) + ",\"rune_us\":" + buf;
    std::snprintf(buf, sizeof buf, "%.6g", ref_us);
    e += ",\"ref\":" + json_str(ref_name) + ",\"ref_us\":" + buf;
    std::snprintf(buf, sizeof buf, "%.6g", ratio);
    e += std::string(",\"ratio\":") + buf;
    if (!goal.empty()) e += ",\"goal\":" + json_str(goal) + ",\"met\":" + (met ? "true" : "false");
    entries_.push_back(e + "}");
  }

  // A workload with no reference of its own here (others may be measured by compare.py),
  // held to an absolute goal of goal_us when that is above 0.
  void time(const std::string& name, double rune_us, double goal_us = 0) {
    bool met = rune_us < goal_us;
    char buf[128];
    std::string goal;
    if (goal_us > 0) {
      std::snprintf(buf, sizeof buf, "rune < %g us", goal_us);
      goal = buf;
    }
    std::printf("%s: rune %.3f us%s%s\n", name.c_str(), rune_us, goal.empty() ? "" : "  [goal ",
                goal.empty() ? "" : (goal + (met ? ": MET]" : ": NOT MET]")).c_str());
    std::fflush(stdout);
    std::snprintf(buf, sizeof buf, "%.6g", rune_us);
    std::string e = "{\"name\":" + json_str(name) + ",\"rune_us\":" + buf;
    if (!goal.empty()) e += ",\"goal\":" + json_str(goal) + ",\"met\":" + (met ? "true" : "false");
    entries_.push_back(e + "}");
  }

  // Information that is not a timing (checksums, errors against the reference).
  void note(const std::string& name, const std::string& text) {
    std::printf("%s: %s\n", name.c_str(), text.c_str());
    std::fflush(stdout);
    notes_.push_back(json_str(name) + ":" + json_str(text));
  }

  // A workload rune could not run; the reference time, when measured, is still reported, and
  // the goal it would have been held to.
  void skip(const std::string& name, const std::string& reason, const std::string& ref_name = "",
            double ref_us = 0, const std::string& goal = "") {
    std::string r = reason.substr(0, reason.find('\n'));  // first line is enough for a table
    std::string e = "{\"name\":" + json_str(name) + ",\"skipped\":" + json_str(r);
    if (!goal.empty()) e += ",\"goal\":" + json_str(goal);
    if (!ref_name.empty()) {
      std::printf("%s: skipped: %s (reference %s %.3f us)\n", name.c_str(), r.c_str(),
                  ref_name.c_str(), ref_us);
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", ref_us);
      e += ",\"ref\":" + json_str(ref_name) + ",\"ref_us\":" + buf;
    } else {
      std::printf("%s: skipped: %s\n", name.c_str(), r.c_str());
    }
    std::fflush(stdout);
    entries_.push_back(e + "}");
  }

  void print_json() const {
    std::string s = "{\"bench\":" + json_str(bench_) + ",\"results\":[";
    for (size_t i = 0; i < entries_.size(); ++i) s += (i ? "," : "") + entries_[i];
    s += "],\"notes\":{";
    for (size_t i = 0; i < notes_.size(); ++i) s += (i ? "," : "") + notes_[i];
    std::printf("%s}}\n", s.c_str());
  }

 private:
  std::string bench_;
  std::vector<std::string> entries_, notes_;
};

}  // namespace bench
