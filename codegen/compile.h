// The compile pipeline, one readable function of named passes:
//   schedule -> decompose -> render (LLVM IR) -> compile (ORC) -> cache (memory, disk).
// Programs are cached in memory by their roots (interned nodes: a pointer is a structure);
// kernels by their structure, and on disk by their source and the target.
#pragma once
#include <memory>
#include <vector>

#include "ir/node.h"
#include "runtime/program.h"

namespace codegen {

std::shared_ptr<const runtime::HostProgram> compile_host(const std::vector<ir::NodeRef>& roots,
                                                         int n_inputs);

struct CompileStats {
  size_t programs = 0;           // programs built (memory-cache misses)
  size_t kernels_compiled = 0;   // kernels compiled by LLVM
  size_t kernels_from_disk = 0;  // kernels loaded from the disk cache
};
CompileStats compile_stats();

}  // namespace codegen
