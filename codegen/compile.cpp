#include "codegen/compile.h"

#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "codegen/cpu/gemm.h"
#include "codegen/cpu/orc_compiler.h"
#include "codegen/cpu/render_llvm.h"
#include "codegen/cpu/sort_scan.h"
#include "codegen/decompose.h"
#include "codegen/disk_cache.h"
#include "codegen/inplace.h"
#include "codegen/schedule.h"
#include "ir/debug.h"
#include "ir/hash.h"
#include "ir/rewrite.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace codegen {

using namespace ir;

namespace {

struct RootsKey {
  std::vector<NodeRef> roots;
  int n_inputs;
  bool operator==(const RootsKey&) const = default;
};
struct RootsHash {
  size_t operator()(const RootsKey& k) const {
    size_t h = static_cast<size_t>(k.n_inputs);
    for (auto r : k.roots) h = h * 1000003u ^ std::hash<const void*>()(r);
    return h;
  }
};
struct SpecHash {
  size_t operator()(const KernelSpec& k) const { return k.hash(); }
};

// A loaded kernel: its entry points stay valid while `code` (or a program step holding a copy)
// lives; the last owner unloads it (cpu::load_object).
struct HostKernel {
  runtime::HostKernelFn main = nullptr, phase1 = nullptr;
  std::string name;
  std::shared_ptr<void> code;
};
// The caches hold kernels and programs weakly: a program lives as long as its owners (a
// rune::jit entry, an eager op cache, a call in progress) and its kernels as long as some
// program uses them, so evicting the owners gives their memory back. Expired entries are
// swept every kSweepEvery insertions and at each node collection (their keys hold nodes).
struct CachedKernel {
  runtime::HostKernelFn main = nullptr, phase1 = nullptr;
  std::string name;
  std::weak_ptr<void> code;
  bool expired() const { return code.expired(); }
  std::optional<HostKernel> get() const {
    auto c = code.lock();
    if (!c) return std::nullopt;
    return HostKernel{main, phase1, name, std::move(c)};
  }
};
constexpr size_t kSweepEvery = 1024;

struct Caches {
  std::mutex programs_mu;
  std::unordered_map<RootsKey, std::weak_ptr<const runtime::HostProgram>, RootsHash> programs;
  size_t program_inserts = 0;
  std::mutex compile_mu;  // one compile at a time; also guards kernels and stats
  std::unordered_map<KernelSpec, CachedKernel, SpecHash> kernels;
  std::unordered_map<std::string, CachedKernel> by_name;  // distinct specs may render alike
  size_t kernel_inserts = 0;
  CompileStats stats;
  int roots_id = -1;
};

// Drops the entries whose program or kernel no owner holds any more.
template <class Map>
void erase_expired(Map& m) {
  std::erase_if(m, [](const auto& entry) { return entry.second.expired(); });
}

Caches& caches() {
  static auto* c = [] {
    auto* caches = new Caches;  // lives for the process: programs and kernels point into it
    // The nodes its keys hold survive node collections (ir::collect_nodes); expired entries
    // are dropped first, so their nodes can go.
    caches->roots_id = ir::add_node_roots([caches](std::vector<NodeRef>& roots) {
      {
        std::lock_guard lock(caches->programs_mu);
        erase_expired(caches->programs);
        for (const auto& [key, p] : caches->programs)
          roots.insert(roots.end(), key.roots.begin(), key.roots.end());
      }
      std::lock_guard lock(caches->compile_mu);
      erase_expired(caches->kernels);
      erase_expired(caches->by_name);
      for (const auto& [spec, k] : caches->kernels) {
        if (spec.body) roots.push_back(spec.body);
        if (spec.rbody) roots.push_back(spec.rbody);
      }
    });
    return caches;
  }();
  return *c;
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// Decompose + render + compile (or load from disk) one kernel.
HostKernel build_kernel(const KernelSpec& spec, Caches& c) {
  KernelSpec k = spec;
  k.body = decompose(k.body);
  if (k.rbody) k.rbody = decompose(k.rbody);
  auto rendered = cpu::render_llvm(k, "KERNEL");
  // The symbol is named after the source, so equal kernels share one name and object.
  char name[32];
  std::snprintf(name, sizeof name, "rk_%016llx",
                static_cast<unsigned long long>(ir::fnv1a64(rendered.ir)));
  std::string ir = rendered.ir;
  replace_all(ir, "@KERNEL", std::string("@") + name);
  if (auto it = c.by_name.find(name); it != c.by_name.end())
    if (auto live = it->second.get()) return *live;
  if (debug_level() >= 5) std::fprintf(stderr, "rune: kernel %s source:\n%s\n", name, ir.c_str());
  std::string key = cpu::target_id() + "\n" + ir;
  runtime::ProfileSpan span("compile", name, "CPU", static_cast<int64_t>(ir.size()));
  auto t0 = std::chrono::steady_clock::now();
  std::string obj;
  auto& disk = DiskCache::instance();
  if (auto hit = disk.get(key)) {
    obj = std::move(*hit);
    ++c.stats.kernels_from_disk;
  } else {
    obj = cpu::compile_to_object(ir, name);
    disk.put(key, obj);
    ++c.stats.kernels_compiled;
  }
  std::vector<std::string> syms = {name};
  if (rendered.two_phase) syms.push_back(std::string(name) + "_p1");
  auto loaded = cpu::load_object(obj, syms);
  const auto& addrs = loaded.addresses;
  if (debug_level() >= 1) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "rune: kernel %s ready in %.2f ms\n", name, ms);
  }
  HostKernel hk;
  hk.name = name;
  hk.main = reinterpret_cast<runtime::HostKernelFn>(addrs[0]);
  if (rendered.two_phase) hk.phase1 = reinterpret_cast<runtime::HostKernelFn>(addrs[1]);
  hk.code = loaded.owner;
  c.by_name[name] = CachedKernel{hk.main, hk.phase1, hk.name, hk.code};
  return hk;
}

