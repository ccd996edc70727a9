// The host compiler: LLVM IR text -> optimised object code (O3 for this CPU, no FP
// contraction) -> loaded into the process with ORC. LLVM headers stay inside codegen/cpu.
#pragma once
#include <memory>
#include <string>
#include <vector>

namespace codegen::cpu {

// Identifies the code this compiler produces (LLVM version, CPU, features): part of every
// disk cache key, so a cache shared between machines never loads foreign code.
const std::string& target_id();
// Compiles IR text to a relocatable object. Throws std::runtime_error with LLVM's diagnostic.
std::string compile_to_object(const std::string& ir, const std::string& module_name);
// A loaded object: the addresses of its symbols, valid while `owner` (or a copy) lives; the
// last owner unloads the object and frees its code.
struct LoadedObject {
  std::vector<void*> addresses;
  std::shared_ptr<void> owner;
};
// Loads an object into the process and returns the addresses of `symbols`.
LoadedObject load_object(const std::string& object, const std::vector<std::string>& symbols);

}  // namespace codegen::cpu
