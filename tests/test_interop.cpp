// nx::from_blob and the DLPack exchange (core/interop.h, docs/interop.md): round trips, the
// deleters' counts and timing, and that borrowed memory is never written in place.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <vector>

#include "runtime/gpu/context.h"
#include "test_util.h"
#include "trace/rune.h"

namespace {

using nx::Tensor;
using rt::message_of;

TEST(FromBlob, ViewsHostMemoryAndDeletesOnceWhenTheLastViewDies) {
  auto* data = new double[6]{1, 2, 3, 4, 5, 6};
  int deleted = 0;
  {
    Tensor t = nx::from_blob(data, nx::float64, {2, 3}, nx::Device::cpu(), [&](void* p) {
      EXPECT_EQ(p, data);
      ++deleted;
      delete[] static_cast<double*>(p);
    });
    EXPECT_EQ(t.impl().buffer->data, data);  // no copy
    EXPECT_EQ(nx::to_vector<double>(t), (std::vector<double>{1, 2, 3, 4, 5, 6}));
    Tensor row;
    {
      Tensor view = nx::transpose(t);
      row = view + 1.0;  // a new value: it does not hold the blob
      EXPECT_EQ(nx::to_vector<double>(view), (std::vector<double>{1, 4, 2, 5, 3, 6}));
      t = Tensor();  // the first view goes; `view` still holds the memory
      EXPECT_EQ(deleted, 0);
    }
    EXPECT_EQ(deleted, 1);  // the last view went with its scope
    EXPECT_EQ(nx::to_vector<double>(row), (std::vector<double>{2, 5, 3, 6, 4, 7}));
  }
  EXPECT_EQ(deleted, 1);
}

TEST(FromBlob, StridesAndMessages) {
  std::vector<int32_t> v = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11};
  // Every other column of a 3x4 row-major block: strides {4, 2}.
  Tensor t = nx::from_blob(v.data(), nx::int32, {3, 2}, {4, 2});
  EXPECT_EQ(nx::to_vector<int32_t>(t), (std::vector<int32_t>{0, 2, 4, 6, 8, 10}));
  EXPECT_EQ(t.impl().buffer->nbytes, 11 * sizeof(int32_t));  // one past the last element read
  int deleted = 0;
  auto count = [&](void*) { ++deleted; };
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int32, {3, -1}, nx::Device::cpu(), count);
            }),
            "nx::from_blob: negative dimension in shape [3, -1]");
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int32, {3, 2}, {4}, nx::Device::cpu(), count);
            }),
            "nx::from_blob: 1 strides [4] for the 2 dimensions of shape [3, 2]");
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int32, {3, 2}, {4, -1}, nx::Device::cpu(), count);
            }),
            "nx::from_blob: negative stride in [4, -1] (rune views borrowed memory with "
            "non-negative strides only)");
  EXPECT_EQ(message_of([&] { nx::from_blob(nullptr, nx::int32, {2}, nx::Device::cpu(), count); }),
            "nx::from_blob: null data for shape [2]");
  EXPECT_EQ(deleted, 0);  // a call that raises leaves the memory to the caller
  EXPECT_EQ(nx::from_blob(nullptr, nx::float32, {0, 3}).size(), 0);
}

