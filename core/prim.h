// Internal helpers shared by the op files of core/: primitive application, checks, and
// broadcasting. Not part of the public API.
#pragma once
#include <string>

#include "core/interpreter.h"
#include "core/ops.h"

namespace nx::detail {

inline Tensor prim(ir::Op op, DType out, const Shape& shape, const std::vector<Tensor>& srcs,
                   const ir::Arg& arg = {}) {
  return apply(op, out, shape, srcs, arg);
}
inline Tensor unary(ir::Op op, const Tensor& x) { return prim(op, x.dtype(), x.shape(), {x}); }

[[noreturn]] void fail(const std::string& api, const std::string& msg);
// The axis in [0, ndim) that `axis` names (negative counts from the end), or fail.
int norm_axis(const std::string& api, int axis, int ndim, const Tensor& x);
// Sorted unique axes (all axes when empty), or fail.
std::vector<int64_t> norm_axes(const std::string& api, const Axes& axes, const Tensor& x);
void require_float(const std::string& api, const Tensor& x);
void require_same_dtype(const std::string& api, const Tensor& a, const Tensor& b);
// Broadcasts two tensors to their common shape, or fails naming both.
std::pair<Tensor, Tensor> broadcast_pair(const std::string& api, const Tensor& a, const Tensor& b);
Tensor const_of(DType t, double v);    // 0-d constant (floats rounded, ints truncated)
Tensor const_int(DType t, int64_t v);  // 0-d integer constant, exact
Tensor binary(const std::string& api, ir::Op op, const Tensor& a, const Tensor& b);
Tensor compare(const std::string& api, ir::Op op, const Tensor& a, const Tensor& b);
// A primitive of ir/ops.def applied with its row's result dtype (binary: as binary or compare).
Tensor elementwise(ir::Op op, const Tensor& x);
Tensor elementwise(const std::string& api, ir::Op op, const Tensor& a, const Tensor& b);
// The device a creation op called as `api` creates on: operandless_device() inside another op
// or a CreateOn, else the default device. Raises (naming `api`) for a bad RUNE_DEFAULT_DEVICE
// or a device that is unavailable here.
Device creation_device(const char* api);

}  // namespace nx::detail
