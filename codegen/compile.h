// The compile pipeline, one readable function of named passes, for every device:
//   schedule -> decompose -> render -> compile -> load -> runtime::Program
// where render, compile and load are the device kind's backend (codegen/backend.h): the host's
// renders LLVM IR and compiles it with ORC through the kernel disk cache; a GPU's renders the C
// dialect of its kind and compiles it with NVRTC / hiprtc through the GPU binary disk cache.
// Programs are cached in memory by their roots (interned nodes: a pointer is a structure), the
// input count and the device (a device implies its arch); host kernels by their structure.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "codegen/gpu/c_renderer.h"
#include "codegen/kernel.h"
#include "ir/node.h"
#include "runtime/device.h"
#include "runtime/program.h"

namespace codegen {

// The program of `roots` over Params 0..n_inputs-1 for `device`. Throws std::invalid_argument
// "rune::compile: device CUDA:0 is unavailable: ..." without the device, and std::runtime_error
// with the compiler's log when a GPU kernel does not compile.
std::shared_ptr<const runtime::Program> compile(const std::vector<ir::NodeRef>& roots, int n_inputs,
                                                runtime::Device device);
// The program of an eager op kind that serves every shape (codegen/kernel.h RuntimeSizes,
// core/eager_sized.h): `root` is the op over placeholder shapes; Params 0..n_inputs-2 are its
// operands and Param n_inputs-1 its int64 descriptor, read by the kernel only. Its one kernel's
// step has placeholder items: the caller sets each call's. The host only.
std::shared_ptr<const runtime::Program> compile_sized(ir::NodeRef root, int n_inputs,
                                                      runtime::Device device, RuntimeSizes sizes);

struct CompileStats {
  size_t programs = 0;           // programs built for any device (memory-cache misses)
  size_t kernels_compiled = 0;   // host kernels compiled by LLVM
  size_t kernels_from_disk = 0;  // host kernels loaded from the disk cache or prebuilt
  size_t kernels_prebuilt = 0;   // of those, the kernels built with rune (DiskCache::prebuilt)
  size_t sources = 0;            // GPU sources compiled (or read from the GPU binary cache)
  size_t kernels_upgraded = 0;   // host kernels whose full tier replaced their quick tier
};
CompileStats compile_stats();

// Blocks until every host kernel upgrade queued so far (a quick-tier kernel's full tier,
// compiled in the background: codegen/cpu/kernel_upgrades.h) is installed. For benchmarks that
// time steady-state code, and tests; the bits are the same before and after.
void wait_for_kernel_upgrades();
// Whether the background upgrade thread has been stopped (it is stopped when the process exits,
// before any static object is destroyed; later upgrades are dropped). For tests.
bool kernel_upgrades_stopped();

// How kernels for a GPU kind are rendered and turned into a module image: the dialect, and
// compile(source, arch) -> the bytes handed to the driver's module_load.
struct GpuTarget {
  const CDialect* dialect = nullptr;
  std::function<std::string(const std::string& source, const std::string& arch)> compile;
};
// Replaces the target of `kind` (tests: a host dialect compiled by the system compiler, run by
// a fake driver). Programs compiled before keep their modules.
void set_gpu_target_for_testing(runtime::DeviceKind kind, GpuTarget target);

}  // namespace codegen
