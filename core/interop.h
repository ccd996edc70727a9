// Memory rune did not allocate: nx::from_blob wraps a pointer (host or GPU memory) as a tensor
// without copying; nx::to_dlpack / nx::from_dlpack exchange tensors with other libraries through
// the DLPack ABI (core/dlpack.h, version 1.0). docs/interop.md has the ownership rules.
#pragma once
#include <functional>

#include "core/dlpack.h"
#include "core/tensor.h"

namespace nx {

// Called once with the blob's pointer when the last tensor (or queued work) using it is gone.
using BlobDeleter = std::function<void(void* data)>;

// A tensor viewing `data` (no copy): `shape`, element strides `strides` (empty: C-contiguous;
// non-negative), on `device`: a CPU device for host memory, CUDA:n / HIP:n for that GPU's memory
// (the device must be available). The memory is borrowed: rune never writes into it (a donated
// borrowed tensor dies, and its consumer takes fresh memory), and `deleter` (may be empty) runs
// exactly once when the last reference goes. A call that raises leaves the memory to the caller
// (the deleter is not called).
Tensor from_blob(void* data, DType dtype, const Shape& shape, Device device = Device::cpu(),
                 BlobDeleter deleter = nullptr);
Tensor from_blob(void* data, DType dtype, const Shape& shape, const std::vector<int64_t>& strides,
                 Device device = Device::cpu(), BlobDeleter deleter = nullptr);

// Exports a concrete tensor as a DLPack capsule that views its buffer (waits for the value on an
// asynchronous device). A view DLPack cannot describe (masked, or with negative strides) is
// exported as a contiguous copy. The capsule keeps the buffer alive until the consumer calls its
// deleter, exactly once. Raises "nx::to_dlpack: ..." for a traced or donated-away tensor.
DLManagedTensor* to_dlpack(const Tensor& x);
// The same as a DLPack 1.0 versioned capsule (version {1, 0}, flags 0).
DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& x);

// Imports a capsule without copying (as from_blob). The import consumes it: its deleter runs
// once, when the last view is gone, and importing it again before then raises. Raises
// "nx::from_dlpack: ..." for what rune cannot view (lanes != 1, complex, negative strides, shape
// or strides past the size bound, major version != 1); then the capsule is still the caller's.
Tensor from_dlpack(DLManagedTensor* capsule);
Tensor from_dlpack(DLManagedTensorVersioned* capsule);

// The DLPack dtype of a rune dtype and back (bool is {kDLBool, 8, 1}; {kDLUInt, 1} is not read).
DLDataType to_dlpack_dtype(DType t);
DType from_dlpack_dtype(DLDataType t, const char* api);

}  // namespace nx
