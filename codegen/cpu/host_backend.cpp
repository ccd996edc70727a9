// The host backend: each kernel decomposed, rendered as LLVM IR (cpu::render_llvm), compiled
// by ORC through the kernel disk cache, loaded, and run on the thread pool; matrix products and
// sorts / scans are library steps with their plans (codegen/cpu/gemm.h, sort_scan.h); a host call
// (ir/host_fn.h) is a library step that runs its function on the calling thread; an attention
// kernel is a library step over row blocks (codegen/cpu/attention.h) that calls the gemm and
// its compiled row kernel; an attention gradient kernel likewise
// (codegen/cpu/attention_gradient.h).
#include <chrono>
#include <cstdio>
#include <optional>
#include <stdexcept>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <variant>

#include "codegen/backend.h"
#include "codegen/cpu/attention.h"
#include "codegen/cpu/attention_gradient.h"
#include "codegen/cpu/gemm.h"
#include "codegen/cpu/kernel_upgrades.h"
#include "codegen/cpu/orc_compiler.h"
#include "codegen/cpu/render_llvm.h"
#include "codegen/cpu/sort_scan.h"
#include "codegen/decompose.h"
#include "codegen/disk_cache.h"
#include "codegen/plan.h"
#include "ir/debug.h"
#include "ir/env.h"
#include "ir/rewrite.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace codegen {

using namespace ir;

namespace {

struct SpecHash {
  size_t operator()(const KernelSpec& k) const { return k.hash(); }
};

// A loaded kernel: its entry points stay valid while `code` (or a program step holding a copy)
// lives; the last owner unloads it (cpu::load_object). A tiered kernel's steps read their entry
// point from `live_main` / `live_phase1` (into the cpu::TieredKernel that `code` holds), which
// its upgrade moves from the quick tier to the full tier (codegen/cpu/kernel_upgrades.h).
struct HostKernel {
  runtime::HostKernelFn main = nullptr, phase1 = nullptr;
  std::string name;
  std::shared_ptr<void> code;
  int64_t phase1_items = 0;  // work items of phase1 (the plan may give one several blocks)
  const std::atomic<void*>* live_main = nullptr;
  const std::atomic<void*>* live_phase1 = nullptr;
};
// Kernels are held weakly, as programs are (codegen/compile.cpp): a kernel lives as long as
// some program step uses it.
struct CachedKernel {
  runtime::HostKernelFn main = nullptr, phase1 = nullptr;
  std::string name;
  std::weak_ptr<void> code;
  int64_t phase1_items = 0;
  const std::atomic<void*>* live_main = nullptr;
  const std::atomic<void*>* live_phase1 = nullptr;
  explicit CachedKernel(const HostKernel& k)
      : main(k.main),
        phase1(k.phase1),
        name(k.name),
        code(k.code),
        phase1_items(k.phase1_items),
        live_main(k.live_main),
        live_phase1(k.live_phase1) {}
  bool expired() const { return code.expired(); }
  std::optional<HostKernel> get() const {
    auto c = code.lock();
    if (!c) return std::nullopt;
    return HostKernel{main, phase1, name, std::move(c), phase1_items, live_main, live_phase1};
  }
};
constexpr size_t kSweepEvery = 1024;

template <class Map>
void erase_expired(Map& m) {
  std::erase_if(m, [](const auto& entry) { return entry.second.expired(); });
}

runtime::Step kernel_step(runtime::HostKernelFn fn, const std::atomic<void*>* live,
                          std::string name, int64_t items, int64_t cost, int64_t bytes,
                          std::vector<int> slots, std::shared_ptr<const void> code) {
  runtime::Step st;
  st.kind = runtime::Step::Kind::Kernel;
  st.entry = runtime::Step::entry_of(fn);
  st.live_entry = live;
  st.keep = std::move(code);
  st.name = std::move(name);
  st.items = items;
  st.cost = cost;
  st.bytes = bytes;
  st.slots = std::move(slots);
  return st;
}

class HostBackend final : public Backend {
 public:
  const char* program_span() const override { return "CPU"; }

