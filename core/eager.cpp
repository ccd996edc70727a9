// The eager interpreter: each primitive runs at once. View ops (permute, expand, shrink, flip,
// and reshapes the strides allow) make a new view of the same buffer; every other primitive
// is a one-op program through the same compile pipeline as rune::jit, cached by structure, so
// eager and compiled results share their bits and a repeated op never recompiles.
#include <bit>
#include <list>
#include <optional>
#include <unordered_map>

#include "codegen/compile.h"
#include "codegen/plan.h"
#include "core/check.h"
#include "core/donation.h"
#include "core/eager_sized.h"
#include "core/interpreter.h"
#include "core/ops.h"
#include "ir/debug.h"
#include "ir/env.h"
#include "ir/hash.h"
#include "ir/scalar.h"
#include "runtime/launcher.h"

namespace nx {

namespace {

using detail::key_view;

std::optional<ir::View> view_op(ir::Op op, const ir::View& v, const Shape& shape,
                                const ir::Arg& arg) {
  switch (op) {
    case ir::Op::Reshape:
      return v.reshape(shape);
    case ir::Op::Permute: {
      const auto& p = std::get<std::vector<int64_t>>(arg);
      return v.permute(std::vector<int>(p.begin(), p.end()));
    }
    case ir::Op::Expand:
      return v.expand(shape);
    case ir::Op::Shrink:
      return v.shrink(std::get<ir::Pairs>(arg));
    case ir::Op::Window: {
      const auto& a = std::get<std::vector<int64_t>>(arg);
      return v.window(static_cast<int>(a[0]), shape[a[0]], a[1], a[2], a[3]);
    }
    case ir::Op::Flip: {
      std::vector<bool> axes(v.shape.size(), false);
      for (auto a : std::get<std::vector<int64_t>>(arg)) axes[a] = true;
      return v.flip(axes);
    }
    default:
      return std::nullopt;
  }
}

// The structure of a one-op program as integers: op, dtypes, shapes, argument, and each
// operand's layout. Two calls with equal fingerprints run the same program, so the eager fast
// path finds it without building (interning) any node.
struct Fingerprint {
  std::vector<int64_t> v;
  size_t hash = 0;
  bool operator==(const Fingerprint& o) const { return hash == o.hash && v == o.v; }
};
struct FingerprintHash {
  size_t operator()(const Fingerprint& f) const { return f.hash; }
};

// Appends an op's argument to a fingerprint.
void push_arg(std::vector<int64_t>& v, const ir::Arg& arg) {
  v.push_back(static_cast<int64_t>(arg.index()));
  std::visit(
      [&](const auto& a) {
        using T = std::decay_t<decltype(a)>;
        if constexpr (std::is_same_v<T, int64_t>)
          v.push_back(a);
        else if constexpr (std::is_same_v<T, double>)
          v.push_back(std::bit_cast<int64_t>(a));
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          v.push_back(static_cast<int64_t>(a.size()));
          v.insert(v.end(), a.begin(), a.end());
        } else if constexpr (std::is_same_v<T, ir::Pairs>) {
          v.push_back(static_cast<int64_t>(a.size()));
          for (auto [x, y] : a) v.push_back(x), v.push_back(y);
        } else if constexpr (std::is_same_v<T, ir::HostFnArg>) {
          const auto& k = a.fn->key();
          v.push_back(static_cast<int64_t>(k.size()));
          v.insert(v.end(), k.begin(), k.end());
        } else if constexpr (!std::is_same_v<T, std::monostate>) {
          throw std::logic_error("nx: unexpected eager op argument");
        }
      },
      arg);
}

// Fills f (reused per thread, so the hot path allocates nothing).
void fingerprint(Fingerprint& f, ir::Op op, DType out, const Shape& shape,
                 const std::vector<Tensor>& srcs, const ir::Arg& arg) {
  auto& v = f.v;
  v.clear();
  v.push_back(static_cast<int64_t>(op));
  v.push_back(static_cast<int64_t>(out));
  v.push_back(static_cast<int64_t>(shape.size()));
  v.insert(v.end(), shape.begin(), shape.end());
  push_arg(v, arg);
  for (const auto& s : srcs) {
    const auto& im = s.impl();
    v.push_back(static_cast<int64_t>(im.dtype));
    v.push_back(static_cast<int64_t>(im.shape.size()));
    for (size_t d = 0; d < im.shape.size(); ++d) {
      v.push_back(im.shape[d]);
      v.push_back(im.shape[d] == 1 ? 0 : im.view.strides[d]);
    }
  }
  f.hash = ir::hash_words(v);
}

// An eager op's program for one shape, and the descriptor its sized kernel reads (core/
// eager_sized.h: bound after the operands), if it has one.
struct EagerProgram {
  std::shared_ptr<const runtime::Program> program;
  Tensor descriptor;
};

// A thread's one-op programs by fingerprint: at most eager_cache_size() of them, the least
// recently used evicted first, so a process whose shapes vary keeps a bounded set (the
// programs' kernels and nodes go with their last owner, codegen/compile.cpp).
size_t eager_cache_size() {
  static const size_t n =
      static_cast<size_t>(ir::env::integer(ir::env::Var::EagerCacheSize));  // >= 1
  return n;
}
template <class Program>
class ProgramLru {
 public:
  using Ref = std::shared_ptr<const Program>;
  // The program for f (now the most recent), or nullptr.
  const Ref* find(const Fingerprint& f) {
    auto it = index_.find(f);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);
    return &it->second->second;
  }
  const Ref& insert(const Fingerprint& f, Ref p) {
    order_.emplace_front(f, std::move(p));
    index_[f] = order_.begin();
    while (order_.size() > eager_cache_size()) {
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    return order_.front().second;
  }

 private:
  std::list<std::pair<Fingerprint, Ref>> order_;
  std::unordered_map<Fingerprint, typename std::list<std::pair<Fingerprint, Ref>>::iterator,
                     FingerprintHash>
      index_;
};

// Eager ops compiled once per op kind, not once per shape (docs/performance.md "The first
// step"). A host kernel's entry runs the items [lo, hi) its launcher gives it, and an elementwise
// kernel over a 1-D shape [F] computes item i from its operands' elements i (or their one
// broadcast element) only. So an elementwise op whose operands are each contiguous in the
// output's shape or a single broadcast element computes, over any shape of n elements, exactly
// what the *flat* program over [kFlatExtent] computes over its first n items: the same
// per-element code, so the same bits (the lowering fixes every element's operation order, and
// no plan changes it). That program is compiled once per op, dtypes, argument and operand
// layout class (contiguous or broadcast); each shape gets a copy of it with its item count and
// output size (no compile), cached by shape as every one-op program is.
constexpr int64_t kFlatExtent = int64_t{1} << 40;

enum class FlatOperand : int64_t { Contiguous = 1, Broadcast = 2 };

// How operand s reads in the flat program, if it can: every element in row-major order, or
// one element for all.
std::optional<FlatOperand> flat_operand(const Tensor& s, const Shape& shape) {
  const auto& im = s.impl();
  if (im.shape != shape) return std::nullopt;
  const ir::View v = key_view(im.view);
  if (!v.mask.empty()) return std::nullopt;
  // One element: read at index 0 either way (so a 0-d op shares the kind's kernel).
  if (ir::numel(shape) == 1) return FlatOperand::Contiguous;
  bool broadcast = true;
  for (int64_t st : v.strides) broadcast = broadcast && st == 0;
  if (broadcast) return FlatOperand::Broadcast;
  if (v.is_contiguous()) return FlatOperand::Contiguous;
  return std::nullopt;
}

// The flat program's key (op, dtypes, argument, operands' classes, device) into f, if the op
// has one: an elementwise op, a copy or a constant fill (a 1-D iota too: its index is the flat
// index)
// with at least one element, on a host device (a GPU kernel's launch geometry is its shape's).
bool flat_fingerprint(Fingerprint& f, ir::Op op, DType out, const Shape& shape,
                      const std::vector<Tensor>& srcs, const ir::Arg& arg, int64_t dev,
                      Device device) {
  if (device.kind != runtime::DeviceKind::CPU) return false;
  if (!ir::is_elementwise(op) && op != ir::Op::Const && op != ir::Op::Copy &&
      !(op == ir::Op::Iota && shape.size() == 1))
    return false;
  if (ir::numel(shape) == 0 || std::holds_alternative<ir::HostFnArg>(arg)) return false;
  auto& v = f.v;
  v.clear();
  v.push_back(static_cast<int64_t>(op));
  v.push_back(static_cast<int64_t>(out));
  v.push_back(-1);  // no shape: the flat program's
  push_arg(v, arg);
  for (const auto& s : srcs) {
    auto how = flat_operand(s, shape);
    if (!how) return false;
    v.push_back(static_cast<int64_t>(s.dtype()));
    v.push_back(static_cast<int64_t>(*how));
  }
  v.push_back(dev);
  f.hash = ir::hash_words(v);
  return true;
}

// The graph of the flat program: the op over [kFlatExtent] with Params of that shape, each read
// contiguously or as one broadcast element.
ir::NodeRef flat_root(ir::Op op, DType out, const std::vector<Tensor>& srcs, const Shape& shape,
                      const ir::Arg& arg) {
  const Shape flat = {kFlatExtent};
  std::vector<ir::NodeRef> params;
  for (size_t i = 0; i < srcs.size(); ++i) {
    ir::View view = ir::View::contiguous(flat);
    if (*flat_operand(srcs[i], shape) == FlatOperand::Broadcast) view.strides = {0};
    params.push_back(
        ir::make(ir::Op::Param, srcs[i].dtype(), flat, {}, ir::LoadArg{static_cast<int>(i), view}));
  }
  return op == ir::Op::Copy ? params[0] : ir::make(op, out, flat, params, arg);
}

// The flat program g run over n items: a copy with its item count and output size. Null when g
// is not the single elementwise kernel expected (its kernel then serves no other shape).
std::shared_ptr<const runtime::Program> flat_program_for(const runtime::Program& g, int64_t n,
                                                         DType out) {
  return detail::resized_program(g, n * ir::itemsize(out), [n](runtime::Step& step) {
    if (step.items != kFlatExtent) return false;
    step.bytes = step.bytes / kFlatExtent * n;
    step.items = n;
    return true;
  });
}

// The graph of one primitive over Params 0..n-1 laid out as its operands are.
ir::NodeRef one_op_root(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
                        const ir::Arg& arg) {
  std::vector<ir::NodeRef> params;
  for (size_t i = 0; i < srcs.size(); ++i) {
    const auto& im = srcs[i].impl();
    params.push_back(ir::make(ir::Op::Param, im.dtype, im.shape, {},
                              ir::LoadArg{static_cast<int>(i), key_view(im.view)}));
  }
  return op == ir::Op::Copy ? params[0] : ir::make(op, out, shape, params, arg);
}

class Eager final : public Interpreter {
 public:
  Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
               const ir::Arg& arg) override {
    for (const auto& s : srcs) {
      if (s.is_traced())
        throw rune::jit_error(std::string("nx: a traced value ") + s.describe() +
                              " was used outside the function being traced");
    }
    Device device = device_of(op, srcs);
    // Inside a public op the op's scope owns donation; a bare primitive consumes its own.
    if (!OpScope::active()) consume_donations(srcs, "nx::", ir::op_name(op));
    if (ir::is_movement(op) && op != ir::Op::Pad && op != ir::Op::Copy) {
      const Tensor& x = srcs[0];
      // A view stays with its buffer (a view of a host scalar stays a host value).
      if (auto v = view_op(op, x.impl().view, shape, arg))
        return make_concrete(out, x.impl().buffer, *v, x.device(), x.impl().poison);
      // The strides cannot express this reshape: copy to contiguous memory first.
      Tensor c = run_program(ir::Op::Copy, x.dtype(), x.shape(), {x}, {}, device);
      return make_concrete(out, c.impl().buffer, *c.impl().view.reshape(shape), device,
                           c.impl().poison);
    }
    return run_program(op, out, shape, srcs, arg, device);
  }