// The creation ops' size bound (ir/shape.h): a shape whose element count wraps (2^64 elements
// read as 0) or exceeds ir::kMaxElements, and strides whose reach does, raise naming the API and
// the values; the deleter is not called.
TEST(FromBlob, ShapesAndStridesBeyondTheSizeBoundRaise) {
  std::vector<int32_t> v(4);
  int deleted = 0;
  auto count = [&](void*) { ++deleted; };
  const int64_t k32 = int64_t{1} << 32;
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int32, {k32, k32}, nx::Device::cpu(), count);
            }),
            "nx::from_blob: shape [4294967296, 4294967296] is too large: over "
            "1152921504606846975 elements, the most an array may hold");
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int8, {int64_t{1} << 61}, nx::Device::cpu(), count);
            }),
            "nx::from_blob: shape [2305843009213693952] is too large: over "
            "1152921504606846975 elements, the most an array may hold");
  // Strides whose products overflow int64, whose sum does, and one past the bound.
  EXPECT_EQ(
      message_of([&] {
        nx::from_blob(v.data(), nx::int32, {3, 2}, {int64_t{1} << 62, 1}, nx::Device::cpu(), count);
      }),
      "nx::from_blob: strides [4611686018427387904, 1] of shape [3, 2] reach past element "
      "1152921504606846975, the most an array may span");
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int32, {2, 2}, {INT64_MAX / 2 + 1, INT64_MAX / 2 + 1},
                            nx::Device::cpu(), count);
            }),
            "nx::from_blob: strides [4611686018427387904, 4611686018427387904] of shape [2, 2] "
            "reach past element 1152921504606846975, the most an array may span");
  EXPECT_EQ(message_of([&] {
              nx::from_blob(v.data(), nx::int32, {2}, {ir::kMaxElements}, nx::Device::cpu(), count);
            }),
            "nx::from_blob: strides [1152921504606846975] of shape [2] reach past element "
            "1152921504606846975, the most an array may span");
  EXPECT_EQ(deleted, 0);
  // At the bound: the last element reached is kMaxElements - 1 (nothing is read).
  Tensor edge = nx::from_blob(v.data(), nx::int8, {2}, {ir::kMaxElements - 1});
  EXPECT_EQ(edge.impl().buffer->nbytes, static_cast<size_t>(ir::kMaxElements));
  // An empty shape reaches nothing, whatever its strides.
  EXPECT_EQ(nx::from_blob(v.data(), nx::int32, {0, 3}, {INT64_MAX, INT64_MAX}).size(), 0);
}

// The rule of docs/interop.md: a donated borrowed tensor dies, its consumer takes fresh memory,
// the producer's memory keeps its values. The control cases (rune's own memory) show the same
// calls do write in place.
TEST(FromBlob, BorrowedMemoryIsNeverWrittenInPlace) {
  std::vector<double> mem(1000, 4.0);
  Tensor borrowed = nx::from_blob(mem.data(), nx::float64, {1000});
  Tensor eager = nx::neg(nx::donate(borrowed));  // a primitive: may write in place
  EXPECT_TRUE(nx::is_dead(borrowed));
  EXPECT_NE(eager.impl().buffer->data, mem.data());
  EXPECT_EQ(nx::to_vector<double>(eager), std::vector<double>(1000, -4.0));
  EXPECT_EQ(mem, std::vector<double>(1000, 4.0));

  auto step = rune::jit([](const Tensor& w) { return w * 0.5 + 1.0; });
  Tensor borrowed2 = nx::from_blob(mem.data(), nx::float64, {1000});
  Tensor compiled = step(nx::donate(borrowed2));
  EXPECT_TRUE(nx::is_dead(borrowed2));
  EXPECT_NE(compiled.impl().buffer->data, mem.data());
  EXPECT_EQ(nx::to_vector<double>(compiled), std::vector<double>(1000, 3.0));
  EXPECT_EQ(mem, std::vector<double>(1000, 4.0));

  Tensor own = nx::full(nx::float64, {1000}, 4.0);
  void* storage = own.impl().buffer->data;
  EXPECT_EQ(nx::neg(nx::donate(own)).impl().buffer->data, storage);
  Tensor own2 = nx::full(nx::float64, {1000}, 4.0);
  void* storage2 = own2.impl().buffer->data;
  EXPECT_EQ(step(nx::donate(own2)).impl().buffer->data, storage2);
}