  void keep_nodes(std::vector<NodeRef>& roots) override {
    erase_expired(kernels_);
    erase_expired(by_name_);
    for (const auto& [spec, k] : kernels_) {
      for (NodeRef r : spec.roots()) roots.push_back(r);
    }
  }

  void add_steps(const Schedule& s, runtime::Program& p, CompileStats& stats) override {
    const std::vector<HostKernel> held = precompile(s, stats);
    for (const auto& k : s.kernels) {
      if (k.attention_gradient())
        p.steps.push_back(attention_gradient_step(k, stats));
      else if (k.fused_attention())
        p.steps.push_back(attention_step(k, stats));
      else if (k.contract)
        p.steps.push_back(gemm_step(k, stats));
      else if (k.library && k.library->op == Op::HostCall)
        p.steps.push_back(host_call_step(k));
      else if (k.library)
        p.steps.push_back(sort_scan_step(k));
      else
        add_kernel_steps(k, p, stats);
    }
  }

 private:
  // One kernel between its render and its load: named, looked up in the disk cache, and
  // compiled (compile_pending) when no cache has it; that step may run on another thread.
  struct PendingKernel {
    std::string name, ir, key;
    bool two_phase = false;
    int64_t phase1_items = 0;
    bool quick = false;  // loads the quick tier and queues the full tier's upgrade
    std::string quick_key;
    std::optional<std::string> obj;  // the object, once read or compiled
    bool compiled = false;
    std::chrono::steady_clock::time_point t0;
  };

  // Decompose + render one kernel (the one place the host's renderer is called) and look its
  // object up: a kernel of the same source still loaded is returned as it is. `tiered`: a
  // disk-cache miss compiles the quick tier and queues the full tier's upgrade
  // (RUNE_KERNEL_TIERS=1, the default); else the full tier is compiled (a gemm epilogue or an
  // attention row kernel, whose entry point its plan holds, is never swapped).
  std::variant<HostKernel, PendingKernel> prepare_kernel(const KernelSpec& spec, bool tiered,
                                                         CompileStats& stats) {
    std::optional<runtime::ProfileSpan> phase(std::in_place, "phase", "lower and render", "CPU");
    KernelSpec k = spec;
    for (NodeRef* r : k.roots()) *r = decompose(*r);
    auto rendered = cpu::render_llvm(k, "KERNEL", runtime::host_threads());
    phase.reset();
    PendingKernel p;
    p.t0 = std::chrono::steady_clock::now();
    // The symbol is named after the source, so equal kernels share one name and object.
    p.name = kernel_symbol(rendered.ir);
    p.ir = rendered.ir;
    replace_all(p.ir, "@KERNEL", "@" + p.name);
    if (auto it = by_name_.find(p.name); it != by_name_.end())
      if (auto live = it->second.get()) return *live;
    if (debug_level() >= 5)
      std::fprintf(stderr, "rune: kernel %s source:\n%s\n", p.name.c_str(), p.ir.c_str());
    p.key = cpu::target_id() + "\n" + p.ir;
    p.two_phase = rendered.two_phase;
    p.phase1_items = rendered.phase1_items;
    const int tiers = cpu::kernel_tiers();
    tiered = tiered && tiers != 0;
    // The full tier from the disk cache, unless only the quick tier is wanted.
    if (!tiered || tiers == 1) p.obj = disk_read(p.key, stats);
    if (!p.obj && tiered) {
      // The quick tier, under names of its own (`name`_q...) so that the full tier's object
      // can be loaded beside it, and a disk-cache key of its own.
      p.quick = true;
      p.quick_key = "quick\n" + cpu::target_id() + "\n" + quick_ir(p);
      p.obj = disk_read(p.quick_key, stats);
    }
    return p;
  }