  // Operands live on one device. Host scalars (scalar operands such as the 2 of x * 2) go
  // with any device: a CPU device reads host memory, a GPU gets the element uploaded. A
  // primitive without any other operand runs where operandless_device() says, else on the host.
  static Device device_of(ir::Op op, const std::vector<Tensor>& srcs) {
    const Tensor* first = nullptr;
    for (const auto& s : srcs) {
      if (is_host_scalar(s)) continue;
      if (!first) {
        first = &s;
      } else if (!(s.device() == first->device())) {
        const char* api = OpScope::current_api();
        throw std::invalid_argument(
            (api ? std::string(api) : "nx::" + std::string(ir::op_name(op))) +
            ": operands on two devices, " + first->device().name() + " (" + first->describe() +
            ") and " + s.device().name() + " (" + s.describe() + "); move one with nx::place");
      }
    }
    Device device = first ? first->device() : operandless_device().value_or(Device::cpu());
    if (device.kind != runtime::DeviceKind::CPU) {
      const char* api = OpScope::current_api();
      runtime::stream_for(device,  // raises: unavailable
                          (api ? std::string(api) : "nx::" + std::string(ir::op_name(op))).c_str());
    }
    return device;
  }

  Tensor constant(const ir::Value& v) override {
    uint64_t bits = v.bits();
    return host_from_bytes(v.dtype, {}, &bits);  // little-endian: the low bytes hold the value
  }

