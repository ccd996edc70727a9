// Checks that a kernel's CUDA rendering compiles: the CI gate that every generated GPU kernel is
// valid source, runnable without a GPU.
#pragma once
#include "codegen/kernel.h"

namespace codegen {

// The archs check_cuda_source compiles for.
inline constexpr const char* kCheckArchs[] = {"sm_80", "sm_90"};

// Renders `decomposed` (codegen/decompose.h already applied) as CUDA C and compiles it with
// NVRTC for each of kCheckArchs. Throws std::runtime_error with the source and NVRTC's log on
// failure (and std::runtime_error naming libnvrtc when it cannot be loaded).
void check_cuda_source(const KernelSpec& decomposed);

}  // namespace codegen
