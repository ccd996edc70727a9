#include "core/earlier_failure.h"

#include "core/donation.h"
#include "runtime/stream.h"

namespace nx::detail {

void raise_earlier_failure(Device d) {
  if (!runtime::is_async(d)) return;
  runtime::Stream* s = nullptr;
  try {
    s = runtime::stream_for(d, "nx");
  } catch (...) {
    return;  // no such device here: the op's own error says so
  }
  if (s) s->synchronize();
}

void raise_earlier_failure_of_current_op() {
  for (const Tensor* t : OpScope::current_args())
    if (t->defined() && runtime::is_async(t->device())) return raise_earlier_failure(t->device());
}

}  // namespace nx::detail