// The kernel of `spec`, from the cache while some program still holds it, else built.
HostKernel kernel_for(const KernelSpec& spec, Caches& c) {
  if (auto it = c.kernels.find(spec); it != c.kernels.end())
    if (auto live = it->second.get()) return *live;
  HostKernel hk = build_kernel(spec, c);
  c.kernels[spec] = CachedKernel{hk.main, hk.phase1, hk.name, hk.code};
  if (++c.kernel_inserts % kSweepEvery == 0) {
    erase_expired(c.kernels);
    erase_expired(c.by_name);
  }
  return hk;
}

runtime::HostStep kernel_step(runtime::HostKernelFn fn, std::string name, int64_t items,
                              int64_t cost, int64_t bytes, std::vector<int> slots,
                              std::shared_ptr<const void> code) {
  runtime::HostStep st;
  st.fn = fn;
  st.keep = std::move(code);
  st.name = std::move(name);
  st.items = items;
  st.cost = cost;
  st.bytes = bytes;
  st.slots = std::move(slots);
  return st;
}

std::shared_ptr<const runtime::HostProgram> build_program(const std::vector<NodeRef>& roots,
                                                          int n_inputs, Caches& c) {
  runtime::ProfileSpan span("compile", "program (" + std::to_string(roots.size()) + " outputs)",
                            "CPU");
  Schedule s = schedule(roots, n_inputs, /*fuse_epilogues=*/true);
  if (debug_level() >= 3)
    std::fprintf(stderr, "rune: schedule: %zu kernels, %zu slots\n", s.kernels.size(),
                 s.slots.size());
  auto p = std::make_shared<runtime::HostProgram>();
  p->n_inputs = n_inputs;
  p->output_slots = s.output_slots;
  for (size_t i = 0; i < s.slots.size(); ++i)
    p->slot_bytes.push_back(
        static_cast<int>(i) < n_inputs ? -1 : s.slots[i].numel * itemsize(s.slots[i].dtype));
  for (const auto& k : s.kernels) {
    if (k.contract) {
      std::shared_ptr<void> epilogue_code;
      auto plan = std::make_shared<cpu::GemmPlan>(cpu::plan_gemm(k, runtime::host_threads()));
      if (k.body && k.body->op != Op::Acc) {
        // The fused epilogue: an elementwise kernel over the output that reads the product
        // where it was built (Acc becomes a load of the output at its own index), applied by
        // the gemm to each finished tile while it is in cache.
        KernelSpec e;
        e.shape = k.shape;
        e.out_dtype = k.out_dtype;
        e.slots = k.slots;
        NodeRef acc_load =
            make(Op::Load, k.out_dtype, {}, {}, LoadArg{0, View::contiguous(k.shape)});
        e.body = rewrite(k.body, [&](NodeRef n, const std::vector<NodeRef>& src) -> NodeRef {
          (void)src;
          return n->op == Op::Acc ? acc_load : nullptr;
        });
        HostKernel ek = kernel_for(e, c);
        plan->epilogue = ek.main;
        epilogue_code = ek.code;
      }
      runtime::HostStep st;
      st.name = "gemm_" + std::string(ir::name(k.out_dtype)) + (plan->epilogue ? "_epilogue" : "");
      st.items = plan->tasks();
      st.cost = plan->flops_per_task();
      st.bytes = (numel(k.shape) + plan->batch_count() * plan->k * (plan->m + plan->n)) *
                 itemsize(k.out_dtype);
      st.slots = k.slots;
      st.library = cpu::run_gemm;
      st.plan = std::move(plan);
      st.keep = std::move(epilogue_code);
      p->steps.push_back(std::move(st));
      continue;
    }
    if (k.library) {
      auto plan = std::make_shared<cpu::SortScanPlan>(cpu::plan_sort_scan(k));
      runtime::HostStep st;
      st.name = std::string(ir::op_name(k.library->op)) + "_" + std::string(ir::name(k.out_dtype));
      st.items = plan->rows;
      st.cost = plan->cost_per_row();
      st.bytes = numel(k.shape) * (itemsize(k.library->in_dtype) + itemsize(k.out_dtype));
      st.slots = k.slots;
      st.library = cpu::run_sort_scan;
      st.plan = std::move(plan);
      p->steps.push_back(std::move(st));
      continue;
    }
    const HostKernel hk = kernel_for(k, c);
    int64_t outs = numel(k.shape);
    int64_t bytes = outs * itemsize(k.out_dtype);
    if (hk.phase1) {
      int64_t nb = k.blocks();
      int scratch = static_cast<int>(p->slot_bytes.size());
      p->slot_bytes.push_back(outs * nb * itemsize(k.rbody->dtype));
      auto slots = k.slots;
      slots.push_back(scratch);
      p->steps.push_back(
          kernel_step(hk.phase1, hk.name + "_p1", outs * nb, kReduceBlock, bytes, slots, hk.code));
      p->steps.push_back(kernel_step(hk.main, hk.name, outs, nb, bytes, slots, hk.code));
    } else {
      int64_t cost = k.rbody ? std::max<int64_t>(k.reduce_size(), 1) : 1;
      p->steps.push_back(kernel_step(hk.main, hk.name, outs, cost, bytes * cost, k.slots, hk.code));
    }
  }
  p->inplace_inputs = inplace_inputs(s);
  p->finalize();
  ++c.stats.programs;
  return p;
}

}  // namespace

std::shared_ptr<const runtime::HostProgram> compile_host(const std::vector<NodeRef>& roots,
                                                         int n_inputs) {
  ir::NodeUse use;  // the nodes built while compiling stay until it is done
  auto& c = caches();
  RootsKey key{roots, n_inputs};
  auto cached = [&]() -> std::shared_ptr<const runtime::HostProgram> {
    std::lock_guard lock(c.programs_mu);
    auto it = c.programs.find(key);
    return it == c.programs.end() ? nullptr : it->second.lock();
  };
  if (auto p = cached()) return p;
  std::lock_guard compile(c.compile_mu);
  if (auto p = cached()) return p;
  auto p = build_program(roots, n_inputs, c);
  std::lock_guard lock(c.programs_mu);
  c.programs[key] = p;
  if (++c.program_inserts % kSweepEvery == 0) erase_expired(c.programs);
  return p;
}

CompileStats compile_stats() {
  auto& c = caches();
  std::lock_guard lock(c.compile_mu);
  return c.stats;
}

}  // namespace codegen
