// The GPU backend (CUDA, HIP): one source per program in the kind's C dialect (the shared
// helpers once, then each distinct kernel), compiled for the device's arch through the GPU
// binary disk cache (NVRTC / hiprtc), loaded as one module; each kernel a launch of its entry
// with the device's geometry. Sorts on CUDA may be CUB's radix sorts instead (library steps).
#include <chrono>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>

#include "codegen/backend.h"
#include "codegen/cuda/cubin_cache.h"
#include "codegen/decompose.h"
#include "codegen/gpu/device_desc.h"
#include "codegen/hip/code_object_cache.h"
#include "ir/debug.h"
#include "runtime/cuda/cub_sort.h"
#include "runtime/gpu/context.h"
#include "runtime/profile.h"

namespace codegen {

using namespace ir;

namespace {

GpuTarget default_target(runtime::DeviceKind kind) {
  if (kind == runtime::DeviceKind::HIP) return {&hip_dialect(), hip::code_object_for};
  return {&cuda_dialect(), cuda::cubin_for};
}

// Bytes a kernel reads (each load over its view's extent) and writes, for DEBUG=2.
int64_t kernel_bytes(const KernelSpec& k) {
  int64_t bytes = k.out_numel() * itemsize(k.out_dtype);
  for (NodeRef root : k.roots()) {
    for (NodeRef n : toposort({root}))
      if (n->op == Op::Load) bytes += numel(arg_load(n).view.shape) * itemsize(n->dtype);
  }
  return bytes;
}

// A program's kernels rendered into one source: each kernel's entry name (named after its own
// text: equal kernels share one name and one function) and its entries' launches, as lower()
// chose them (work items, threads).
struct Rendered {
  std::string source;
  std::vector<std::string> names;
  std::vector<std::vector<CLaunch>> launches;
};

// The one place the C renderer is called.
Rendered render(const Schedule& s, const CDialect& dialect, const DeviceDesc& device) {
  Rendered r;
  r.source = render_c_prelude(dialect);
  std::map<std::string, bool> seen;
  for (const auto& spec : s.kernels) {
    if (spec.library && spec.library->op == Op::HostCall) {  // a host function's step, no code
      r.names.emplace_back();
      r.launches.emplace_back();
      continue;
    }
    KernelSpec k = spec;
    for (NodeRef* r : k.roots()) *r = decompose(*r);
    CKernel ck = render_c_kernel_for_launch(k, "RUNE_KERNEL_NAME", dialect, device);
    std::string text = std::move(ck.text);
    const std::string name = kernel_symbol(text);
    replace_all(text, "RUNE_KERNEL_NAME", name);
    r.names.push_back(name);
    r.launches.push_back(std::move(ck.launches));
    if (!seen.emplace(name, true).second) continue;
    r.source += text;
  }
  return r;
}

// A Sort / Argsort kernel on a device whose sorts use CUB (runtime/cuda/cub_sort.h): adds a
// library step running the module's radix sort, and its scratch as a temporary slot, and
// returns true. False: the rendered rank sort runs (HIP, a fake driver, no module). DEBUG=1
// says which.
bool add_cub_sort(runtime::Program& p, const KernelSpec& k, runtime::gpu::Context& ctx) {
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

// A HostCall with a GPU form (ir::HostFn::queue_on_gpu, e.g. an NCCL collective): a library
// step that queues it on the device's stream, between the program's kernels.
runtime::Step host_call_step(const KernelSpec& k) {
  const LibraryCall& lib = *k.library;
  runtime::Step st;
  st.kind = runtime::Step::Kind::Library;
  st.name = lib.host.fn->describe();
  st.items = 1;
  st.bytes = (numel(lib.in_shape) + numel(k.shape)) * itemsize(lib.in_dtype);
  st.slots = k.slots;
  // Not a kernel: a nonzero grid only says it runs, also for empty operands (every rank must
  // make the call: the function's header check is a collective).
  st.geometry = runtime::gpu::LaunchGeometry{1, 1};
  st.queue = [fn = lib.host.fn, t = lib.in_dtype, in_shape = lib.in_shape, out_shape = k.shape,
              offset = lib.offset](runtime::gpu::Context& c, char* const* bufs) {
    fn->queue_on_gpu(&c, bufs[1] + offset * itemsize(t), bufs[0], t, in_shape, out_shape);
  };
  return st;
}

runtime::Step launch_step(runtime::gpu::Handle fn, std::string name, int64_t items, int64_t bytes,
                          std::vector<int> slots, runtime::gpu::LaunchGeometry geometry) {
  runtime::Step st;
  st.kind = runtime::Step::Kind::Kernel;
  st.entry = fn;
  st.name = std::move(name);
  st.items = items;
  st.bytes = bytes;
  st.slots = std::move(slots);
  st.geometry = geometry;
  return st;
}

class GpuBackend final : public Backend {
 public:
  explicit GpuBackend(runtime::DeviceKind kind) : target_(default_target(kind)) {}
  void set_target(GpuTarget t) { target_ = std::move(t); }

  void add_steps(const Schedule& s, runtime::Program& p, CompileStats& stats) override {
    bool code = false;  // whether any kernel is rendered (a lone host call needs no module)
    for (const auto& k : s.kernels) {
      const bool host_call = k.library && k.library->op == Op::HostCall;
      if (host_call && !k.library->host.fn->runs_on_gpu())
        throw std::invalid_argument(
            k.library->host.fn->api() + ": cannot run inside a program for " + p.device.name() +
            " (this host function has no GPU form); call it between compiled steps");
      code |= !host_call;
    }
    runtime::gpu::Context& ctx = runtime::gpu::context(p.device, "rune::compile");
    const GpuTarget target = target_;
    // Every plan decision reads the runtime's description of the device (tensor cores and
    // cp.async need CUDA sm_80: on an older arch the opt-in precisions keep the SIMT plan,
    // docs/gpu.md "The tiled matrix product"); the dialect only spells the lowered kernels.
    const CDialect& dialect = *target.dialect;
    Rendered r = render(s, dialect, gpu_device_desc(ctx.info()));
    if (!code) {
      for (const auto& k : s.kernels) p.steps.push_back(host_call_step(k));
      return;
    }
    if (debug_level() >= 5)
      std::fprintf(stderr, "rune: %s source for %s:\n%s\n", target.dialect->name.c_str(),
                   ctx.info().arch.c_str(), r.source.c_str());
    auto t0 = std::chrono::steady_clock::now();
    runtime::ProfileSpan span("compile", target.dialect->name + " " + ctx.info().arch,
                              p.device.name());
    std::string image = target.compile(r.source, ctx.info().arch);
    ++stats.sources;
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
                   p.device.name().c_str(), ctx.info().arch.c_str(), ms);
    }
    const auto& info = ctx.info();
    auto geometry = [&](int64_t n) {
      return runtime::gpu::launch_geometry(n, info.multiprocessors, info.warp_size);
    };
    for (size_t j = 0; j < s.kernels.size(); ++j) {
      const KernelSpec& k = s.kernels[j];
      if (k.library && k.library->op == Op::HostCall) {
        p.steps.push_back(host_call_step(k));
        continue;
      }
      const std::string& name = r.names[j];
      int64_t outs = numel(k.shape);
      int64_t bytes = kernel_bytes(k);
      if (add_cub_sort(p, k, ctx)) continue;  // CUB's radix sort instead of the rank sort kernel
      // A two-phase reduction (codegen/gpu/c_renderer.h) writes B partials per output into a
      // scratch slot in its first entry (_p1) and combines them in the second.
      auto slots = k.slots;
      int64_t combine_bytes = 0;
      if (k.rbody && k.blocks() > 1) {
        int64_t nb = k.blocks();
        slots.push_back(static_cast<int>(p.slot_bytes.size()));
        p.slot_bytes.push_back(outs * nb * itemsize(k.rbody->dtype));
        combine_bytes = outs * (itemsize(k.out_dtype) + nb * itemsize(k.rbody->dtype));
      }
      for (const CLaunch& l : r.launches[j]) {
        const bool combine = combine_bytes && l.suffix.empty();
        p.steps.push_back(launch_step(
            function(name + l.suffix), name + l.suffix, l.items, combine ? combine_bytes : bytes,
            slots,
            l.block ? runtime::gpu::fixed_block_geometry(l.threads, l.block, info.multiprocessors)
                    : geometry(l.threads)));
      }
    }
  }

 private:
  GpuTarget target_;
};

}  // namespace

std::unique_ptr<Backend> make_gpu_backend(runtime::DeviceKind kind) {
  return std::make_unique<GpuBackend>(kind);
}

void set_gpu_backend_target(Backend& gpu_backend, GpuTarget target) {
  static_cast<GpuBackend&>(gpu_backend).set_target(std::move(target));
}

}  // namespace codegen
