#include "trace/jit.h"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <future>
#include <list>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "codegen/compile.h"
#include "codegen/plan.h"
#include "core/dlpack_exports.h"
#include "core/donation.h"
#include "core/ops.h"
#include "ir/debug.h"
#include "ir/env.h"
#include "ir/hash.h"
#include "runtime/launcher.h"
#include "runtime/profile.h"
#include "trace/staged_program.h"
#include "trace/structured.h"

namespace rune {

namespace {

// The abstract value of one leaf: what the program depends on besides the structure.
struct LeafKey {
  nx::DType dtype;
  nx::Shape shape;
  nx::Device device;
  std::vector<int64_t> strides;  // extent-1 axes zeroed: they never affect addressing
  int64_t align;                 // where the data starts, modulo 16 bytes
  bool operator==(const LeafKey&) const = default;
};

struct Key {
  std::vector<int64_t> tokens;
  std::vector<LeafKey> leaves;
  // A GPU program's products depend on the matmul precision (nx::set_matmul_precision): 1 + the
  // codegen::MatmulPrecision for a call that runs on a GPU, 0 on the host (which ignores it).
  int precision = 0;
  size_t hash = 0;
  bool operator==(const Key& o) const {
    return hash == o.hash && tokens == o.tokens && leaves == o.leaves && precision == o.precision;
  }
};
// The call's precision key: it runs on its arguments' device, or the default device without any.
int precision_key(const Flat& args) {
  bool gpu = args.leaves.empty() && nx::default_device().kind != runtime::DeviceKind::CPU;
  for (const auto& t : args.leaves) gpu |= t.impl().device.kind != runtime::DeviceKind::CPU;
  return gpu ? 1 + static_cast<int>(codegen::matmul_precision()) : 0;
}
// Where a concrete leaf's data starts, modulo 16 bytes.
int64_t leaf_align(const nx::TensorImpl& im) {
  return static_cast<int64_t>(
      (reinterpret_cast<uintptr_t>(im.buffer->data) + im.view.offset * ir::itemsize(im.dtype)) %
      16);
}

// The key's hash, straight from the call's arguments (make_key's leaves, unbuilt).
size_t hash_args(const Flat& args) {
  uint64_t h = ir::kFnvOffset;
  auto mix = [&](int64_t v) { h = ir::hash_combine(h, v); };
  mix(precision_key(args));
  for (auto t : args.tokens) mix(t);
  for (const auto& t : args.leaves) {
    const auto& im = t.impl();
    mix(static_cast<int64_t>(im.dtype));
    for (auto d : im.shape) mix(d);
    mix(static_cast<int64_t>(im.device.kind) * 64 + im.device.index);
    if (!im.node)
      for (size_t d = 0; d < im.shape.size(); ++d) mix(im.shape[d] == 1 ? 0 : im.view.strides[d]);
    mix(im.node ? 0 : leaf_align(im));
  }
  return h;
}

// Whether the key made from `args` would equal `k`, without making it.
bool key_matches(const Key& k, const Flat& args) {
  if (k.tokens != args.tokens || k.leaves.size() != args.leaves.size()) return false;
  if (k.precision != precision_key(args)) return false;
  for (size_t i = 0; i < k.leaves.size(); ++i) {
    const LeafKey& lk = k.leaves[i];
    const auto& im = args.leaves[i].impl();
    if (lk.dtype != im.dtype || lk.shape != im.shape || !(lk.device == im.device)) return false;
    if (im.node) {
      if (!lk.strides.empty() || lk.align != 0) return false;
      continue;
    }
    if (lk.strides.size() != im.view.strides.size() || lk.align != leaf_align(im)) return false;
    for (size_t d = 0; d < lk.strides.size(); ++d)
      if (lk.strides[d] != (im.shape[d] == 1 ? 0 : im.view.strides[d])) return false;
  }
  return true;
}

// A call's key as the cache looks it up: a hit builds no Key (a steady call allocates nothing
// for its key), a miss builds one with make_key to store.
struct ArgsKey {
  const Flat* args;
  size_t hash;
};

struct KeyHash {
  using is_transparent = void;
  size_t operator()(const Key& k) const { return k.hash; }
  size_t operator()(const ArgsKey& a) const { return a.hash; }
};
struct KeyEq {
  using is_transparent = void;
  bool operator()(const Key& a, const Key& b) const { return a == b; }
  bool operator()(const ArgsKey& a, const Key& b) const {
    return a.hash == b.hash && key_matches(b, *a.args);
  }
  bool operator()(const Key& a, const ArgsKey& b) const { return (*this)(b, a); }
};

// Step "key": the call's structure tokens and each leaf's abstract value, with their hash.
Key make_key(const Flat& args) {
  Key k;
  k.tokens = args.tokens;
  k.precision = precision_key(args);
  k.leaves.reserve(args.leaves.size());
  for (const auto& t : args.leaves) {
    const auto& im = t.impl();
    LeafKey lk{im.dtype, im.shape, im.device, {}, 0};
    if (!im.node) {
      lk.strides = im.view.strides;
      for (size_t d = 0; d < lk.shape.size(); ++d)
        if (lk.shape[d] == 1) lk.strides[d] = 0;
      lk.align = leaf_align(im);
    }
    k.leaves.push_back(std::move(lk));
  }
  k.hash = hash_args(args);
  return k;
}

std::string strides_text(const std::vector<int64_t>& s) { return ir::to_string(s); }

// The first difference between two keys, as "<path>: <this> here, <that> in the previous key".
std::string first_difference(const Key& cur, const Key& prev,
                             const std::vector<std::string>& leaf_paths,
                             const std::vector<std::string>& token_paths) {
  size_t leaf = 0;
  auto path_of_token = [&](size_t i) {
    return i < token_paths.size() ? token_paths[i] : std::string("?");
  };
  for (size_t i = 0; i < cur.tokens.size() && i < prev.tokens.size(); ++i) {
    int64_t a = cur.tokens[i], b = prev.tokens[i];
    std::string p = path_of_token(i);
    if (a != b) {
      if ((a == kSome || a == kNone) && (b == kSome || b == kNone))
        return p + ": option " + (a == kSome ? "present" : "absent") + " here, option " +
               (b == kSome ? "present" : "absent") + " in the previous key";
      return p + ": structure differs from the previous key";
    }
    if (a == kList || a == kStatic) {
      ++i;
      int64_t x = cur.tokens[i], y = prev.tokens[i];
      if (x != y) {
        const char* what = a == kList ? "list length " : "static ";
        return p + ": " + what + std::to_string(x) + " here, " + what + std::to_string(y) +
               " in the previous key";
      }
      continue;
    }
    if (a != kLeaf) continue;
    const LeafKey& x = cur.leaves[leaf];
    const LeafKey& y = prev.leaves[leaf];
    std::string lp = leaf < leaf_paths.size() ? leaf_paths[leaf] : p;
    ++leaf;
    if (x.dtype != y.dtype)
      return lp + ": dtype " + std::string(ir::name(x.dtype)) + " here, dtype " +
             std::string(ir::name(y.dtype)) + " in the previous key";
    if (x.shape != y.shape)
      return lp + ": shape " + ir::to_string(x.shape) + " here, shape " + ir::to_string(y.shape) +
             " in the previous key";
    if (!(x.device == y.device))
      return lp + ": placement " + x.device.name() + " here, placement " + y.device.name() +
             " in the previous key";
    if (x.strides != y.strides)
      return lp + ": strides " + strides_text(x.strides) + " here, strides " +
             strides_text(y.strides) + " in the previous key";
    if (x.align != y.align)
      return lp + ": data offset " + std::to_string(x.align) + " (mod 16 bytes) here, " +
             std::to_string(y.align) + " in the previous key";
  }
  if (cur.tokens.size() != prev.tokens.size()) return "structure differs from the previous key";
  if (cur.precision != prev.precision) {
    auto text = [](int p) {
      return p == 0 ? std::string("none (host)")
                    : std::string(
                          codegen::precision_name(static_cast<codegen::MatmulPrecision>(p - 1)));
    };
    return "matmul precision " + text(cur.precision) + " here, " + text(prev.precision) +
           " in the previous key";
  }
  return "key differs from the previous key";
}

std::string describe_key(const Key& k) {
  std::string s;
  for (size_t i = 0; i < k.leaves.size(); ++i) {
    if (i) s += ", ";
    s += std::string(ir::name(k.leaves[i].dtype)) + " " + ir::to_string(k.leaves[i].shape) +
         " on " + k.leaves[i].device.name();
  }
  return "(" + s + ")";
}

struct Compiled {
  std::shared_ptr<const runtime::Program> program;
  std::vector<nx::Tensor> captured;
  std::shared_ptr<const std::vector<int64_t>> result_tokens;
  std::vector<std::pair<nx::DType, nx::Shape>> outputs;  // results, then one index per check
  size_t n_results = 0;
  std::vector<Tracer::Check> checks;
  int n_params = 0;
  nx::Device device;
  // The checks' graphs (run again when a check fails) keep their nodes while this lives.
  int roots_id = -1;
  Compiled() = default;
  Compiled(const Compiled&) = delete;
  Compiled& operator=(const Compiled&) = delete;
  ~Compiled() {
    if (roots_id >= 0) ir::remove_node_roots(roots_id);
  }
};

// The failure of the first failing check (in trace order) after a run, or null, on every
// device (on an asynchronous one a task of its stream: the device work before it is done).
// The first-false indices are read back through the device's launcher; a failing check's data
// are computed with the same inputs on the device and read back to build its error on the host.
std::exception_ptr failed_check(const Compiled& c, const std::vector<runtime::BufferRef>& bufs,
                                const std::vector<char*>& ptrs) {
  const runtime::Launcher& launcher = c.program->launcher();
  for (size_t k = 0; k < c.checks.size(); ++k) {
    int64_t first;
    launcher.read(&first, bufs[c.n_results + k]->data, sizeof first);
    const auto& chk = c.checks[k];
    if (first >= chk.size) continue;
    // Rare path: evaluate the check's data with the same inputs, then build its error.
    auto data_program = codegen::compile(chk.data, c.n_params, c.device);
    auto data_bufs = data_program->run(ptrs.data(), ptrs.size());
    std::vector<nx::Tensor> data;
    for (size_t d = 0; d < data_bufs.size(); ++d) {
      size_t n =
          static_cast<size_t>(ir::numel(chk.data[d]->shape) * ir::itemsize(chk.data[d]->dtype));
      auto host = runtime::allocate(nx::Device::cpu(), n);
      launcher.read(host->data, data_bufs[d]->data, n);
      data.push_back(nx::make_concrete(chk.data[d]->dtype, std::move(host),
                                       ir::View::contiguous(chk.data[d]->shape)));
    }
    return nx::detail::build_failure(chk.shape, first, data, chk.fail);
  }
  return nullptr;
}

// A call on any device, through its launcher (runtime/launcher.h): on the host the program runs
// now and the first failing check raises (the call returns no results); on an asynchronous
// device the call returns once its work is queued, arguments on the device bind without a copy
// and results stay there; checks are read in the device's order, and a failure poisons the
// results and raises at the next wait. Donated buffers in `reuse` are written in place.
JitCore::Result launch_call(const std::shared_ptr<const Compiled>& c,
                            const std::vector<nx::Tensor>& leaves, std::vector<char*> ptrs,
                            std::vector<runtime::BufferRef> reuse) {
  const runtime::Launcher& launcher = c->program->launcher();
  std::vector<const std::shared_ptr<runtime::Poison>*> poisons;  // the host has no failure states
  if (runtime::is_async(c->device))
    for (const auto& t : leaves) poisons.push_back(&t.impl().poison);
  runtime::Call call;
  call.inputs = ptrs.data();
  call.n = ptrs.size();
  call.reuse = reuse.empty() ? nullptr : reuse.data();
  call.poisons = poisons.data();
  call.n_poisons = poisons.size();
  if (!c->checks.empty())
    call.after = [c, ptrs](const std::vector<runtime::BufferRef>& bufs) {
      return failed_check(*c, bufs, ptrs);
    };
  if (launcher.defers_calls() || (call.after && launcher.after_runs_at_wait())) {
    // The program (its captured constants) and the arguments stay alive until the deferred
    // work ran. Where the check reads run after later device work, the arguments are held as
    // values of their own, so no later op may write a donated result into them.
    auto keep =
        std::make_shared<std::pair<std::shared_ptr<const Compiled>, std::vector<nx::Tensor>>>();
    keep->first = c;
    for (const auto& t : leaves)
      keep->second.push_back(launcher.after_runs_at_wait() ? nx::observer_of(t) : t);
    call.keep = std::move(keep);
  }
  auto launched = launcher.call(c->program, call);
  std::vector<nx::Tensor> outs;
  outs.reserve(c->n_results);
  for (size_t i = 0; i < c->n_results; ++i)
    outs.push_back(nx::make_concrete(c->outputs[i].first, std::move(launched.outputs[i]),
                                     ir::View::contiguous(c->outputs[i].second), c->device,
                                     launched.poison));
  return {std::move(outs), c->result_tokens};
}

using CallResult = JitCore::Result;

// The device a call runs on: its arguments' (all on one), or without tensor arguments the
// default device, where creation ops would have put its values. A device that does not exist
// here raises before anything is traced.
nx::Device call_device(const Flat& args, const std::string& api) {
  nx::Device device = args.leaves.empty() ? nx::default_device() : args.leaves[0].device();
  for (const auto& l : args.leaves)
    if (!(l.device() == device))
      throw std::invalid_argument(api + ": arguments on two devices: " + device.name() + " and " +
                                  l.device().name());
  if (device.kind != runtime::DeviceKind::CPU) runtime::stream_for(device, api.c_str());
  return device;
}

// A traced program: what a run needs besides the compiled code, and the graph to compile.
struct Traced {
  std::shared_ptr<Compiled> compiled;
  std::vector<ir::NodeRef> roots;   // the results, then one first-false index per check
  std::vector<Tracer::Loop> loops;  // control flow compiled as loop steps (staged_program.h)
};

// Raises unless no check's data reads a loop's results: a failing check's data are computed by
// a program of their own over the call's params, where a loop's results are not bound.
void check_data_outside_loops(const std::vector<Tracer::Check>& checks,
                              const std::vector<Tracer::Loop>& loops) {
  std::vector<int> outs;
  for (const auto& l : loops) outs.insert(outs.end(), l.outputs.begin(), l.outputs.end());
  for (const auto& k : checks)
    for (ir::NodeRef n : ir::toposort(k.data))
      if (n->op == ir::Op::Param &&
          std::find(outs.begin(), outs.end(), ir::arg_load(n).param) != outs.end())
        throw jit_error(
            "rune::jit: a check (e.g. an index bound) reads the result of a "
            "rune::scan / fori_loop; compute it inside the loop's body instead");
}

// Step "trace": runs the function over stand-ins of the key's leaves (dtype, shape and layout;
// offset 0). Concrete tensors it captured become params after the arguments and move to the
// program's device once, with the program (a host program cannot read GPU memory, nor a CPU:n
// value before its stream ran). The caller holds a NodeUse until the roots are compiled.
Traced trace_program(const Flat& args, const Key& key, const JitCore::TraceFn& trace,
                     nx::Device device) {
  Tracer tracer(device, static_cast<int>(args.leaves.size()));
  // Loops become loop steps of the program, except in a trace being differentiated (jit inside
  // rune::grad's f), which autodiff replays per iteration.
  tracer.records_loops = !detail::differentiating();
  std::vector<nx::Tensor> stand_ins;
  for (size_t i = 0; i < args.leaves.size(); ++i) {
    const LeafKey& lk = key.leaves[i];
    ir::View layout{lk.shape, lk.strides, 0, {}};
    stand_ins.push_back(tracer.stand_in(static_cast<int>(i), lk.dtype, layout));
  }
  Flat result;
  {
    nx::InterpreterScope scope(&tracer);
    result = trace(stand_ins);
  }
  Traced t;
  for (const auto& r : result.leaves) t.roots.push_back(tracer.node_of(r));
  auto c = std::make_shared<Compiled>();
  c->n_results = t.roots.size();
  // The structured primitives by their stage rules (trace/structured.def): checks become outputs
  // of the program, loops its loop steps.
  detail::Staging staging;
  staging.checks = &c->checks;
  detail::stage_equations(tracer.equations(), staging);
  for (const auto& k : c->checks) t.roots.push_back(k.first_false);
  if (!c->checks.empty())
    c->roots_id = ir::add_node_roots([cp = c.get()](std::vector<ir::NodeRef>& r) {
      for (const auto& k : cp->checks) r.insert(r.end(), k.data.begin(), k.data.end());
    });
  c->captured = tracer.captured();
  c->n_params = static_cast<int>(args.leaves.size() + c->captured.size());
  t.loops = std::move(staging.loops);
  check_data_outside_loops(c->checks, t.loops);
  for (auto& cap : c->captured)  // undefined: a loop's result, bound inside the program
    if (cap.defined() && !cap.is_traced() && !(cap.device() == device))
      cap = nx::place(cap, device);
  c->result_tokens = std::make_shared<const std::vector<int64_t>>(std::move(result.tokens));
  for (auto r : t.roots) c->outputs.push_back({r->dtype, r->shape});
  c->device = device;
  t.compiled = std::move(c);
  return t;
}

// Step "compile": schedule, optimise, lower, render and compile the roots for the program's
// device, all inside codegen (one call per device kind).
void compile_program(Compiled& c, const Traced& t) {
  c.program = t.loops.empty() ? codegen::compile(t.roots, c.n_params, c.device)
                              : compile_with_loops(t.roots, t.loops, c.n_params, c.device);
}

// Donated leaves lend their memory to results that may take it (Program::inplace_inputs).
// Every leaf's read is registered in `reads` (held by the caller for the whole run) before the
// donors are killed (nx::StorageReads); a donor's storage is lent only when, after its death,
// no other value or read can observe it (docs/semantics.md §3: views, bases, captured constants,
// other arguments, other threads' reads). Otherwise the results take fresh memory; the donor
// dies either way. Returns one buffer per output (null: fresh memory), or none without donors;
// with RUNE_JIT_DEBUG, prints each donor's fate.
std::vector<runtime::BufferRef> lend_donations(const Compiled& c,
                                               const std::vector<nx::Tensor>& leaves,
                                               const nx::StorageReads& reads,
                                               const std::string& api,
                                               const JitCore::PathsFn& paths) {
  // Raises before killing anything; `donated` marks the leaves this call killed.
  const std::vector<bool> donated = nx::consume_donations(leaves, api);
  std::vector<runtime::BufferRef> reuse;
  std::vector<std::pair<size_t, std::string>> fates;  // leaf index, fate
  if (!donated.empty()) {
    const auto& output_slots = c.program->output_slots;
    const auto& inplace_inputs = c.program->inplace_inputs;
    reuse.resize(output_slots.size());
    for (size_t i = 0; i < leaves.size(); ++i) {
      const auto& im = leaves[i].impl();
      if (!donated[i]) continue;
      size_t bytes = static_cast<size_t>(ir::numel(im.shape) * ir::itemsize(im.dtype));
      std::string fate = "consumed and lent to no result";
      const int own_reads = reads.count(im.buffer.get());  // this call's leaves on the storage
      int others = nx::other_observers(leaves[i], own_reads);
      if (!c.checks.empty()) {
        fate = "copied: the program has checks, which may still read it";
      } else if (im.view.offset != 0 || !im.view.is_contiguous() || im.buffer->nbytes != bytes) {
        fate = "copied: a view that does not cover its storage";
      } else if (im.buffer->borrowed()) {
        fate = "copied: borrowed memory (nx::from_blob, nx::from_dlpack) is never written in place";
      } else if (int caps = nx::live_dlpack_exports(im.buffer.get()); caps > 0) {
        // A consumer outside rune may still read it: counted among `others` (docs/interop.md).
        fate = "copied: exported as " +
               (caps == 1 ? std::string("a DLPack capsule whose deleter has")
                          : std::to_string(caps) + " DLPack capsules whose deleters have") +
               " not run (nx::to_dlpack)";
      } else if (own_reads != 1 || others != 0) {
        int n = others + own_reads - 1;
        fate = "copied: storage shared with " + std::to_string(n) + " live value" +
               (n == 1 ? "" : "s");
      } else {
        for (size_t o = 0; o < output_slots.size(); ++o) {
          if (reuse[o] || c.outputs[o].first != im.dtype ||
              ir::numel(c.outputs[o].second) != ir::numel(im.shape))
            continue;
          const auto& ok = inplace_inputs[o];
          if (std::find(ok.begin(), ok.end(), static_cast<int>(i)) == ok.end()) continue;
          reuse[o] = im.buffer;
          fate = "reused by result " + std::to_string(o);
          break;
        }
      }
      fates.push_back({i, fate});
    }
  }
  if (ir::jit_debug() && !fates.empty()) {
    std::vector<std::string> lp, tp;
    paths(lp, tp);
    for (const auto& [leaf, fate] : fates)
      std::fprintf(stderr, "rune.jit: donation: %s: %s\n",
                   leaf < lp.size() ? lp[leaf].c_str() : "?", fate.c_str());
  }
  return reuse;
}

// The program's params: the call's leaves, then the captured constants, each at its first
// element.
std::vector<char*> bind_params(const Compiled& c, const std::vector<nx::Tensor>& leaves) {
  std::vector<char*> ptrs;
  ptrs.reserve(leaves.size() + c.captured.size());
  auto bind = [&](const nx::Tensor& t) {
    const auto& im = t.impl();
    ptrs.push_back(static_cast<char*>(im.buffer->data) + im.view.offset * ir::itemsize(im.dtype));
  };
  for (const auto& l : leaves) bind(l);
  for (const auto& l : c.captured) {
    if (l.defined())
      bind(l);
    else
      ptrs.push_back(nullptr);  // a loop's result: the program binds its own slot
  }
  return ptrs;
}

}  // namespace

struct JitCore::Impl {
  JitOptions options;
  mutable std::mutex mu;
  using Future = std::shared_future<std::shared_ptr<const Compiled>>;
  using Promise = std::promise<std::shared_ptr<const Compiled>>;
  struct Entry {
    Future future;
    std::list<Key>::iterator lru;
  };
  std::unordered_map<Key, Entry, KeyHash, KeyEq> cache;
  std::list<Key> lru;  // most recent first
  std::optional<Key> last;
  size_t traces = 0;

