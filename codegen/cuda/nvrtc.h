// NVRTC, loaded at run time with dlopen: the library builds and runs without CUDA, and says
// what is missing when a CUDA compile is asked for. No GPU is needed to compile.
#pragma once
#include <string>

namespace codegen::cuda {

// Compiles CUDA C source to a cubin for `arch` ("sm_80", "sm_90", ...) with --fmad=false and
// IEEE division, sqrt and denormals (no fast math: docs/semantics.md §5).
// Throws std::runtime_error with NVRTC's log and the numbered source when compilation fails,
// and a message naming libnvrtc when the library cannot be loaded.
std::string nvrtc_compile(const std::string& source, const std::string& arch);
// The same, with ptxas's verbose report (registers, stack, spills, shared memory per function)
// in *ptxas_log (codegen/cuda/kernel_report.h parses it).
std::string nvrtc_compile(const std::string& source, const std::string& arch,
                          std::string* ptxas_log);

// Whether libnvrtc can be loaded (loads it on first call).
bool nvrtc_available();
// Why libnvrtc could not be loaded ("" when it was); "major.minor" of NVRTC when it was.
std::string nvrtc_load_error();
std::string nvrtc_version();

}  // namespace codegen::cuda
