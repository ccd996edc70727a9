#include "runtime/gpu/program.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "ir/debug.h"
#include "runtime/profile.h"

namespace runtime::gpu {

void GpuProgram::finalize() {
  temp_offset.assign(slot_bytes.size(), -1);
  temp_bytes = 0;
  std::vector<bool> is_output(slot_bytes.size(), false);
  for (int s : output_slots) is_output[s] = true;
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    if (is_output[s]) continue;
    temp_offset[s] = temp_bytes;
    temp_bytes += (std::max<int64_t>(slot_bytes[s], 1) + 255) / 256 * 256;
  }
}

void launch(Context& c, const GpuStep& step, char* const* bufs) {
  if (step.geometry.grid == 0) return;  // no work items
  c.make_current();
  const DriverTable& d = c.driver();
  constexpr size_t kMax = 64;
  size_t np = step.slots.size();
  if (np + 1 > kMax) throw std::logic_error("runtime::gpu::launch: too many kernel params");
  // Each param is passed by address: device pointers as 64-bit values, then n.
  uint64_t values[kMax];
  void* params[kMax];
  for (size_t i = 0; i < np; ++i) {
    values[i] = reinterpret_cast<uintptr_t>(bufs[i]);
    params[i] = &values[i];
  }
  long long n = step.items;
  params[np] = &n;
  // Queues the step: a kernel launch (a driver status) or the host step (which throws itself).
  auto queue = [&] {
    if (step.host) {
      step.host(c, bufs);
      return 0;
    }
    return d.launch(step.fn, step.geometry.grid, step.geometry.block, c.handle(), params,
                    static_cast<unsigned>(np + 1));
  };
  const bool profiled = profile_enabled();
  if (ir::debug_level() < 2 && !profiled) {
    c.check(queue(), "launch");
    return;
  }
  Handle start = nullptr, end = nullptr;
  c.check(d.event_create(&start), "event_create");
  c.check(d.event_create(&end), "event_create");
  float ms = 0;
  int rc = d.event_record(start, c.handle());
  if (!rc) {
    try {
      rc = queue();
    } catch (...) {
      d.event_destroy(start);
      d.event_destroy(end);
      throw;
    }
  }
  if (!rc) rc = d.event_record(end, c.handle());
  if (!rc) rc = d.event_synchronize(end);
  if (!rc) rc = d.event_elapsed_ms(&ms, start, end);
  d.event_destroy(start);
  d.event_destroy(end);
  c.check(rc, "launch (timed)");
  double us = ms * 1e3;
  if (profiled) {  // device time, ending now
    auto end_t = std::chrono::steady_clock::now();
    auto start_t = end_t - std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                               std::chrono::duration<double, std::micro>(us));
    profile_record("kernel", step.name, c.device().name(), start_t, end_t, step.bytes, step.items);
  }
  if (ir::debug_level() < 2) return;
  std::fprintf(stderr, "rune: kernel %s on %s: %lld items, %.1f us, %.2f GB/s\n", step.name.c_str(),
               c.device().name().c_str(), static_cast<long long>(step.items), us,
               us > 0 ? step.bytes / us / 1e3 : 0.0);
}

std::vector<BufferRef> GpuProgram::run(char* const* inputs, size_t n,
                                       const BufferRef* reuse) const {
  if (n != static_cast<size_t>(n_inputs))
    throw std::logic_error("runtime: GPU program bound to the wrong number of inputs");
  Context& c = context(device, "runtime::gpu::GpuProgram::run");
  constexpr size_t kSmall = 8;
  BufferRef owned_small[kSmall];
  char* ptr_small[kSmall];
  std::vector<BufferRef> owned_big;
  std::vector<char*> ptr_big;
  BufferRef* owned = owned_small;
  char** ptr = ptr_small;
  if (slot_bytes.size() > kSmall) {
    owned_big.resize(slot_bytes.size());
    ptr_big.resize(slot_bytes.size());
    owned = owned_big.data();
    ptr = ptr_big.data();
  }
  for (int i = 0; i < n_inputs; ++i) ptr[i] = inputs[i];
  if (reuse)
    for (size_t o = 0; o < output_slots.size(); ++o)
      if (reuse[o]) owned[output_slots[o]] = reuse[o];
  BufferRef temps = temp_bytes > 0 ? allocate(device, static_cast<size_t>(temp_bytes)) : nullptr;
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    if (temp_offset[s] >= 0) {
      ptr[s] = static_cast<char*>(temps->data) + temp_offset[s];
      continue;
    }
    if (!owned[s]) owned[s] = allocate(device, static_cast<size_t>(slot_bytes[s]));
    ptr[s] = static_cast<char*>(owned[s]->data);
  }
  for (const auto& st : steps) {
    char* bufs[64];
    size_t np = std::min<size_t>(st.slots.size(), 64);
    for (size_t p = 0; p < np; ++p) bufs[p] = ptr[st.slots[p]];
    launch(c, st, bufs);
  }
  std::vector<BufferRef> out;
  out.reserve(output_slots.size());
  for (int s : output_slots) out.push_back(std::move(owned[s]));
  return out;
}

}  // namespace runtime::gpu
