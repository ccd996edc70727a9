// Prints a Program as a standalone C++ reproducer over the public nx / rune API: the inputs'
// raw bits, the program as a function of its inputs, and a main that runs it eagerly on the
// host and in the disagreeing mode and prints both results.
#pragma once
#include <cstdio>
#include <sstream>

#include "fuzz/differential.h"

namespace fuzz {

inline std::string dtype_cpp(DType t) {
  return t == nx::bool_ ? "nx::bool_" : "nx::" + std::string(ir::name(t));
}
inline std::string shape_cpp(const Shape& s) {
  std::string r = "{";
  for (size_t i = 0; i < s.size(); ++i) r += (i ? ", " : "") + std::to_string(s[i]);
  return r + "}";
}
inline std::string axes_cpp(const std::vector<int>& a) {
  std::string r = "{";
  for (size_t i = 0; i < a.size(); ++i) r += (i ? ", " : "") + std::to_string(a[i]);
  return r + "}";
}
inline std::string double_cpp(double v) {
  if (std::isnan(v)) return "NAN";
  if (std::isinf(v)) return v > 0 ? "INFINITY" : "-INFINITY";
  std::ostringstream s;
  s.precision(17);
  s << v;
  std::string r = s.str();
  if (r.find_first_of(".e") == std::string::npos) r += ".0";
  return std::signbit(v) && v == 0 ? "-0.0" : r;
}
inline std::string opt_cpp(const std::optional<int64_t>& v) {
  return v ? std::to_string(*v) : "std::nullopt";
}
inline std::string slices_cpp(const std::vector<nx::Slice>& sl) {
  std::string r = "{";
  for (size_t i = 0; i < sl.size(); ++i)
    r += std::string(i ? ", " : "") + "{" + opt_cpp(sl[i].start) + ", " + opt_cpp(sl[i].stop) +
         ", " + std::to_string(sl[i].step) + "}";
  return r + "}";
}
inline const char* uint_cpp(DType t) {
  switch (ir::itemsize(t)) {
    case 1:
      return "uint8_t";
    case 2:
      return "uint16_t";
    case 4:
      return "uint32_t";
  }
  return "uint64_t";
}

inline std::string step_cpp(const Step& s, const std::string& slot = "v");

// A generated function (bodies.h) as a lambda: its operands named l0, l1, ... (`params`
// declares the first of them; `prelude` defines the rest), its steps one statement each.
// A scan's body returns (carry, y), both its result (`pair`).
inline std::string body_cpp(const std::vector<Step>& body, const std::string& params,
                            const std::string& prelude, int n_operands, bool pair = false) {
  std::string r = "[&](" + params + ") {" + prelude;
  for (size_t k = 0; k < body.size(); ++k)
    r += " nx::Tensor l" + std::to_string(n_operands + k) + " = " + step_cpp(body[k], "l") + ";";
  std::string last = "l" + std::to_string(n_operands + body.size() - 1);
  return r + " return " + (pair ? "std::make_pair(" + last + ", " + last + ")" : last) + "; }";
}

// The C++ expression of step s (slots named <slot><i>, donated arguments through dn()).
inline std::string step_cpp(const Step& s, const std::string& slot) {
  auto a = [&](size_t i) {
    std::string v = slot + std::to_string(s.args[i]);
    return s.donate[i] ? "dn(" + v + ")" : v;
  };
  // Locals first, first + 1, ... defined as arguments from, from + 1, ... of the step.
  auto rest = [&](size_t from, size_t first) {
    std::string r;
    for (size_t i = from; i < s.args.size(); ++i)
      r += " nx::Tensor l" + std::to_string(first + i - from) + " = " + a(i) + ";";
    return r;
  };
  switch (s.kind) {
    case Kind::Input:
      return "";
    case Kind::Unary:
      return std::string(kUnary[s.fn].name) + "(" + a(0) + ")";
    case Kind::Binary:
      return std::string(kBinary[s.fn].name) + "(" + a(0) + ", " + a(1) + ")";
    case Kind::Where:
      return "nx::where(" + a(0) + ", " + a(1) + ", " + a(2) + ")";
    case Kind::Cast:
      return "nx::cast(" + a(0) + ", " + dtype_cpp(s.dtype) + ")";
    case Kind::Reshape:
      return "nx::reshape(" + a(0) + ", " + shape_cpp(s.shape) + ")";
    case Kind::Slice:
      return "nx::slice(" + a(0) + ", " + slices_cpp(s.slices) + ")";
    case Kind::Flip:
      return "nx::flip(" + a(0) + ", " + axes_cpp(s.axes) + ")";
    case Kind::Permute:
      return "nx::permute(" + a(0) + ", " + axes_cpp(s.axes) + ")";
    case Kind::Transpose:
      return "nx::transpose(" + a(0) + ")";
    case Kind::BroadcastTo:
      return "nx::broadcast_to(" + a(0) + ", " + shape_cpp(s.shape) + ")";
    case Kind::Pad: {
      std::string w = "{";
      for (size_t i = 0; i < s.widths.size(); ++i)
        w += std::string(i ? ", " : "") + "{" + std::to_string(s.widths[i].first) + ", " +
             std::to_string(s.widths[i].second) + "}";
      return "nx::pad(" + a(0) + ", " + w + "}, " + double_cpp(s.value) + ")";
    }
    case Kind::Reduce:
      return std::string(kReduce[s.fn].name) + "(" + a(0) + ", " + axes_cpp(s.axes) + ", " +
             (s.keepdims ? "true" : "false") + ")";
    case Kind::ArgReduce:
      return std::string(kArgReduce[s.fn]) + "(" + a(0) + ", " +
             (s.axes.empty() ? "std::nullopt" : std::to_string(s.axes[0])) + ", " +
             (s.keepdims ? "true" : "false") + ")";
    case Kind::Matmul:
      return "nx::matmul(" + a(0) + ", " + a(1) + ")";
    case Kind::Check:
      return "";
    case Kind::Take:
      return "nx::take(" + a(0) + ", " + a(1) + ", " + std::to_string(s.axes[0]) + ")";
    case Kind::TakeAlong:
      return "nx::take_along_axis(" + a(0) + ", " + a(1) + ", " + std::to_string(s.axes[0]) + ")";
    case Kind::ScatterAdd:
      return s.fn == 0 ? "nx::scatter_add(" + a(0) + ", " + a(1) + ", " + a(2) + ", " +
                             std::to_string(s.axes[0]) + ")"
                       : "nx::index_add(" + a(0) + ", " + std::to_string(s.axes[0]) + ", " + a(1) +
                             ", " + a(2) + ")";
    case Kind::OneHot:
      return "nx::one_hot(" + a(0) + ", " + std::to_string(s.count) + ", " + dtype_cpp(s.dtype) +
             ")";
    case Kind::DynSlice:
    case Kind::DynUpdate: {
      const size_t first = s.kind == Kind::DynSlice ? 1 : 2;
      std::string starts = "{";
      for (size_t i = first; i < s.args.size(); ++i) starts += (i > first ? ", " : "") + a(i);
      starts += "}";
      return s.kind == Kind::DynSlice
                 ? "nx::dynamic_slice(" + a(0) + ", " + starts + ", " + shape_cpp(s.shape) + ")"
                 : "nx::dynamic_update_slice(" + a(0) + ", " + a(1) + ", " + starts + ")";
    }
    case Kind::Random: {
      std::string r = std::string(kRandom[s.fn]) + "(" + a(0);
      switch (s.fn) {
        case RBits:
          return r + ", " + shape_cpp(s.shape) + ")";
        case RUniform:
          return r + ", " + shape_cpp(s.shape) + ", " + dtype_cpp(s.dtype) + ", " +
                 double_cpp(s.value) + ", " + double_cpp(s.value2) + ")";
        case RNormal:
          return r + ", " + shape_cpp(s.shape) + ", " + dtype_cpp(s.dtype) + ")";
        case RBernoulli:
          return r + ", " + double_cpp(s.value) + ", " + shape_cpp(s.shape) + ")";
        case RRandint:
          return r + ", " + shape_cpp(s.shape) + ", " + std::to_string(int64_t(s.value)) + ", " +
                 std::to_string(int64_t(s.value2)) + ", " + dtype_cpp(s.dtype) + ")";
        case RFoldIn:
          return r + ", uint32_t{" + std::to_string(s.count) + "u})";
        case RDropout:
          return r + ", " + a(1) + ", " + double_cpp(s.value) + ")";
        default:  // split, permutation
          return r + ", " + std::to_string(s.count) + ")";
      }
    }
    case Kind::Fori:
      return "rune::fori_loop(int64_t{0}, int64_t{" + std::to_string(s.count) + "}, " +
             body_cpp(s.bodies[0], "const nx::Tensor& i, const nx::Tensor& l0",
                      " nx::Tensor l1 = nx::cast(i, l0.dtype());" + rest(1, 2),
                      static_cast<int>(s.args.size()) + 1) +
             ", " + a(0) + ")";
    case Kind::Scan:
      return "rune::scan(" +
             body_cpp(s.bodies[0], "const nx::Tensor& l0, const nx::Tensor& l1", "", 2, true) +
             ", " + a(0) + ", " + a(1) + ", rune::ScanOptions{" + (s.reverse ? "true" : "false") +
             "})." + (s.second ? "second" : "first");
    case Kind::Cond:
      return "rune::cond(" + a(0) + ", " + body_cpp(s.bodies[0], "const nx::Tensor& l0", "", 1) +
             ", " + body_cpp(s.bodies[1], "const nx::Tensor& l0", "", 1) + ", " + a(1) + ")";
    case Kind::Switch: {
      std::string r = "rune::switch_<nx::Tensor, nx::Tensor>(nx::clip(" + a(0) + ", 0, " +
                      std::to_string(s.bodies.size() - 1) + "), {";
      for (size_t b = 0; b < s.bodies.size(); ++b)
        r += (b ? ", " : "") + body_cpp(s.bodies[b], "const nx::Tensor& l0", "", 1);
      return r + "}, " + a(1) + ")";
    }
    case Kind::Vmap:
      return s.args.size() == 1
                 ? "rune::vmap(" + body_cpp(s.bodies[0], "const nx::Tensor& l0", "", 1) + ", " +
                       std::to_string(s.axes[0]) + ")(" + a(0) + ")"
                 : "rune::vmap(" +
                       body_cpp(s.bodies[0], "const nx::Tensor& l0, const nx::Tensor& l1", "", 2) +
                       ", {" + std::to_string(s.axes[0]) + ", rune::none})(" + a(0) + ", " + a(1) +
                       ")";
    case Kind::Optim:
      return "/* " + std::to_string(s.count) + " update(s) from init */ fuzz_optim(" +
             kOptim[s.fn] + ", " + a(0) + ", " + a(1) + ", " + std::to_string(s.count) + ")";
  }
  return "";
}

inline std::string input_cpp(const Step& s, int slot) {
  std::string b = "nx::place(nx::from_bytes(" + dtype_cpp(s.dtype) + ", " +
                  shape_cpp(base_shape(s)) + ", in" + std::to_string(slot) + "_bits), dev)";
  switch (s.layout) {
    case Layout::Contig:
      return b;
    case Layout::Transposed:
      return "nx::transpose(" + b + ")";
    case Layout::Stepped:
      return "nx::slice(" + b + ", " + slices_cpp(stepped_slices(s.shape)) + ")";
    case Layout::Flipped:
      return "nx::flip(" + b + ")";
    case Layout::Broadcast:
      return "nx::broadcast_to(" + b + ", " + shape_cpp(s.shape) + ")";
  }
  return b;
}

// The reproducer; `mode` is the disagreeing run (an eager-only failure runs eagerly only).
inline std::string reproducer(const Program& p, const Mode& mode, const std::string& headline) {
  std::ostringstream o;
  o << "// rune fuzz reproducer: " << headline << "\n"
    << "#include <cmath>\n#include <cstdint>\n#include <cstdio>\n#include <vector>\n\n"
    << "#include \"trace/rune.h\"\n\n"
    << "// `count` updates of an optimizer from its initial state (fuzz Optim steps).\n"
    << "template <class O>\nnx::Tensor fuzz_optim(const O& opt, nx::Tensor p, const nx::Tensor& g, "
       "int count) {\n  auto s = opt.init(p);\n"
    << "  for (int k = 0; k < count; ++k) std::tie(p, s) = opt.update(p, g, s);\n  return "
       "p;\n}\n\n";
  std::vector<int> inputs;
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    if (s.kind != Kind::Input) continue;
    inputs.push_back(static_cast<int>(k));
    auto bytes = base_bytes(s);
    size_t isz = ir::itemsize(s.dtype);
    int64_t n = numel(base_shape(s));
    o << "// v" << k << ": " << ir::name(s.dtype) << " " << ir::to_string(s.shape)
      << ", the raw bits of its base buffer\n"
      << "static const " << uint_cpp(s.dtype) << " in" << k << "_bits[] = {";
    for (int64_t i = 0; i < std::max<int64_t>(n, 1); ++i) {
      uint64_t v = 0;
      if (i < n) std::memcpy(&v, bytes.data() + i * isz, isz);
      o << (i ? ", " : "") << hex(v);
    }
    o << "};\n";
  }
  o << "\nstatic std::vector<nx::Tensor> inputs(const char* dev) {\n  return {";
  for (size_t i = 0; i < inputs.size(); ++i)
    o << (i ? ",\n          " : "") << input_cpp(p.steps[inputs[i]], inputs[i]);
  o << "};\n}\n\n"
    << "// Eagerly, the marked arguments are donated (dn); compiled, the donated inputs are\n"
    << "// donated to the call instead.\n"
    << "static std::vector<nx::Tensor> program(const std::vector<nx::Tensor>& in, bool eager) {\n"
    << "  auto dn = [eager](const nx::Tensor& t) { return eager ? nx::donate(t) : t; };\n"
    << "  (void)dn;\n";
  for (size_t i = 0; i < inputs.size(); ++i)
    o << "  nx::Tensor v" << inputs[i] << " = in[" << i << "];\n";
  for (size_t k = 0; k < p.steps.size(); ++k) {
    const Step& s = p.steps[k];
    if (s.kind == Kind::Input) continue;
    if (s.kind == Kind::Check) {
      std::string ok = "v" + std::to_string(s.args[0]);
      o << "  nx::Tensor v" << k << " = "
        << (s.always_true ? "nx::logical_or(" + ok + ", nx::logical_not(" + ok + "))" : ok)
        << ";\n  nx::check(v" << k << ", v" << s.args[1]
        << ", [](const std::vector<int64_t>&, const nx::Tensor& d) {\n"
        << "    return std::invalid_argument(\"fuzz check: false, data \" + nx::to_string(d));\n"
        << "  });\n";
      continue;
    }
    o << "  nx::Tensor v" << k << " = " << step_cpp(s) << ";"
      << (s.expect_error ? "  // raises" : "") << "\n";
  }
  o << "  return {";
  for (size_t i = 0; i < p.outputs.size(); ++i) o << (i ? ", " : "") << "v" << p.outputs[i];
  o << "};\n}\n\n"
    << "static void show(const char* what, const std::vector<nx::Tensor>& r) {\n"
    << "  for (auto& t : r) std::printf(\"%s: %s\\n\", what, nx::to_string(t).c_str());\n}\n\n"
    << "int main() {\n"
    << "  try {\n    show(\"eager on CPU\", program(inputs(\"CPU\"), true));\n"
    << "  } catch (const std::exception& e) {\n    std::printf(\"eager on CPU: %s\\n\", "
       "e.what());\n  }\n";
  if (mode.jit || mode.device != "CPU") {
    o << "  try {\n    auto in = inputs(\"" << mode.device << "\");\n";
    if (mode.jit) {
      o << "    auto f = rune::jit([](const std::vector<nx::Tensor>& xs) { return program(xs, "
           "false); });\n"
        << "    show(\"" << mode.name() << "\", f({";
      for (size_t i = 0; i < inputs.size(); ++i)
        o << (i ? ", " : "")
          << (donor_step(p, inputs[i]) >= 0 && !p.steps[donor_step(p, inputs[i])].expect_error
                  ? "nx::donate(in[" + std::to_string(i) + "])"
                  : "in[" + std::to_string(i) + "]");
      o << "}));\n";
    } else {
      o << "    show(\"" << mode.name() << "\", program(in, true));\n";
    }
    o << "  } catch (const std::exception& e) {\n    std::printf(\"" << mode.name()
      << ": %s\\n\", e.what());\n  }\n";
  }
  o << "}\n";
  return o.str();
}

}  // namespace fuzz