  static std::string quick_ir(const PendingKernel& p) {
    std::string ir = p.ir;
    replace_all(ir, "@" + p.name, "@" + p.name + "_q");
    return ir;
  }

  // Compiles p's object if no cache had it. Thread-safe: each compile has its own LLVM context
  // and target machine, and touches nothing of the backend's.
  static void compile_pending(PendingKernel& p) {
    if (p.obj) return;
    runtime::ProfileSpan span("compile", p.name, "CPU", static_cast<int64_t>(p.ir.size()));
    p.obj = p.quick ? cpu::compile_to_object(quick_ir(p), p.name + "_q", cpu::Tier::Quick)
                    : cpu::compile_to_object(p.ir, p.name, cpu::Tier::Full);
    p.compiled = true;
  }

  // Writes a compiled full tier to the disk cache, loads p's object and, for a quick tier,
  // queues its upgrade.
  HostKernel finish_kernel(PendingKernel& p, CompileStats& stats) {
    const int tiers = cpu::kernel_tiers();
    std::vector<std::string> syms = {p.name};
    if (p.two_phase) syms.push_back(p.name + "_p1");
    if (p.compiled) ++stats.kernels_compiled;
    HostKernel hk;
    hk.name = p.name;
    hk.phase1_items = p.phase1_items;
    if (!p.quick) {
      if (p.compiled) disk_write(p.key, *p.obj);
      std::optional<runtime::ProfileSpan> phase(std::in_place, "phase", "load", "CPU");
      auto loaded = cpu::load_object(*p.obj, syms);
      phase.reset();
      hk.main = reinterpret_cast<runtime::HostKernelFn>(loaded.addresses[0]);
      if (p.two_phase) hk.phase1 = reinterpret_cast<runtime::HostKernelFn>(loaded.addresses[1]);
      hk.code = loaded.owner;
    } else {
      // RUNE_KERNEL_TIERS=2 has no thread to write the quick tier's entry.
      if (p.compiled && tiers == 2) disk_write(p.quick_key, *p.obj);
      std::vector<std::string> quick_syms;
      for (const auto& sym : syms)
        quick_syms.push_back(sym.substr(0, p.name.size()) + "_q" + sym.substr(p.name.size()));
      std::optional<runtime::ProfileSpan> phase(std::in_place, "phase", "load", "CPU");
      auto loaded = cpu::load_object(*p.obj, quick_syms);
      phase.reset();
      auto tk = std::make_shared<cpu::TieredKernel>();
      tk->quick_code = loaded.owner;
      tk->main.store(loaded.addresses[0]);
      if (p.two_phase) tk->phase1.store(loaded.addresses[1]);
      hk.main = reinterpret_cast<runtime::HostKernelFn>(loaded.addresses[0]);
      if (p.two_phase) hk.phase1 = reinterpret_cast<runtime::HostKernelFn>(loaded.addresses[1]);
      hk.live_main = &tk->main;
      if (p.two_phase) hk.live_phase1 = &tk->phase1;
      if (tiers == 1)
        cpu::queue_upgrade({tk, p.ir, p.name, p.key, p.two_phase, p.compiled ? p.quick_key : "",
                            p.compiled ? *p.obj : ""});
      hk.code = std::shared_ptr<void>(tk, tk.get());
    }
    if (debug_level() >= 1) {
      double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - p.t0)
                      .count();
      std::fprintf(stderr, "rune: kernel %s ready in %.2f ms%s\n", p.name.c_str(), ms,
                   hk.live_main ? " (quick tier)" : "");
    }
    by_name_.insert_or_assign(p.name, CachedKernel(hk));
    return hk;
  }

  HostKernel build_kernel(const KernelSpec& spec, bool tiered, CompileStats& stats) {
    auto prepared = prepare_kernel(spec, tiered, stats);
    if (auto* hk = std::get_if<HostKernel>(&prepared)) return *hk;
    auto& p = std::get<PendingKernel>(prepared);
    compile_pending(p);
    return finish_kernel(p, stats);
  }