  void record_check(
      const Tensor& ok, const std::vector<Tensor>& data,
      std::function<std::exception_ptr(const std::vector<int64_t>&, const std::vector<Tensor>&)>
          fail) override {
    Tensor first = detail::first_false(ok);
    runtime::Stream* stream = runtime::stream_for(ok.device());
    if (!stream) {
      int64_t f = item<int64_t>(first);
      if (f < ok.size()) std::rethrow_exception(detail::build_failure(ok.shape(), f, data, fail));
      return;
    }
    // Asynchronous device: the check runs with the queued work; a failure is raised at the
    // next wait. The failing data are read straight from memory on the stream (their
    // producers ran before this task, in stream order).
    Shape shape = ok.shape();
    int64_t n = ok.size();
    // The data are held as values of their own (a GPU runs this task after all the device work
    // queued before the wait, so no later op may write a donated result into them).
    std::vector<Tensor> data_held;
    for (const auto& d : data) data_held.push_back(observer_of(d));
    stream->enqueue([first, data = std::move(data_held), fail, shape, n] {
      if (auto e = first.impl().poison ? first.impl().poison->get() : nullptr)
        std::rethrow_exception(e);
      int64_t f;
      read_memory(first, first.impl().view.offset, &f, sizeof f);
      if (f >= n) return;
      std::vector<Tensor> at;
      for (const auto& d : data) at.push_back(element_on_host(d, shape, f));
      std::rethrow_exception(detail::build_failure(
          {}, 0, at, [&](const std::vector<int64_t>&, const std::vector<Tensor>& v) {
            return fail(unravel(shape, f), v);
          }));
    });
  }

