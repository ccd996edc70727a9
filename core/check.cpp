#include "core/check.h"

#include <cstring>

#include "core/donation.h"
#include "core/prim.h"

namespace nx {

using namespace detail;

namespace detail {

Tensor first_false(const Tensor& ok) {
  int64_t n = ok.size();
  CreateOn on(ok.device());  // the index grid lives with ok
  Tensor flat_index = reshape(arange(n), ok.shape());
  return min(where(ok, const_int(DType::Int64, n), flat_index));
}

std::exception_ptr build_failure(const Shape& shape, int64_t flat, const std::vector<Tensor>& data,
                                 const CheckFail& fail) {
  std::vector<int64_t> index(shape.size());
  int64_t rest = flat;
  for (size_t d = shape.size(); d-- > 0;) {
    index[d] = shape[d] ? rest % shape[d] : 0;
    rest = shape[d] ? rest / shape[d] : 0;
  }
  std::vector<Tensor> at;
  for (const auto& t : data) {
    Tensor e = broadcast_to(t, shape);
    for (size_t d = 0; d < shape.size(); ++d) e = nx::index(e, 0, index[d]);
    at.push_back(e);
  }
  return fail(index, at);
}

void check_flat(const Tensor& ok, const std::vector<Tensor>& data, CheckFail fail) {
  const std::string api = "nx::check";
  if (ok.dtype() != DType::Bool) detail::fail(api, "ok must be bool, got " + ok.describe());
  for (const auto& d : data)
    if (!ir::broadcast_shapes(d.shape(), ok.shape()) ||
        *ir::broadcast_shapes(d.shape(), ok.shape()) != ok.shape())
      detail::fail(
          api, "data " + d.describe() + " does not broadcast to the shape of ok, " + ok.describe());
  if (ok.size() == 0) return;
  current_interpreter().record_check(ok, data, std::move(fail));
}

}  // namespace detail

}  // namespace nx
