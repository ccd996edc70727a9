// rune::jit: compile a function of tensor trees. A call traces f over stand-ins of its
// arguments into a program, keyed by the arguments' structure and each leaf's dtype, shape,
// placement and layout (docs/semantics.md §2.3), compiles it and runs it; later calls with the same
// key run the compiled program without calling f.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <tuple>

#include "core/donation.h"
#include "core/tree.h"
#include "trace/tracer.h"

namespace rune {

// RUNE_JIT_CACHE_SIZE (default 4096), read once: the default of JitOptions::cache_size.
size_t default_jit_cache_size();

struct JitOptions {
  // Programs kept per compiled function: the least recently used go first, with their kernels
  // and nodes once nothing else holds them (docs/design-notes.md "Bounded queues and caches").
  size_t cache_size = default_jit_cache_size();
  std::string name = "rune::jit";  // the entry point named in messages
};

// An explicit signature: the C++ form of Nx.Ptree's `params @-> returns ...`. The structure of
// arguments and results comes from f's C++ types; the signature adds what types cannot say:
// arguments consumed on every call (donated, docs/semantics.md §3) and integers declared static
// (every integer argument is static, i.e. part of the key; declaring one checks that it is).
struct Signature {
  std::vector<int> consumed;
  std::vector<int> static_ints;
  JitOptions options;
  Signature& consume(int arg) {
    consumed.push_back(arg);
    return *this;
  }
  Signature& static_int(int arg) {
    static_ints.push_back(arg);
    return *this;
  }
};

// The type-independent part of a compiled function: keys, the program cache, retrace reports.
class JitCore {
 public:
  explicit JitCore(JitOptions o);
  ~JitCore();
  // Traces f on stand-ins (given in the argument's structure) and returns its flat result.
  using TraceFn = std::function<Flat(const std::vector<nx::Tensor>& stand_ins)>;
  // Fills paths for the arguments (only used for messages).
  using PathsFn = std::function<void(std::vector<std::string>& leaf_paths,
                                     std::vector<std::string>& token_paths)>;
  // The outputs of a call and the tokens that rebuild its result's structure (the program's
  // own, shared: a call copies nothing of them).
  using Result = std::pair<std::vector<nx::Tensor>, std::shared_ptr<const std::vector<int64_t>>>;
  // Runs the program for `args` (tracing on a new key); returns outputs and result tokens.
  Result call(const Flat& args, const TraceFn& trace, const PathsFn& paths);
  size_t traces() const;  // how many times f was traced
  size_t cached_programs() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

template <class Sig>
class Jitted;

template <class R, class... Args>
class Jitted<R(Args...)> {
 public:
  Jitted(std::function<R(Args...)> f, JitOptions o)
      : f_(std::move(f)), core_(std::make_shared<JitCore>(std::move(o))) {}
  Jitted(std::function<R(Args...)> f, Signature sig)
      : f_(std::move(f)), core_(std::make_shared<JitCore>(sig.options)), sig_(std::move(sig)) {
    for (int a : sig_.consumed)
      if (a < 0 || a >= static_cast<int>(sizeof...(Args)))
        throw std::invalid_argument(sig_.options.name + ": consumed argument " + std::to_string(a) +
                                    " out of range for " + std::to_string(sizeof...(Args)) +
                                    " arguments");
    bool integral[] = {std::is_integral_v<std::decay_t<Args>>..., false};
    for (int a : sig_.static_ints)
      if (a < 0 || a >= static_cast<int>(sizeof...(Args)) || !integral[a])
        throw std::invalid_argument(sig_.options.name + ": argument " + std::to_string(a) +
                                    " is declared static but is not an integer");
  }

  R operator()(Args... args) const {
    // jit inside a traced function is inlined into the enclosing trace.
    if (active_tracer()) return f_(std::forward<Args>(args)...);
    Flat flat;
    std::vector<size_t> leaf_end;  // leaves of argument i end at leaf_end[i]
    flatten_args(flat, sig_.consumed.empty() ? nullptr : &leaf_end, args...);
    for (int a : sig_.consumed)  // consumed arguments are donated on every call
      for (size_t l = a == 0 ? 0 : leaf_end[a - 1]; l < leaf_end[a]; ++l)
        nx::donate(flat.leaves[l]);
    // The callbacks go to JitCore as std::function: each wraps a closure of one pointer, which
    // std::function stores in place (a closure of several references would be allocated on
    // every call, hit or miss).
    auto trace_here = [&](const std::vector<nx::Tensor>& stand_ins) {
      [[maybe_unused]] Unflat u{stand_ins, flat.tokens};  // unread when f takes no arguments
      std::tuple<std::decay_t<Args>...> a{Tree<std::decay_t<Args>>::build(u)...};
      R r = std::apply(f_, a);
      Flat out;
      Tree<R>::flatten(r, out, "");
      return out;
    };
    auto paths_here = [&](std::vector<std::string>& lp, std::vector<std::string>& tp) {
      Flat f;
      f.paths = &lp;
      f.token_paths = &tp;
      flatten_args(f, nullptr, args...);
    };
    auto trace = [p = &trace_here](const std::vector<nx::Tensor>& s) { return (*p)(s); };
    auto paths = [p = &paths_here](std::vector<std::string>& lp, std::vector<std::string>& tp) {
      (*p)(lp, tp);
    };
    auto [outs, tokens] = core_->call(flat, trace, paths);
    Unflat u{outs, *tokens};
    return Tree<R>::build(u);
  }

  size_t traces() const { return core_->traces(); }
  size_t cached_programs() const { return core_->cached_programs(); }

 private:
  template <class... A>
  static void flatten_args(Flat& f, std::vector<size_t>* leaf_end, const A&... a) {
    int i = 0;
    ((Tree<std::decay_t<A>>::flatten(a, f, std::to_string(i++)),
      leaf_end ? leaf_end->push_back(f.leaves.size()) : void()),
     ...);
  }
  std::function<R(Args...)> f_;
  std::shared_ptr<JitCore> core_;
  Signature sig_;
};

namespace detail {
template <class T>
struct FnSig;
template <class R, class... A>
struct FnSig<std::function<R(A...)>> {
  using type = R(A...);
};
}  // namespace detail

// Compiles f with an explicit signature (consumed arguments, static integers).
template <class F>
auto jit(Signature sig, F f) {
  using Fn = decltype(std::function{f});
  return Jitted<typename detail::FnSig<Fn>::type>(Fn(std::move(f)), std::move(sig));
}

// Compiles f; its signature is deduced from its parameter and result types.
template <class F>
auto jit(F f, JitOptions o = {}) {
  using Fn = decltype(std::function{f});
  return Jitted<typename detail::FnSig<Fn>::type>(Fn(std::move(f)), std::move(o));
}

}  // namespace rune
