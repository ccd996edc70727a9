// RUNE_PROFILE=file.json: a trace of compiles, transfers and kernel runs (name, device, time,
// bytes) in the Chrome trace-event format, which Perfetto (ui.perfetto.dev) and
// chrome://tracing open. Events are kept in memory and written when the process exits (or at
// profile_flush()). Unset, recording costs one predictable branch per event site.
#pragma once
#include <chrono>
#include <cstdint>
#include <string>

namespace runtime {

// Whether RUNE_PROFILE names a file (read once).
bool profile_enabled();

// A completed span: `category` is "kernel", "compile", "transfer" or "program"; `device` names
// where it ran ("CPU", "CUDA:0"); `bytes` moved (0 when not meaningful); `items` work items.
void profile_record(const char* category, const std::string& name, const std::string& device,
                    std::chrono::steady_clock::time_point start,
                    std::chrono::steady_clock::time_point end, int64_t bytes = 0,
                    int64_t items = 0);

// Writes the trace now (it is also written at exit). Returns the path, or "" when disabled.
std::string profile_flush();

// Records the span from construction to destruction when profiling is on.
class ProfileSpan {
 public:
  ProfileSpan(const char* category, std::string name, std::string device, int64_t bytes = 0)
      : on_(profile_enabled()) {
    if (!on_) return;
    category_ = category;
    name_ = std::move(name);
    device_ = std::move(device);
    bytes_ = bytes;
    start_ = std::chrono::steady_clock::now();
  }
  ~ProfileSpan() {
    if (on_)
      profile_record(category_, name_, device_, start_, std::chrono::steady_clock::now(), bytes_);
  }
  ProfileSpan(const ProfileSpan&) = delete;
  ProfileSpan& operator=(const ProfileSpan&) = delete;

 private:
  bool on_;
  const char* category_ = "";
  std::string name_, device_;
  int64_t bytes_ = 0;
  std::chrono::steady_clock::time_point start_;
};

}  // namespace runtime
