// The host compiler: LLVM IR text -> optimised object code (O3 for this CPU, no FP
// contraction) -> loaded into the process. LLVM itself lives in a module of its own,
// librune_llvm.so (codegen/cpu/orc_compiler.cpp, the only user of LLVM's headers and library),
// which codegen/cpu/llvm_module.cpp loads with dlopen on the first call that needs LLVM: a
// compile, or target_id on a CPU no process has recorded yet. Objects are loaded by rune's own
// loader (codegen/cpu/object_loader.h), ORC only where it declines; so a process whose kernels
// all come from the disk cache never maps libLLVM (issue 42: a warm process starts in a few
// milliseconds instead of relocating libLLVM first).
#pragma once
#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace codegen::cpu {

// Identifies the code this compiler produces (LLVM version, CPU, features): part of every
// disk cache key, so a cache shared between machines never loads foreign code. LLVM computes
// it; the disk cache remembers it under a fingerprint of this CPU and LLVM library
// (codegen/cpu/host_target.h), so later processes on the same machine need no LLVM for it.
const std::string& target_id();
// How much LLVM works on a kernel (codegen/kernel_tiers.h decides which a kernel gets first):
//   Quick: a few cleanup passes (sroa, early-cse, instcombine, simplifycfg) and the fast
//          instruction selector: no vectorisation or unrolling, about 10x less compile time;
//   Full:  the O3 pipeline and aggressive code generation, the kernel's steady-state speed.
// The tier changes speed only, never bits: the lowering fixed every operation's order, the IR
// carries no fast-math flags and FP contraction is off in both, so no pass may reassociate,
// contract or otherwise change a floating-point result (tests/test_kernel_tiers.cpp compares).
enum class Tier { Quick, Full };
// Compiles IR text to a relocatable object. Throws std::runtime_error with LLVM's diagnostic.
// `cancel` (optional): once it reads true, the optimisation passes left are skipped and the
// result is an empty string (a process exiting while a background compile runs).
std::string compile_to_object(const std::string& ir, const std::string& module_name,
                              Tier tier = Tier::Full, const std::atomic<bool>* cancel = nullptr);
// A loaded object: the addresses of its symbols, valid while `owner` (or a copy) lives; the
// last owner unloads the object and frees its code.
struct LoadedObject {
  std::vector<void*> addresses;
  std::shared_ptr<void> owner;
};
// Loads an object into the process and returns the addresses of `symbols`: with rune's own
// loader, or with ORC where that declines (the reason is printed at DEBUG=1).
LoadedObject load_object(const std::string& object, const std::vector<std::string>& symbols);
// Loads with ORC only (tests compare the two loaders).
LoadedObject load_object_with_orc(const std::string& object,
                                  const std::vector<std::string>& symbols);
// Whether this process has loaded the LLVM module (and so libLLVM).
bool llvm_module_loaded();

}  // namespace codegen::cpu
