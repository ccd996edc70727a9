// A fuzz program: a list of op steps over value slots (slot i holds step i's result). The same
// data is executed through the nx API in every mode (executor.h), printed as a C++ reproducer
// (printer.h) and shrunk (shrinker.h), so all three read only what is declared here.
#pragma once
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "core/nx.h"

namespace fuzz {

using nx::DType;
using nx::Shape;
using nx::Tensor;

enum class Kind {
  Input,        // a fresh argument: `dtype`, `shape`, `layout`, values from `seed`
  Unary,        // kUnary[fn](a)
  Binary,       // kBinary[fn](a, b)
  Where,        // nx::where(cond, a, b)
  Cast,         // nx::cast(a, dtype)
  Reshape,      // nx::reshape(a, shape)
  Slice,        // nx::slice(a, slices)
  Flip,         // nx::flip(a, axes)
  Permute,      // nx::permute(a, axes)
  Transpose,    // nx::transpose(a)
  BroadcastTo,  // nx::broadcast_to(a, shape)
  Pad,          // nx::pad(a, widths, value)
  Reduce,       // kReduce[fn](a, axes, keepdims)
  ArgReduce,    // nx::argmax / argmin (fn 0 / 1) over axes[0] (no axis when axes is empty)
  Matmul,       // nx::matmul(a, b)
  Check,        // nx::check(ok, data, fail); the slot holds ok (or ok || !ok when always_true)
  // ---- the newer ops (from here on: test_fuzz counts them by this order) ----
  // ---- indexing (args[1] an integer index slot; JAX's clamp rule for out-of-range values) ----
  Take,        // nx::take(a, idx, axes[0])
  TakeAlong,   // nx::take_along_axis(a, idx, axes[0])
  ScatterAdd,  // nx::scatter_add(a, idx, updates, axes[0]) (fn 1: nx::index_add, the same)
  OneHot,      // nx::one_hot(labels, count, dtype)
  DynSlice,    // nx::dynamic_slice(a, {args[1..]}, shape): one 0-d integer start per axis
  DynUpdate,   // nx::dynamic_update_slice(a, args[1], {args[2..]})
  // ---- random numbers: args[0] a uint32 [2] key (random.h) ----
  Random,  // kRandom[fn](key, ...): shape, dtype, value / value2 (bounds, p, rate), count
  // ---- control flow, batching and optimizers: bodies[i] are generated functions (bodies.h) ----
  Fori,    // rune::fori_loop(0, count, body 0 over {carry, i as its dtype, args[1..]}, args[0])
  Scan,    // rune::scan(body 0 over {carry, row}, args[0], args[1], {reverse}): ys if `second`
  Cond,    // rune::cond(args[0] (bool 0-d), body 0, body 1, args[1])
  Switch,  // rune::switch_(nx::clip(args[0], 0, n - 1), bodies, args[1])
  Vmap,    // rune::vmap(body 0, {axes[0], none...})(args...): args[0] batched, the rest shared
  Optim,   // count updates of kOptim[fn] from its init state: params args[0], grads args[1]
};

// How an Input reaches the program: a view of a fresh buffer, so ops see non-contiguous
// operands (strides other than C order, negative strides, stride 0).
enum class Layout { Contig, Transposed, Stepped, Flipped, Broadcast };

struct Step {
  Kind kind = Kind::Input;
  std::vector<int> args;           // slots read, all earlier than this step
  std::vector<bool> donate;        // per arg: passed through nx::donate (see executor.h)
  int fn = 0;                      // Unary / Binary / Reduce / ArgReduce: which op of the table
  DType dtype = nx::float32;       // Input: its dtype; Cast: the target
  Shape shape;                     // Input: its shape; Reshape / BroadcastTo: the target
  Layout layout = Layout::Contig;  // Input
  uint64_t seed = 0;               // Input: its values (values.h)
  std::vector<int> axes;           // Flip / Permute / Reduce / ArgReduce
  std::vector<nx::Slice> slices;   // Slice
  std::vector<std::pair<int64_t, int64_t>> widths;  // Pad
  double value = 0;                                 // Pad
  bool keepdims = false;                            // Reduce / ArgReduce
  bool always_true = false;                         // Check
  double value2 = 0;                                // Random: the upper bound
  int64_t count = 0;                                // Random: split's n; Fori / Optim: steps
  bool reverse = false;                             // Scan
  bool second = false;                              // Scan: the slot holds ys, not the carry
  // Fori / Scan / Cond / Switch / Vmap: each a function of its operands (bodies.h): a list of
  // steps over local slots (its operands first, then one per step); its result is the last.
  std::vector<std::vector<struct Step>> bodies;
  bool expect_error = false;  // generated with invalid arguments on purpose (always the last step)
};

struct Program {
  std::vector<Step> steps;
  std::vector<int> outputs;  // slots compared between modes (never a donated one)
};

// ---- the op tables (name as printed in reproducers, the nx function, constraints) ----

struct UnaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&);
  bool float_only;  // raises on integer and bool operands
  bool no_bool;     // raises on bool operands
  bool to_bool;     // the result is bool
};
inline const UnaryOp kUnary[] = {
    {"nx::neg", nx::neg, false, true, false},
    {"nx::abs", nx::abs, false, false, false},
    {"nx::sqrt", nx::sqrt, true, false, false},
    {"nx::exp", nx::exp, true, false, false},
    {"nx::log", nx::log, true, false, false},
    {"nx::sin", nx::sin, true, false, false},
    {"nx::tanh", nx::tanh, true, false, false},
    {"nx::erf", nx::erf, true, false, false},
    {"nx::expm1", nx::expm1, true, false, false},
    {"nx::sigmoid", nx::sigmoid, true, false, false},
    {"nx::floor", nx::floor, false, false, false},
    {"nx::round", nx::round, false, false, false},
    {"nx::square", nx::square, false, false, false},
    {"nx::relu", nx::relu, false, false, false},
    {"nx::sign", nx::sign, false, false, false},
    {"nx::isnan", nx::isnan, false, false, true},
    {"nx::logical_not", nx::logical_not, false, false, true},
};
inline constexpr int kUnaryCount = sizeof(kUnary) / sizeof(kUnary[0]);

