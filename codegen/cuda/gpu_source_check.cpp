#include "codegen/cuda/gpu_source_check.h"

#include <stdexcept>

#include "codegen/c_renderer.h"
#include "codegen/cuda/nvrtc.h"

namespace codegen {

void check_cuda_source(const KernelSpec& decomposed) {
  std::string src = render_c(decomposed, "rune_check", cuda_dialect());
  for (const char* arch : kCheckArchs) {
    try {
      cuda::nvrtc_compile(src, arch);
    } catch (const std::runtime_error& e) {
      throw std::runtime_error(std::string("check_cuda_source: ") + e.what());
    }
  }
}

}  // namespace codegen
