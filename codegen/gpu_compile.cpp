#include "codegen/gpu_compile.h"

#include <chrono>
#include <cstdio>
#include <map>
#include <mutex>
#include <stdexcept>
#include <unordered_map>

#include "codegen/cuda/cubin_cache.h"
#include "codegen/decompose.h"
#include "codegen/hip/code_object_cache.h"
#include "codegen/inplace.h"
#include "codegen/schedule.h"
#include "ir/debug.h"
#include "ir/hash.h"
#include "runtime/cuda/cub_sort.h"
#include "runtime/gpu/context.h"
#include "runtime/profile.h"

namespace codegen {

using namespace ir;

namespace {

struct Key {
  std::vector<NodeRef> roots;
  int n_inputs;
  runtime::Device device;
  bool operator==(const Key&) const = default;
};
struct KeyHash {
  size_t operator()(const Key& k) const {
    size_t h = static_cast<size_t>(k.n_inputs) * 31 + static_cast<size_t>(k.device.kind) * 64 +
               static_cast<size_t>(k.device.index);
    for (auto r : k.roots) h = h * 1000003u ^ std::hash<const void*>()(r);
    return h;
  }
};

struct Caches {
  std::mutex programs_mu;
  // Held weakly, as the host's (codegen/compile.cpp): a program lives as long as its owners.
  std::unordered_map<Key, std::weak_ptr<const runtime::gpu::GpuProgram>, KeyHash> programs;
  size_t inserts = 0;
  std::mutex compile_mu;  // one compile at a time; guards targets and stats
  std::map<runtime::DeviceKind, GpuTarget> targets;
  GpuCompileStats stats;
};
void erase_expired(Caches& c) {
  std::erase_if(c.programs, [](const auto& entry) { return entry.second.expired(); });
}
Caches& caches() {
  static auto* c = [] {
    auto* caches = new Caches;  // lives for the process: programs point into it
    // The nodes its keys hold survive node collections; expired entries go first.
    ir::add_node_roots([caches](std::vector<NodeRef>& roots) {
      std::lock_guard lock(caches->programs_mu);
      erase_expired(*caches);
      for (const auto& [key, p] : caches->programs)
        roots.insert(roots.end(), key.roots.begin(), key.roots.end());
    });
    return caches;
  }();
  return *c;
}

GpuTarget default_target(runtime::DeviceKind kind) {
  if (kind == runtime::DeviceKind::HIP) return {&hip_dialect(), hip::code_object_for};
  return {&cuda_dialect(), cuda::cubin_for};
}

void replace_all(std::string& s, const std::string& from, const std::string& to) {
  for (size_t p = s.find(from); p != std::string::npos; p = s.find(from, p + to.size()))
    s.replace(p, from.size(), to);
}

// Bytes a kernel reads (each load over its view's extent) and writes, for DEBUG=2.
int64_t kernel_bytes(const KernelSpec& k) {
  int64_t bytes = numel(k.shape) * itemsize(k.out_dtype);
  for (NodeRef root : {k.body, k.rbody}) {
    if (!root) continue;
    for (NodeRef n : toposort({root}))
      if (n->op == Op::Load) bytes += numel(arg_load(n).view.shape) * itemsize(n->dtype);
  }
  return bytes;
}

// A Sort / Argsort kernel on a device whose sorts use CUB (runtime/cuda/cub_sort.h): adds a host
// step running the module's radix sort, and its scratch as a temporary slot, and returns true.
// False: the rendered rank sort runs (HIP, a fake driver, no module). DEBUG=1 says which.
bool add_cub_sort(runtime::gpu::GpuProgram& p, const KernelSpec& k, runtime::gpu::Context& ctx) {
  if (!k.library || k.library->op == Op::Cumsum) return false;
  const int64_t len = k.shape.empty() ? 1 : k.shape.back();
  const int64_t rows = len == 0 ? 0 : numel(k.shape) / len;
  std::string why;
  const auto* m = runtime::cuda::cub_module_for(ctx.device().kind, ctx.driver(), &why);
  if (debug_level() >= 1)
    std::fprintf(stderr, "rune: %s of %lld x %lld %s on %s: %s%s\n",
                 k.library->op == Op::Argsort ? "argsort" : "sort", static_cast<long long>(rows),
                 static_cast<long long>(len), std::string(name(k.library->in_dtype)).c_str(),
                 ctx.device().name().c_str(), m ? "CUB radix sort from " : "rank sort kernel (",
                 m ? m->path.c_str() : (why + ")").c_str());
  if (!m) return false;
  int64_t scratch_bytes = 0;
  auto st = runtime::cuda::cub_sort_step(ctx, *m, k.library->op == Op::Argsort, k.library->in_dtype,
                                         k.library->offset, rows, len, &scratch_bytes);
  st.slots = {k.slots[0], k.slots[1], static_cast<int>(p.slot_bytes.size())};
  p.slot_bytes.push_back(scratch_bytes);
  p.steps.push_back(std::move(st));
  return true;
}

std::shared_ptr<const runtime::gpu::GpuProgram> build(const std::vector<NodeRef>& roots,
                                                      int n_inputs, runtime::Device device,
                                                      Caches& c) {
  runtime::gpu::Context& ctx = runtime::gpu::context(device, "rune::compile");
  auto it_t = c.targets.find(device.kind);
  GpuTarget target = it_t != c.targets.end() ? it_t->second : default_target(device.kind);
  Schedule s = schedule(roots, n_inputs, /*fuse_epilogues=*/true);
  if (debug_level() >= 3)
    std::fprintf(stderr, "rune: schedule for %s: %zu kernels, %zu slots\n", device.name().c_str(),
                 s.kernels.size(), s.slots.size());
  // One source per program: the shared helpers once, then each distinct kernel, named after
  // its own text (equal kernels share one name and one function).
  std::string source = render_c_prelude(*target.dialect);
  std::vector<std::string> names;
  std::vector<int64_t> lanes;  // threads per reduction work item (c_lane_threads: 8)
  std::vector<bool> vectors;   // 4 outputs per thread (c_vector_loads)
  std::map<std::string, bool> seen;
  for (const auto& spec : s.kernels) {
    KernelSpec k = spec;
    if (k.body) k.body = decompose(k.body);
    if (k.rbody) k.rbody = decompose(k.rbody);
    std::string text = render_c_kernel(k, "RUNE_KERNEL_NAME", *target.dialect);
    char name[32];
    std::snprintf(name, sizeof name, "rk_%016llx",
                  static_cast<unsigned long long>(ir::fnv1a64(text)));
    replace_all(text, "RUNE_KERNEL_NAME", name);
    names.push_back(name);
    lanes.push_back(c_lane_threads(k, *target.dialect) ? kReduceLanes : 1);
    vectors.push_back(c_vector_loads(k, *target.dialect));
    if (!seen.emplace(name, true).second) continue;
    source += text;
  }
  if (debug_level() >= 5)
    std::fprintf(stderr, "rune: %s source for %s:\n%s\n", target.dialect->name.c_str(),
                 ctx.info().arch.c_str(), source.c_str());
  auto t0 = std::chrono::steady_clock::now();
  runtime::ProfileSpan span("compile", target.dialect->name + " " + ctx.info().arch, device.name());
  std::string image = target.compile(source, ctx.info().arch);
  ++c.stats.sources;
  const auto& drv = ctx.driver();
  ctx.make_current();
  runtime::gpu::Handle module = nullptr;
  ctx.check(drv.module_load(&module, image.data()), "module_load");
  auto function = [&](const std::string& name) {
    runtime::gpu::Handle f = nullptr;
    ctx.check(drv.module_function(&f, module, name.c_str()), "module_function");
    return f;
  };
  if (debug_level() >= 1) {
    double ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    std::fprintf(stderr, "rune: %zu kernels for %s (%s) ready in %.2f ms\n", s.kernels.size(),
                 device.name().c_str(), ctx.info().arch.c_str(), ms);
  }
  auto p = std::make_shared<runtime::gpu::GpuProgram>();
  p->device = device;
  p->n_inputs = n_inputs;
  p->output_slots = s.output_slots;
  for (size_t i = 0; i < s.slots.size(); ++i)
    p->slot_bytes.push_back(
        static_cast<int>(i) < n_inputs ? -1 : s.slots[i].numel * itemsize(s.slots[i].dtype));
  const auto& info = ctx.info();
  auto geometry = [&](int64_t n) {
    return runtime::gpu::launch_geometry(n, info.multiprocessors, info.warp_size);
  };
  for (size_t j = 0; j < s.kernels.size(); ++j) {
    const KernelSpec& k = s.kernels[j];
    const std::string& name = names[j];
    int64_t outs = numel(k.shape);
    int64_t bytes = kernel_bytes(k);
    if (add_cub_sort(*p, k, ctx)) continue;  // CUB's radix sort instead of the rank sort kernel
    if (k.rbody && k.blocks() > 1) {
      // Two-phase reduction (codegen/c_renderer.h): B partials per output in a scratch slot.
      int64_t nb = k.blocks();
      int scratch = static_cast<int>(p->slot_bytes.size());
      p->slot_bytes.push_back(outs * nb * itemsize(k.rbody->dtype));
      auto slots = k.slots;
      slots.push_back(scratch);
      int64_t items = outs * nb * lanes[j];
      p->steps.push_back(
          {function(name + "_p1"), name + "_p1", items, bytes, slots, geometry(items)});
      int64_t combine_bytes = outs * (itemsize(k.out_dtype) + nb * itemsize(k.rbody->dtype));
      p->steps.push_back({function(name), name, outs, combine_bytes, slots, geometry(outs)});
    } else {
      int64_t items = outs * lanes[j];
      int64_t threads = vectors[j] ? (items + 3) / 4 : items;
      p->steps.push_back({function(name), name, items, bytes, k.slots, geometry(threads)});
    }
  }
  p->inplace_inputs = inplace_inputs(s);
  p->finalize();
  ++c.stats.programs;
  return p;
}

}  // namespace

std::shared_ptr<const runtime::gpu::GpuProgram> compile_gpu(const std::vector<NodeRef>& roots,
                                                            int n_inputs, runtime::Device device) {
  ir::NodeUse use;  // the nodes built while compiling stay until it is done
  auto& c = caches();
  Key key{roots, n_inputs, device};
  auto cached = [&]() -> std::shared_ptr<const runtime::gpu::GpuProgram> {
    std::lock_guard lock(c.programs_mu);
    auto it = c.programs.find(key);
    return it == c.programs.end() ? nullptr : it->second.lock();
  };
  if (auto p = cached()) return p;
  std::lock_guard compile(c.compile_mu);
  if (auto p = cached()) return p;
  auto p = build(roots, n_inputs, device, c);
  std::lock_guard lock(c.programs_mu);
  c.programs[key] = p;
  if (++c.inserts % 1024 == 0) erase_expired(c);
  return p;
}

void set_gpu_target_for_testing(runtime::DeviceKind kind, GpuTarget target) {
  auto& c = caches();
  std::lock_guard lock(c.compile_mu);
  c.targets[kind] = std::move(target);
}

GpuCompileStats gpu_compile_stats() {
  auto& c = caches();
  std::lock_guard lock(c.compile_mu);
  return c.stats;
}

}  // namespace codegen