TEST(DLPack, ExportKeepsTheBufferAliveUntilTheDeleterRuns) {
  Tensor x = nx::create(nx::float32, {2, 2}, {1, 2, 3, 4});
  std::weak_ptr<runtime::Buffer> buffer = x.impl().buffer;
  DLManagedTensor* capsule = nx::to_dlpack(x);
  const DLTensor& t = capsule->dl_tensor;
  EXPECT_EQ(t.data, x.impl().buffer->data);
  EXPECT_EQ(t.device.device_type, kDLCPU);
  EXPECT_EQ(t.ndim, 2);
  EXPECT_EQ(t.dtype.code, kDLFloat);
  EXPECT_EQ(t.dtype.bits, 32);
  EXPECT_EQ(t.dtype.lanes, 1);
  EXPECT_EQ(std::vector<int64_t>(t.shape, t.shape + 2), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(std::vector<int64_t>(t.strides, t.strides + 2), (std::vector<int64_t>{2, 1}));
  x = Tensor();
  ASSERT_FALSE(buffer.expired());  // the capsule holds it
  const float* f = static_cast<const float*>(t.data);
  EXPECT_EQ(std::vector<float>(f, f + 4), (std::vector<float>{1, 2, 3, 4}));
  capsule->deleter(capsule);
  EXPECT_TRUE(buffer.expired());
}

TEST(DLPack, VersionedExportCarriesVersionAndFlags) {
  Tensor x = nx::create(nx::uint16, {3}, {7, 8, 9});
  std::weak_ptr<runtime::Buffer> buffer = x.impl().buffer;
  DLManagedTensorVersioned* c = nx::to_dlpack_versioned(x);
  x = Tensor();
  EXPECT_EQ(c->version.major, 1u);
  EXPECT_EQ(c->version.minor, 0u);
  EXPECT_EQ(c->flags, 0u);
  EXPECT_EQ(c->dl_tensor.dtype.code, kDLUInt);
  EXPECT_EQ(c->dl_tensor.dtype.bits, 16);
  const uint16_t* d = static_cast<const uint16_t*>(c->dl_tensor.data);
  EXPECT_EQ(std::vector<uint16_t>(d, d + 3), (std::vector<uint16_t>{7, 8, 9}));
  ASSERT_FALSE(buffer.expired());
  c->deleter(c);
  EXPECT_TRUE(buffer.expired());
}

TEST(DLPack, ExportedTransposeAndMaskedViews) {
  Tensor x = nx::create(nx::int64, {2, 3}, {0, 1, 2, 3, 4, 5});
  DLManagedTensor* c = nx::to_dlpack(nx::transpose(x));
  EXPECT_EQ(std::vector<int64_t>(c->dl_tensor.strides, c->dl_tensor.strides + 2),
            (std::vector<int64_t>{1, 3}));  // the same memory, permuted strides
  EXPECT_EQ(c->dl_tensor.data, x.impl().buffer->data);
  Tensor back = nx::from_dlpack(c);
  EXPECT_EQ(nx::to_vector<int64_t>(back), (std::vector<int64_t>{0, 3, 1, 4, 2, 5}));
  // A flip has negative strides: exported as a contiguous copy.
  DLManagedTensor* f = nx::to_dlpack(nx::flip(x));
  EXPECT_NE(f->dl_tensor.data, x.impl().buffer->data);
  Tensor fb = nx::from_dlpack(f);
  EXPECT_EQ(nx::to_vector<int64_t>(fb), (std::vector<int64_t>{5, 4, 3, 2, 1, 0}));
}

// A producer's capsule (as another library hands one over): its deleter runs exactly once,
// when the last rune view of the import is gone.
struct Producer {
  std::vector<float> data{1.5f, -2.0f, 8.0f};
  int64_t shape[1] = {3};
  int deleted = 0;
  DLManagedTensor capsule{};
  DLManagedTensorVersioned versioned{};
  Producer() {
    DLTensor t{};
    t.data = data.data();
    t.device = {kDLCPU, 0};
    t.ndim = 1;
    t.dtype = {kDLFloat, 32, 1};
    t.shape = shape;
    t.strides = nullptr;  // compact
    t.byte_offset = 0;
    capsule.dl_tensor = t;
    capsule.manager_ctx = this;
    capsule.deleter = [](DLManagedTensor* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
    versioned.version = {1, 0};
    versioned.dl_tensor = t;
    versioned.manager_ctx = this;
    versioned.deleter = [](DLManagedTensorVersioned* self) {
      ++static_cast<Producer*>(self->manager_ctx)->deleted;
    };
  }
};

TEST(DLPack, ImportCallsTheProducersDeleterOnceWhenTheLastViewDies) {
  Producer p;
  {
    Tensor a = nx::from_dlpack(&p.capsule);
    EXPECT_EQ(a.impl().buffer->data, p.data.data());
    Tensor b = nx::reshape(a, {3, 1});
    a = Tensor();
    EXPECT_EQ(p.deleted, 0);
    EXPECT_EQ(nx::to_vector<float>(b * 2.0f), (std::vector<float>{3.0f, -4.0f, 16.0f}));
    // Re-exported and re-imported: one chain of owners, still one call of the deleter.
    Tensor c = nx::from_dlpack(nx::to_dlpack_versioned(b));
    b = Tensor();
    EXPECT_EQ(p.deleted, 0);
    EXPECT_EQ(nx::to_vector<float>(c), (std::vector<float>{1.5f, -2.0f, 8.0f}));
  }
  EXPECT_EQ(p.deleted, 1);
  {
    Tensor v = nx::from_dlpack(&p.versioned);
    EXPECT_EQ(nx::to_vector<float>(v), (std::vector<float>{1.5f, -2.0f, 8.0f}));
  }
  EXPECT_EQ(p.deleted, 2);
}

TEST(DLPack, ImportErrorsLeaveTheCapsuleToTheCaller) {
  Producer p;
  p.capsule.dl_tensor.dtype = {kDLComplex, 64, 1};
  EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.capsule); }),
            "nx::from_dlpack: DLPack dtype {code 5, bits 64, lanes 1} has no rune dtype");
  p.capsule.dl_tensor.dtype = {kDLFloat, 32, 4};
  EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.capsule); }),
            "nx::from_dlpack: DLPack dtype {code 2, bits 32, lanes 4} has no rune dtype");
  p.capsule.dl_tensor.dtype = {kDLFloat, 32, 1};
  p.capsule.dl_tensor.device = {kDLVulkan, 0};
  EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.capsule); }),
            "nx::from_dlpack: DLPack device type 7 (id 0) is not a rune device (kDLCPU, kDLCUDA, "
            "kDLROCM and their host kinds)");
  p.versioned.version = {2, 1};
  EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.versioned); }),
            "nx::from_dlpack: DLPack version 2.1 (rune reads major version 1)");
  EXPECT_EQ(p.deleted, 0);
}

