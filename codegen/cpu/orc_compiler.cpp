// The host compiler inside rune's LLVM module (librune_llvm.so, codegen/cpu/llvm_module_api.h):
// LLVM IR text -> optimised object code (for this CPU, no FP contraction) -> loaded into the
// process with ORC where rune's own loader declines (codegen/cpu/object_loader.h). Only this
// file and libLLVM are in the module; the libraries load it on their first compile
// (codegen/cpu/llvm_module.cpp), so a process that compiles nothing never maps libLLVM.
#include "codegen/cpu/orc_compiler.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/ExecutionEngine/Orc/ExecutionUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Verifier.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/MC/SubtargetFeature.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>

#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>

#include "codegen/cpu/llvm_compat.h"
#include "codegen/cpu/llvm_module_api.h"
#include RUNE_LLVM_HOST_H

namespace codegen::cpu {

namespace {

struct Host {
  std::string triple, cpu, features, id;
  const llvm::Target* target = nullptr;
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::mutex mu;
  // Loaded objects by their first symbol, while an owner may still use them (load_object).
  struct Loaded {
    llvm::orc::ResourceTrackerSP tracker;
    uint64_t generation;
  };
  std::map<std::string, Loaded> loaded;
  uint64_t generation = 0;

  Host() {
    llvm::InitializeNativeTarget();
    llvm::InitializeNativeTargetAsmPrinter();
    llvm::InitializeNativeTargetAsmParser();
    triple = llvm::sys::getProcessTriple();
    cpu = llvm::sys::getHostCPUName().str();
    llvm::StringMap<bool> feats;
    llvm::SubtargetFeatures sf;
    if (llvm::sys::getHostCPUFeatures(feats))
      for (auto& f : feats) sf.AddFeature(f.first(), f.second);
    features = sf.getString();
    std::string err;
    target = llvm::TargetRegistry::lookupTarget(triple, err);
    if (!target) throw std::runtime_error("rune: no LLVM target for " + triple + ": " + err);
    id = "llvm" + std::to_string(LLVM_VERSION_MAJOR) + ";" + triple + ";" + cpu + ";" + features;
    auto j = llvm::orc::LLJITBuilder().create();
    if (!j) throw std::runtime_error("rune: cannot start ORC: " + llvm::toString(j.takeError()));
    jit = std::move(*j);
    // Generated code may call memset/memcpy (LLVM forms them from loops): resolve from the process.
    auto gen = llvm::orc::DynamicLibrarySearchGenerator::GetForCurrentProcess(
        jit->getDataLayout().getGlobalPrefix());
    if (!gen) throw std::runtime_error("rune: " + llvm::toString(gen.takeError()));
    jit->getMainJITDylib().addGenerator(std::move(*gen));
  }

