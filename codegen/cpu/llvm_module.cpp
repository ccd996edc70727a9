// codegen/cpu/orc_compiler.h for the libraries: LLVM is reached through its module,
// librune_llvm.so (codegen/cpu/llvm_module_api.h), loaded with dlopen on the first call that
// needs it; objects are loaded by rune's own loader first (codegen/cpu/object_loader.h).
#include <dlfcn.h>
#include <sys/stat.h>

#include <cstdio>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "codegen/cpu/host_target.h"
#include "codegen/cpu/llvm_module_api.h"
#include "codegen/cpu/object_loader.h"
#include "codegen/cpu/orc_compiler.h"
#include "codegen/disk_cache.h"
#include "ir/debug.h"
#include "ir/env.h"
#include "runtime/profile.h"

namespace codegen::cpu {

namespace {

bool file_exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// RUNE_LLVM_MODULE, else the build tree's module, else (that one gone: an installed rune whose
// build tree was removed) the one `cmake --install` put in the configured prefix.
std::string module_path() {
  const std::optional<std::string>& env = ir::env::value(ir::env::Var::LlvmModule);
  if (env && !env->empty()) return *env;
#ifdef RUNE_LLVM_MODULE_PATH
#ifdef RUNE_LLVM_MODULE_INSTALLED_PATH
  if (!file_exists(RUNE_LLVM_MODULE_PATH) && file_exists(RUNE_LLVM_MODULE_INSTALLED_PATH))
    return RUNE_LLVM_MODULE_INSTALLED_PATH;
#endif
  return RUNE_LLVM_MODULE_PATH;
#else
  return "librune_llvm.so";
#endif
}

RuneLlvmSink sink(std::string& s) {
  return {&s, [](void* ctx, const char* data, size_t size) {
            static_cast<std::string*>(ctx)->append(data, size);
          }};
}

std::atomic<bool> module_loaded{false};
// The target id this process took from the disk cache, checked against LLVM's when the module
// is loaded anyway (never freed: read by api() at any time).
std::atomic<const std::string*> remembered_id{nullptr};

const RuneLlvmApi* load_module() {
  runtime::ProfileSpan span("phase", "llvm start", "CPU");
  const std::string path = module_path();
  const std::string head = "rune: the LLVM module " + path +
                           " (the host compiler, loaded to compile kernels) cannot be loaded: ";
  // RTLD_LAZY, as the executable linked with libLLVM bound it: libLLVM is not linked with
  // BIND_NOW, and RTLD_NOW would resolve every one of its (and its dependencies') PLT slots now.
  // RTLD_LOCAL: its symbols stay out of the global scope (another LLVM in the process, such as
  // hiprtc's comgr, never binds to them).
  void* h = ::dlopen(path.c_str(), RTLD_LAZY | RTLD_LOCAL);
  if (!h) {
    const char* e = ::dlerror();
    throw std::runtime_error(head + "dlopen: " + (e ? e : "failed") +
                             " (set RUNE_LLVM_MODULE to its path)");
  }
  auto fn = reinterpret_cast<RuneLlvmApiFn>(::dlsym(h, "rune_llvm_module_api"));
  if (!fn) {
    const char* e = ::dlerror();
    const std::string why = e ? e : "";  // dlclose frees dlerror's string: copy it first
    ::dlclose(h);
    throw std::runtime_error(head + "dlsym: no rune_llvm_module_api (" + why + ")");
  }
  const RuneLlvmApi* api = fn(RUNE_LLVM_MODULE_API_VERSION);
  if (!api || api->version != RUNE_LLVM_MODULE_API_VERSION) {
    ::dlclose(h);
    throw std::runtime_error(head + "it does not implement interface version " +
                             std::to_string(RUNE_LLVM_MODULE_API_VERSION) +
                             " (built for another rune: rebuild it)");
  }
  std::string err;
  if (api->start(sink(err)) != 0) throw std::runtime_error(err);
  // The module stays loaded for the process's lifetime: loaded code and ORC's state live in it.
  module_loaded.store(true);
  return api;
}

const RuneLlvmApi& api() {
  static std::mutex mu;
  static const RuneLlvmApi* a = nullptr;
  std::lock_guard lock(mu);
  if (!a) {
    a = load_module();  // throws, and is tried again by the next call, when it cannot load
    // A remembered target id that LLVM disagrees with (a libLLVM replaced in place, keeping its
    // size, time and inode): the entry is corrected for later processes.
    if (const std::string* id = remembered_id.load()) {
      std::string llvm_id, err;
      if (a->target_id(sink(llvm_id), sink(err)) == 0 && llvm_id != *id) {
        const std::string fp = host_fingerprint();
        DiskCache::instance().put("rune host target id\n" + fp, llvm_id, ".target");
        if (ir::debug_level() >= 1)
          std::fprintf(stderr, "rune: the disk cache's target id for this CPU was stale; fixed\n");
      }
    }
  }
  return *a;
}

std::string llvm_target_id() {
  std::string out, err;
  if (api().target_id(sink(out), sink(err)) != 0) throw std::runtime_error(err);
  return out;
}

}  // namespace

const std::string& target_id() {
  // LLVM's answer, remembered in the disk cache under this machine's fingerprint: the first
  // process on a machine (or after an LLVM upgrade) loads LLVM for it, later ones read it.
  static const std::string id = [] {
    const std::string fp = host_fingerprint();
    if (fp.empty() || !DiskCache::instance().enabled()) return llvm_target_id();
    const std::string key = "rune host target id\n" + fp;
    std::optional<std::string> hit = DiskCache::instance().get(key, ".target");
    if (!hit)
      hit = DiskCache::prebuilt().get(key, ".target");  // written by the build's prebuild step
    if (hit) {
      remembered_id.store(new std::string(*hit));  // checked if LLVM is loaded later
      return *hit;
    }
    std::string computed = llvm_target_id();
    DiskCache::instance().put(key, computed, ".target");
    return computed;
  }();
  return id;
}

std::string compile_to_object(const std::string& ir, const std::string& module_name, Tier tier,
                              const std::atomic<bool>* cancel) {
  const RuneLlvmApi& a = api();
  std::optional<runtime::ProfileSpan> phase;
  RunePhaseHook hook{&phase, [](void* ctx, const char* name) {
                       auto& p = *static_cast<std::optional<runtime::ProfileSpan>*>(ctx);
                       p.reset();
                       p.emplace("phase", name, "CPU");
                     }};
  std::string out, err;
  const int rc = a.compile(ir.data(), ir.size(), module_name.c_str(), tier == Tier::Quick ? 0 : 1,
                           cancel, hook, sink(out), sink(err));
  if (rc == 2) return {};  // cancelled
  if (rc != 0) throw std::runtime_error(err);
  return out;
}

LoadedObject load_object_with_orc(const std::string& object,
                                  const std::vector<std::string>& symbols) {
  const RuneLlvmApi& a = api();
  std::vector<const char*> names;
  for (const auto& s : symbols) names.push_back(s.c_str());
  LoadedObject out;
  out.addresses.resize(symbols.size());
  uint64_t generation = 0;
  std::string err;
  if (a.load(object.data(), object.size(), names.data(), names.size(), out.addresses.data(),
             &generation, sink(err)) != 0)
    throw std::runtime_error(err);
  static char token;  // the owner's pointer: never dereferenced
  const std::string name = symbols.empty() ? "rune" : symbols[0];
  out.owner = std::shared_ptr<void>(
      &token, [name, generation, &a](void*) { a.unload(name.c_str(), generation); });
  return out;
}

LoadedObject load_object(const std::string& object, const std::vector<std::string>& symbols) {
  std::string why;
  if (auto own = load_elf_object(object, symbols, &why))
    return {std::move(own->addresses), std::move(own->owner)};
  if (ir::debug_level() >= 1)
    std::fprintf(stderr, "rune: kernel %s: rune's object loader declined it (%s); ORC loads it\n",
                 symbols.empty() ? "?" : symbols[0].c_str(), why.c_str());
  return load_object_with_orc(object, symbols);
}

bool llvm_module_loaded() { return module_loaded.load(); }

}  // namespace codegen::cpu
