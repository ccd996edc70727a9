#include "codegen/compile.h"

#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <unordered_map>

#include "codegen/backend.h"
#include "codegen/cpu/kernel_upgrades.h"
#include "codegen/inplace.h"
#include "codegen/memory_order.h"
#include "codegen/plan.h"
#include "codegen/schedule.h"
#include "ir/debug.h"
#include "ir/hash.h"
#include "runtime/launcher.h"
#include "runtime/profile.h"

namespace codegen {

using namespace ir;

namespace {

struct Key {
  std::vector<NodeRef> roots;
  int n_inputs;
  runtime::Device device;
  // A GPU program's products depend on the matmul precision (codegen/plan.h): a program built
  // under one is never reused under another. The host ignores it (always Highest here).
  MatmulPrecision precision;
  RuntimeSizes sizes = RuntimeSizes::Fixed;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = static_cast<size_t>(k.n_inputs) * 31 + static_cast<size_t>(k.device.kind) * 64 +
               static_cast<size_t>(k.device.index) + static_cast<size_t>(k.precision) * 7919 +
               static_cast<size_t>(k.sizes) * 104729;
    for (auto r : k.roots) h = h * 1000003u ^ std::hash<const void*>()(r);
    return h;
  }
};

// Programs are held weakly: a program lives as long as its owners (a rune::jit entry, an eager
// op cache, a call in progress), and its kernels as long as some program uses them, so evicting
// the owners gives their memory back. Expired entries are swept every kSweepEvery insertions
// and at each node collection (their keys hold nodes).
constexpr size_t kSweepEvery = 1024;

struct Caches {
  std::mutex programs_mu;
  std::unordered_map<Key, std::weak_ptr<const runtime::Program>, KeyHash> programs;
  size_t program_inserts = 0;
  std::mutex compile_mu;  // one compile at a time; also guards the backends and stats
  std::unique_ptr<Backend> backends[3];  // by runtime::DeviceKind, made on first use
  CompileStats stats;
};

void erase_expired(Caches& c) {
  std::erase_if(c.programs, [](const auto& entry) { return entry.second.expired(); });
}

Caches& caches() {
  static auto* c = [] {
    auto* caches = new Caches;  // lives for the process: programs and kernels point into it
    // The nodes its keys (and the backends' caches) hold survive node collections
    // (ir::collect_nodes); expired entries are dropped first, so their nodes can go.
    ir::add_node_roots([caches](std::vector<NodeRef>& roots) {
      {
        std::lock_guard lock(caches->programs_mu);
        erase_expired(*caches);
        for (const auto& [key, p] : caches->programs)
          roots.insert(roots.end(), key.roots.begin(), key.roots.end());
      }
      std::lock_guard lock(caches->compile_mu);
      for (auto& b : caches->backends)
        if (b) b->keep_nodes(roots);
    });
    return caches;
  }();
  return *c;
}

// The backend of a device kind; under compile_mu.
Backend& backend(Caches& c, runtime::DeviceKind kind) {
  auto& b = c.backends[static_cast<size_t>(kind)];
  if (!b) b = kind == runtime::DeviceKind::CPU ? make_host_backend() : make_gpu_backend(kind);
  return *b;
}

// A sized kernel (RuntimeSizes) is the schedule's one kernel with its descriptor as its last
// param; anything else is a caller's error.
void make_sized(Schedule& s, int n_inputs, RuntimeSizes sizes) {
  if (s.kernels.size() != 1)
    throw std::logic_error("rune::compile_sized: the op scheduled as " +
                           std::to_string(s.kernels.size()) + " kernels, not one");
  KernelSpec& k = s.kernels[0];
  const bool reduce = sizes == RuntimeSizes::ReduceRows || sizes == RuntimeSizes::ReduceStrided;
  if (k.contract || k.library || k.row() || k.fused_attention() || reduce != (k.rbody != nullptr) ||
      (reduce && k.blocks() != 1))
    throw std::logic_error("rune::compile_sized: the op's kernel is not of its sized kind");
  k.sizes = sizes;
  k.slots.push_back(n_inputs - 1);
}

// schedule -> the backend's steps -> the donation rule and the temporaries' block.
std::shared_ptr<const runtime::Program> build(const std::vector<NodeRef>& roots, int n_inputs,
                                              runtime::Device device, Caches& c,
                                              RuntimeSizes sizes = RuntimeSizes::Fixed) {
  Backend& b = backend(c, device.kind);
  std::optional<runtime::ProfileSpan> span;
  if (const char* where = b.program_span())
    span.emplace("compile", "program (" + std::to_string(roots.size()) + " outputs)", where);
  // A GPU that does not exist raises here, before anything is scheduled or rendered.
  (void)runtime::launcher_for(device, "rune::compile");
  auto p = std::make_shared<runtime::Program>();
  p->device = device;
  std::optional<runtime::ProfileSpan> phase(std::in_place, "phase", "schedule", device.name());
  Schedule s = schedule(roots, n_inputs, /*fuse_epilogues=*/true,
                        /*half_operands=*/device.kind != runtime::DeviceKind::CPU,
                        /*fuse_attention=*/true);
  order_for_memory(s);  // before anything reads the order: the steps, the donation rule
  if (sizes != RuntimeSizes::Fixed) make_sized(s, n_inputs, sizes);
  phase.reset();
  if (debug_level() >= 3) {
    std::string where = device.kind == runtime::DeviceKind::CPU ? "" : " for " + device.name();
    std::fprintf(stderr, "rune: schedule%s: %zu kernels, %zu slots\n", where.c_str(),
                 s.kernels.size(), s.slots.size());
  }
  p->n_inputs = n_inputs;
  p->output_slots = s.output_slots;
  for (size_t i = 0; i < s.slots.size(); ++i)
    p->slot_bytes.push_back(
        static_cast<int>(i) < n_inputs ? -1 : s.slots[i].numel * itemsize(s.slots[i].dtype));
  b.add_steps(s, *p, c.stats);
  p->inplace_inputs = inplace_inputs(s);
  p->finalize();
  ++c.stats.programs;
  return p;
}

}  // namespace

