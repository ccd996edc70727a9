#include "core/tensor.h"

#include <cstring>

namespace nx {

TensorImpl& Tensor::impl() const {
  if (!impl_) throw std::invalid_argument("nx: use of an undefined (default-constructed) tensor");
  return *impl_;
}

int64_t Tensor::dim(int axis) const {
  int n = ndim();
  int a = axis < 0 ? axis + n : axis;
  if (a < 0 || a >= n)
    throw std::invalid_argument("nx::Tensor::dim: axis " + std::to_string(axis) +
                                " out of range for " + describe());
  return shape()[a];
}

std::string Tensor::describe() const {
  return std::string(ir::name(dtype())) + " " + ir::to_string(shape());
}

Tensor make_concrete(DType t, runtime::BufferRef buf, ir::View view, Device d,
                     std::shared_ptr<runtime::Poison> poison) {
  auto impl = std::make_shared<TensorImpl>();
  impl->dtype = t;
  impl->shape = view.shape;
  impl->device = d;
  impl->buffer = std::move(buf);
  if (impl->buffer) impl->buffer->live_values.fetch_add(1);
  impl->view = std::move(view);
  impl->poison = std::move(poison);
  return Tensor(std::move(impl));
}

Tensor host_from_bytes(DType t, const Shape& shape, const void* data) {
  size_t n = static_cast<size_t>(ir::numel(shape) * ir::itemsize(t));
  auto buf = runtime::allocate(Device::cpu(), n);
  if (n) std::memcpy(buf->data, data, n);
  return make_concrete(t, std::move(buf), ir::View::contiguous(shape));
}

}  // namespace nx