  std::unique_ptr<llvm::TargetMachine> machine(Tier tier) {
    llvm::TargetOptions opts;
    // docs/semantics.md §5: every + - * / rounds separately; never contract into FMA.
    opts.AllowFPOpFusion = llvm::FPOpFusion::Strict;
    return std::unique_ptr<llvm::TargetMachine>(target->createTargetMachine(
        triple, cpu, features, opts, llvm::Reloc::PIC_, llvm::None,
        tier == Tier::Full ? RUNE_LLVM_OPT_AGGRESSIVE : RUNE_LLVM_OPT_NONE));
  }
};

Host& host() {
  static Host* h = new Host;  // lives as long as the process: loaded code points into it
  return *h;
}

std::string compile(const std::string& ir, const std::string& module_name, Tier tier,
                    const std::atomic<bool>* cancel, RunePhaseHook hook) {
  Host& h = host();
  llvm::LLVMContext ctx;
  // Warnings and remarks are for compiler developers, not users: a lanes loop LLVM cannot
  // vectorise (one that gathers by a loaded index) stays a correct scalar loop, and printing
  // "loop not vectorized" on stderr for it would only alarm. Errors still reach the default
  // handler (and abort, as they would).
  ctx.setDiagnosticHandlerCallBack(
      [](const llvm::DiagnosticInfo& d, void*) {
        if (d.getSeverity() != llvm::DS_Error) return;
        llvm::DiagnosticPrinterRawOStream printer(llvm::errs());
        d.print(printer);
        llvm::errs() << "\n";
      },
      nullptr);
  auto phase = [&](const char* name) {
    if (hook.phase) hook.phase(hook.ctx, name);
  };
  phase("llvm parse");
  llvm::SMDiagnostic diag;
  auto mod = llvm::parseIR(llvm::MemoryBufferRef(ir, module_name), diag, ctx);
  if (!mod) {
    std::string msg;
    llvm::raw_string_ostream os(msg);
    diag.print(module_name.c_str(), os);
    throw std::runtime_error("rune: generated LLVM IR does not parse: " + os.str());
  }
  std::string verr;
  llvm::raw_string_ostream vos(verr);
  if (llvm::verifyModule(*mod, &vos))
    throw std::runtime_error("rune: generated LLVM IR is invalid: " + vos.str());
  phase("llvm optimise");
  auto tm = h.machine(tier);
  mod->setDataLayout(tm->createDataLayout());
  mod->setTargetTriple(h.triple);

  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  // A background compile stops early when the process exits: every optional pass left is
  // skipped once `cancel` is set, and the result is thrown away below.
  llvm::PassInstrumentationCallbacks pic;
  if (cancel)
    pic.registerShouldRunOptionalPassCallback(
        [cancel](llvm::StringRef, llvm::Any) { return !cancel->load(std::memory_order_relaxed); });
  llvm::PassBuilder pb(tm.get(), llvm::PipelineTuningOptions(), {}, &pic);
  pb.registerModuleAnalyses(mam);
  pb.registerCGSCCAnalyses(cgam);
  pb.registerFunctionAnalyses(fam);
  pb.registerLoopAnalyses(lam);
  pb.crossRegisterProxies(lam, fam, cgam, mam);
  // After vectorization, promote what it left in memory: a reduction's lane array is accessed
  // only at constant offsets once its lane loop became one vector operation (render_llvm.cpp),
  // and SROA turns it into a vector register carried by the loop.
  // The passes are named, not instantiated here: a pass template instantiated in this binary
  // would be exported and preempt the copy inside another LLVM loaded in the same process
  // (hiprtc's comgr carries LLVM 15), crashing it.
  pb.registerOptimizerLastEPCallback([&pb](llvm::ModulePassManager& m, llvm::OptimizationLevel) {
    if (auto err = pb.parsePassPipeline(m, "function(sroa,instcombine)"))
      throw std::runtime_error("rune: LLVM pass pipeline: " + llvm::toString(std::move(err)));
  });
  llvm::ModulePassManager mpm;
  if (tier == Tier::Full) {
    mpm = pb.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3);
  } else if (auto err =
                 pb.parsePassPipeline(mpm, "function(sroa,early-cse,instcombine,simplifycfg)")) {
    throw std::runtime_error("rune: LLVM pass pipeline: " + llvm::toString(std::move(err)));
  }
  mpm.run(*mod, mam);
  if (cancel && cancel->load()) return {};

