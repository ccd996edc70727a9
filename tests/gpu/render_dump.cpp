// Prints, for every kernel of the GPU source corpus (tests/gpu/gpu_corpus.h) on each GPU the
// backend plans for (CUDA sm_90 and sm_75, HIP gfx90a, the test suite's fake device) and at each
// matmul precision, the plan the device's description gives and a hash of the rendered source.
// Not a test: a change to how GPUs are described or planned that must not change what is
// rendered is checked by diffing this output before and after it:
//   build/tests/gpu/render_dump > before.txt   (then the change, the build)
//   build/tests/gpu/render_dump | diff before.txt -
// It also checks c_param_dtypes (the kernel's params without lowering) against the lowered
// kernel's params, and exits 1 on a difference.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

// Test executables get trace/rune.h from their precompiled header; the corpus needs it first.
#include "trace/rune.h"
// The corpus and what it renders with:
#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"
#include "codegen/lower.h"
#include "gpu/gpu_corpus.h"
#include "gpu_runtime/fake_driver.h"

namespace {

uint64_t fnv1a(const std::string& s) {
  uint64_t h = 1469598103934665603ull;
  for (unsigned char c : s) h = (h ^ c) * 1099511628211ull;
  return h;
}

}  // namespace

int main() {
  using namespace gpu_test;
  struct Gpu {
    const char* label;
    const codegen::CDialect* dialect;
    codegen::DeviceDesc (*device)();
  };
  const Gpu gpus[] = {
      {"cuda sm_90", &codegen::cuda_dialect(),
       [] { return codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_90"); }},
      {"cuda sm_75", &codegen::cuda_dialect(),
       [] { return codegen::gpu_device_desc(runtime::DeviceKind::CUDA, "sm_75"); }},
      {"hip gfx90a", &codegen::hip_dialect(),
       [] { return codegen::gpu_device_desc(runtime::DeviceKind::HIP, "gfx90a"); }},
      {"fake", &fake_gpu::host_dialect(), fake_gpu::fake_device_desc},
  };
  std::vector<Labelled> corpus;
  for (auto part : {corpus_elementwise, corpus_casts, corpus_reductions, corpus_movement,
                    corpus_transcendentals})
    for (auto& l : part()) corpus.push_back(std::move(l));
  int bad = 0;
  for (auto precision : {codegen::MatmulPrecision::Highest, codegen::MatmulPrecision::TF32,
                         codegen::MatmulPrecision::BF16}) {
    codegen::set_matmul_precision(precision);
    for (const Gpu& g : gpus) {
      const codegen::DeviceDesc device = g.device();  // reads the precision
      for (const Labelled& l : corpus) {
        const codegen::Plan plan = codegen::c_plan(l.k, device);
        std::string src;
        try {
          src = codegen::render_c(l.k, "k", *g.dialect, device);
        } catch (const std::exception& e) {
          src = std::string("throws: ") + e.what();
        }
        std::printf("%s | %s | %s | %s | %016llx\n", codegen::precision_name(precision), g.label,
                    l.label.c_str(), plan.str().c_str(),
                    static_cast<unsigned long long>(fnv1a(src)));
        std::vector<ir::DType> lowered;
        for (const auto& p : codegen::lower(l.k, plan).params) lowered.push_back(p.dtype);
        if (lowered != codegen::c_param_dtypes(l.k)) {
          std::fprintf(stderr, "render_dump: c_param_dtypes differs from the lowered params: %s\n",
                       l.label.c_str());
          ++bad;
        }
      }
    }
  }
  codegen::set_matmul_precision(codegen::MatmulPrecision::Highest);
  return bad ? 1 : 0;
}
