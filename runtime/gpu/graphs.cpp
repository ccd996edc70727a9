#include "runtime/gpu/graphs.h"

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <map>

#include "ir/debug.h"
#include "ir/env.h"
#include "runtime/gpu/context.h"
#include "runtime/gpu/launcher.h"
#include "runtime/program.h"

namespace runtime::gpu {

namespace {

std::atomic<int64_t> g_captures{0}, g_replays{0}, g_failures{0};

// A device's capture stream and the lock that keeps one capture at a time on it. Created on
// first use and kept for the life of the process, like the device's context.
struct CaptureStream {
  std::mutex mu;
  Handle stream = nullptr;
};

CaptureStream& capture_stream(Context& c) {
  static std::mutex mu;
  static auto* streams = new std::map<const Context*, CaptureStream>;
  std::lock_guard lock(mu);
  return (*streams)[&c];
}

bool eligible(const Program& p) {
  int kernels = 0;
  for (const Step& s : p.steps) {
    if (s.kind == Step::Kind::Library) return false;
    if (s.geometry.grid > 0) ++kernels;
  }
  return kernels >= 2;
}

}  // namespace

GraphStats graph_stats() { return {g_captures.load(), g_replays.load(), g_failures.load()}; }

std::shared_ptr<ProgramGraphs> graphs_for(Context& c, const Program& p) {
  static const bool enabled = ir::env::integer(ir::env::Var::GpuGraphs) != 0;
  if (!enabled || !c.driver().has_graphs() || !eligible(p)) return nullptr;
  return std::make_shared<ProgramGraphs>(c);
}

ProgramGraphs::~ProgramGraphs() {
  const DriverTable& d = c_.driver();
  for (Entry& e : entries_) d.graph_exec_destroy(e.exec);
}

bool ProgramGraphs::launch(const Program& p, char* const* slot_ptrs) {
  const size_t n = p.slot_bytes.size();
  std::lock_guard lock(mu_);
  if (off_) return false;
  auto same = [&](const std::vector<char*>& key) {
    return key.size() == n && std::equal(key.begin(), key.end(), slot_ptrs);
  };
  Entry* hit = nullptr;
  for (Entry& e : entries_)
    if (same(e.key)) hit = &e;
  if (!hit) {
    auto seen = std::find_if(seen_.begin(), seen_.end(), same);
    if (seen == seen_.end()) {  // first sighting: step by step, captured if it comes back
      if (seen_.size() == kRemembered) seen_.pop_front();
      seen_.emplace_back(slot_ptrs, slot_ptrs + n);
      return false;
    }
    seen_.erase(seen);
    Handle exec = capture(p, slot_ptrs);
    if (!exec) {
      off_ = true;
      ++g_failures;
      return false;
    }
    if (entries_.size() == kMaxGraphs) {
      auto lru = std::min_element(entries_.begin(), entries_.end(),
                                  [](const Entry& a, const Entry& b) { return a.used < b.used; });
      c_.driver().graph_exec_destroy(lru->exec);
      entries_.erase(lru);
    }
    entries_.push_back({std::vector<char*>(slot_ptrs, slot_ptrs + n), exec, 0});
    hit = &entries_.back();
  }
  hit->used = ++clock_;
  c_.make_current();
  c_.check(c_.driver().graph_launch(hit->exec, c_.handle()), "graph launch");
  ++g_replays;
  return true;
}

// Records p's kernels with these addresses on the capture stream and instantiates them; null
// when the driver refuses any part (nothing is left capturing or allocated).
Handle ProgramGraphs::capture(const Program& p, char* const* slot_ptrs) {
  const DriverTable& d = c_.driver();
  CaptureStream& cs = capture_stream(c_);
  std::lock_guard lock(cs.mu);
  c_.make_current();
  if (!cs.stream && d.stream_create(&cs.stream) != 0) {
    cs.stream = nullptr;
    return nullptr;
  }
  if (d.begin_capture(cs.stream) != 0) return nullptr;
  int rc = 0;
  for (const Step& st : p.steps) {
    if (st.geometry.grid == 0) continue;
    constexpr size_t kParams = 64;
    char* bufs[kParams];
    if (st.slots.size() > kParams) {
      rc = -1;
      break;
    }
    for (size_t q = 0; q < st.slots.size(); ++q) bufs[q] = slot_ptrs[st.slots[q]];
    rc = queue_kernel(d, st, bufs, cs.stream);
    if (rc != 0) break;
  }
  Handle graph = nullptr;
  const int end_rc = d.end_capture(cs.stream, &graph);  // always ends the capture
  Handle exec = nullptr;
  if (rc == 0 && end_rc == 0 && graph && d.graph_instantiate(&exec, graph) != 0) exec = nullptr;
  if (graph) d.graph_destroy(graph);  // the instantiated graph keeps what it needs
  if (!exec) return nullptr;
  ++g_captures;
  if (ir::debug_level() >= 1) {
    int kernels = 0;
    for (const Step& st : p.steps) kernels += st.geometry.grid > 0;
    std::fprintf(stderr, "rune: graph: captured %d kernels on %s\n", kernels,
                 c_.device().name().c_str());
  }
  return exec;
}

}  // namespace runtime::gpu