// The message a second import of `capsule` raises.
std::string already_imported(const void* capsule) {
  char addr[32];
  std::snprintf(addr, sizeof addr, "%p", capsule);
  return std::string("nx::from_dlpack: capsule ") + addr +
         " was already imported (a capsule is consumed by its first import, which calls its "
         "deleter when its last view goes; import it once and share the tensor)";
}

// A capsule is consumed by its import (docs/interop.md): a second import would run the
// producer's deleter twice. It raises and leaves the capsule as it was; the first import's
// deleter still runs once.
TEST(DLPack, ASecondImportOfOneCapsuleRaises) {
  Producer p;
  const DLManagedTensor before = p.capsule;
  const DLManagedTensorVersioned before_v = p.versioned;
  {
    Tensor a = nx::from_dlpack(&p.capsule);
    Tensor v = nx::from_dlpack(&p.versioned);
    EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.capsule); }), already_imported(&p.capsule));
    EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.versioned); }), already_imported(&p.versioned));
    EXPECT_EQ(std::memcmp(&p.capsule, &before, sizeof before), 0);  // untouched
    EXPECT_EQ(std::memcmp(&p.versioned, &before_v, sizeof before_v), 0);
    EXPECT_EQ(p.deleted, 0);
    Tensor view = nx::reshape(a, {1, 3});
    a = Tensor();  // a view of the import still holds the capsule
    EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.capsule); }), already_imported(&p.capsule));
    EXPECT_EQ(nx::to_vector<float>(view), (std::vector<float>{1.5f, -2.0f, 8.0f}));
    EXPECT_EQ(nx::to_vector<float>(v), (std::vector<float>{1.5f, -2.0f, 8.0f}));
  }
  EXPECT_EQ(p.deleted, 2);  // once per capsule
  // The deleter ran: the capsule is the producer's again, who may hand it out anew.
  { Tensor again = nx::from_dlpack(&p.capsule); }
  EXPECT_EQ(p.deleted, 3);
}