  // The kernels a schedule's steps will ask kernel_for for (its plain kernels, gemm epilogues
  // and attention row kernels) that no cache holds, compiled in parallel on the host's threads
  // before the steps are built in order (XLA compiles a module's kernels in parallel too); the
  // result holds them until the steps do. Compiling is the only parallel part: rendering,
  // cache lookups, loading and every cache of the backend stay on this thread, in schedule
  // order, so the kernels and their names are the ones a serial compile makes.
  std::vector<HostKernel> precompile(const Schedule& s, CompileStats& stats) {
    std::vector<std::pair<KernelSpec, bool>> specs;  // (spec, tiered), as the steps ask
    for (const auto& k : s.kernels) {
      if (k.attention_gradient()) {
        for (const KernelSpec& part : k.attention)
          if (!part.contract)
            specs.emplace_back(part, false);
          else if (auto e = epilogue_spec(part))
            specs.emplace_back(std::move(*e), false);
      } else if (k.fused_attention()) {
        specs.emplace_back(k.attention[1], false);
      } else if (k.contract) {
        if (auto e = epilogue_spec(k)) specs.emplace_back(std::move(*e), false);
      } else if (!k.library) {
        specs.emplace_back(k, true);
      }
    }
    std::vector<HostKernel> held;
    std::vector<std::pair<const KernelSpec*, PendingKernel>> todo;
    std::unordered_set<std::string> names;
    for (const auto& [spec, tiered] : specs) {
      if (auto it = kernels_.find(spec); it != kernels_.end() && !it->second.expired()) continue;
      auto prepared = prepare_kernel(spec, tiered, stats);
      if (auto* hk = std::get_if<HostKernel>(&prepared)) {
        kernels_.insert_or_assign(spec, CachedKernel(*hk));
        held.push_back(*hk);
        continue;
      }
      auto& p = std::get<PendingKernel>(prepared);
      // The same source twice: the second step finds the first's kernel by name.
      if (!names.insert(p.name).second) continue;
      todo.emplace_back(&spec, std::move(p));
    }
    size_t to_compile = 0;
    for (const auto& [spec, p] : todo) to_compile += p.obj ? 0 : 1;
    static const int64_t threads = ir::env::integer(ir::env::Var::CompileThreads);
    const size_t workers = std::min<size_t>(
        to_compile, static_cast<size_t>(threads > 0 ? threads : runtime::host_threads()));
    if (workers >= 2) {
      std::atomic<size_t> next{0};
      std::vector<std::exception_ptr> errors(todo.size());
      auto work = [&] {
        for (size_t i; (i = next.fetch_add(1)) < todo.size();) try {
            compile_pending(todo[i].second);
          } catch (...) {
            errors[i] = std::current_exception();
          }
      };
      std::vector<std::thread> threads;
      for (size_t t = 1; t < workers; ++t) threads.emplace_back(work);
      work();
      for (auto& t : threads) t.join();
      for (const auto& e : errors)
        if (e) std::rethrow_exception(e);
    }
    for (auto& [spec, p] : todo) {
      compile_pending(p);  // none left when compiled above
      HostKernel hk = finish_kernel(p, stats);
      kernels_.insert_or_assign(*spec, CachedKernel(hk));
      held.push_back(std::move(hk));
    }
    return held;
  }

  // An entry of the disk cache, else a prebuilt kernel (both counted as loaded from disk), or
  // nullopt.
  static std::optional<std::string> disk_read(const std::string& key, CompileStats& stats) {
    runtime::ProfileSpan phase("phase", "disk read", "CPU");
    auto hit = DiskCache::instance().get(key);
    // The prebuilt kernels count as part of the disk cache: off with it (RUNE_DISK_CACHE=0,
    // RUNE_CACHE_DIR=""), so that setting compiles every kernel.
    if (!hit && DiskCache::instance().enabled()) {
      hit = DiskCache::prebuilt().get(key);
      if (hit) ++stats.kernels_prebuilt;
    }
    if (hit) ++stats.kernels_from_disk;
    return hit;
  }
  static void disk_write(const std::string& key, const std::string& obj) {
    runtime::ProfileSpan phase("phase", "disk write", "CPU");
    DiskCache::instance().put(key, obj);
  }

