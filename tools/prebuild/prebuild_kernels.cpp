// Builds the host kernels of common eager ops ahead of time (docs/performance.md "Prebuilt
// kernels"). An eager elementwise op, copy or fill over operands that are contiguous or one
// broadcast element runs one kernel per op kind, whatever its shape (core/eager.cpp, "flat"
// programs), and so do reductions, strided copies and ops over operands broadcast along some
// axes (core/eager_sized.h, "sized" kernels), so running each common kind once here, with
// RUNE_CACHE_DIR pointing at the build's prebuilt-kernels directory and RUNE_KERNEL_TIERS=0, leaves
// the full-tier kernel of each there; the library reads that directory
// (codegen::DiskCache::prebuilt) after the user's own cache misses, so a fresh install's first
// eager ops of these kinds compile nothing. The kernels are the ones any process would compile for
// the same ops (the same IR, so the same bits): only where they come from differs. Run by the build
// (CMakeLists.txt), not by users.
#include <cstdio>
#include <vector>

#include "codegen/compile.h"
#include "core/random.h"
#include "trace/rune.h"

using nx::DType;
using nx::Tensor;

namespace {

// Each unary and binary primitive of nx whose domain includes floats (ir/ops.def), as functions.
using Unary = Tensor (*)(const Tensor&);
using Binary = Tensor (*)(const Tensor&, const Tensor&);
#define X(name, arity, cat)
#define RUNE_NX_UNARY_Float(fn) +[](const Tensor& x) { return nx::fn(x); },
#define RUNE_NX_UNARY_Any(fn) +[](const Tensor& x) { return nx::fn(x); },
#define RUNE_NX_UNARY_FloatOrFalse(fn) +[](const Tensor& x) { return nx::fn(x); },
#define RUNE_NX_UNARY_FloatOrTrue(fn) +[](const Tensor& x) { return nx::fn(x); },
#define RUNE_NX_UNARY_Hand(fn)
#define X_UNARY(name, nx, domain, result, lowering, derivative) RUNE_NX_UNARY_##domain(nx)
#define X_BINARY(name, nx, domain, result, lowering)
const std::vector<Unary> kUnary = {
#include "ir/ops.def"
};
#undef X_UNARY
#undef X_BINARY
#define RUNE_NX_BINARY_Float(fn) +[](const Tensor& a, const Tensor& b) { return nx::fn(a, b); },
#define RUNE_NX_BINARY_Any(fn) +[](const Tensor& a, const Tensor& b) { return nx::fn(a, b); },
#define RUNE_NX_BINARY_Hand(fn)
#define X_UNARY(name, nx, domain, result, lowering, derivative)
#define X_BINARY(name, nx, domain, result, lowering) RUNE_NX_BINARY_##domain(nx)
const std::vector<Binary> kBinary = {
#include "ir/ops.def"
};
#undef X
#undef X_UNARY
#undef X_BINARY

// The composite elementwise ops users call most (each a few primitives).
const std::vector<Unary> kComposite = {nx::neg,         nx::sigmoid, nx::relu,       nx::gelu,
                                       nx::softplus,    nx::square,  nx::reciprocal, nx::sign,
                                       nx::logical_not, nx::abs,     nx::exp,        nx::tanh};

void run(const Tensor& t) { nx::wait(t); }

}  // namespace