  phase("llvm codegen");
  llvm::SmallVector<char, 0> buf;
  llvm::raw_svector_ostream os(buf);
  llvm::legacy::PassManager pm;
  if (tm->addPassesToEmitFile(pm, os, nullptr, RUNE_LLVM_OBJECT_FILE))
    throw std::runtime_error("rune: LLVM cannot emit objects for " + h.triple);
  pm.run(*mod);
  return std::string(buf.data(), buf.size());
}

// Loads `object` with ORC; a later load of the same first symbol replaces it.
std::vector<void*> load(const std::string& object, const std::vector<std::string>& symbols,
                        uint64_t* generation_out) {
  Host& h = host();
  std::lock_guard lock(h.mu);
  const std::string name = symbols.empty() ? "rune" : symbols[0];
  // An object of this name whose last owner is going away (its unload waits for the lock)
  // is removed now, so its symbols never clash with the new copy's.
  if (auto it = h.loaded.find(name); it != h.loaded.end()) {
    llvm::consumeError(it->second.tracker->remove());
    h.loaded.erase(it);
  }
  auto buf = llvm::MemoryBuffer::getMemBufferCopy(object, name);
  // One resource tracker per object: removing it frees the object's code and unbinds its
  // symbols, so a kernel's memory goes back when its last program does.
  auto tracker = h.jit->getMainJITDylib().createResourceTracker();
  if (auto err = h.jit->addObjectFile(tracker, std::move(buf)))
    throw std::runtime_error("rune: cannot load compiled kernel: " +
                             llvm::toString(std::move(err)));
  std::vector<void*> out;
  for (const auto& s : symbols) {
    auto sym = h.jit->lookup(s);
    if (!sym) {
      llvm::consumeError(tracker->remove());
      throw std::runtime_error("rune: compiled kernel lacks " + s + ": " +
                               llvm::toString(sym.takeError()));
    }
    out.push_back(compat::address(*sym));
  }
  const uint64_t generation = ++h.generation;
  h.loaded[name] = {tracker, generation};
  *generation_out = generation;
  return out;
}

void unload(const std::string& name, uint64_t generation) {
  Host& h = host();
  std::lock_guard l(h.mu);
  auto it = h.loaded.find(name);
  if (it == h.loaded.end() || it->second.generation != generation) return;  // reloaded since
  llvm::consumeError(it->second.tracker->remove());
  h.loaded.erase(it);
}

void put(RuneLlvmSink sink, const std::string& s) { sink.write(sink.ctx, s.data(), s.size()); }

// Runs `f`, turning any exception into status 1 and its message in `err`.
template <class F>
int guarded(RuneLlvmSink err, F&& f) {
  try {
    return f();
  } catch (const std::exception& e) {
    put(err, e.what());
  } catch (...) {
    put(err, "rune: unknown error in the LLVM module");
  }
  return 1;
}

const RuneLlvmApi kApi = {
    RUNE_LLVM_MODULE_API_VERSION,
    [](RuneLlvmSink err) {
      return guarded(err, [] {
        host();
        return 0;
      });
    },
    [](RuneLlvmSink out, RuneLlvmSink err) {
      return guarded(err, [&] {
        put(out, host().id);
        return 0;
      });
    },
    [](const char* ir, size_t ir_size, const char* module_name, int tier,
       const std::atomic<bool>* cancel, RunePhaseHook hook, RuneLlvmSink out, RuneLlvmSink err) {
      return guarded(err, [&] {
        std::string obj = compile(std::string(ir, ir_size), module_name,
                                  tier == 0 ? Tier::Quick : Tier::Full, cancel, hook);
        if (cancel && cancel->load()) return 2;
        put(out, obj);
        return 0;
      });
    },
    [](const char* object, size_t size, const char* const* symbols, size_t count, void** addresses,
       uint64_t* generation, RuneLlvmSink err) {
      return guarded(err, [&] {
        std::vector<std::string> syms(symbols, symbols + count);
        auto a = load(std::string(object, size), syms, generation);
        for (size_t i = 0; i < count; ++i) addresses[i] = a[i];
        return 0;
      });
    },
    [](const char* name, uint64_t generation) {
      try {
        unload(name, generation);
      } catch (...) {
        // Unloading runs from an owner's deleter: nothing may escape it.
      }
    },
};

}  // namespace

}  // namespace codegen::cpu

extern "C" __attribute__((visibility("default"))) const RuneLlvmApi* rune_llvm_module_api(
    int version) {
  return version == RUNE_LLVM_MODULE_API_VERSION ? &codegen::cpu::kApi : nullptr;
}