  // The kernel of `spec`, from the cache while some program still holds it, else built.
  HostKernel kernel_for(const KernelSpec& spec, bool tiered, CompileStats& stats) {
    if (auto it = kernels_.find(spec); it != kernels_.end())
      if (auto live = it->second.get()) return *live;
    HostKernel hk = build_kernel(spec, tiered, stats);
    kernels_.insert_or_assign(spec, CachedKernel(hk));
    if (++kernel_inserts_ % kSweepEvery == 0) {
      erase_expired(kernels_);
      erase_expired(by_name_);
    }
    return hk;
  }

  // A product's fused epilogue, if it has one: an elementwise kernel over the output that reads
  // the product where it was built (Acc becomes a load of the output at its own index), applied
  // by the gemm to each finished tile while it is in cache.
  static std::optional<KernelSpec> epilogue_spec(const KernelSpec& k) {
    if (!k.body || k.body->op == Op::Acc) return std::nullopt;
    KernelSpec e;
    e.shape = k.shape;
    e.out_dtype = k.out_dtype;
    e.slots = k.slots;
    NodeRef acc_load = make(Op::Load, k.out_dtype, {}, {}, LoadArg{0, View::contiguous(k.shape)});
    e.body = rewrite(k.body, [&](NodeRef n, const std::vector<NodeRef>& src) -> NodeRef {
      (void)src;
      return n->op == Op::Acc ? acc_load : nullptr;
    });
    return e;
  }

  runtime::Step gemm_step(const KernelSpec& k, CompileStats& stats) {
    std::shared_ptr<void> epilogue_code;
    const bool has_epilogue = k.body && k.body->op != Op::Acc;
    KernelSpec body_only;  // the epilogue's operations per output, without the product's
    body_only.shape = k.shape;
    body_only.body = k.body;
    auto plan = std::make_shared<cpu::GemmPlan>(
        cpu::plan_gemm(k, runtime::host_threads(), has_epilogue ? work_per_output(body_only) : 0));
    if (has_epilogue) {
      KernelSpec e = *epilogue_spec(k);
      HostKernel ek = kernel_for(e, /*tiered=*/false, stats);
      plan->epilogue = ek.main;
      epilogue_code = ek.code;
    }
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    // Named with its geometry as the output's m x k x n (profiles and DEBUG=2 tell products
    // apart), "t" when it runs transposed (GemmPlan::transposed).
    int64_t out_m = plan->transposed ? plan->n : plan->m,
            out_n = plan->transposed ? plan->m : plan->n;
    st.name = "gemm_" + std::string(ir::name(k.out_dtype)) + "_" + std::to_string(out_m) + "x" +
              std::to_string(plan->k) + "x" + std::to_string(out_n) +
              (plan->transposed ? "t" : "") + (plan->epilogue ? "_epilogue" : "");
    st.items = plan->tasks();
    st.cost = plan->flops_per_task();
    st.bytes = (numel(k.shape) + plan->batch_count() * plan->k * (plan->m + plan->n)) *
               itemsize(k.out_dtype);
    st.slots = k.slots;
    st.library = cpu::run_gemm;
    st.plan = std::move(plan);
    st.keep = std::move(epilogue_code);
    return st;
  }

