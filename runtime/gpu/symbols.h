// The dlopen side of every vendor library rune loads at run time (the CUDA driver, the HIP
// runtime, NVRTC, hiprtc): open the first library of a list that loads, then resolve a table of
// entry points from it, saying by name what is missing. The tables themselves are X-macro files,
// one per API (runtime/cuda/cuda_driver.def, runtime/hip/hip_driver.def, codegen/cuda/nvrtc.def,
// codegen/hip/hiprtc.def), expanded by runtime/gpu/symbol_table.inc.
#pragma once
#include <string>
#include <vector>

namespace runtime::gpu {

// Opens the first library of `names` that loads.
struct Library {
  void* handle = nullptr;
  std::string name;   // the name that loaded
  std::string tried;  // "\n  name: dlerror" per failed name, for messages
  static Library open_first(const std::vector<std::string>& names);
  // The symbol, or nullptr (appending "symbol <sym> not found in <name>" to *missing).
  void* symbol(const char* sym, std::string* missing) const;
};

// Whether a table's row must resolve for the library to be usable. Optional rows are a feature
// the API may lack (graphs): they are null together unless all of them resolved.
enum class Need { required, optional };

// Resolves the rows of one table from `lib`. A row's `names` is its symbol, or alternatives
// separated by '|' tried in order (the first that resolves wins): "cuEventElapsedTime_v2|
// cuEventElapsedTime" takes the newer entry point where the library has it.
class SymbolBinder {
 public:
  explicit SymbolBinder(const Library& lib) : lib_(lib) {}
  template <class F>
  void bind(F& fn, const char* names, Need need) {
    fn = reinterpret_cast<F>(find(names, need));
  }
  // "symbol <sym> not found in <library>" for each required row that did not resolve, joined by
  // ", "; empty when the library is usable.
  const std::string& missing() const { return missing_; }
  // Whether every optional row resolved (else the caller treats them all as absent).
  bool has_optional() const { return optional_missing_.empty(); }

 private:
  void* find(const char* names, Need need);
  const Library& lib_;
  std::string missing_, optional_missing_;
};

// Binds every row of `table` (a struct expanding a .def through runtime/gpu/symbol_table.inc)
// from `lib`: "" when every required row resolved, else "<library> is not a usable <what>:
// symbol <sym> not found in <library>, ...". *has_optional: whether the optional rows did.
template <class Table>
std::string bind_table(const Library& lib, Table& table, const std::string& what,
                       bool* has_optional = nullptr) {
  SymbolBinder binder(lib);
  table.bind(binder);
  if (has_optional) *has_optional = binder.has_optional();
  if (binder.missing().empty()) return "";
  return lib.name + " is not a usable " + what + ": " + binder.missing();
}

}  // namespace runtime::gpu
