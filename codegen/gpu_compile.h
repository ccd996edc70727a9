// The compile pipeline for a GPU, the device twin of codegen/compile.h:
//   schedule -> decompose -> render_c (the device's dialect) -> NVRTC / hiprtc for the device's
//   arch (through the GPU binary disk cache) -> module load -> runtime::gpu::GpuProgram.
// Programs are cached in memory by their roots (interned nodes), the input count and the device
// (a device implies its arch); one source and one module per program.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/c_renderer.h"
#include "ir/node.h"
#include "runtime/gpu/program.h"

namespace codegen {

// Throws std::invalid_argument "<api>: device CUDA:0 is unavailable: ..." without the device,
// and std::runtime_error with the compiler's log when a kernel does not compile.
std::shared_ptr<const runtime::gpu::GpuProgram> compile_gpu(const std::vector<ir::NodeRef>& roots,
                                                            int n_inputs, runtime::Device device);

// How kernels for a device kind are rendered and turned into a module image: the dialect, and
// compile(source, arch) -> the bytes handed to the driver's module_load.
struct GpuTarget {
  const CDialect* dialect = nullptr;
  std::function<std::string(const std::string& source, const std::string& arch)> compile;
};
// Replaces the target of `kind` (tests: a host dialect compiled by the system compiler, run by
// a fake driver). Programs compiled before keep their modules.
void set_gpu_target_for_testing(runtime::DeviceKind kind, GpuTarget target);

struct GpuCompileStats {
  size_t programs = 0;  // programs built (memory-cache misses)
  size_t sources = 0;   // sources compiled (or read from the disk cache)
};
GpuCompileStats gpu_compile_stats();

}  // namespace codegen
