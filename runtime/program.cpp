#include "runtime/program.h"

#include <chrono>
#include <cstdio>
#include <stdexcept>

#include "ir/debug.h"
#include "runtime/profile.h"
#include "runtime/thread_pool.h"

namespace runtime {

void HostProgram::finalize() {
  temp_offset.assign(slot_bytes.size(), -1);
  temp_bytes = 0;
  std::vector<bool> is_output(slot_bytes.size(), false);
  for (int s : output_slots) is_output[s] = true;
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    if (is_output[s]) continue;
    temp_offset[s] = temp_bytes;
    temp_bytes += (std::max<int64_t>(slot_bytes[s], 1) + 63) / 64 * 64;  // keep 64-byte alignment
  }
}

std::vector<BufferRef> HostProgram::run(char* const* inputs, size_t n,
                                        const BufferRef* reuse) const {
  if (n != static_cast<size_t>(n_inputs))
    throw std::logic_error("runtime: program bound to the wrong number of inputs");
  // Small programs (the eager case) keep their slot tables on the stack.
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
  // One block holds every temporary; it lives until the run returns.
  BufferRef temps =
      temp_bytes > 0 ? allocate(Device::cpu(), static_cast<size_t>(temp_bytes)) : nullptr;
  for (size_t s = n_inputs; s < slot_bytes.size(); ++s) {
    if (!temp_offset.empty() && temp_offset[s] >= 0) {
      ptr[s] = static_cast<char*>(temps->data) + temp_offset[s];
      continue;
    }
    if (!owned[s]) owned[s] = allocate(Device::cpu(), static_cast<size_t>(slot_bytes[s]));
    ptr[s] = static_cast<char*>(owned[s]->data);
  }
  const bool print = ir::debug_level() >= 2, timed = print || profile_enabled();
  for (const auto& st : steps) {
    char* bufs[32];
    std::vector<char*> big;
    char** b = bufs;
    if (st.slots.size() > 32) {
      big.resize(st.slots.size());
      b = big.data();
    }
    for (size_t p = 0; p < st.slots.size(); ++p) b[p] = ptr[st.slots[p]];
    auto t0 = timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
    if (st.items * st.cost < (1 << 15))
      st.call(b, 0, st.items);  // tiny: no pool, no std::function
    else
      parallel_for(st.items, st.cost, [&](int64_t lo, int64_t hi) { st.call(b, lo, hi); });
    if (timed) {
      auto t1 = std::chrono::steady_clock::now();
      profile_record("kernel", st.name, "CPU", t0, t1, st.bytes, st.items);
      double us = std::chrono::duration<double, std::micro>(t1 - t0).count();
      if (print)
        std::fprintf(stderr, "rune: kernel %s on CPU: %lld items, %.1f us, %.2f GB/s\n",
                     st.name.c_str(), static_cast<long long>(st.items), us,
                     us > 0 ? st.bytes / us / 1e3 : 0.0);
    }
  }
  std::vector<BufferRef> out;
  out.reserve(output_slots.size());
  for (int s : output_slots) out.push_back(std::move(owned[s]));
  return out;
}

}  // namespace runtime
