// hiprtc (the HIP runtime compiler), loaded at run time with dlopen from libamdhip64.so.5: the
// library builds and runs without ROCm, and says what is missing when a HIP compile is asked
// for. No GPU is needed to compile.
#pragma once
#include <string>
#include <vector>

namespace codegen::hip {

// The archs hiprtc_compile accepts (the part before any ':' feature suffix): those measured to
// compile with the hiprtc of ROCm 5.2. hiprtc 5.2 aborts the calling process for gfx940-942 and
// gfx1100-1101 (and likely the other gfx11xx), so any arch not listed is refused with an error
// instead of being handed to hiprtc.
const std::vector<std::string>& hiprtc_archs();

// Compiles HIP C source to a code object (an AMDGPU ELF, loadable with hipModuleLoadData) for
// `arch` ("gfx90a", "gfx1030", "gfx90a:xnack-", ...) with -O3 and -ffp-contract=off (no
// contraction into FMA: docs/semantics.md §5). Throws std::runtime_error starting with
// "hiprtc_compile:" with hiprtc's log and the numbered source when compilation fails, naming
// the arch when it is not in hiprtc_archs(), and naming libamdhip64.so.5 when the library
// cannot be loaded.
std::string hiprtc_compile(const std::string& source, const std::string& arch);

// Whether hiprtc can be loaded (loads it on first call).
bool hiprtc_available();
// Why libamdhip64 could not be loaded ("" when it was).
std::string hiprtc_load_error();
// "major.minor (library file)" of the loaded hiprtc, e.g. "9.0 (libamdhip64.so.5.2.21153)":
// hiprtcVersion alone does not change with ROCm releases. "" when not loaded.
std::string hiprtc_version();

}  // namespace codegen::hip