// A failed import consumes nothing: the capsule imports once afterwards.
TEST(DLPack, AFailedImportLeavesTheCapsuleImportable) {
  Producer p;
  p.capsule.dl_tensor.dtype = {kDLComplex, 64, 1};
  EXPECT_NE(message_of([&] { nx::from_dlpack(&p.capsule); }), "no error");
  p.capsule.dl_tensor.dtype = {kDLFloat, 32, 1};
  {
    Tensor a = nx::from_dlpack(&p.capsule);
    EXPECT_EQ(nx::to_vector<float>(a), (std::vector<float>{1.5f, -2.0f, 8.0f}));
  }
  EXPECT_EQ(p.deleted, 1);
}

TEST(DLPack, ImportedShapesAndStridesBeyondTheSizeBoundRaise) {
  Producer p;
  int64_t huge[2] = {int64_t{1} << 32, int64_t{1} << 32};
  p.capsule.dl_tensor.ndim = 2;
  p.capsule.dl_tensor.shape = huge;
  EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.capsule); }),
            "nx::from_dlpack: shape [4294967296, 4294967296] is too large: over "
            "1152921504606846975 elements, the most an array may hold");
  int64_t shape[2] = {3, 2}, strides[2] = {int64_t{1} << 62, 1};
  p.versioned.dl_tensor.ndim = 2;
  p.versioned.dl_tensor.shape = shape;
  p.versioned.dl_tensor.strides = strides;
  EXPECT_EQ(message_of([&] { nx::from_dlpack(&p.versioned); }),
            "nx::from_dlpack: strides [4611686018427387904, 1] of shape [3, 2] reach past "
            "element 1152921504606846975, the most an array may span");
  EXPECT_EQ(p.deleted, 0);
  // Neither was consumed: fixed, each imports.
  p.capsule.dl_tensor.ndim = 1;
  p.capsule.dl_tensor.shape = p.shape;
  p.versioned.dl_tensor.ndim = 1;
  p.versioned.dl_tensor.shape = p.shape;
  p.versioned.dl_tensor.strides = nullptr;
  EXPECT_EQ(nx::to_vector<float>(nx::from_dlpack(&p.capsule)),
            (std::vector<float>{1.5f, -2.0f, 8.0f}));
  EXPECT_EQ(nx::to_vector<float>(nx::from_dlpack(&p.versioned)),
            (std::vector<float>{1.5f, -2.0f, 8.0f}));
  EXPECT_EQ(p.deleted, 2);
}