  void check_readable(const Tensor& t, const char* api) override {
    if (t.is_traced())
      throw rune::jit_error(std::string(api) + ": cannot read traced value " + t.describe() +
                            " while tracing (data-dependent choices use nx::where)");
    check_alive(t, api);
    // A read is a wait: the queued work finishes and failures recorded since the last wait
    // raise; a poisoned value raises its own failure at every read.
    if (runtime::Stream* s = runtime::stream_for(t.device())) s->synchronize();
    if (t.impl().poison)
      if (auto e = t.impl().poison->get()) std::rethrow_exception(e);
  }

 private:
  // The one run path of every device: the program by fingerprint and device, per thread (no
  // lock; misses go to the shared compile cache), its operands bound (host scalars uploaded
  // where the device cannot read host memory), a donated operand's buffer lent to the result,
  // then one call through the device's launcher (runtime/launcher.h: at once on the host,
  // queued on CPU:n's or a GPU's stream, where a failed operand poisons the result).
  Tensor run_program(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
                     const ir::Arg& arg, Device device) {
    thread_local ProgramLru<EagerProgram> programs;
    thread_local Fingerprint fp;
    fingerprint(fp, op, out, shape, srcs, arg);
    // A GPU's products depend on the matmul precision (nx::set_matmul_precision): part of the
    // key there, so a changed setting never reuses a program built under the other.
    int64_t dev = static_cast<int64_t>(device.kind) * 1024 + device.index;
    if (device.kind != runtime::DeviceKind::CPU)
      dev += 65536 * (1 + static_cast<int64_t>(codegen::matmul_precision()));
    fp.v.push_back(dev);
    fp.hash = ir::hash_combine(fp.hash, dev);
    const auto* found = programs.find(fp);
    if (!found) {
      auto built = std::make_shared<EagerProgram>();
      built->program = flat_program(op, out, shape, srcs, arg, dev, device);
      if (!built->program) {
        if (auto sized = detail::sized_op(op, out, shape, srcs, arg, device)) {
          built->program = sized_program(*sized, op, out, shape, srcs, dev, device);
          if (built->program) built->descriptor = detail::sized_descriptor(*sized, device);
        }
      }
      if (!built->program) {
        ir::NodeUse use;
        built->program = codegen::compile({one_op_root(op, out, shape, srcs, arg)},
                                          static_cast<int>(srcs.size()), device);
      }
      found = &programs.insert(fp, std::move(built));
      ir::maybe_collect_nodes();
    }
    // Copies: the cache may evict the entry while the program runs.
    const auto program = (*found)->program;
    const Tensor descriptor = (*found)->descriptor;
    const runtime::Launcher& launcher = program->launcher();
    constexpr size_t kSmall = 5;
    char* ptr_small[kSmall];
    const std::shared_ptr<runtime::Poison>* poison_small[kSmall];
    std::vector<char*> ptr_big;
    std::vector<const std::shared_ptr<runtime::Poison>*> poison_big;
    char** ptrs = ptr_small;
    const std::shared_ptr<runtime::Poison>** poisons = poison_small;
    if (srcs.size() + 1 > kSmall) {
      ptr_big.resize(srcs.size() + 1);
      poison_big.resize(srcs.size() + 1);
      ptrs = ptr_big.data();
      poisons = poison_big.data();
    }
    std::vector<Tensor> bound;  // uploaded host scalars, alive until the call is made
    for (size_t i = 0; i < srcs.size(); ++i) {
      const Tensor* s = &srcs[i];
      if (!launcher.host_memory() && !(s->device() == device)) {
        bound.push_back(upload_scalar(*s, device, launcher));
        s = &bound.back();
      }
      const auto& im = s->impl();
      ptrs[i] = static_cast<char*>(im.buffer->data) + im.view.offset * ir::itemsize(im.dtype);
      poisons[i] = &im.poison;
    }
    // A sized kernel's descriptor is its last input (core/eager_sized.h); it is never poisoned.
    if (descriptor.defined())
      ptrs[srcs.size()] = static_cast<char*>(descriptor.impl().buffer->data);
    runtime::BufferRef lent = donated_buffer(op, out, shape, srcs);
    runtime::Call call;
    call.inputs = ptrs;
    call.n = srcs.size() + (descriptor.defined() ? 1 : 0);
    call.reuse = lent ? &lent : nullptr;
    call.poisons = poisons;
    call.n_poisons = srcs.size();
    // The operands stay alive until a deferred call ran (CPU:n).
    if (launcher.defers_calls()) {
      auto keep = std::make_shared<std::vector<Tensor>>(srcs);
      if (descriptor.defined()) keep->push_back(descriptor);
      call.keep = std::move(keep);
    }
    auto launched = launcher.call(program, call);
    return make_concrete(out, std::move(launched.outputs[0]), ir::View::contiguous(shape), device,
                         std::move(launched.poison));
  }

