#include "codegen/cuda/gpu_source_check.h"

#include <stdexcept>

#include "codegen/cuda/nvrtc.h"
#include "codegen/gpu/c_renderer.h"
#include "codegen/gpu/device_desc.h"

namespace codegen {

void check_cuda_source(const KernelSpec& decomposed) {
  for (const char* arch : kCheckArchs) {
    // Each arch's own plan (tensor cores and cp.async from sm_80).
    const std::string src = render_c(decomposed, "rune_check", cuda_dialect(),
                                     gpu_device_desc(runtime::DeviceKind::CUDA, arch));
    try {
      cuda::nvrtc_compile(src, arch);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string("check_cuda_source: ") + e.what());
    }
  }
}

}  // namespace codegen