  // The outcome of a look-up: the program's future, and on a miss the promise this caller
  // fulfils (callers with the same key meanwhile wait on the future).
  struct Lookup {
    Future future;
    std::shared_ptr<Promise> mine;
    std::optional<Key> key;  // a miss's key, as stored
  };

  // Step "look up": a hit moves the key to the front of the LRU list; a miss reports the
  // retrace (RUNE_JIT_DEBUG), installs a pending entry and evicts the least recently used
  // programs past the cache size.
  Lookup look_up(const Flat& args, const PathsFn& paths) {
    Lookup r;
    const ArgsKey probe{&args, hash_args(args)};
    std::lock_guard lock(mu);
    auto it = cache.find(probe);
    if (it != cache.end()) {
      lru.splice(lru.begin(), lru, it->second.lru);
      r.future = it->second.future;
      if (ir::jit_debug()) last = it->first;  // read only by the retrace report
      return r;
    }
    r.key = make_key(args);
    const Key& key = *r.key;
    if (ir::jit_debug() && last) {
      std::vector<std::string> lp, tp;
      paths(lp, tp);
      std::fprintf(stderr, "rune.jit: retrace: %s\n", first_difference(key, *last, lp, tp).c_str());
    }
    r.mine = std::make_shared<Promise>();
    r.future = r.mine->get_future().share();
    lru.push_front(key);
    cache.emplace(key, Entry{r.future, lru.begin()});
    ++traces;
    while (cache.size() > std::max<size_t>(options.cache_size, 1)) {
      const Key& victim = lru.back();
      if (ir::jit_debug())
        std::fprintf(stderr, "rune.jit: evicted the program for %s (cache size %zu)\n",
                     describe_key(victim).c_str(), options.cache_size);
      cache.erase(victim);
      lru.pop_back();
    }
    if (ir::jit_debug()) last = key;
    return r;
  }