  // The program of an op kind that serves every shape (a flat or a sized one) by its key in
  // `kinds` (the caller's, per thread), built by `build` at the kind's first shape.
  template <class Build>
  static std::shared_ptr<const runtime::Program> kind_program(ProgramLru<runtime::Program>& kinds,
                                                              const Fingerprint& key,
                                                              Build&& build) {
    const auto* found = kinds.find(key);
    if (!found) found = &kinds.insert(key, build());
    return *found;
  }

  // This shape's copy of the op kind's flat program (compiled at the kind's first shape), or
  // null when the op has none.
  static std::shared_ptr<const runtime::Program> flat_program(ir::Op op, DType out,
                                                              const Shape& shape,
                                                              const std::vector<Tensor>& srcs,
                                                              const ir::Arg& arg, int64_t dev,
                                                              Device device) {
    thread_local ProgramLru<runtime::Program> flat_programs;
    thread_local Fingerprint key;
    if (!flat_fingerprint(key, op, out, shape, srcs, arg, dev, device)) return nullptr;
    auto kind = kind_program(flat_programs, key, [&] {
      ir::NodeUse use;
      return codegen::compile({flat_root(op, out, srcs, shape, arg)}, static_cast<int>(srcs.size()),
                              device);
    });
    return flat_program_for(*kind, ir::numel(shape), out);
  }