  // The attention kernel: its row kernel compiled as any kernel (the full tier, unless a
  // program compiled it tiered before: the plan then reads its live entry point), the products
  // planned per row block.
  runtime::Step attention_step(const KernelSpec& k, CompileStats& stats) {
    const KernelSpec& w = k.attention[1];
    HostKernel wk = kernel_for(w, /*tiered=*/false, stats);
    if (wk.phase1) throw std::logic_error("attention_step: a row kernel with two phases");
    auto plan = std::make_shared<cpu::AttentionPlan>(
        cpu::plan_attention(k, wk.main, wk.live_main, work_per_output(w)));
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    // Named with its geometry: batch elements x Tq x Tk x the output's columns.
    st.name = "attention_" + std::string(ir::name(k.out_dtype)) + "_" +
              std::to_string(plan->batch) + "x" + std::to_string(plan->tq) + "x" +
              std::to_string(plan->tk) + "x" + std::to_string(plan->values.n);
    st.items = plan->tasks();
    st.cost = plan->flops_per_task();
    // q, k, v and the output, about (a mask read in place is not counted).
    st.bytes = plan->batch *
               (plan->tq * (plan->scores.k + plan->values.n) +
                plan->tk * (plan->scores.k + plan->values.n)) *
               itemsize(k.out_dtype);
    st.slots = k.slots;
    st.library = cpu::run_attention;
    st.plan = std::move(plan);
    st.keep = std::move(wk.code);
    return st;
  }

  // The attention gradient kernel: its row kernels and its products' epilogues compiled as the
  // forward's row kernel (the full tier, unless a program compiled them tiered before), its
  // products planned per block.
  runtime::Step attention_gradient_step(const KernelSpec& k, CompileStats& stats) {
    std::vector<cpu::GradientRowKernel> fns(k.attention.size());
    auto codes = std::make_shared<std::vector<std::shared_ptr<void>>>();
    for (size_t i = 0; i < k.attention.size(); ++i) {
      const KernelSpec& part = k.attention[i];
      // A row kernel, or a product's epilogue (a kernel over the product's output).
      std::optional<KernelSpec> spec = part.contract ? epilogue_spec(part) : part;
      if (!spec) continue;
      HostKernel hk = kernel_for(*spec, /*tiered=*/false, stats);
      if (hk.phase1)
        throw std::logic_error("attention_gradient_step: a row kernel with two phases");
      fns[i] = {hk.main, hk.live_main, work_per_output(*spec)};
      codes->push_back(std::move(hk.code));
    }
    auto plan = std::make_shared<cpu::AttentionGradientPlan>(cpu::plan_attention_gradient(k, fns));
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    // Named with its geometry: batch elements x Tq x Tk, and its parts.
    const KernelSpec& w = k.attention[1];
    st.name = "attention_grad_" + std::string(ir::name(k.out_dtype)) + "_" +
              std::to_string(plan->batch) + "x" + std::to_string(plan->tq) + "x" +
              std::to_string(numel(w.rshape)) + "_" + std::to_string(k.attention.size()) + "parts";
    st.items = plan->tasks();
    st.cost = plan->flops_per_task();
    // The buffers it reads and writes, about (each once per batch element).
    int64_t bytes = 0;
    for (const auto& part : plan->parts)
      if (part.role != GradientRole::RowKernel)
        bytes +=
            (part.gemm.m * part.gemm.k + part.gemm.k * part.gemm.n + part.gemm.m * part.gemm.n) *
            itemsize(part.gemm.dtype);
    st.bytes = plan->batch * bytes;
    st.slots = k.slots;
    st.library = cpu::run_attention_gradient;
    st.plan = std::move(plan);
    st.keep = std::move(codes);
    return st;
  }

  // One call of the function over the whole operand (items 1: never split over the pool, so it
  // runs on the thread running the program).
  struct HostCallPlan {
    std::shared_ptr<const HostFn> fn;
    DType dtype;
    Shape in_shape, out_shape;
    int64_t offset;
  };
  static runtime::Step host_call_step(const KernelSpec& k) {
    const LibraryCall& lib = *k.library;
    auto plan = std::make_shared<HostCallPlan>(
        HostCallPlan{lib.host.fn, lib.in_dtype, lib.in_shape, k.shape, lib.offset});
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    st.name = lib.host.fn->describe();
    st.items = 1;
    st.bytes = (numel(lib.in_shape) + numel(k.shape)) * itemsize(lib.in_dtype);
    st.slots = k.slots;
    st.library = [](const void* p, char** bufs, int64_t, int64_t) {
      const auto& h = *static_cast<const HostCallPlan*>(p);
      h.fn->run(bufs[1] + h.offset * itemsize(h.dtype), bufs[0], h.dtype, h.in_shape, h.out_shape);
    };
    st.plan = std::move(plan);
    return st;
  }

