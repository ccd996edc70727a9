// Every difference between the LLVM versions we build against (14 to 19) lives here: the IR
// text we render and the C++ API we call. LLVM 15 made pointers opaque (`ptr`) and changed
// symbol lookups to ExecutorAddr; 17 moved Host.h; 18 renamed the codegen enums.
#pragma once
#include <llvm/Config/llvm-config.h>

#include <string>

namespace codegen::cpu::dialect {

inline constexpr bool kOpaquePointers = LLVM_VERSION_MAJOR >= 15;

// The type of a pointer to `elem` values.
inline std::string ptr(const std::string& elem) { return kOpaquePointers ? "ptr" : elem + "*"; }

}  // namespace codegen::cpu::dialect

namespace codegen::cpu::compat {

// The address of a symbol returned by LLJIT::lookup.
template <class Symbol>
void* address(const Symbol& s) {
#if LLVM_VERSION_MAJOR >= 15
  return s.template toPtr<void*>();
#else
  return reinterpret_cast<void*>(s.getAddress());
#endif
}

}  // namespace codegen::cpu::compat

#if LLVM_VERSION_MAJOR >= 17
#define RUNE_LLVM_HOST_H <llvm/TargetParser/Host.h>
#else
#define RUNE_LLVM_HOST_H <llvm/Support/Host.h>
#endif
#if LLVM_VERSION_MAJOR >= 18
#define RUNE_LLVM_OPT_AGGRESSIVE llvm::CodeGenOptLevel::Aggressive
#define RUNE_LLVM_OPT_NONE llvm::CodeGenOptLevel::None
#define RUNE_LLVM_OBJECT_FILE llvm::CodeGenFileType::ObjectFile
#else
#define RUNE_LLVM_OPT_AGGRESSIVE llvm::CodeGenOpt::Aggressive
#define RUNE_LLVM_OPT_NONE llvm::CodeGenOpt::None
#define RUNE_LLVM_OBJECT_FILE llvm::CGFT_ObjectFile
#endif
