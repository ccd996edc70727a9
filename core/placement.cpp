// Moving data between devices, and waiting for asynchronous work (SEMANTICS.md §6).
#include <cstring>

#include "core/donation.h"
#include "core/interpreter.h"
#include "core/prim.h"

namespace nx {

void wait(Device d) {
  if (runtime::Stream* s = runtime::stream_for(d)) s->synchronize();
}

void wait(const Tensor& x) { current_interpreter().check_readable(x, "nx::wait"); }

Tensor place(const Tensor& x, Device d) {
  OpScope scope_("nx::place", {&x});
  if (x.is_traced())
    throw rune::jit_error("nx::place: cannot move traced value " + x.describe() + " while tracing");
  runtime::stream_for(d);  // raises for a device that does not exist here
  if (x.device() == d) return x;
  // A transfer is a wait on the source's device.
  current_interpreter().check_readable(x, "nx::place");
  const auto& im = x.impl();
  int64_t isz = ir::itemsize(im.dtype);
  auto buf = runtime::allocate(d, static_cast<size_t>(x.size() * isz));
  char* dst = static_cast<char*>(buf->data);
  const char* src = static_cast<const char*>(im.buffer->data);
  int nd = x.ndim();
  std::vector<int64_t> idx(nd, 0);
  for (int64_t k = 0; k < x.size(); ++k) {
    int64_t off = im.view.offset;
    for (int a = 0; a < nd; ++a) off += idx[a] * im.view.strides[a];
    std::memcpy(dst + k * isz, src + off * isz, isz);
    for (int a = nd - 1; a >= 0; --a) {
      if (++idx[a] < im.shape[a]) break;
      idx[a] = 0;
    }
  }
  return make_concrete(im.dtype, std::move(buf), ir::View::contiguous(im.shape), d);
}

Tensor place(const Tensor& x, const std::string& device) {
  return place(x, Device::parse(device, "nx::place"));
}

}  // namespace nx