  // Steps "trace" and "compile", on a miss: the new program fulfils `mine`. A failed trace or
  // compile installs nothing; its error reaches this caller and any caller that was waiting for
  // the same key.
  void build(Promise& mine, const Flat& args, const Key& key, const TraceFn& trace) {
    try {
      nx::Device device = call_device(args, options.name);
      std::shared_ptr<Compiled> c;
      {
        ir::NodeUse use;  // the trace's nodes stay until the program is compiled
        std::optional<runtime::ProfileSpan> phase(std::in_place, "phase", "trace", device.name());
        Traced t = trace_program(args, key, trace, device);
        phase.reset();
        compile_program(*t.compiled, t);
        c = std::move(t.compiled);
      }
      mine.set_value(std::move(c));
      ir::maybe_collect_nodes();  // a new program may have left the node table past its limit
    } catch (...) {
      mine.set_exception(std::current_exception());
      std::lock_guard lock(mu);
      auto it = cache.find(key);
      if (it != cache.end()) {
        lru.erase(it->second.lru);
        cache.erase(it);
      }
      throw;
    }
  }

  // Step "run": lends donated leaves' memory to results, binds the params and runs the program
  // through its device's launcher (host, asynchronous host stream or GPU stream).
  CallResult run(const std::shared_ptr<const Compiled>& c, const Flat& args,
                 const PathsFn& paths) const {
    nx::CallName named(options.name.c_str());  // e.g. an allocation that fails names rune::jit
    nx::StorageReads reads;  // the leaves' reads, registered until the program ran
    for (const auto& l : args.leaves) reads.add(l);
    std::vector<runtime::BufferRef> reuse =
        lend_donations(*c, args.leaves, reads, options.name, paths);
    std::vector<char*> ptrs = bind_params(*c, args.leaves);
    return launch_call(c, args.leaves, std::move(ptrs), std::move(reuse));
  }
};

size_t default_jit_cache_size() {
  static const size_t n =
      static_cast<size_t>(ir::env::integer(ir::env::Var::JitCacheSize));  // >= 1
  return n;
}

JitCore::JitCore(JitOptions o) : impl_(std::make_unique<Impl>()) { impl_->options = std::move(o); }
JitCore::~JitCore() = default;

size_t JitCore::traces() const {
  std::lock_guard lock(impl_->mu);
  return impl_->traces;
}
size_t JitCore::cached_programs() const {
  std::lock_guard lock(impl_->mu);
  return impl_->cache.size();
}

// A call, step by step: key, look up, (on a miss) trace and compile, run.
CallResult JitCore::call(const Flat& args, const TraceFn& trace, const PathsFn& paths) {
  Impl& m = *impl_;
  for (const auto& l : args.leaves) nx::check_alive(l, m.options.name.c_str());
  Impl::Lookup found = m.look_up(args, paths);
  if (found.mine) m.build(*found.mine, args, *found.key, trace);
  std::shared_ptr<const Compiled> c = found.future.get();
  return m.run(c, args, paths);
}

}  // namespace rune