int main() {
  const nx::Shape shape = {3};
  const std::vector<DType> floats = {DType::Float32, DType::Float64};
  const std::vector<DType> ints = {DType::Int32, DType::Int64};
  const std::vector<DType> all = {DType::Float16, DType::BFloat16, DType::Float32, DType::Float64,
                                  DType::Int32,   DType::Int64,    DType::UInt8,   DType::Bool};
  // Creation: fills, ranges and casts between the common dtypes.
  for (DType t : all) {
    run(nx::zeros(t, shape));
    run(nx::ones(t, shape));
    for (DType to : all) run(nx::cast(nx::ones(t, shape), to));
  }
  run(nx::arange(5));
  for (DType t : floats) run(nx::arange(t, 0, 5));
  for (DType t : floats) {
    Tensor x = nx::full(t, shape, 0.75), y = nx::full(t, shape, 1.5), s = nx::scalar(t, 2);
    for (Unary f : kUnary) run(f(x));
    for (Unary f : kComposite) run(f(x));
    for (Binary f : kBinary) {
      run(f(x, y));  // both operands contiguous
      run(f(x, s));  // a Python-style scalar on either side
      run(f(s, x));
    }
    run(nx::where(nx::less(x, y), x, y));
    run(nx::where(nx::less(x, y), x, s));
  }
  for (DType t : ints) {
    Tensor x = nx::full(t, shape, 3), y = nx::full(t, shape, 2), s = nx::scalar(t, 2);
    for (Binary f : {Binary(nx::add), Binary(nx::sub), Binary(nx::mul), Binary(nx::div),
                     Binary(nx::mod), Binary(nx::maximum), Binary(nx::minimum), Binary(nx::less),
                     Binary(nx::less_equal), Binary(nx::equal), Binary(nx::not_equal)}) {
      run(f(x, y));
      run(f(x, s));
      run(f(s, x));
    }
    run(nx::neg(x));
    run(nx::abs(x));
  }
  // Sized kernels (core/eager_sized.h: one per op kind and layout class, whatever the shape):
  // reductions over the rows [.., R] and over a leading axis [.., R, B] (mean's and argmax's
  // too), transposed copies, and the common binary ops with an operand broadcast along the
  // rows or the columns (x - mean(x, -1, true), x + bias).
  for (DType t : floats) {
    Tensor m = nx::full(t, {3, 4}, 0.5), r = nx::full(t, {3, 1}, 2), c = nx::full(t, {1, 4}, 2);
    for (int axis : {0, 1}) {
      run(nx::sum(m, {axis}));
      run(nx::mean(m, {axis}));
      run(nx::prod(m, {axis}));
      run(nx::max(m, {axis}));
      run(nx::min(m, {axis}));
      run(nx::argmax(m, axis));
      run(nx::argmin(m, axis));
    }
    run(nx::contiguous(nx::transpose(m)));
    for (Binary f :
         {Binary(nx::add), Binary(nx::sub), Binary(nx::mul), Binary(nx::div), Binary(nx::maximum),
          Binary(nx::minimum), Binary(nx::less), Binary(nx::greater), Binary(nx::equal)})
      for (const Tensor& v : {r, c}) {
        run(f(m, v));
        run(f(v, m));
      }
  }
  for (DType t : ints) {
    Tensor m = nx::full(t, {3, 4}, 2);
    for (int axis : {0, 1}) {
      run(nx::sum(m, {axis}));
      run(nx::max(m, {axis}));
      run(nx::min(m, {axis}));
    }
    run(nx::contiguous(nx::transpose(m)));
    for (DType f : floats) run(nx::one_hot(nx::zeros(t, {3}), 4, f));
  }
  // Random draws: nx::rand / randn from a host key, nx::random's from a key tensor (the key
  // ops' kernels are shape [2]: shared by every draw).
  for (DType t : floats) {
    auto [a, b] = nx::split(nx::key(7));
    run(nx::rand(a, t, shape));
    run(nx::randn(b, t, shape));
    Tensor k = nx::random::key(0);
    run(nx::random::split(k));
    Tensor k1 = nx::random::fold_in(k, 1), k2 = nx::random::fold_in(k, 2);
    run(nx::random::uniform(k1, shape, t));
    run(nx::random::normal(k2, shape, t));
    run(nx::random::dropout(k1, nx::ones(t, shape), 0.5));
  }
  run(nx::randint(nx::key(3), 0, 10, shape));
  run(nx::random::bernoulli(nx::random::key(1), 0.5, shape));
  run(nx::random::randint(nx::random::key(2), shape, 0, 10));
  auto s = codegen::compile_stats();
  std::printf("prebuild_kernels: %zu kernels compiled\n", s.kernels_compiled);
}
