// Moving data between devices, and waiting for asynchronous work (docs/semantics.md §6).
// Every CPU device (CPU, CPU:n) uses host memory; a GPU (CUDA:n, HIP:n) has its own, reached
// through runtime/gpu/transfer.h. A transfer waits for the source's work (and raises its
// failures) and makes strided data contiguous on the source's side first.
#include <cstdlib>
#include <cstring>

#include "core/donation.h"
#include "core/interpreter.h"
#include "core/prim.h"
#include "ir/env.h"
#include "runtime/gpu/transfer.h"
#include "runtime/profile.h"

namespace nx {

namespace {

bool on_gpu(Device d) { return d.kind != runtime::DeviceKind::CPU; }

// Host data of x as one contiguous block: x's own memory when its view already is, else a
// gathered copy in `scratch`.
const char* contiguous_host_bytes(const Tensor& x, std::vector<char>& scratch) {
  const auto& im = x.impl();
  int64_t isz = ir::itemsize(im.dtype);
  const char* src = static_cast<const char*>(im.buffer->data);
  if (im.view.is_contiguous()) return src;
  scratch.resize(static_cast<size_t>(x.size() * isz));
  int nd = x.ndim();
  std::vector<int64_t> idx(nd, 0);
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t off = im.view.offset;
    for (int a = 0; a < nd; ++a) off += idx[a] * im.view.strides[a];
    std::memcpy(scratch.data() + k * isz, src + off * isz, isz);
    for (int a = nd - 1; a >= 0; --a) {
      if (++idx[a] < im.shape[a]) break;
      idx[a] = 0;
    }
  }
  return scratch.data();
}

}  // namespace

namespace {

// RUNE_DEFAULT_DEVICE, read once: the device, or why the value is not one.
struct DefaultDevice {
  Device device;
  std::string error;  // "RUNE_DEFAULT_DEVICE=... is not a device ..." when the value is bad
};
const DefaultDevice& default_device_setting() {
  static const DefaultDevice setting = [] {
    DefaultDevice r;
    const std::optional<std::string>& v = ir::env::value(ir::env::Var::DefaultDevice);
    if (!v || v->empty()) return r;
    try {
      r.device = Device::parse(*v, "RUNE_DEFAULT_DEVICE");
    } catch (const std::invalid_argument&) {
      r.error = "RUNE_DEFAULT_DEVICE=\"" + *v +
                "\" is not a device (expected CPU, CPU:n, CUDA:n or HIP:n)";
    }
    return r;
  }();
  return setting;
}

Device default_device_for(const char* api) {
  const auto& s = default_device_setting();
  if (!s.error.empty()) throw std::invalid_argument(std::string(api) + ": " + s.error);
  return s.device;
}

}  // namespace

Device default_device() { return default_device_for("nx::default_device"); }

namespace detail {
Device creation_device(const char* api) {
  if (auto d = operandless_device()) return *d;
  Device d = default_device_for(api);
  runtime::stream_for(d, api);  // raises for a device that does not exist here
  return d;
}
}  // namespace detail

void wait(Device d) {
  if (runtime::Stream* s = runtime::stream_for(d, "nx::wait")) s->synchronize();
}

void wait(const Tensor& x) { current_interpreter().check_readable(x, "nx::wait"); }

Tensor place(const Tensor& x, Device d) {
  OpScope scope_("nx::place", {&x});
  // A traced value placed on its own device moves nothing: the identity below (rune::optim's
  // init places its step count on the parameters' device, also inside rune::jit).
  if (x.is_traced() && x.device() != d)
    throw rune::jit_error("nx::place: cannot move traced value " + x.describe() + " while tracing");
  runtime::stream_for(d, "nx::place");  // raises for a device that does not exist here
  if (x.device() == d) return identity_result(x);
  // A transfer is a wait on the source's device.
  current_interpreter().check_readable(x, "nx::place");
  Tensor src = x;
  // A strided GPU value is made contiguous on its device first (a copy kernel).
  if (on_gpu(x.device()) && !x.impl().view.is_contiguous()) {
    src = eager_interpreter().apply(ir::Op::Copy, x.dtype(), x.shape(), {x}, {});
    eager_interpreter().check_readable(src, "nx::place");
  }
  const auto& im = src.impl();
  size_t bytes = static_cast<size_t>(src.size() * ir::itemsize(im.dtype));
  auto buf = runtime::allocate(d, bytes);
  runtime::ProfileSpan span("transfer", src.device().name() + " -> " + d.name(), d.name(), bytes);
  if (!on_gpu(src.device())) {
    std::vector<char> scratch;
    const char* host = contiguous_host_bytes(src, scratch);
    if (on_gpu(d))
      runtime::gpu::copy_to_device(runtime::gpu::context(d, "nx::place"), buf->data, host, bytes);
    else if (bytes)
      std::memcpy(buf->data, host, bytes);
  } else {
    auto& from = runtime::gpu::context(src.device(), "nx::place");
    const char* dev =
        static_cast<const char*>(im.buffer->data) + im.view.offset * ir::itemsize(im.dtype);
    if (!on_gpu(d)) {
      runtime::gpu::copy_to_host(from, buf->data, dev, bytes);
    } else {
      // GPU to another GPU: through host memory (devices of two drivers, or two contexts).
      std::vector<char> host(bytes);
      runtime::gpu::copy_to_host(from, host.data(), dev, bytes);
      runtime::gpu::copy_to_device(runtime::gpu::context(d, "nx::place"), buf->data, host.data(),
                                   bytes);
    }
  }
  return make_concrete(im.dtype, std::move(buf), ir::View::contiguous(im.shape), d);
}

Tensor place(const Tensor& x, const std::string& device) {
  return place(x, Device::parse(device, "nx::place"));
}

}  // namespace nx
