// nx::from_blob and the DLPack exchange (core/interop.h): borrowed buffers in, views out.
#include "core/interop.h"

#include <cstdio>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "core/dlpack_exports.h"
#include "core/donation.h"
#include "core/interpreter.h"
#include "core/ops.h"
#include "runtime/gpu/context.h"

namespace nx {

namespace {

std::string join(const std::vector<int64_t>& v) { return ir::to_string(v); }

// Raises naming `api` unless `d` can hold memory now (a GPU device must be available).
void check_device(Device d, const char* api) {
  if (d.kind == runtime::DeviceKind::CPU) {
    if (d.index < 0)
      throw std::invalid_argument(std::string(api) + ": " + d.name() + " is not a device");
    return;
  }
  runtime::gpu::context(d, api);  // throws "<api>: device CUDA:n is unavailable: ..."
}

// One past the largest element offset the view (shape, strides) reaches from its first element;
// 0 for an empty shape. Raises naming `api`, the strides and the shape where that does not fit
// in ir::kMaxElements: the bound every rune view keeps (ir/shape.h), so that byte counts and
// the offsets kernels compute from these strides fit in int64 whatever the dtype.
int64_t checked_extent(const Shape& shape, const std::vector<int64_t>& strides, const char* api) {
  for (int64_t n : shape)
    if (n == 0) return 0;
  std::optional<int64_t> last = 0;
  for (size_t d = 0; d < shape.size() && last; ++d) {
    auto step = ir::checked_mul(shape[d] - 1, strides[d]);
    last = step ? ir::checked_add(*last, *step) : std::nullopt;
  }
  if (!last || *last >= ir::kMaxElements)
    throw std::invalid_argument(std::string(api) + ": strides " + join(strides) + " of shape " +
                                join(shape) + " reach past element " +
                                std::to_string(ir::kMaxElements) + ", the most an array may span");
  return *last + 1;
}

// The borrowed tensor: checks shape and strides, then wraps the memory. Nothing is owned until
// the Buffer exists, so a throw before that leaves `release` uncalled.
Tensor wrap_borrowed(void* data, DType dtype, const Shape& shape, std::vector<int64_t> strides,
                     Device device, std::function<void()> release, const char* api) {
  for (int64_t n : shape)
    if (n < 0)
      throw std::invalid_argument(std::string(api) + ": negative dimension in shape " +
                                  join(shape));
  // The creation ops' bound on the element count (a count that wraps, e.g. 2^64, is caught).
  const int64_t count = ir::checked_numel(api, shape);
  if (strides.empty()) {
    strides = ir::View::contiguous(shape).strides;
  } else if (strides.size() != shape.size()) {
    throw std::invalid_argument(
        std::string(api) + ": " + std::to_string(strides.size()) + " strides " + join(strides) +
        " for the " + std::to_string(shape.size()) + " dimensions of shape " + join(shape));
  }
  for (int64_t s : strides)
    if (s < 0)
      throw std::invalid_argument(std::string(api) + ": negative stride in " + join(strides) +
                                  " (rune views borrowed memory with non-negative strides only)");
  const int64_t extent = checked_extent(shape, strides, api);
  if (count > 0 && data == nullptr)
    throw std::invalid_argument(std::string(api) + ": null data for shape " + join(shape));
  check_device(device, api);
  // The bytes the view reaches: one past the largest element offset.
  size_t nbytes = static_cast<size_t>(extent * ir::itemsize(dtype));
  auto buffer = std::make_shared<runtime::Buffer>(device, data, nbytes, std::move(release));
  ir::View view;
  view.shape = shape;
  view.strides = std::move(strides);
  return make_concrete(dtype, std::move(buffer), std::move(view), device);
}

DLDevice to_dl_device(Device d) {
  switch (d.kind) {
    case runtime::DeviceKind::CPU:
      return {kDLCPU, 0};  // every CPU device is host memory
    case runtime::DeviceKind::CUDA:
      return {kDLCUDA, d.index};
    case runtime::DeviceKind::HIP:
      return {kDLROCM, d.index};
  }
  return {kDLCPU, 0};
}

Device from_dl_device(DLDevice d, const char* api) {
  switch (d.device_type) {
    case kDLCPU:
    case kDLCUDAHost:  // pinned host memory: the host reads it directly
    case kDLROCMHost:
      return Device::cpu();
    case kDLCUDA:
      return Device{runtime::DeviceKind::CUDA, d.device_id};
    case kDLROCM:
      return Device{runtime::DeviceKind::HIP, d.device_id};
    default:
      throw std::invalid_argument(
          std::string(api) + ": DLPack device type " +
          std::to_string(static_cast<int>(d.device_type)) + " (id " + std::to_string(d.device_id) +
          ") is not a rune device (kDLCPU, kDLCUDA, kDLROCM and their host kinds)");
  }
}

Tensor import_tensor(const DLTensor& t, std::function<void()> release, const char* api) {
  if (t.ndim < 0)
    throw std::invalid_argument(std::string(api) + ": ndim " + std::to_string(t.ndim));
  DType dtype = from_dlpack_dtype(t.dtype, api);
  Device device = from_dl_device(t.device, api);
  Shape shape(t.shape, t.shape + t.ndim);
  // No strides: contiguous, which wrap_borrowed computes once it has checked the shape (the
  // strides of a shape past the size bound overflow).
  std::vector<int64_t> strides;
  if (t.strides) strides.assign(t.strides, t.strides + t.ndim);
  void* data = static_cast<char*>(t.data) + t.byte_offset;
  return wrap_borrowed(data, dtype, shape, std::move(strides), device, std::move(release), api);
}

// rune's records of the capsules it handed out and took in, under one lock. Never destroyed: a
// capsule's deleter may run during static destruction.
struct CapsuleRecords {
  std::mutex mu;
  // Exported capsules not deleted yet, per buffer (live_dlpack_exports). A counted buffer is
  // alive: the capsule's observer holds it, and is released only after the count drops.
  std::unordered_map<const runtime::Buffer*, int> exports;
  // Capsules imported whose deleter has not run: consumed, so another import raises. Erased
  // just before the deleter runs (the producer may then reuse the address for a new capsule).
  std::unordered_set<const void*> imported;
};
CapsuleRecords& records() {
  static auto* r = new CapsuleRecords;
  return *r;
}

// What a capsule owns: a live value of the exported tensor (so its buffer stays alive, and
// counts as an observer of it: no donation writes into memory the consumer may be reading) and
// the arrays DLTensor points at.
struct ExportContext {
  Tensor observer;
  std::vector<int64_t> shape, strides;
  const runtime::Buffer* counted = nullptr;  // in records().exports while set
  ExportContext() = default;
  ExportContext(const ExportContext&) = delete;
  ExportContext& operator=(const ExportContext&) = delete;
  void count(const runtime::Buffer* b) {
    if (!b) return;
    std::lock_guard lock(records().mu);
    ++records().exports[b];
    counted = b;
  }
  ~ExportContext() {  // before `observer` goes, so a counted buffer is always alive
    if (!counted) return;
    std::lock_guard lock(records().mu);
    auto it = records().exports.find(counted);
    if (--it->second == 0) records().exports.erase(it);
  }
};

// Records `capsule` as imported (consumed), or raises if it already is: its deleter belongs to
// the first import, and a second would run it twice.
void claim_import(const void* capsule, const char* api) {
  std::lock_guard lock(records().mu);
  if (!records().imported.insert(capsule).second) {
    char addr[32];
    std::snprintf(addr, sizeof addr, "%p", capsule);
    throw std::invalid_argument(
        std::string(api) + ": capsule " + addr +
        " was already imported (a capsule is consumed by its first import, which calls its "
        "deleter when its last view goes; import it once and share the tensor)");
  }
}
void unclaim_import(const void* capsule) {
  std::lock_guard lock(records().mu);
  records().imported.erase(capsule);
}

// Imports a legacy or versioned capsule once: claimed before anything is read, unclaimed if the
// import raises (the capsule is then the caller's again, as it was) or just before its deleter
// runs when the last view goes.
template <class Capsule>
Tensor import_capsule(Capsule* capsule, const char* api) {
  claim_import(capsule, api);
  std::function<void()> release = [capsule]() {
    unclaim_import(capsule);
    if (capsule->deleter) capsule->deleter(capsule);
  };
  try {
    return import_tensor(capsule->dl_tensor, std::move(release), api);
  } catch (...) {
    unclaim_import(capsule);
    throw;
  }
}

// The tensor a capsule views: concrete, computed, and a view DLPack can describe.
Tensor exportable(const Tensor& x, const char* api, DLTensor& out, ExportContext& ctx) {
  if (x.is_traced())
    throw rune::jit_error(std::string(api) + ": " + x.describe() +
                          " is a traced value inside a transformation; export concrete values");
  eager_interpreter().check_readable(x, api);  // waits; raises for donated or failed values
  Tensor t = x;
  const auto& v = x.impl().view;
  bool negative = false;
  for (int64_t s : v.strides) negative |= s < 0;
  if (!v.mask.empty() || negative || v.offset < 0) {
    OpScope scope(api, {});
    t = contiguous(x);
    eager_interpreter().check_readable(t, api);
  }
  const auto& im = t.impl();
  ctx.observer = observer_of(t);  // a value of its own: x's donation does not end it
  ctx.count(im.buffer.get());
  ctx.shape = im.shape;
  ctx.strides = im.view.strides;
  int64_t isz = ir::itemsize(im.dtype);
  out.data = im.buffer ? im.buffer->data : nullptr;
  out.device = to_dl_device(im.device);
  out.ndim = static_cast<int32_t>(im.shape.size());
  out.dtype = to_dlpack_dtype(im.dtype);
  out.shape = ctx.shape.data();
  out.strides = ctx.strides.data();
  out.byte_offset = static_cast<uint64_t>(im.view.offset * isz);
  return t;
}

}  // namespace

int live_dlpack_exports(const runtime::Buffer* b) {
  std::lock_guard lock(records().mu);
  auto it = records().exports.find(b);
  return it == records().exports.end() ? 0 : it->second;
}

DLDataType to_dlpack_dtype(DType t) {
  uint8_t bits = static_cast<uint8_t>(ir::itemsize(t) * 8);
  if (t == DType::Bool) return {kDLBool, 8, 1};
  if (t == DType::BFloat16) return {kDLBfloat, 16, 1};
  if (ir::is_float(t)) return {kDLFloat, bits, 1};
  if (ir::is_signed_int(t)) return {kDLInt, bits, 1};
  return {kDLUInt, bits, 1};
}

DType from_dlpack_dtype(DLDataType t, const char* api) {
  auto bad = [&]() {
    return std::invalid_argument(std::string(api) + ": DLPack dtype {code " +
                                 std::to_string(t.code) + ", bits " + std::to_string(t.bits) +
                                 ", lanes " + std::to_string(t.lanes) + "} has no rune dtype");
  };
  if (t.lanes != 1) throw bad();
  switch (t.code) {
    case kDLBool:
      if (t.bits == 8) return DType::Bool;
      break;
    case kDLBfloat:
      if (t.bits == 16) return DType::BFloat16;
      break;
    case kDLFloat:
      if (t.bits == 16) return DType::Float16;
      if (t.bits == 32) return DType::Float32;
      if (t.bits == 64) return DType::Float64;
      break;
    case kDLInt:
      if (t.bits == 8) return DType::Int8;
      if (t.bits == 16) return DType::Int16;
      if (t.bits == 32) return DType::Int32;
      if (t.bits == 64) return DType::Int64;
      break;
    case kDLUInt:
      if (t.bits == 8) return DType::UInt8;
      if (t.bits == 16) return DType::UInt16;
      if (t.bits == 32) return DType::UInt32;
      if (t.bits == 64) return DType::UInt64;
      break;
    default:
      break;
  }
  throw bad();
}

Tensor from_blob(void* data, DType dtype, const Shape& shape, Device device, BlobDeleter deleter) {
  return from_blob(data, dtype, shape, {}, device, std::move(deleter));
}

Tensor from_blob(void* data, DType dtype, const Shape& shape, const std::vector<int64_t>& strides,
                 Device device, BlobDeleter deleter) {
  std::function<void()> release;
  if (deleter) release = [data, d = std::move(deleter)]() { d(data); };
  return wrap_borrowed(data, dtype, shape, strides, device, std::move(release), "nx::from_blob");
}

DLManagedTensor* to_dlpack(const Tensor& x) {
  auto capsule = std::make_unique<DLManagedTensor>();
  auto ctx = std::make_unique<ExportContext>();
  exportable(x, "nx::to_dlpack", capsule->dl_tensor, *ctx);
  capsule->manager_ctx = ctx.release();
  capsule->deleter = [](DLManagedTensor* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
    delete self;
  };
  return capsule.release();
}

DLManagedTensorVersioned* to_dlpack_versioned(const Tensor& x) {
  auto capsule = std::make_unique<DLManagedTensorVersioned>();
  auto ctx = std::make_unique<ExportContext>();
  exportable(x, "nx::to_dlpack_versioned", capsule->dl_tensor, *ctx);
  capsule->version = {DLPACK_MAJOR_VERSION, DLPACK_MINOR_VERSION};
  capsule->flags = 0;
  capsule->manager_ctx = ctx.release();
  capsule->deleter = [](DLManagedTensorVersioned* self) {
    delete static_cast<ExportContext*>(self->manager_ctx);
    delete self;
  };
  return capsule.release();
}

Tensor from_dlpack(DLManagedTensor* capsule) {
  const char* api = "nx::from_dlpack";
  if (!capsule) throw std::invalid_argument(std::string(api) + ": null capsule");
  return import_capsule(capsule, api);
}

Tensor from_dlpack(DLManagedTensorVersioned* capsule) {
  const char* api = "nx::from_dlpack";
  if (!capsule) throw std::invalid_argument(std::string(api) + ": null capsule");
  if (capsule->version.major != DLPACK_MAJOR_VERSION)
    throw std::invalid_argument(
        std::string(api) + ": DLPack version " + std::to_string(capsule->version.major) + "." +
        std::to_string(capsule->version.minor) + " (rune reads major version " +
        std::to_string(DLPACK_MAJOR_VERSION) + ")");
  return import_capsule(capsule, api);
}

}  // namespace nx
