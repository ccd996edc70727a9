// The interface between rune's libraries and its LLVM module, librune_llvm.so: the host
// compiler (codegen/cpu/orc_compiler.cpp and libLLVM, which only it links) built as a shared
// module that codegen/cpu/llvm_module.cpp loads with dlopen the first time a process compiles a
// host kernel. A process whose kernels all come from the disk cache never loads it, nor libLLVM
// (issue 42). Plain C types and function pointers only: no C++ object, allocation or exception
// crosses it, so the module and the libraries agree on nothing but this table.
#pragma once
#include <atomic>
#include <cstddef>
#include <cstdint>

extern "C" {

// Bumped whenever the table changes: a module of another version is refused, by name.
#define RUNE_LLVM_MODULE_API_VERSION 1

// Where the module writes a result (an object, an id) or an error message: `write` appends.
struct RuneLlvmSink {
  void* ctx;
  void (*write)(void* ctx, const char* data, size_t size);
};

// Called as each step of a compile begins, with its name ("llvm parse", "llvm optimise",
// "llvm codegen"): the caller's profile spans (the last one ends when compile returns).
struct RunePhaseHook {
  void* ctx;
  void (*phase)(void* ctx, const char* name);
};

struct RuneLlvmApi {
  int version;
  // Every function returns 0 on success; otherwise it wrote the error message to `err`.
  // Starts LLVM for this CPU (once; later calls return at once).
  int (*start)(RuneLlvmSink err);
  // The code's identity (LLVM version, triple, CPU name and features): see cpu::target_id.
  int (*target_id)(RuneLlvmSink out, RuneLlvmSink err);
  // IR text -> relocatable object, written to `out`. tier: 0 quick, 1 full (cpu::Tier).
  // Returns 2, writing nothing, when `cancel` was set during the compile.
  int (*compile)(const char* ir, size_t ir_size, const char* module_name, int tier,
                 const std::atomic<bool>* cancel, RunePhaseHook hook, RuneLlvmSink out,
                 RuneLlvmSink err);
  // Loads an object with ORC; addresses[i] receives the address of symbols[i]. `generation`
  // names this load for unload.
  int (*load)(const char* object, size_t size, const char* const* symbols, size_t count,
              void** addresses, uint64_t* generation, RuneLlvmSink err);
  // Frees what load(symbols[0] == name) made, unless that name was loaded again since.
  void (*unload)(const char* name, uint64_t generation);
};

// The module's one exported symbol.
typedef const RuneLlvmApi* (*RuneLlvmApiFn)(int version);
const RuneLlvmApi* rune_llvm_module_api(int version);
}