// rune's own capsule imported twice: its deleter frees it, so a second import would free it
// twice. Run in a child process (a double free kills it, not the suite; alarm: a hang fails).
TEST(DLPackDeathTest, ASecondImportOfARuneCapsuleRaisesInsteadOfFreeingTwice) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  auto twice = [](bool versioned) {
    alarm(60);
    Tensor x = nx::create(nx::int32, {3}, {4, 5, 6});
    void* c = versioned ? static_cast<void*>(nx::to_dlpack_versioned(x))
                        : static_cast<void*>(nx::to_dlpack(x));
    auto import = [&] {
      return versioned ? nx::from_dlpack(static_cast<DLManagedTensorVersioned*>(c))
                       : nx::from_dlpack(static_cast<DLManagedTensor*>(c));
    };
    bool ok;
    {
      Tensor a = import();
      ok = message_of(import) == already_imported(c) &&
           nx::to_vector<int32_t>(a) == std::vector<int32_t>{4, 5, 6};
    }
    std::fflush(stdout);
    _exit(ok ? 0 : 1);
  };
  EXPECT_EXIT(twice(false), testing::ExitedWithCode(0), "");
  EXPECT_EXIT(twice(true), testing::ExitedWithCode(0), "");
}

TEST(DLPack, EveryDtypeRoundTrips) {
  for (nx::DType t : {nx::bool_, nx::uint8, nx::int8, nx::int16, nx::uint16, nx::int32, nx::uint32,
                      nx::int64, nx::uint64, nx::float16, nx::bfloat16, nx::float32, nx::float64}) {
    EXPECT_EQ(nx::from_dlpack_dtype(nx::to_dlpack_dtype(t), "test"), t) << ir::name(t);
    Tensor x = nx::cast(nx::create(nx::float64, {3}, {0, 1, 1}), t);
    Tensor y = nx::from_dlpack(nx::to_dlpack(x));
    EXPECT_EQ(y.dtype(), t);
    EXPECT_EQ(nx::to_array(y), (std::vector<double>{0, 1, 1})) << ir::name(t);
  }
  EXPECT_EQ(nx::to_dlpack_dtype(nx::bool_).code, kDLBool);
  EXPECT_EQ(nx::to_dlpack_dtype(nx::bfloat16).code, kDLBfloat);
}

TEST(DLPack, ExportOfADonatedValueRaises) {
  Tensor x = nx::full(nx::float64, {4}, 1.0);
  Tensor y = nx::donate(x) * 2.0;
  EXPECT_EQ(message_of([&] { nx::to_dlpack(x); }),
            "nx::to_dlpack: float64 [4] was donated to nx::mul");
}

// GPU memory through the device abstraction: CUDA:0 is the fake driver in CI
// (RUNE_TEST_FAKE_CUDA=1), a real GPU under tools/gpu-check.
TEST(FromBlob, GpuMemory) {
  nx::Device cuda{runtime::DeviceKind::CUDA, 0};
  if (!runtime::gpu::unavailable_reason(cuda).empty()) GTEST_SKIP() << "no CUDA:0";
  Tensor owner = nx::place(nx::create(nx::float32, {4}, {1, 2, 3, 4}), cuda);
  nx::wait(cuda);
  int deleted = 0;
  {
    Tensor view = nx::from_blob(owner.impl().buffer->data, nx::float32, {2}, {2}, cuda,
                                [&](void*) { ++deleted; });
    EXPECT_EQ(view.device(), cuda);
    EXPECT_EQ(nx::to_vector<float>(view + 1.0f), (std::vector<float>{2, 4}));
    DLManagedTensor* c = nx::to_dlpack(view);
    EXPECT_EQ(c->dl_tensor.device.device_type, kDLCUDA);
    EXPECT_EQ(c->dl_tensor.device.device_id, 0);
    Tensor back = nx::from_dlpack(c);
    EXPECT_EQ(back.device(), cuda);
    EXPECT_EQ(nx::to_vector<float>(back), (std::vector<float>{1, 3}));
  }
  EXPECT_EQ(deleted, 1);
  EXPECT_EQ(message_of([&] {
              nx::from_blob(owner.impl().buffer->data, nx::float32, {1},
                            nx::Device{runtime::DeviceKind::CUDA, 7});
            }).rfind("nx::from_blob: device CUDA:7 is unavailable: ", 0),
            0u);
}

}  // namespace
