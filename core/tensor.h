// nx::Tensor: a dtype, a shape, a placement and a strided view over a reference-counted
// buffer (eager), or a node of a graph being traced (inside rune::jit / rune::grad).
// Values are immutable: every op returns a new tensor.
#pragma once
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <vector>

#include "ir/dtype.h"
#include "ir/node.h"
#include "ir/shape.h"
#include "runtime/allocator.h"
#include "runtime/device.h"
#include "runtime/stream.h"

namespace rune {
// Raised when a traced value is read (item, to_vector, printing, a C++ branch on an element).
class jit_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};
}  // namespace rune

namespace nx {

using ir::DType;
using Shape = std::vector<int64_t>;
using runtime::Device;

inline constexpr DType bool_ = DType::Bool;
inline constexpr DType uint8 = DType::UInt8;
inline constexpr DType int32 = DType::Int32;
inline constexpr DType int64 = DType::Int64;
inline constexpr DType float16 = DType::Float16;
inline constexpr DType bfloat16 = DType::BFloat16;
inline constexpr DType float32 = DType::Float32;
inline constexpr DType float64 = DType::Float64;
inline constexpr DType int8 = DType::Int8;
inline constexpr DType int16 = DType::Int16;
inline constexpr DType uint16 = DType::UInt16;
inline constexpr DType uint32 = DType::UInt32;
inline constexpr DType uint64 = DType::UInt64;

class Interpreter;

struct TensorImpl {
  DType dtype;
  Shape shape;
  Device device;
  // Concrete value: view.shape == shape; view.offset in elements from buffer->data.
  runtime::BufferRef buffer;
  ir::View view;
  // Traced value: a node of the graph `tracer` is recording (nullptr for concrete values).
  ir::NodeRef node = nullptr;
  // On an asynchronous device: set when the work producing this value failed (shared by views).
  std::shared_ptr<runtime::Poison> poison;
  Interpreter* tracer = nullptr;
  // Donation (docs/semantics.md §3): marked by nx::donate, dead once its consumer ran.
  std::atomic<int> donation{0};  // 0 live, 1 donated (not yet consumed), 2 dead
  std::string consumer;          // who consumed it, once dead
  std::mutex mu;                 // guards consumer
  // A live value counts itself in buffer->live_values (make_concrete); it stops counting when
  // it dies (its donation is consumed) or is destroyed.
  TensorImpl() = default;
  TensorImpl(const TensorImpl&) = delete;
  TensorImpl& operator=(const TensorImpl&) = delete;
  ~TensorImpl() {
    if (buffer && donation.load() != 2) buffer->live_values.fetch_sub(1);
  }
};

class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  DType dtype() const { return impl().dtype; }
  const Shape& shape() const { return impl().shape; }
  int ndim() const { return static_cast<int>(impl().shape.size()); }
  int64_t size() const { return ir::numel(impl().shape); }
  int64_t dim(int axis) const;  // negative axes count from the end
  Device device() const { return impl().device; }
  bool is_traced() const { return impl().node != nullptr; }
  std::string describe() const;  // "float64 [3]": dtype and shape, for messages

  TensorImpl& impl() const;
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }

 private:
  std::shared_ptr<TensorImpl> impl_;
};

// Makes a concrete tensor from a buffer and a view.
Tensor make_concrete(DType t, runtime::BufferRef buf, ir::View view, Device d = Device::cpu(),
                     std::shared_ptr<runtime::Poison> poison = nullptr);
// A fresh contiguous tensor holding raw bytes (copied), on the default device (a creation op:
// core/ops.h, docs/gpu.md "The default device").
Tensor from_bytes(DType t, const Shape& shape, const void* data);
// The same on the host, whatever the default device (the library's own constants).
Tensor host_from_bytes(DType t, const Shape& shape, const void* data);

}  // namespace nx
