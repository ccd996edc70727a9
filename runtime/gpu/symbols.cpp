#include "runtime/gpu/symbols.h"

#include <dlfcn.h>

#include <algorithm>

namespace runtime::gpu {

Library Library::open_first(const std::vector<std::string>& names) {
  Library lib;
  for (const auto& n : names) {
    lib.handle = dlopen(n.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) {
      lib.name = n;
      return lib;
    }
    const char* e = dlerror();
    lib.tried += "\n  " + n + ": " + (e ? e : "not found");
  }
  return lib;
}

void* Library::symbol(const char* sym, std::string* missing) const {
  void* p = handle ? dlsym(handle, sym) : nullptr;
  if (!p && missing) {
    if (!missing->empty()) *missing += ", ";
    *missing += std::string("symbol ") + sym + " not found in " + name;
  }
  return p;
}

void* SymbolBinder::find(const char* names, Need need) {
  const std::string all = names;
  std::string tried;  // "a", or "a (or b)" where the row has an alternative
  for (size_t at = 0; at <= all.size();) {
    size_t bar = std::min(all.find('|', at), all.size());
    const std::string sym = all.substr(at, bar - at);
    if (void* p = lib_.symbol(sym.c_str(), nullptr)) return p;
    tried += at == 0 ? sym : " (or " + sym + ")";
    at = bar + 1;
  }
  std::string& out = need == Need::required ? missing_ : optional_missing_;
  if (!out.empty()) out += ", ";
  out += "symbol " + tried + " not found in " + lib_.name;
  return nullptr;
}

}  // namespace runtime::gpu
