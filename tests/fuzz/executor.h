// Runs a Program in one mode: eagerly or compiled (rune::jit), on one device, and records what
// a user can observe: the outputs' raw bits, or the exception (type and message); plus the
// contract breaches seen on the way (a failing op that consumed its arguments, a donated value
// still readable, ...).
//
// Donation: eagerly, a step's donated argument goes through nx::donate right before the step.
// Compiled, the program's inputs that some step donates are donated to the compiled call
// (inside a trace there are no buffers to give up). Either way the donated values must be dead
// afterwards and the outputs the same bits as without donation.
#pragma once
#include <cstdlib>
#include <exception>
#include <typeinfo>

#include "fuzz/values.h"
#include "trace/rune.h"

namespace fuzz {

struct Mode {
  std::string device;  // "CPU", "CPU:1", "CUDA:0"
  bool jit = false;
  std::string name() const { return (jit ? "rune::jit on " : "eager on ") + device; }
};

struct Outcome {
  bool raised = false;
  std::string error;  // "<exception type>: <what()>"
  std::vector<Bits> outputs;
  std::vector<std::string> breaches;  // contract breaches seen during the run
  int failed_step = -1;               // eager: the step that raised (-1: a later read raised)
  // Eager: a donated operand's storage was reachable from another live value (the case the
  // lead engineer is fixing, see docs/testing.md); `alias`: a donated operand was the very
  // tensor another live slot holds (nx returns its argument for identity ops).
  bool shared_donation = false;
  bool alias = false;
  std::vector<Bits> slots;  // eager, when asked: every slot's bits (for the reference)
};

inline std::string exception_text(std::exception_ptr e) {
  try {
    std::rethrow_exception(e);
  } catch (const rune::jit_error& x) {
    return std::string("rune::jit_error: ") + x.what();
  } catch (const std::invalid_argument& x) {
    return std::string("std::invalid_argument: ") + x.what();
  } catch (const std::runtime_error& x) {
    return std::string("std::runtime_error: ") + x.what();
  } catch (const std::logic_error& x) {
    return std::string("std::logic_error: ") + x.what();
  } catch (const std::exception& x) {
    return std::string(typeid(x).name()) + ": " + x.what();
  } catch (...) {
    return "unknown exception";
  }
}

// The message every check step's failure carries (so a run can tell a failed check from an
// op's invalid argument).
inline constexpr const char* kCheckPrefix = "fuzz check: ";

inline std::string index_text(const std::vector<int64_t>& idx) {
  std::string s = "[";
  for (size_t i = 0; i < idx.size(); ++i) s += (i ? ", " : "") + std::to_string(idx[i]);
  return s + "]";
}

inline Tensor apply_step(const Step& s, const std::vector<Tensor>& slots, bool donations);

// A generated function (bodies.h) applied to its operands: its result, the last local.
inline Tensor apply_body(const std::vector<Step>& body, std::vector<Tensor> locals) {
  for (const Step& s : body) locals.push_back(apply_step(s, locals, false));
  return locals.back();
}

inline Tensor apply_random(const Step& s, const Tensor& key, const Tensor& x) {
  namespace r = nx::random;
  switch (s.fn) {
    case RBits:
      return r::bits(key, s.shape);
    case RUniform:
      return r::uniform(key, s.shape, s.dtype, s.value, s.value2);
    case RNormal:
      return r::normal(key, s.shape, s.dtype);
    case RBernoulli:
      return r::bernoulli(key, s.value, s.shape);
    case RRandint:
      return r::randint(key, s.shape, static_cast<int64_t>(s.value), static_cast<int64_t>(s.value2),
                        s.dtype);
    case RSplit:
      return r::split(key, s.count);
    case RFoldIn:
      return r::fold_in(key, static_cast<uint32_t>(s.count));
    case RPermutation:
      return r::permutation(key, s.count);
    default:
      return r::dropout(key, x, s.value);
  }
}

// `count` updates of optimizer `fn` (program.h kOptim) from its initial state.
inline Tensor apply_optim(const Step& s, const Tensor& params, const Tensor& grads) {
  namespace o = rune::optim;
  auto run = [&](const auto& opt) {
    auto state = opt.init(params);
    Tensor p = params;
    for (int64_t k = 0; k < s.count; ++k) {
      auto [np, ns] = opt.update(p, grads, state);
      p = np;
      state = ns;
    }
    return p;
  };
  switch (s.fn) {
    case 0:
      return run(o::Sgd{o::constant(0.25)});
    case 1:
      return run(o::Sgd{o::constant(0.125), 0.9, true});
    case 2:
      return run(o::Adam{o::constant(0.5)});
    default:
      return run(o::adamw(o::constant(0.25)));
  }
}

// Applies one non-Input step to its arguments through the nx API (eagerly or while tracing).
inline Tensor apply_step(const Step& s, const std::vector<Tensor>& slots, bool donations) {
  auto arg = [&](size_t i) {
    const Tensor& t = slots[s.args[i]];
    return donations && s.donate[i] ? nx::donate(t) : t;
  };
  switch (s.kind) {
    case Kind::Input:
      break;
    case Kind::Unary:
      return kUnary[s.fn].fn(arg(0));
    case Kind::Binary:
      return kBinary[s.fn].fn(arg(0), arg(1));
    case Kind::Where:
      return nx::where(arg(0), arg(1), arg(2));
    case Kind::Cast:
      return nx::cast(arg(0), s.dtype);
    case Kind::Reshape:
      return nx::reshape(arg(0), s.shape);
    case Kind::Slice:
      return nx::slice(arg(0), s.slices);
    case Kind::Flip:
      return nx::flip(arg(0), s.axes);
    case Kind::Permute:
      return nx::permute(arg(0), s.axes);
    case Kind::Transpose:
      return nx::transpose(arg(0));
    case Kind::BroadcastTo:
      return nx::broadcast_to(arg(0), s.shape);
    case Kind::Pad:
      return nx::pad(arg(0), s.widths, s.value);
    case Kind::Reduce:
      return kReduce[s.fn].fn(arg(0), s.axes, s.keepdims);
    case Kind::ArgReduce: {
      std::optional<int> axis;
      if (!s.axes.empty()) axis = s.axes[0];
      return s.fn == 0 ? nx::argmax(arg(0), axis, s.keepdims)
                       : nx::argmin(arg(0), axis, s.keepdims);
    }
    case Kind::Matmul:
      return nx::matmul(arg(0), arg(1));
    case Kind::Check: {
      Tensor ok = slots[s.args[0]];
      if (s.always_true) ok = nx::logical_or(ok, nx::logical_not(ok));
      nx::check(ok, slots[s.args[1]], [](const std::vector<int64_t>& idx, const Tensor& d) {
        return std::invalid_argument(std::string(kCheckPrefix) + "false at " + index_text(idx) +
                                     ", data " + nx::to_string(d));
      });
      return ok;
    }
    case Kind::Take:
      return nx::take(arg(0), arg(1), s.axes[0]);
    case Kind::TakeAlong:
      return nx::take_along_axis(arg(0), arg(1), s.axes[0]);
    case Kind::ScatterAdd:
      return s.fn == 0 ? nx::scatter_add(arg(0), arg(1), arg(2), s.axes[0])
                       : nx::index_add(arg(0), s.axes[0], arg(1), arg(2));
    case Kind::OneHot:
      return nx::one_hot(arg(0), s.count, s.dtype);
    case Kind::DynSlice:
    case Kind::DynUpdate: {
      const size_t first = s.kind == Kind::DynSlice ? 1 : 2;
      std::vector<Tensor> starts;
      for (size_t i = first; i < s.args.size(); ++i) starts.push_back(arg(i));
      return s.kind == Kind::DynSlice ? nx::dynamic_slice(arg(0), starts, s.shape)
                                      : nx::dynamic_update_slice(arg(0), arg(1), starts);
    }
    case Kind::Random:
      return apply_random(s, arg(0), s.args.size() > 1 ? arg(1) : Tensor{});
    case Kind::Fori: {
      std::vector<Tensor> rest;
      for (size_t i = 1; i < s.args.size(); ++i) rest.push_back(arg(i));
      auto body = [&](const Tensor& i, const Tensor& c) {
        std::vector<Tensor> l = {c, nx::cast(i, c.dtype())};
        l.insert(l.end(), rest.begin(), rest.end());
        return apply_body(s.bodies[0], l);
      };
      return rune::fori_loop(int64_t{0}, s.count, body, arg(0));
    }
    case Kind::Scan: {
      auto body = [&](const Tensor& c, const Tensor& x) {
        Tensor n = apply_body(s.bodies[0], {c, x});
        return std::make_pair(n, n);
      };
      auto [carry, ys] = rune::scan(body, arg(0), arg(1), rune::ScanOptions{s.reverse});
      return s.second ? ys : carry;
    }
    case Kind::Cond:
      return rune::cond(
          arg(0), [&](const Tensor& a) { return apply_body(s.bodies[0], {a}); },
          [&](const Tensor& a) { return apply_body(s.bodies[1], {a}); }, arg(1));
    case Kind::Switch: {
      std::vector<std::function<Tensor(const Tensor&)>> branches;
      for (const auto& b : s.bodies)
        branches.push_back([&b](const Tensor& a) { return apply_body(b, {a}); });
      Tensor index = nx::clip(arg(0), 0, static_cast<double>(s.bodies.size() - 1));
      return rune::switch_<Tensor, Tensor>(index, branches, arg(1));
    }
    case Kind::Vmap:
      if (s.args.size() == 1)
        return rune::vmap([&](const Tensor& a) { return apply_body(s.bodies[0], {a}); },
                          rune::InAxes{int64_t{s.axes[0]}})(arg(0));
      return rune::vmap(
          [&](const Tensor& a, const Tensor& b) {
            return apply_body(s.bodies[0], {a, b});
          },
          rune::InAxes{rune::Axis{s.axes[0]}, rune::none})(arg(0), arg(1));
    case Kind::Optim:
      return apply_optim(s, arg(0), arg(1));
  }
  throw std::logic_error("fuzz::apply_step: an Input step");
}

// An Input's tensor on device `dev`: its base buffer placed there, then its view taken there.
inline Tensor make_input(const Step& s, const std::string& dev) {
  auto bytes = base_bytes(s);
  Tensor base = nx::host_from_bytes(s.dtype, base_shape(s), bytes.data());
  if (dev != "CPU") base = nx::place(base, dev);
  return input_view(s, base);
}

// Whether reading t raises the donation error ("... was donated to ...").
inline bool reads_as_donated(const Tensor& t, std::string& got) {
  try {
    nx::to_vector<double>(t);
    got = "readable";
    return false;
  } catch (const std::invalid_argument& e) {
    got = e.what();
    return got.find("was donated to") != std::string::npos;
  } catch (const std::exception& e) {
    got = exception_text(std::current_exception());
    return false;
  }
}

// Whether slot `s` of the program is donated by some step (and by which).
inline int donor_step(const Program& p, int slot) {
  for (size_t k = 0; k < p.steps.size(); ++k)
    for (size_t i = 0; i < p.steps[k].args.size(); ++i)
      if (p.steps[k].args[i] == slot && p.steps[k].donate[i]) return static_cast<int>(k);
  return -1;
}

// With RUNE_FUZZ_DRAIN=1, after a run on an asynchronous device: a device-wide wait must raise
// nothing, as every failure of the run was due at the run's own reads. Off by default: programs
// then overlap on the device as a user's do, which is how seeds 901..928 found work of one
// program disturbing a later one (docs/testing.md); on, a failure is blamed on its own program.
inline void drain(const std::string& dev, Outcome& o) {
  static const bool on = [] {
    const char* v = std::getenv("RUNE_FUZZ_DRAIN");
    return v && std::string(v) == "1";
  }();
  if (!on || dev == "CPU") return;
  try {
    nx::wait(nx::Device::parse(dev, "fuzz::drain"));
  } catch (...) {
    o.breaches.push_back("a device-wide wait on " + dev +
                         " after the run raised: " + exception_text(std::current_exception()));
  }
}

inline Outcome run_eager(const Program& p, const std::string& dev, bool keep_slots) {
  Outcome o;
  std::vector<Tensor> slots(p.steps.size());
  std::vector<bool> donated(p.steps.size(), false);
  size_t k = 0;
  try {
    for (; k < p.steps.size(); ++k) {
      const Step& s = p.steps[k];
      if (s.kind == Kind::Input) {
        slots[k] = make_input(s, dev);
        continue;
      }
      // Which live values a donated operand's storage is reachable from.
      for (size_t i = 0; i < s.args.size(); ++i) {
        if (!s.donate[i] || s.expect_error) continue;
        const Tensor& t = slots[s.args[i]];
        for (size_t j = 0; j < k; ++j) {
          if (static_cast<int>(j) == s.args[i] || !slots[j].defined() || donated[j]) continue;
          if (slots[j].impl_ptr() == t.impl_ptr()) o.alias = true;
          if (slots[j].impl().buffer == t.impl().buffer) o.shared_donation = true;
        }
      }
      slots[k] = apply_step(s, slots, true);
      // An op that returns its argument itself (an identity: a cast to the same dtype, a
      // reduction over no axes, ...) must not hand back the donated, now dead, tensor.
      for (size_t i = 0; i < s.args.size(); ++i)
        if (s.donate[i] && !s.expect_error && slots[k].impl_ptr() == slots[s.args[i]].impl_ptr())
          o.breaches.push_back(
              "step " + std::to_string(k) + " returned its donated argument (slot " +
              std::to_string(s.args[i]) +
              ") itself, dead: " + (nx::is_dead(slots[k]) ? "unreadable" : "still readable"));
      if (!s.expect_error)
        for (size_t i = 0; i < s.args.size(); ++i)
          if (s.donate[i]) donated[s.args[i]] = true;
      if (s.expect_error) o.breaches.push_back("step " + std::to_string(k) + " did not raise");
    }
    for (int out : p.outputs) o.outputs.push_back(read_bits(slots[out]));
    if (keep_slots)
      for (size_t j = 0; j < slots.size(); ++j)
        o.slots.push_back(donated[j] ? Bits{} : read_bits(slots[j]));
  } catch (...) {
    o.raised = true;
    o.error = exception_text(std::current_exception());
    o.outputs.clear();
    if (k < p.steps.size()) {
      o.failed_step = static_cast<int>(k);
      // A failing op leaves its arguments as they were: alive and readable, except those an
      // earlier step consumed (a donated slot, or a generated alias of one): on an asynchronous
      // device an earlier check's failure raises at this later op, whose operand is dead.
      for (int a : p.steps[k].args) {
        bool consumed = false;
        for (size_t j = 0; j < k; ++j)
          consumed |= donated[j] && slots[j].defined() && slots[a].defined() &&
                      slots[j].impl_ptr() == slots[a].impl_ptr();
        if (consumed) continue;
        try {
          read_bits(slots[a]);
        } catch (...) {
          o.breaches.push_back(
              "argument slot " + std::to_string(a) + " of the failing step " + std::to_string(k) +
              " is unreadable after the failure: " + exception_text(std::current_exception()));
        }
      }
    }
    return o;
  }
  for (size_t j = 0; j < slots.size(); ++j) {
    if (!donated[j]) continue;
    std::string got;
    if (!reads_as_donated(slots[j], got))
      o.breaches.push_back("slot " + std::to_string(j) + " donated to step " +
                           std::to_string(donor_step(p, static_cast<int>(j))) +
                           " reads as: " + got);
  }
  return o;
}

inline Outcome run_jit(const Program& p, const std::string& dev) {
  Outcome o;
  std::vector<int> input_slots;
  std::vector<Tensor> args;
  std::vector<bool> donated;
  try {
    for (size_t k = 0; k < p.steps.size(); ++k) {
      if (p.steps[k].kind != Kind::Input) continue;
      input_slots.push_back(static_cast<int>(k));
      args.push_back(make_input(p.steps[k], dev));
      donated.push_back(donor_step(p, static_cast<int>(k)) >= 0 &&
                        !p.steps[donor_step(p, static_cast<int>(k))].expect_error);
    }
  } catch (...) {
    o.raised = true;
    o.error = "making the inputs: " + exception_text(std::current_exception());
    return o;
  }
  std::vector<Bits> before;
  for (auto& a : args) before.push_back(read_bits(a));
  auto f = rune::jit([&p, &input_slots](const std::vector<Tensor>& xs) {
    std::vector<Tensor> slots(p.steps.size());
    for (size_t i = 0; i < xs.size(); ++i) slots[input_slots[i]] = xs[i];
    for (size_t k = 0; k < p.steps.size(); ++k)
      if (p.steps[k].kind != Kind::Input) slots[k] = apply_step(p.steps[k], slots, false);
    std::vector<Tensor> outs;
    for (int out : p.outputs) outs.push_back(slots[out]);
    return outs;
  });
  std::vector<Tensor> call_args;
  for (size_t i = 0; i < args.size(); ++i)
    call_args.push_back(donated[i] ? nx::donate(args[i]) : args[i]);
  bool check_failed = false;
  try {
    auto outs = f(call_args);
    for (auto& t : outs) o.outputs.push_back(read_bits(t));
  } catch (...) {
    o.raised = true;
    o.error = exception_text(std::current_exception());
    o.outputs.clear();
    check_failed = o.error.find(kCheckPrefix) != std::string::npos;
  }
  for (size_t i = 0; i < args.size(); ++i) {
    std::string got;
    std::string who = "input slot " + std::to_string(input_slots[i]);
    if (donated[i] && (!o.raised || check_failed)) {
      if (!reads_as_donated(args[i], got))
        o.breaches.push_back(who + " donated to the compiled call reads as: " + got);
    } else if (!donated[i] || o.raised) {
      // Not donated, or the call failed before running: the argument is as it was.
      try {
        if (!(read_bits(args[i]) == before[i]))
          o.breaches.push_back(who + " changed its values in the call");
      } catch (...) {
        o.breaches.push_back(
            who + " is unreadable after the call: " + exception_text(std::current_exception()));
      }
    }
  }
  return o;
}

inline Outcome run(const Program& p, const Mode& m, bool keep_slots = false) {
  Outcome o = m.jit ? run_jit(p, m.device) : run_eager(p, m.device, keep_slots);
  drain(m.device, o);
  return o;
}

}  // namespace fuzz