  static runtime::Step sort_scan_step(const KernelSpec& k) {
    auto plan = std::make_shared<cpu::SortScanPlan>(cpu::plan_sort_scan(k));
    runtime::Step st;
    st.kind = runtime::Step::Kind::Library;
    st.name = std::string(ir::op_name(k.library->op)) + "_" + std::string(ir::name(k.out_dtype));
    st.items = plan->rows;
    st.cost = plan->cost_per_row();
    st.bytes = numel(k.shape) * (itemsize(k.library->in_dtype) + itemsize(k.out_dtype));
    st.slots = k.slots;
    st.library = cpu::run_sort_scan;
    st.plan = std::move(plan);
    return st;
  }

  // An output's work, for the pool's decision (runtime::kParallelWork): the operations of the
  // kernel as compiled (transcendentals decomposed: a tanh is about a hundred, an add one;
  // codegen::traffic), at least one per element it reduces.
  static int64_t work_per_output(const KernelSpec& k) {
    KernelSpec d = k;
    for (NodeRef* r : d.roots()) *r = decompose(*r);
    const double outs = static_cast<double>(std::max<int64_t>(numel(k.shape), 1));
    const int64_t least = k.rbody || k.row() ? std::max<int64_t>(k.reduce_size(), 1) *
                                                   std::max<size_t>(k.stages.size(), 1)
                                             : 1;
    return std::max<int64_t>(least, static_cast<int64_t>(traffic(d, Plan{}).flops / outs));
  }

  void add_kernel_steps(const KernelSpec& k, runtime::Program& p, CompileStats& stats) {
    const HostKernel hk = kernel_for(k, /*tiered=*/true, stats);
    int64_t outs = numel(k.shape);
    int64_t bytes = k.out_numel() * itemsize(k.out_dtype);
    if (hk.phase1) {
      // Two-phase reduction: the blocks' partials in a scratch slot, then their combination.
      int64_t nb = k.blocks();
      int scratch = static_cast<int>(p.slot_bytes.size());
      p.slot_bytes.push_back(outs * nb * itemsize(k.rbody->dtype));
      auto slots = k.slots;
      slots.push_back(scratch);
      // Phase 1's items are (output, block) pairs, or (output, group of blocks) under a plan
      // that interleaves blocks (codegen/plan.h); an item's cost is its elements.
      const int64_t items = hk.phase1_items;
      p.steps.push_back(kernel_step(hk.phase1, hk.live_phase1, hk.name + "_p1", items,
                                    kReduceBlock * ((outs * nb + items - 1) / items), bytes, slots,
                                    hk.code));
      p.steps.push_back(
          kernel_step(hk.main, hk.live_main, hk.name, outs, nb, bytes, slots, hk.code));
    } else {
      // The bytes read, about: a reduction reads its rows once per output; a row kernel writing
      // rows reads about as much as it writes.
      int64_t reduced =
          k.rbody || (k.row() && !k.row_out) ? std::max<int64_t>(k.reduce_size(), 1) : 1;
      p.steps.push_back(kernel_step(hk.main, hk.live_main, hk.name, outs, work_per_output(k),
                                    bytes * reduced, k.slots, hk.code));
    }
  }

  std::unordered_map<KernelSpec, CachedKernel, SpecHash> kernels_;
  std::unordered_map<std::string, CachedKernel> by_name_;  // distinct specs may render alike
  size_t kernel_inserts_ = 0;
};

}  // namespace

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<HostBackend>(); }

}  // namespace codegen
