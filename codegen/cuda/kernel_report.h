// The plan report of GPU kernels: for each kernel, its plan, the FLOP and global bytes that plan
// issues (codegen::traffic) and the compiled function's resources as ptxas reports them when
// NVRTC builds the cubin (registers, stack frame, spill stores and loads, shared memory). The
// toolkit here has no cuobjdump or nvdisasm; ptxas's verbose report (NVRTC
// --ptxas-options=-v) gives the same numbers for the cubin that runs. No GPU is needed.
// tools/gpu-plan-report prints it for the products of bench_gpu's shapes.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "codegen/kernel.h"
#include "codegen/plan.h"

namespace codegen::cuda {

// One function of a cubin, as ptxas reports it.
struct FunctionResources {
  std::string name;
  int registers = -1;  // -1: not reported
  int64_t stack_bytes = 0, spill_store_bytes = 0, spill_load_bytes = 0, shared_bytes = 0;
};

// Parses ptxas's verbose lines ("Compiling entry function 'f'", "N bytes stack frame, N bytes
// spill stores, N bytes spill loads", "Used N registers, ... N bytes smem") per function.
std::vector<FunctionResources> parse_ptxas_log(const std::string& log);

struct KernelReport {
  std::string label;  // the caller's name for the kernel
  Plan plan;
  Traffic traffic;
  std::vector<FunctionResources> functions;  // its entries, in launch order
  double flops_per_byte() const {
    return traffic.global_bytes > 0 ? traffic.flops / traffic.global_bytes : 0;
  }
};

// Renders each kernel in the CUDA dialect, compiles it with NVRTC for `arch` and reports it.
// Throws as nvrtc_compile does (no libnvrtc, a compile error).
KernelReport report_kernel(const KernelSpec& k, const std::string& label, const std::string& arch);

// One line per function: "<label> <entry>: plan <plan>; <regs> registers, <stack> B stack,
// <spills> B spill stores, <loads> B spill loads, <smem> B shared; <f> FLOP per global byte".
std::string format_report(const KernelReport& r);

}  // namespace codegen::cuda
