// rune's own loader for the host kernels' objects: the x86-64 ELF relocatable files that LLVM
// writes (cpu::compile_to_object) and the disk cache keeps. Loading one needs no LLVM, so a
// process whose kernels all come from the disk cache never loads libLLVM (issue 42: a warm
// process starts in milliseconds; relocating libLLVM alone cost most of them).
//
// It maps the object's allocated sections (code, constants, data) into fresh pages, applies the
// relocation kinds LLVM emits for PIC code in the small code model (64-bit absolute, 32- and
// 64-bit PC-relative, PLT and GOT references), binds undefined symbols (memset, memcpy, ...) to
// the process's definitions (dlsym, as ORC's process generator does) through jump stubs and GOT
// slots inside the mapping, and write-protects the pages (code read + execute, constants and
// GOT read-only). The machine code is the object's, byte for byte, save the relocated fields:
// the same bits as ORC's load of the same object.
//
// Anything it does not handle (another machine, a relocation kind, TLS, initialisers, a symbol
// the process lacks, a malformed file) makes load_elf_object return nullopt with the reason,
// and the caller loads the object with ORC instead: never a crash and never wrong code.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace codegen::cpu {

struct ElfLoad {
  std::vector<void*> addresses;  // of the requested symbols, in order
  std::shared_ptr<void> owner;   // the mapping: unmapped when the last copy goes
};

// Loads `object` and returns the addresses of `symbols` (defined, global symbols), or nullopt
// with `why` set when the object is not one this loader handles.
std::optional<ElfLoad> load_elf_object(const std::string& object,
                                       const std::vector<std::string>& symbols, std::string* why);

}  // namespace codegen::cpu