  // This shape's copy of the op kind's sized program (core/eager_sized.h: compiled at the
  // kind's first shape), or null. Its key: the class, op, dtypes, the kernel's argument and
  // the operands' inner strides (no shape).
  static std::shared_ptr<const runtime::Program> sized_program(const detail::SizedOp& sized,
                                                               ir::Op op, DType out,
                                                               const Shape& shape,
                                                               const std::vector<Tensor>& srcs,
                                                               int64_t dev, Device device) {
    thread_local ProgramLru<runtime::Program> sized_programs;
    thread_local Fingerprint key;
    auto& v = key.v;
    v.assign({-2, static_cast<int64_t>(sized.sizes), static_cast<int64_t>(op),
              static_cast<int64_t>(out)});
    push_arg(v, sized.arg);
    for (const auto& x : srcs) v.push_back(static_cast<int64_t>(x.dtype()));
    v.insert(v.end(), sized.inner.begin(), sized.inner.end());
    v.push_back(dev);
    key.hash = ir::hash_words(v);
    auto kind = kind_program(sized_programs, key, [&] {
      return detail::compile_sized_kind(sized, op, out, srcs, device);
    });
    return detail::sized_program_for(*kind, sized, out, ir::numel(shape));
  }

  // A host scalar (0-d, or broadcast with all strides 0) as a one-element tensor on `device`
  // with the same view (offset 0: every stride is 0 or spans an extent-1 axis).
  static Tensor upload_scalar(const Tensor& s, Device device, const runtime::Launcher& launcher) {
    const auto& im = s.impl();
    size_t isz = static_cast<size_t>(ir::itemsize(im.dtype));
    auto buf = runtime::allocate(device, isz);
    launcher.write(buf->data, static_cast<const char*>(im.buffer->data) + im.view.offset * isz,
                   isz);
    ir::View v = im.view;
    v.offset = 0;
    return make_concrete(im.dtype, std::move(buf), std::move(v), device);
  }

  // Reads n bytes of t's buffer at element offset `elem` through its device's launcher (a
  // device copy on a GPU: the caller is a stream task, run at a wait, so the device work before
  // it is done).
  static void read_memory(const Tensor& t, int64_t elem, void* dst, size_t n) {
    const auto& im = t.impl();
    const char* src = static_cast<const char*>(im.buffer->data) + elem * ir::itemsize(im.dtype);
    runtime::launcher_for(t.device(), "nx::check").read(dst, src, n);
  }

