// Driving a runtime compiler (NVRTC, hiprtc), written once for both: load its library and
// resolve its table (codegen/cuda/nvrtc.def, codegen/hip/hiprtc.def, expanded by
// runtime/gpu/symbol_table.inc; the roles are named alike in both), then create a program,
// compile it with the caller's options, read the log and the binary and destroy the program.
// Errors start with the compiler's entry ("nvrtc_compile: ") and name the arch and the failing
// call; a failed compile carries the compiler's log and the numbered source.
#pragma once
#include <stdexcept>
#include <string>
#include <vector>

#include "runtime/gpu/symbols.h"

namespace codegen::gpu {

// What tells one runtime compiler's errors and program apart, e.g. NVRTC's
// {"nvrtc", "NVRTC", "cubin", "GetCUBIN", "cu", hint}.
struct RtcWords {
  const char* prefix;     // "nvrtc": errors start "nvrtc_compile: ", calls are "nvrtc<Role>"
  const char* log_title;  // "NVRTC": the log's heading, "--- NVRTC log ---"
  const char* binary;     // "cubin" / "code object"
  const char* get_code;   // the role of the call that reads the binary ("GetCUBIN"), for errors
  const char* extension;  // the program's name is "rune_kernel.<extension>"
  const char* no_code;    // appended to "no <binary> for <arch> (<error>)"
};

// A runtime compiler loaded once: its table (Fns expands the compiler's .def) or why not.
template <class Fns>
struct Rtc {
  runtime::gpu::Library lib;
  Fns fn;
  std::string error;  // why loading failed; "" when loaded
  int major = 0, minor = 0;
  bool loaded() const { return error.empty(); }
};

// Opens the first of `names` that loads and binds Fns from it; reads the version. The error:
// `not_loaded` then every name tried with its dlerror, or "<library> is not a usable <what>:
// symbol <sym> not found in <library>, ...".
template <class Fns>
Rtc<Fns> load_rtc(const std::vector<std::string>& names, const std::string& not_loaded,
                  const std::string& what) {
  Rtc<Fns> rtc;
  rtc.lib = runtime::gpu::Library::open_first(names);
  if (!rtc.lib.handle) {
    rtc.error = not_loaded + rtc.lib.tried;
    return rtc;
  }
  rtc.error = runtime::gpu::bind_table(rtc.lib, rtc.fn, what);
  if (rtc.loaded()) rtc.fn.Version(&rtc.major, &rtc.minor);
  return rtc;
}

// The program handle type of a compiler's table: T of CreateProgram(T* prog, ...).
template <class F>
struct ProgramOf;
template <class R, class P, class... Rest>
struct ProgramOf<R (*)(P*, Rest...)> {
  using type = P;
};

// The source with right-aligned line numbers, for compile errors.
std::string numbered(const std::string& source);
// The log as the compiler wrote it (size counting its NUL), without the trailing NULs.
std::string trimmed_log(std::string log);

// Compiles `source` with `options` to the compiler's binary; *log_out (when given) receives the
// compiler's log of a successful compile.
template <class Fns>
std::string rtc_compile(const Rtc<Fns>& rtc, const RtcWords& w, const std::string& source,
                        const std::string& arch, std::vector<const char*> options,
                        std::string* log_out = nullptr) {
  const Fns& fn = rtc.fn;
  const std::string entry = std::string(w.prefix) + "_compile: ";
  const std::string file_name = std::string("rune_kernel.") + w.extension;
  if (!rtc.loaded()) throw std::runtime_error(entry + rtc.error);
  auto failed = [&](const std::string& call, int r) {
    return std::runtime_error(entry + w.prefix + call + ": " + fn.GetErrorString(r));
  };
  typename ProgramOf<decltype(fn.CreateProgram)>::type prog = nullptr;
  int r = fn.CreateProgram(&prog, source.c_str(), file_name.c_str(), 0, nullptr, nullptr);
  if (r != 0) throw failed("CreateProgram", r);
  struct Guard {
    const Fns& fn;
    decltype(prog)& p;
    ~Guard() { fn.DestroyProgram(&p); }
  } guard{fn, prog};
  r = fn.CompileProgram(prog, static_cast<int>(options.size()), options.data());
  size_t log_size = 0;
  std::string log;
  if (fn.GetProgramLogSize(prog, &log_size) == 0 && log_size > 0) {
    log.resize(log_size);
    fn.GetProgramLog(prog, log.data());
    log = trimmed_log(std::move(log));
  }
  if (r != 0)
    throw std::runtime_error(entry + "compiling for " + arch + " failed (" + fn.GetErrorString(r) +
                             ")\n--- " + w.log_title + " log ---\n" + log + "\n--- source ---\n" +
                             numbered(source));
  size_t size = 0;
  r = fn.GetCodeSize(prog, &size);
  if (r != 0 || size == 0)
    throw std::runtime_error(entry + "no " + w.binary + " for " + arch + " (" +
                             fn.GetErrorString(r) + ")" + w.no_code);
  std::string code(size, '\0');
  r = fn.GetCode(prog, code.data());
  if (r != 0) throw failed(w.get_code, r);
  if (log_out) *log_out = log;
  return code;
}

}  // namespace codegen::gpu