struct BinaryOp {
  const char* name;
  Tensor (*fn)(const Tensor&, const Tensor&);
  bool float_only;
  bool to_bool;
};
inline const BinaryOp kBinary[] = {
    {"nx::add", nx::add, false, false},
    {"nx::sub", nx::sub, false, false},
    {"nx::mul", nx::mul, false, false},
    {"nx::div", nx::div, false, false},
    {"nx::mod", nx::mod, false, false},
    {"nx::maximum", nx::maximum, false, false},
    {"nx::minimum", nx::minimum, false, false},
    {"nx::pow", static_cast<Tensor (*)(const Tensor&, const Tensor&)>(nx::pow), true, false},
    {"nx::atan2", nx::atan2, true, false},
    {"nx::less", nx::less, false, true},
    {"nx::less_equal", nx::less_equal, false, true},
    {"nx::greater", nx::greater, false, true},
    {"nx::equal", nx::equal, false, true},
    {"nx::not_equal", nx::not_equal, false, true},
    {"nx::logical_and", nx::logical_and, false, true},
    {"nx::logical_xor", nx::logical_xor, false, true},
};
inline constexpr int kBinaryCount = sizeof(kBinary) / sizeof(kBinary[0]);

struct ReduceOp {
  const char* name;
  Tensor (*fn)(const Tensor&, nx::Axes, bool);
};
inline const ReduceOp kReduce[] = {
    {"nx::sum", nx::sum}, {"nx::prod", nx::prod}, {"nx::max", nx::max},
    {"nx::min", nx::min}, {"nx::mean", nx::mean},
};
inline constexpr int kReduceCount = sizeof(kReduce) / sizeof(kReduce[0]);
inline const char* const kArgReduce[] = {"nx::argmax", "nx::argmin"};

// nx::random's draws (Random steps), by fn.
enum RandomFn {
  RBits,
  RUniform,
  RNormal,
  RBernoulli,
  RRandint,
  RSplit,
  RFoldIn,
  RPermutation,
  RDropout,
  kRandomCount
};
inline const char* const kRandom[] = {
    "nx::random::bits",      "nx::random::uniform",     "nx::random::normal",
    "nx::random::bernoulli", "nx::random::randint",     "nx::random::split",
    "nx::random::fold_in",   "nx::random::permutation", "nx::random::dropout"};
// rune::optim's optimizers (Optim steps), by fn: plain SGD, SGD with Nesterov momentum, Adam,
// AdamW.
inline const char* const kOptim[] = {"rune::optim::Sgd{rune::optim::constant(0.25)}",
                                     "rune::optim::Sgd{rune::optim::constant(0.125), 0.9, true}",
                                     "rune::optim::Adam{rune::optim::constant(0.5)}",
                                     "rune::optim::adamw(rune::optim::constant(0.25))"};
inline constexpr int kOptimCount = 4;

inline const DType kDTypes[] = {nx::bool_,    nx::uint8,   nx::int32,   nx::int64, nx::float16,
                                nx::bfloat16, nx::float32, nx::float64, nx::int8,  nx::int16,
                                nx::uint16,   nx::uint32,  nx::uint64};  // ints: issue 18
inline constexpr int kDTypeCount = sizeof(kDTypes) / sizeof(kDTypes[0]);

}  // namespace fuzz
