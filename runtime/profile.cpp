#include "runtime/profile.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "ir/env.h"

namespace runtime {

namespace {

struct Event {
  const char* category;
  std::string name, device;
  double ts_us, dur_us;
  int64_t bytes, items;
  size_t thread;
};

std::string json_escape(const std::string& s) {
  std::string o;
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
  return o;
}

class Profile {
 public:
  Profile() {
    const std::optional<std::string>& p = ir::env::value(ir::env::Var::Profile);
    if (p && !p->empty()) path_ = *p;
    origin_ = std::chrono::steady_clock::now();
  }

  bool enabled() const { return !path_.empty(); }

  void record(Event e) {
    std::lock_guard l(mu_);
    events_.push_back(std::move(e));
  }

  double since_origin_us(std::chrono::steady_clock::time_point t) const {
    return std::chrono::duration<double, std::micro>(t - origin_).count();
  }

  std::string write() {
    if (!enabled()) return "";
    std::lock_guard l(mu_);
    // Written to a temporary file and renamed, so a viewer never opens a torn trace.
    std::string tmp = path_ + ".tmp" + std::to_string(getpid());
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (!f) {
      std::fprintf(stderr, "rune: RUNE_PROFILE: cannot write %s\n", tmp.c_str());
      return "";
    }
    std::fprintf(f, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[\n");
    std::fprintf(f,
                 "{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"rune\"}}",
                 static_cast<int>(getpid()));
    for (const auto& e : events_) {
      std::fprintf(
          f,
          ",\n{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,"
          "\"pid\":%d,\"tid\":%zu,\"args\":{\"device\":\"%s\",\"bytes\":%lld,\"items\":%lld",
          json_escape(e.name).c_str(), e.category, e.ts_us, e.dur_us, static_cast<int>(getpid()),
          e.thread, json_escape(e.device).c_str(), static_cast<long long>(e.bytes),
          static_cast<long long>(e.items));
      bool moves = std::string(e.category) == "kernel" || std::string(e.category) == "transfer";
      if (moves && e.bytes > 0 && e.dur_us > 0)
        std::fprintf(f, ",\"GB/s\":%.3f", e.bytes / e.dur_us / 1e3);
      std::fprintf(f, "}}");
    }
    std::fprintf(f, "\n]}\n");
    bool ok = std::fclose(f) == 0 && std::rename(tmp.c_str(), path_.c_str()) == 0;
    if (!ok) std::fprintf(stderr, "rune: RUNE_PROFILE: cannot write %s\n", path_.c_str());
    return ok ? path_ : "";
  }

 private:
  std::string path_;
  std::chrono::steady_clock::time_point origin_;
  std::mutex mu_;
  std::vector<Event> events_;
};

// Never destroyed (events may be recorded during other objects' destruction); the trace is
// written by an exit handler registered on first use.
Profile& profile() {
  static Profile* p = [] {
    auto* q = new Profile;
    if (q->enabled()) std::atexit([] { profile().write(); });
    return q;
  }();
  return *p;
}

// Small stable thread numbers for the trace's rows.
size_t thread_number() {
  static std::mutex mu;
  static size_t next = 0;
  thread_local size_t mine = [] {
    std::lock_guard l(mu);
    return ++next;
  }();
  return mine;
}

}  // namespace

bool profile_enabled() {
  static const bool on = profile().enabled();
  return on;
}

void profile_record(const char* category, const std::string& name, const std::string& device,
                    std::chrono::steady_clock::time_point start,
                    std::chrono::steady_clock::time_point end, int64_t bytes, int64_t items) {
  if (!profile_enabled()) return;
  auto& p = profile();
  p.record({category, name, device, p.since_origin_us(start),
            std::chrono::duration<double, std::micro>(end - start).count(), bytes, items,
            thread_number()});
}

std::string profile_flush() { return profile().write(); }

}  // namespace runtime