  // The buffer of a donated operand this one-op program may write its result into: an
  // elementwise op applied by the public op itself (OpScope::depth() == 1), whose operand has
  // the result's dtype and shape, is contiguous and covers its whole buffer (so it is read at
  // each element's own index only), and whose storage nothing else can observe
  // (docs/semantics.md §3): the donor is killed first, then no other value or read may reach its
  // buffer (views, bases, captured constants, another operand, another thread's read). Otherwise
  // the result takes fresh memory and the donor still dies with the op.
  static runtime::BufferRef donated_buffer(ir::Op op, DType out, const Shape& shape,
                                           const std::vector<Tensor>& srcs) {
    if (!ir::is_elementwise(op) || OpScope::depth() != 1) return nullptr;
    for (const auto& s : srcs) {
      const auto& im = s.impl();
      if (im.donation.load() != 1 || im.dtype != out || im.shape != shape) continue;
      if (im.view.offset != 0 || !im.view.is_contiguous()) continue;
      if (im.buffer->nbytes != static_cast<size_t>(ir::numel(shape) * ir::itemsize(out))) continue;
      int own_reads = 0;  // the op's reads of this storage: its arguments reaching it
      for (const Tensor* a : OpScope::current_args())
        if (a->impl().buffer == im.buffer) ++own_reads;
      if (own_reads != 1) return nullptr;  // another operand reads it at other indices
      consume_now(s, OpScope::current_api());
      if (other_observers(s, own_reads) != 0) return nullptr;
      return im.buffer;
    }
    return nullptr;
  }

  // Element `flat` of d (broadcast to `shape`) as a 0-d host tensor, read straight from memory.
  static Tensor element_on_host(const Tensor& d, const Shape& shape, int64_t flat) {
    auto idx = unravel(shape, flat);
    const auto& im = d.impl();
    int64_t off = im.view.offset;
    size_t lead = shape.size() - im.shape.size();
    for (size_t k = 0; k < im.shape.size(); ++k)
      if (im.shape[k] != 1) off += idx[lead + k] * im.view.strides[k];
    uint64_t bits = 0;
    read_memory(d, off, &bits, static_cast<size_t>(ir::itemsize(im.dtype)));
    return host_from_bytes(im.dtype, {}, &bits);
  }
  static std::vector<int64_t> unravel(const Shape& shape, int64_t flat) {
    std::vector<int64_t> idx(shape.size());
    for (size_t d = shape.size(); d-- > 0;) {
      idx[d] = shape[d] ? flat % shape[d] : 0;
      flat = shape[d] ? flat / shape[d] : 0;
    }
    return idx;
  }
};

// The interpreters active on this thread, innermost last.
thread_local std::vector<Interpreter*> g_stack;
// The innermost CreateOn's device on this thread.
thread_local std::optional<Device> g_create_on;

}  // namespace

CreateOn::CreateOn(Device d) : prev_(g_create_on) { g_create_on = d; }
CreateOn::~CreateOn() { g_create_on = prev_; }

bool is_host_scalar(const Tensor& t) {
  const auto& im = t.impl();
  if (!(im.device == Device::cpu()) || !im.buffer) return false;
  for (size_t d = 0; d < im.view.strides.size(); ++d)
    if (im.view.strides[d] != 0 && im.shape[d] != 1) return false;
  return true;
}

std::optional<Device> operandless_device() {
  if (g_create_on) return g_create_on;
  const auto& args = OpScope::current_args();
  for (const Tensor* t : args)
    if (!is_host_scalar(*t)) return t->device();
  if (!args.empty()) return Device::cpu();  // an op on host scalars only runs on the host
  return std::nullopt;
}

Interpreter& eager_interpreter() {
  static Eager e;
  return e;
}
Interpreter& current_interpreter() {
  return g_stack.empty() ? eager_interpreter() : *g_stack.back();
}
bool is_active(const Interpreter* i) {
  for (auto* s : g_stack)
    if (s == i) return true;
  return false;
}

InterpreterScope::InterpreterScope(Interpreter* i) { g_stack.push_back(i); }
InterpreterScope::~InterpreterScope() { g_stack.pop_back(); }

Tensor apply(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
             const ir::Arg& arg) {
  return current_interpreter().apply(op, out, shape, srcs, arg);
}

}  // namespace nx
