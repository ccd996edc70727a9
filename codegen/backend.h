// A device kind's backend of the compile path (codegen/compile.cpp): how its kernels are
// rendered, compiled, loaded and made into program steps. The compile path schedules, lays out
// the slots, asks the backend for the steps, and finishes the program; the backend calls its
// renderer from one place (host: cpu::render_llvm; GPU: render_c_prelude / render_c_kernel with
// its dialect), so a renderer swap touches one function per backend.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "codegen/compile.h"
#include "codegen/schedule.h"
#include "runtime/program.h"

namespace codegen {

class Backend {
 public:
  virtual ~Backend() = default;
  // Appends the steps of every kernel of `s`, in schedule order, to `p` (whose device, inputs,
  // slots and outputs are set), adding the scratch slots its steps need after the schedule's.
  // Runs under the compile path's lock; counts what it compiles in `stats`.
  virtual void add_steps(const Schedule& s, runtime::Program& p, CompileStats& stats) = 0;
  // Adds the nodes its caches hold to `roots` (node collection; under the compile lock), after
  // dropping the entries no program uses any more.
  virtual void keep_nodes(std::vector<ir::NodeRef>& roots) { (void)roots; }
  // The device a build's own "compile" span in RUNE_PROFILE names, or null for none (the host:
  // one span per program on "CPU", where the compile runs; a GPU's span is its source's).
  virtual const char* program_span() const { return nullptr; }
};

// A kernel's symbol, named after its rendered text ("rk_" and the text's 64-bit FNV-1a in hex),
// so equal kernels share one name (and one object or function).
std::string kernel_symbol(const std::string& text);
// Replaces every occurrence of `from` in s (the placeholder name a renderer was given).
void replace_all(std::string& s, const std::string& from, const std::string& to);

// The backends (codegen/cpu/host_backend.cpp, codegen/gpu/gpu_backend.cpp).
std::unique_ptr<Backend> make_host_backend();
std::unique_ptr<Backend> make_gpu_backend(runtime::DeviceKind kind);
// The GPU backend's target for `kind` (set_gpu_target_for_testing); under the compile lock.
void set_gpu_backend_target(Backend& gpu_backend, GpuTarget target);

}  // namespace codegen