std::string kernel_symbol(const std::string& text) {
  char name[32];
  std::snprintf(name, sizeof name, "rk_%016llx",
                static_cast<unsigned long long>(ir::fnv1a64(text)));
  return name;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

namespace {
std::shared_ptr<const runtime::Program> compile_keyed(const std::vector<NodeRef>& roots,
                                                      int n_inputs, runtime::Device device,
                                                      RuntimeSizes sizes) {
  ir::NodeUse use;  // the nodes built while compiling stay until it is done
  auto& c = caches();
  Key key{roots, n_inputs, device,
          device.kind == runtime::DeviceKind::CPU ? MatmulPrecision::Highest : matmul_precision(),
          sizes};
  auto cached = [&]() -> std::shared_ptr<const runtime::Program> {
    std::lock_guard lock(c.programs_mu);
    auto it = c.programs.find(key);
    return it == c.programs.end() ? nullptr : it->second.lock();
  };
  if (auto p = cached()) return p;
  std::lock_guard compile(c.compile_mu);
  if (auto p = cached()) return p;
  auto p = build(roots, n_inputs, device, c, sizes);
  std::lock_guard lock(c.programs_mu);
  c.programs[key] = p;
  if (++c.program_inserts % kSweepEvery == 0) erase_expired(c);
  return p;
}
}  // namespace

std::shared_ptr<const runtime::Program> compile(const std::vector<NodeRef>& roots, int n_inputs,
                                                runtime::Device device) {
  return compile_keyed(roots, n_inputs, device, RuntimeSizes::Fixed);
}

std::shared_ptr<const runtime::Program> compile_sized(NodeRef root, int n_inputs,
                                                      runtime::Device device, RuntimeSizes sizes) {
  if (device.kind != runtime::DeviceKind::CPU || sizes == RuntimeSizes::Fixed || n_inputs < 1)
    throw std::logic_error("rune::compile_sized: a sized kind on a host device");
  return compile_keyed({root}, n_inputs, device, sizes);
}

void set_gpu_target_for_testing(runtime::DeviceKind kind, GpuTarget target) {
  if (kind == runtime::DeviceKind::CPU)
    throw std::invalid_argument("codegen::set_gpu_target_for_testing: CPU is not a GPU kind");
  auto& c = caches();
  std::lock_guard lock(c.compile_mu);
  set_gpu_backend_target(backend(c, kind), std::move(target));
}

CompileStats compile_stats() {
  auto& c = caches();
  std::lock_guard lock(c.compile_mu);
  CompileStats s = c.stats;
  s.kernels_upgraded = cpu::upgrades_installed();
  return s;
}

void wait_for_kernel_upgrades() { cpu::wait_for_upgrades(); }

bool kernel_upgrades_stopped() { return cpu::upgrades_stopped(); }

}  // namespace codegen
